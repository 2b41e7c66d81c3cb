"""Running tasks and scoring them with PARTNR's metrics: the evaluation function of a task, one episode with
its state sequence, and a whole suite (noiseless or with EMMOE's execution noise).

The state sequence comes from the loop's :class:`~homiebot.agent.observers.StateRecorder` (the state after
the reset, then the state after every round). docs/partnr.md, "Running the suite", shows the commands.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from homiebot.agent.observers import StateRecorder
from homiebot.config import MAX_ROUNDS, NoiseMode
from homiebot.config.run import RunConfig, SimulatorConfig, SkillsConfig
from homiebot.eval.partnr.metrics import PartnrEpisode, score_episode
from homiebot.planner.base import Planner
from homiebot.tasks.partnr.convert import task_function
from homiebot.tasks.partnr.language import EvaluationFunction
from homiebot.tasks.suite import TaskSpec
from homiebot.types import Trajectory, WorldState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScoredEpisode:
    trajectory: Trajectory
    states: list[WorldState]
    function: EvaluationFunction
    partnr: PartnrEpisode


def run_scored(sim: Any, planner: Planner, task: TaskSpec, seed: int = 0, *, max_rounds: int = MAX_ROUNDS,
               noise: NoiseMode = NoiseMode.OFF) -> ScoredEpisode:
    """One episode of ``task`` and its PARTNR score (state 0 after the reset, one state per round after), built by
    :func:`homiebot.agent.build.build_episode` on the caller's simulator and planner."""
    from homiebot.agent.build import build_episode

    sim.reset(task.scene, seed=task.seed + seed)
    function = task_function(task, sim.state())
    recorder = StateRecorder()
    config = RunConfig(task=task.id, seed=seed, max_rounds=max_rounds, simulator=SimulatorConfig(render=False),
                       skills=SkillsConfig(noise=noise))
    trajectory = build_episode(config, task=task, simulator=sim, planner=planner, observers=[recorder]).run()
    states = recorder.states
    # The final-state check as EMMOE's report counts its goal-check SR: End is not required (nor is it for PC).
    goal_check = trajectory.goal_satisfied
    partnr = score_episode(task.id, function, states, trajectory.rounds, ended=trajectory.ended,
                           goal_check=goal_check, path_length_m=trajectory.path_length,
                           sim_time_s=sim.observe().sim_time)
    return ScoredEpisode(trajectory, states, function, partnr)


def run_suite(tasks: Iterable[TaskSpec], planner_factory: Callable[[], Planner], *, runs: int = 1,
              noise: str = NoiseMode.OFF.value, max_rounds: int = MAX_ROUNDS) -> list[PartnrEpisode]:
    """Every task ``runs`` times (run r resets with the task's seed + r), scored with PARTNR's metrics."""
    from homiebot.sim.mujoco.backend import MujocoSimulator

    mode = SkillsConfig(noise=noise).noise  # a preset's own name too (noiseless, emmoe_table4)
    sim = MujocoSimulator(render=False)
    episodes: list[PartnrEpisode] = []
    try:
        for task in tasks:
            for run in range(runs):
                episodes.append(run_scored(sim, planner_factory(), task, run, max_rounds=max_rounds,
                                           noise=mode).partnr)
    finally:
        sim.shutdown()
    return episodes


def planner_for(tasks: Sequence[TaskSpec]) -> str:
    """The expert that reads a suite: tasks with their own functions need the PARTNR expert."""
    return "partnr_expert" if any(t.evaluation is not None for t in tasks) else "expert"
