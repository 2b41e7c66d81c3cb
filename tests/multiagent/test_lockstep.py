"""Lock-step rounds of two agents in the one episode loop (PARTNR's robot and human): the expert pair in both
modes, per-agent action lists, the partner feed, Pick of what the other holds, the partner's observers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from homiebot.agent.loop import AgentSlot, EpisodeConfig, EpisodeSetupError, run_episode
from homiebot.agent.observers import ObserverBase
from homiebot.multiagent.centralized import AgentRole
from homiebot.multiagent.pair import (
    CentralizedExpert,
    PartnerLog,
    ScriptedHuman,
    ShareExpert,
    centralized_pair,
    role_actions,
    role_config,
)
from homiebot.planner.scripted import ScriptedPlanner
from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.tasks.suite import load_suite, task_actions
from homiebot.types import HOUSEHOLD_ACTIONS, ErrorCode


@pytest.fixture(scope="module")
def sim():
    simulator = MujocoSimulator(render=False, human=True)
    yield simulator
    simulator.shutdown()


@pytest.fixture(scope="module")
def suite():
    return {t.id: t for t in load_suite("partnr").tasks}


def _pair_configs(task):
    base = EpisodeConfig.with_actions(task_actions(task), render=False)
    return role_config(AgentRole.ROBOT, base), role_config(AgentRole.HUMAN, base)


def test_role_action_lists():
    robot = role_actions(AgentRole.ROBOT, HOUSEHOLD_ACTIONS)
    human = role_actions(AgentRole.HUMAN, HOUSEHOLD_ACTIONS)
    assert "Turn on" not in robot and "Clean" not in robot and "Turn on" in human and "Clean" in human
    assert robot[-2:] == ("Wait", "End") and human[-2:] == ("Wait", "End")
    config = role_config(AgentRole.ROBOT, EpisodeConfig.with_actions(HOUSEHOLD_ACTIONS))
    assert config.executor.agent == "robot" and set(config.executor.withheld_actions) == {"Turn on", "Turn off", "Clean", "Fill", "Pour"}


@pytest.mark.parametrize("mode", ["decentralized", "centralized"])
def test_expert_pair_solves_a_heterogeneous_task_in_lock_step(sim, suite, mode):
    # partnr-6-007: a can into the kitchen cabinet (robot) and then the floor lamp on (human only, temporal).
    task = suite["partnr-6-007"]
    robot_config, human_config = _pair_configs(task)
    if mode == "decentralized":
        robot, human = ShareExpert(AgentRole.ROBOT), ShareExpert(AgentRole.HUMAN)
    else:
        robot, human = centralized_pair(CentralizedExpert())
    trajectory = run_episode(sim, robot, task=task, config=robot_config, partner=AgentSlot(human, human_config))
    assert trajectory.error is None
    assert trajectory.goal_satisfied is True
    assert trajectory.ended
    assert {r.agent for r in trajectory.rounds} == {0} and {r.agent for r in trajectory.partner_rounds} == {1}
    robot_actions = [r.output.subtask.action for r in trajectory.rounds]
    human_actions = [r.output.subtask.action for r in trajectory.partner_rounds]
    assert "Turn on" in human_actions and "Turn on" not in robot_actions
    assert "Put" in robot_actions
    # The lamp waits for the can (temporal order): the human's Turn on comes after the robot's Put.
    put_round = robot_actions.index("Put") + 1
    turn_round = human_actions.index("Turn on") + 1
    assert turn_round > put_round
    assert all(r.feedback.code is ErrorCode.OK for r in trajectory.rounds + trajectory.partner_rounds)
    assert trajectory.partner_planner is not None


def test_partner_feed_and_observers(sim, suite):
    task = suite["partnr-1-000"]
    robot_config, human_config = _pair_configs(task)

    class Listening(PartnerLog, ScriptedPlanner):
        pass

    robot = Listening(["Analysis: wait.\nSubtask: [Wait]\nModel: None"] * 4)
    human = ScriptedHuman(["Go to, kitchen_drawer", "Open, kitchen_drawer", "Go to, sofa", "Close, kitchen_drawer"])
    seen: list[tuple[int, str]] = []

    class Watch(ObserverBase):
        def on_round(self, record, seen_views, state):
            seen.append((record.agent, record.subtask_text))

        def on_partner_round(self, record, seen_views, state):
            seen.append((record.agent, record.subtask_text))

    trajectory = run_episode(sim, robot, task=task, config=robot_config, partner=AgentSlot(human, human_config),
                             observers=[Watch()])
    assert [s for s in seen if s[0] == 1][:2] == [(1, "[Go to, kitchen_drawer]"), (1, "[Open, kitchen_drawer]")]
    assert seen[0][0] == 0 and seen[1][0] == 1  # robot first in every round
    # The robot hears of the partner's non-navigation actions only, with their outcome.
    events = robot.partner_events()
    assert [e.subtask for e in events] == ["[Open, kitchen_drawer]", "[Close, kitchen_drawer]"]
    assert events[0].agent == "human" and events[0].feedback.code is ErrorCode.OK
    assert events[1].feedback.code is not ErrorCode.OK  # closed from the sofa: too far
    assert len(trajectory.partner_rounds) == 5  # four subtasks and End


def test_pick_of_what_the_human_holds_and_the_robots_missing_skills(sim, suite):
    task = suite["partnr-1-000"]  # apartment_1: the apple is on a surface in reach
    robot_config, human_config = _pair_configs(task)
    human = ScriptedHuman(["Go to, apple", "Pick, apple"])
    robot = ScriptedPlanner([
        "Analysis: -\nSubtask: [Wait]\nModel: None",
        "Analysis: -\nSubtask: [Turn on, floor_lamp]\nModel: octo",
        "Analysis: -\nSubtask: [Go to, apple]\nModel: PixNav",
        "Analysis: -\nSubtask: [Pick, apple]\nModel: RT-1-X",
    ])
    trajectory = run_episode(sim, robot, task=task, config=robot_config, partner=AgentSlot(human, human_config))
    feedback = [r.feedback for r in trajectory.rounds]
    assert feedback[1].code is ErrorCode.F1 and feedback[1].message.startswith("the robot can not turn on!")
    assert feedback[3].code is ErrorCode.E1
    assert [r.feedback.code for r in trajectory.partner_rounds[:2]] == [ErrorCode.OK, ErrorCode.OK]
    assert feedback[3].message == "Unable to pick, the apple is held by the human"


def test_a_partner_needs_a_simulator_with_a_human(suite):
    alone = MujocoSimulator(render=False)
    try:
        with pytest.raises(EpisodeSetupError, match="human=True"):
            run_episode(alone, ShareExpert(AgentRole.ROBOT), task=suite["partnr-1-000"],
                        partner=AgentSlot(ShareExpert(AgentRole.HUMAN)))
    finally:
        alone.shutdown()


def test_expert_pair_hands_over_an_object_without_deadlock(sim, suite):
    # "Clean the red can, then put it on the sofa": the human cleans (its share), sets the can down at one place
    # and waits; the robot waits while the human holds the can (no Pick of what the other holds), then moves it.
    task = suite["partnr-4-033"]
    robot_config, human_config = _pair_configs(task)
    trajectory = run_episode(sim, ShareExpert(AgentRole.ROBOT), task=task, config=robot_config,
                             partner=AgentSlot(ShareExpert(AgentRole.HUMAN), human_config))
    assert trajectory.goal_satisfied is True and trajectory.ended
    assert all(r.feedback.code is ErrorCode.OK for r in trajectory.rounds + trajectory.partner_rounds)
    human = [r.subtask_text for r in trajectory.partner_rounds]
    assert "[Clean, red_can, sink]" in human
    puts = [t for t in human if t.startswith("[Put, red_can")]
    assert len(puts) == 1  # set down once, at the furniture it chose
    assert "[Put, red_can, sofa]" in [r.subtask_text for r in trajectory.rounds]


def test_expert_takes_over_the_share_of_a_partner_who_never_does_it(sim, suite):
    """A partner who does nothing of its share (a person in homie play who walks off): after TAKEOVER_AFTER_WAITS
    waiting rounds without progress the expert robot does the human's rearrangement itself, well before the round
    limit; what only the human can do (switching a lamp on) ends the robot's episode with that reason instead."""
    from homiebot.multiagent.pair import TAKEOVER_AFTER_WAITS
    from homiebot.tasks.partnr.convert import task_function
    from homiebot.tasks.partnr.tracker import evaluate_states

    task = suite["partnr-6-010"]  # two objects to the TV stand: one is the human's share
    robot = ShareExpert(AgentRole.ROBOT)
    idle = ScriptedHuman("Wait; Wait; Wait; Wait; Wait; Wait; Wait; Wait; Wait; Wait; Wait; Wait")
    robot_config, human_config = _pair_configs(task)
    robot_config = replace(robot_config, max_rounds=30)
    states = []

    class States(ObserverBase):
        def on_start(self, trajectory, state, observation):
            states.append(sim.state())

        def on_round(self, record, seen, state):
            states.append(sim.state())

    trajectory = run_episode(sim, robot, task=task, config=robot_config, partner=AgentSlot(idle, human_config),
                             observers=[States()])
    assert trajectory.error is None
    assert robot.taken_over, "the robot took over the human's share"
    assert evaluate_states(task_function(task, states[0]), states).success
    waits = [r.subtask_text for r in trajectory.rounds].count("[Wait]")
    assert waits == TAKEOVER_AFTER_WAITS  # the waits, then the take-over instead of the next one
    assert len(trajectory.rounds) < 30 and trajectory.rounds[-1].subtask_text == "[End]"

    # Heterogeneous: the lamp is the human's alone; the robot ends with the reason after its bounded wait.
    task = suite["partnr-6-007"]
    robot = ShareExpert(AgentRole.ROBOT, takeover_after=3)
    robot_config, human_config = _pair_configs(task)
    trajectory = run_episode(sim, robot, task=task, config=replace(robot_config, max_rounds=30),
                             partner=AgentSlot(ScriptedHuman("Wait; Wait; Wait; Wait; Wait; Wait; Wait; Wait"),
                                               human_config))
    last = trajectory.rounds[-1]
    assert last.subtask_text == "[End]" and len(trajectory.rounds) < 30
    assert "only the human can do" in last.output.analysis and "is_powered_on" in last.output.analysis
    assert robot.taken_over == []
