"""The joint-space motion planner (homiebot/skills/physical/motion.py) on a planar two-link arm: around a box the
straight joint motion sweeps through, a clear failure where no motion exists, the same path from the same seed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from homiebot.skills.physical.motion import PlannerSettings, plan_motion, segment_clear

LINKS = (1.0, 1.0)  # m
LIMITS = ((-math.pi, -math.pi), (math.pi, math.pi))


def link_points(q: tuple[float, ...], spacing: float = 0.05) -> np.ndarray:
    """Points along both links of a planar arm at joint angles ``q`` (shoulder, elbow)."""
    elbow = np.array([LINKS[0] * math.cos(q[0]), LINKS[0] * math.sin(q[0])])
    tip = elbow + LINKS[1] * np.array([math.cos(q[0] + q[1]), math.sin(q[0] + q[1])])
    n = int(LINKS[0] / spacing)
    return np.array([elbow * k / n for k in range(n + 1)] + [elbow + (tip - elbow) * k / n for k in range(1, n + 1)])


def box_check(lo: tuple[float, float], hi: tuple[float, float]):
    def clear(q: tuple[float, ...]) -> bool:
        points = link_points(q)
        return not np.any(np.all((points > lo) & (points < hi), axis=1))

    return clear


# A box 1.7 m out at 45 degrees: the stretched arm swinging from along x to along y sweeps through it; an arm that
# folds its elbow while it passes does not.
AROUND = box_check((1.05, 1.05), (1.35, 1.35))
START, GOAL = (0.0, 0.0), (math.pi / 2, 0.0)


def test_the_planner_goes_around_a_box_the_straight_motion_sweeps_through():
    assert not segment_clear(START, GOAL, AROUND)
    plan = plan_motion(START, GOAL, AROUND, *LIMITS, settings=PlannerSettings(max_samples=500, time_budget=30.0))
    assert plan.found, plan.failure
    assert plan.waypoints is not None and plan.waypoints[-1] == pytest.approx(GOAL)
    assert 2 <= len(plan.waypoints) < 10, "shortcut to a few waypoints"
    path = [START, *plan.waypoints]
    # Every segment clear at a tenth of the planner's check spacing, and the elbow folded on the way.
    assert all(segment_clear(a, b, AROUND, step=0.01) for a, b in zip(path, path[1:], strict=False))
    assert max(abs(q[1]) for q in path) > 0.5
    assert all(LIMITS[0][i] <= q[i] <= LIMITS[1][i] for q in path for i in range(2))


def test_a_straight_motion_that_is_clear_is_returned_as_it_is():
    plan = plan_motion(START, (0.5, 0.3), AROUND, *LIMITS)
    assert plan.waypoints == ((0.5, 0.3),) and plan.samples == 0


def test_the_same_seed_gives_the_same_path_and_another_seed_another():
    def plan(seed: int):
        return plan_motion(START, GOAL, AROUND, *LIMITS,
                           settings=PlannerSettings(max_samples=500, time_budget=30.0, seed=seed))

    first, again, other = plan(3), plan(3), plan(4)
    assert first.found and other.found
    assert first.waypoints == again.waypoints and first.samples == again.samples
    assert first.waypoints != other.waypoints


def test_no_motion_is_a_clear_failure_within_the_sample_budget():
    # A post 0.5 m out at 60 degrees: the first link cannot pass it whatever the elbow does, and the shoulder's
    # limits leave no way round the other side.
    post = box_check((0.5 * math.cos(math.radians(60)) - 0.05, 0.5 * math.sin(math.radians(60)) - 0.05),
                     (0.5 * math.cos(math.radians(60)) + 0.05, 0.5 * math.sin(math.radians(60)) + 0.05))
    plan = plan_motion(START, GOAL, post, *LIMITS, settings=PlannerSettings(max_samples=150, time_budget=30.0))
    assert not plan.found and plan.waypoints is None
    assert plan.samples == 150
    assert plan.failure.startswith("no collision-free motion found within 150 samples")
    assert "ran out of samples" in plan.failure


def test_the_time_budget_ends_the_search():
    post = box_check((0.2, 0.4), (0.3, 0.5))
    plan = plan_motion(START, GOAL, post, *LIMITS, settings=PlannerSettings(max_samples=10**6, time_budget=0.2))
    assert not plan.found and plan.seconds < 2.0 and "ran out of seconds" in plan.failure


def test_a_goal_in_collision_fails_at_once():
    plan = plan_motion(START, (math.pi / 4, 0.0), AROUND, *LIMITS)
    assert not plan.found and plan.samples == 0
    assert plan.failure == "the goal configuration itself collides"


def test_settings_out_of_range_are_refused():
    with pytest.raises(ValueError, match="planner settings"):
        PlannerSettings(max_samples=0)
