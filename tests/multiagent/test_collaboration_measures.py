"""PARTNR's task offloading and extraneous effort over two agents, on hand-made event sequences."""

from __future__ import annotations

import pytest

from homiebot.multiagent.centralized import AgentRole
from homiebot.multiagent.measures import AgentEvent, collaboration_measures, progress_flags

R, H = AgentRole.ROBOT, AgentRole.HUMAN


def test_even_split_offloads_half_and_wastes_nothing():
    events = [
        AgentEvent(R, 0.0),
        AgentEvent(H, 0.0),
        AgentEvent(R, 0.5, is_place=True),
        AgentEvent(H, 1.0, is_place=True),
    ]
    m = collaboration_measures(events)
    assert m.task_offloading == 0.5 and m.extraneous_effort == 0.0
    assert m.progress == {R: 1, H: 1} and m.actions == {R: 2, H: 2}


def test_useless_placements_count_as_extraneous():
    events = [
        AgentEvent(R, 0.0, is_place=True),  # placed somewhere useless
        AgentEvent(H, 0.5, is_place=True),
        AgentEvent(R, 0.5, is_place=True),  # PC did not rise above its maximum
        AgentEvent(R, 1.0, is_place=True),
        AgentEvent(H, 1.0, succeeded=False, is_place=True),  # failed placements are not effort
    ]
    m = collaboration_measures(events)
    assert m.progress == {R: 1, H: 1}
    assert m.task_offloading == pytest.approx(0.5)
    assert m.extraneous_effort == pytest.approx(2 / 4)


def test_a_drop_and_recovery_is_not_progress_twice():
    assert progress_flags([AgentEvent(R, 0.5), AgentEvent(H, 0.0), AgentEvent(H, 0.5), AgentEvent(R, 1.0)]) == [
        True,
        False,
        False,
        True,
    ]


def test_undefined_on_failed_episodes_and_without_progress():
    assert collaboration_measures([AgentEvent(R, 0.5)]).task_offloading is None
    assert collaboration_measures([AgentEvent(R, 1.0), AgentEvent(H, 0.5)]).extraneous_effort is None  # ends < 0.99
    assert collaboration_measures([], initial_pc=1.0).task_offloading is None  # nothing to credit
    only_robot = collaboration_measures([AgentEvent(H, 0.0), AgentEvent(R, 1.0)])
    assert only_robot.task_offloading == 1.0
