"""The one build path (homiebot/agent/build.py): an episode built from its run configuration is the episode the
loop runs when the same parts are put together by hand, and every section of the configuration reaches the part
it describes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import pytest

from homiebot.agent.build import EpisodeBuildError, build_episode
from homiebot.agent.loop import EpisodeConfig, run_episode
from homiebot.config import PerceptionMode
from homiebot.config.planners import ExpertPlannerConfig
from homiebot.config.run import RunConfig, run_config
from homiebot.planner.expert import ExpertPlanner
from homiebot.planner.partnr_expert import PartnrExpertPlanner
from homiebot.sim.base import make_simulator
from homiebot.sim.scene import load_scene
from homiebot.skills import SkillSet
from homiebot.tasks.suite import get_task, task_actions
from homiebot.types import HOUSEHOLD_ACTIONS, Trajectory


def _rounds(trajectory: Trajectory) -> list[tuple[str, str, str]]:
    return [(r.subtask_text, r.feedback.code.value, r.feedback.message) for r in trajectory.rounds]


@pytest.fixture(scope="module")
def sim():
    simulator = make_simulator("mujoco", render=False)
    yield simulator
    simulator.shutdown()


@pytest.mark.parametrize(("task_id", "seed", "noise", "planner"), [
    ("emmoe-084", 1, "emmoe", {"name": "expert", "interact_range_m": 1.2}),
    ("partnr-1-022", 0, "off", {"name": "partnr_expert"}),
])
def test_a_built_episode_is_the_hand_assembled_one(sim, task_id: str, seed: int, noise: str,
                                                   planner: dict[str, object]) -> None:
    config = run_config({"task": task_id, "seed": seed, "planner": planner, "skills": {"noise": noise},
                         "simulator": {"render": False}})
    built = build_episode(config, simulator=sim).run()
    task = get_task(task_id)
    by_hand_planner = ExpertPlanner(interact_range_m=1.2) if planner["name"] == "expert" else PartnrExpertPlanner()
    preset = {"off": "noiseless", "emmoe": "emmoe_table4"}[noise]
    by_hand = run_episode(sim, by_hand_planner, task=task, seed=seed,
                          config=EpisodeConfig.with_actions(task_actions(task), render=False),
                          skills=lambda s, scene_seed: SkillSet(s, noise=preset, seed=scene_seed))
    assert _rounds(built) == _rounds(by_hand) and built.goal_satisfied == by_hand.goal_satisfied
    assert built.planner == by_hand.planner and len(built.rounds) > 3


def test_every_section_reaches_its_part(sim, tmp_path: Path) -> None:
    config = run_config({
        "task": "partnr-1-022", "seed": 3, "max_rounds": 7, "history_window": 2,
        "planner": {"name": "partnr_expert"},
        "simulator": {"render": False},
        "executor": {"strict_models": True, "max_tries": 2, "far_threshold_m": 2.5, "near_threshold_m": 0.2},
        "perception": {"mode": "privileged", "describe_world": True},
        "recording": {"images": False, "video": False},
    })
    episode = build_episode(config, out=tmp_path / "record", simulator=sim)
    loop = episode.loop
    assert (loop.max_rounds, loop.history_window, loop.render) == (7, 2, False)
    checks = loop.executor
    assert (checks.strict_models, checks.max_tries, checks.far_threshold_m, checks.near_threshold_m) == (True, 2, 2.5, 0.2)
    assert loop.actions == HOUSEHOLD_ACTIONS  # a task with its own evaluation function switches and cleans
    assert episode.perception is not None and episode.task is not None and episode.task.id == "partnr-1-022"
    assert episode.recorder is not None and episode.recorder.images is False and episode.recorder.video is False
    assert episode.recorder.run == config.dump()  # the record keeps the configuration it ran with
    assert episode.planner.name == "partnr_expert" and not episode.owns_simulator and episode.owns_planner
    sim.reset(episode.task.scene, seed=episode.task.seed)
    hook = episode.perception(load_scene(episode.task.scene), sim.state())
    assert hook.describes_world is True  # the privileged graph, describing the world to model planners
    episode.close()
    assert not (tmp_path / "record").exists()  # nothing is written before the episode runs


@pytest.mark.parametrize(("data", "message"), [
    ({"task": "nope-001"}, "nope-001"),
    ({"instruction": "tidy up", "scene": "apartment_1", "planner": {"name": "expert"}}, "needs a built-in task"),
    ({"instruction": "tidy up", "scene": "nowhere", "planner": {"name": "random"}}, "nowhere"),
    ({"task": "emmoe-084", "simulator": {"backend": "habitat"}}, "unknown simulator backend 'habitat'"),
])
def test_what_cannot_be_built_is_refused_before_anything_is_made(tmp_path: Path, data: dict[str, object],
                                                                   message: str) -> None:
    with pytest.raises(EpisodeBuildError, match=message):
        build_episode(RunConfig.model_validate(data), out=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_perception_off_builds_no_hook(sim) -> None:
    episode = build_episode(RunConfig(task="emmoe-084"), simulator=sim)
    assert episode.config.perception.mode is PerceptionMode.OFF and episode.perception is None
    episode.close()


class _UnregisteredExpertConfig(ExpertPlannerConfig):
    name: Literal["unregistered-expert"] = "unregistered-expert"  # type: ignore[assignment]


def test_a_planner_handed_in_need_not_be_registered(sim, tmp_path: Path) -> None:
    """A caller's planner that the registry does not build (data collection's training expert) is checked itself,
    and the record keeps the configuration that describes it."""
    config = RunConfig(task="emmoe-084", planner=_UnregisteredExpertConfig(), simulator={"render": False},
                       recording={"images": False, "video": False})
    with pytest.raises(EpisodeBuildError, match="unknown planner 'unregistered-expert'"):
        build_episode(config, simulator=sim)  # nothing handed in: the registry builds it, and knows no such planner
    episode = build_episode(config, out=tmp_path / "record", simulator=sim, planner=ExpertPlanner())
    assert not episode.owns_planner and episode.recorder is not None
    trajectory = episode.run()
    assert trajectory.ended and trajectory.goal_satisfied
    summary = json.loads((tmp_path / "record" / "summary.json").read_text())
    assert summary["run"]["planner"]["name"] == "unregistered-expert"
    free_text = RunConfig(instruction="tidy up", scene="apartment_1", planner=_UnregisteredExpertConfig())
    with pytest.raises(EpisodeBuildError, match="needs a built-in task"):  # the expert handed in needs a goal
        build_episode(free_text, simulator=sim, planner=ExpertPlanner())


def test_a_pair_gives_each_agent_its_roles_executor_and_needs_its_planners() -> None:
    """PARTNR's pair (``partner``): the robot without the human-only actions, both with Wait; the pair's planners
    come from the caller, and a partner needs the human in the scene. Each refusal is one line, before anything is
    made."""
    from homiebot.agent.build import agent_loop_configs
    from homiebot.config.planners import ConfigError

    pair = run_config({"task": "partnr-1-022", "planner": {"name": "partnr_expert"},
                       "simulator": {"human": True, "render": False}, "partner": {"planner": "expert"}})
    robot, human = agent_loop_configs(pair, get_task("partnr-1-022"))
    assert human is not None and robot.executor.agent == "robot" and human.executor.agent == "human"
    assert "Turn on" in human.actions and "Turn on" not in robot.actions and "Turn on" in robot.executor.withheld_actions
    assert robot.actions[-2:] == human.actions[-2:] == ("Wait", "End")
    alone, none = agent_loop_configs(run_config({"task": "partnr-1-022"}), get_task("partnr-1-022"))
    assert none is None and "Wait" not in alone.actions
    with pytest.raises(EpisodeBuildError, match="made by its caller"):
        build_episode(pair)
    with pytest.raises(EpisodeBuildError, match="needs the run configuration's partner"):
        build_episode(run_config({"task": "partnr-1-022"}), planner=PartnrExpertPlanner(), partner=PartnrExpertPlanner())
    with pytest.raises(ConfigError, match="partner: a second agent needs the human in the scene"):
        run_config({"task": "partnr-1-022", "partner": {"planner": "expert"}})
