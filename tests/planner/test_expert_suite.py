"""The expert is the upper baseline: every EMMOE-100 task succeeds, noiseless, with no error of its own."""

from __future__ import annotations

import pytest

from homiebot.agent.loop import EpisodeConfig, run_episode
from homiebot.planner.expert import ExpertPlanner
from homiebot.sim.base import make_simulator
from homiebot.tasks.suite import load_suite
from homiebot.types import ErrorCode


@pytest.mark.slow
def test_expert_solves_all_100_tasks_noiseless():
    sim = make_simulator("mujoco", render=False)
    failures = []
    try:
        tasks = load_suite("emmoe100").tasks
        assert len(tasks) == 100
        for task in tasks:
            traj = run_episode(sim, ExpertPlanner(), task=task, config=EpisodeConfig(render=False))
            codes = {r.feedback.code for r in traj.rounds}
            if not (traj.ended and traj.goal_satisfied and traj.error is None and codes == {ErrorCode.OK}):
                failures.append((task.id, traj.error, [(r.subtask_text, r.feedback.code.value) for r in traj.rounds]))
    finally:
        sim.shutdown()
    assert not failures, failures
