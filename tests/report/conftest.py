"""Real records for the report tests: one expert episode with images (emmoe-084, the README's demo task), and a
random-baseline evaluation of the two-task demo suite with images (its rounds fail with many codes)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def episode_record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from homiebot.agent.loop import run_episode
    from homiebot.data.record import EpisodeRecorder
    from homiebot.planner.expert import ExpertPlanner
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task

    out = tmp_path_factory.mktemp("report") / "t84"
    sim = make_simulator("mujoco", render=True)
    trajectory = run_episode(sim, ExpertPlanner(), task=get_task("emmoe-084"), recorder=EpisodeRecorder(out, video=False))
    assert trajectory.goal_satisfied and len(trajectory.rounds) == 8
    return out


@pytest.fixture(scope="session")
def random_evaluation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from homiebot.eval.runner import EvalSettings, run_evaluation

    out = tmp_path_factory.mktemp("report") / "eval"
    outcome = run_evaluation(EvalSettings(suite="demo", planner="random"), out, runs=2, workers=1, images=True,
                             progress=False)
    assert outcome.finished == outcome.total and not outcome.failed_jobs
    return out
