"""The human partner in the embedded simulator (PARTNR's second agent): a visible, distinct body with its own
base pose, hand, views and clock in one shared world; collisions between the agents; a Pick of what the other
holds fails with the reason; per-agent capabilities in the executor."""

from __future__ import annotations

import numpy as np
import pytest

from homiebot.executor.executor import Executor, ExecutorConfig
from homiebot.sim.base import Simulator
from homiebot.sim.mujoco.backend import HUMAN_ID, ROBOT_ID, AgentView, MujocoSimulator
from homiebot.types import HOUSEHOLD_ACTIONS, EntityKind, ErrorCode, SkillStatus, Subtask

SCENE = "apartment_1"


@pytest.fixture(scope="module")
def pair():
    simulator = MujocoSimulator(width=160, height=160, render=True, human=True)
    yield simulator
    simulator.shutdown()


def _magenta(rgb: np.ndarray) -> int:
    """Pixels of the human's shirt colour (0.85, 0.25, 0.55)."""
    r, g, b = (rgb[..., i].astype(int) for i in range(3))
    return int(((r > 150) & (g < 110) & (b > 70) & (r - g > 90) & (r - b > 40)).sum())


def test_single_agent_world_is_unchanged(headless):
    headless.reset(SCENE, seed=0)
    state = headless.state()
    assert state.agents == ()
    assert headless.agent_ids == (ROBOT_ID,)
    assert not headless._compiled.has_human
    with pytest.raises(ValueError, match="human=True"):
        headless.agent(HUMAN_ID)


def test_both_agents_stand_apart_in_one_world(pair):
    pair.reset(SCENE, seed=0)
    state = pair.state()
    robot, human = state.agents
    assert (robot.role, robot.name, human.role, human.name) == (0, "robot", 1, "human")
    assert robot.pose == state.robot
    gap = robot.pose.distance_to(human.pose)
    assert gap > robot.radius + human.radius
    assert pair._base_in_collision() is None
    with pair.acting(HUMAN_ID):
        assert pair._base_in_collision() is None


def test_agent_view_is_a_simulator_from_that_agents_point_of_view(pair):
    pair.reset(SCENE, seed=0)
    human = pair.agent(HUMAN_ID)
    assert isinstance(human, AgentView) and isinstance(human, Simulator)
    own = human.state()
    assert own.robot == pair.state().agents[1].pose
    assert own.robot_radius == pytest.approx(0.27)
    assert pair.agent(ROBOT_ID).state().robot == pair.state().robot
    # The protocol's own methods stay the robot's after the human acted.
    result = human.go_to("kitchen")
    assert result.success
    assert pair.state().robot == pair.state().agents[0].pose
    assert human.state().robot_room == "kitchen"
    assert pair.state().agents[1].room == "kitchen"


def test_the_human_is_visible_to_the_robot_and_not_to_itself(pair):
    pair.reset(SCENE, seed=0)
    robot_views = pair.observe().views
    human_views = pair.agent(HUMAN_ID).observe().views
    assert sum(_magenta(v.rgb) for v in robot_views.values()) > 200
    assert sum(_magenta(v.rgb) for v in human_views.values()) == 0
    # The human's cameras are its own: its front view is not the robot's.
    assert not np.array_equal(robot_views["front"].rgb, human_views["front"].rgb)
    assert pair.agent(HUMAN_ID).observe().robot_pose == pair.state().agents[1].pose


def test_topdown_draws_the_human_as_a_distinct_figure(pair, headless):
    pair.reset(SCENE, seed=0)
    headless.reset(SCENE, seed=0)
    with_human = pair.render_topdown(400)
    alone = headless.render_topdown(400)
    human_colour = np.all(with_human == (217, 64, 140), axis=-1).sum()
    assert human_colour > 10
    assert np.all(alone == (217, 64, 140), axis=-1).sum() == 0


def test_pick_of_what_the_other_holds_fails_with_the_reason(pair):
    pair.reset(SCENE, seed=0)
    human = pair.agent(HUMAN_ID)
    assert human.go_to("apple").success and human.pick("apple").success
    state = pair.state()
    assert state.entities["apple"].held and state.held is None and state.agents[1].held == "apple"
    assert pair.holder_of("apple") == "human"
    assert pair.go_to("apple").success
    refused = pair.pick("apple")
    assert refused.status is SkillStatus.EXECUTION_FAILED and refused.detail == "apple is held by the human"
    # The executor answers at once (no three tries) with the holder named.
    report = Executor(pair).execute_detailed(Subtask("Pick", "apple"), "RT-1-X", ())
    assert report.feedback.code is ErrorCode.E1
    assert report.feedback.message == "Unable to pick, the apple is held by the human"
    assert report.results == []
    # The held object rides in the human's hand.
    x, y, _ = pair.state().entities["apple"].position
    pose = pair.state().agents[1].pose
    assert np.hypot(x - pose.x, y - pose.y) < 0.6


def test_agents_do_not_walk_into_each_other(pair):
    pair.reset(SCENE, seed=0)
    human = pair.agent(HUMAN_ID)
    assert human.go_to("sofa").success
    assert pair.go_to("sofa").success
    robot, person = pair.state().agents
    assert robot.pose.distance_to(person.pose) >= robot.radius + person.radius - 0.02
    # Overlapping bases are a contact that names the other agent.
    with pair.acting(ROBOT_ID):
        saved = pair._robot
        pair._robot = person.pose
        pair._write_base()
        assert pair._base_in_collision() == "the human"
        pair._robot = saved
        pair._sync()


def test_clocks_run_per_agent_and_lock_step_syncs_them(pair):
    pair.reset(SCENE, seed=0)
    assert pair.agent(HUMAN_ID).go_to("kitchen").success
    human_clock = pair.sim_time
    assert human_clock > 0
    assert pair._bodies[ROBOT_ID].clock == 0.0
    assert pair.sync_clocks() == pytest.approx(human_clock)
    assert pair._bodies[ROBOT_ID].clock == pytest.approx(human_clock)


def test_capabilities_per_agent(pair):
    pair.reset(SCENE, seed=0)
    lamp = next(n for n, e in pair.state().entities.items() if e.kind is EntityKind.FURNITURE and e.appliance)
    robot_config = ExecutorConfig(actions=HOUSEHOLD_ACTIONS, agent="robot",
                                  withheld_actions=("Turn on", "Turn off", "Clean"))
    refused = Executor(pair, config=robot_config).execute(Subtask("Turn on", lamp), "octo", ())
    assert refused.code is ErrorCode.F1
    assert refused.message.startswith("the robot can not turn on! Only the other agent can")
    human = pair.agent(HUMAN_ID)
    assert human.go_to(lamp).success
    done = Executor(human, config=ExecutorConfig(actions=HOUSEHOLD_ACTIONS, agent="human")).execute(
        Subtask("Turn on", lamp), "octo", ())
    assert done.code is ErrorCode.OK
    assert pair.state().entities[lamp].powered_on is True
