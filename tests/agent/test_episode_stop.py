"""A planner's clean stop (EpisodeStopRequested, what a person at the keyboard's quit raises) against a planner's
crash: the first ends the episode with no error and the goal checked, the second is an infrastructure failure."""

from __future__ import annotations

import logging

import pytest

from homiebot.agent.loop import run_episode
from homiebot.planner.base import EpisodeStopRequested, PlanRequest
from homiebot.planner.expert import ExpertPlanner
from homiebot.sim.base import make_simulator
from homiebot.tasks.suite import get_task


class _ExpertThen(ExpertPlanner):
    """The expert for two rounds, then raises ``error``."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    def plan(self, request: PlanRequest) -> str:
        if request.round_index > 2:
            raise self.error
        return super().plan(request)


@pytest.fixture(scope="module")
def sim():
    simulator = make_simulator("mujoco", render=False)
    yield simulator
    simulator.shutdown()


def test_a_stop_request_ends_the_episode_cleanly_and_checks_the_goal(sim, caplog):
    with caplog.at_level(logging.INFO, logger="homiebot.agent.loop"):
        trajectory = run_episode(sim, _ExpertThen(EpisodeStopRequested("the person quit")), task=get_task("demo-drawer"))
    assert len(trajectory.rounds) == 2 and trajectory.error is None and not trajectory.ended
    assert trajectory.stopped == "the person quit"
    assert trajectory.goal_satisfied is False  # checked as at any end: two rounds do not solve the task
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_any_other_exception_is_a_failure(sim):
    trajectory = run_episode(sim, _ExpertThen(RuntimeError("model crashed")), task=get_task("demo-drawer"))
    assert trajectory.stopped is None and trajectory.goal_satisfied is None
    assert trajectory.error == "planner 'expert' failed in round 3: model crashed"
