"""Observers of the episode loop: what watches an episode without steering it.

The loop (:mod:`homiebot.agent.loop`) calls every observer at three points, in the order they were given,
in both wirings (in-process and the ROS 2 graph), so an observer written once sees the same calls wherever
the episode runs (docs/loop.md):

* ``on_start(trajectory, state, observation)``: after the reset; the first privileged state and the views
  the first request will carry (None when the episode does not render);
* ``on_round(record, seen, state)``: after each round; ``seen`` is the observation the planner saw when it
  chose this round's subtask (None when not rendering), ``state`` the privileged world state after the
  round's execution;
* ``on_end(trajectory, state)``: after the goal check; the final state (None when the reset failed).

An observer that raises aborts the episode: the exception propagates to the caller, like a recording
failure (a state file or a record that silently misses rounds would be worse than no file).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from homiebot.types import Observation, RoundRecord, Trajectory, WorldState


@runtime_checkable
class EpisodeObserver(Protocol):
    """Watches one episode: the start, every finished round, the end (see the module docstring)."""

    def on_start(self, trajectory: Trajectory, state: WorldState, observation: Observation | None) -> None: ...

    def on_round(self, record: RoundRecord, seen: Observation | None, state: WorldState) -> None: ...

    def on_partner_round(self, record: RoundRecord, seen: Observation | None, state: WorldState) -> None:
        """A two-agent episode's partner (the human) finished a round; ``on_round`` gets the robot's."""
        ...

    def on_end(self, trajectory: Trajectory, state: WorldState | None) -> None: ...


class ObserverBase:
    """No-op defaults for every call, so an observer overrides only what it needs."""

    def on_start(self, trajectory: Trajectory, state: WorldState, observation: Observation | None) -> None:
        """Nothing to do at the start."""

    def on_round(self, record: RoundRecord, seen: Observation | None, state: WorldState) -> None:
        """Nothing to do after a round."""

    def on_partner_round(self, record: RoundRecord, seen: Observation | None, state: WorldState) -> None:
        """Nothing to do after the partner's round."""

    def on_end(self, trajectory: Trajectory, state: WorldState | None) -> None:
        """Nothing to do at the end."""


class StateRecorder(ObserverBase):
    """Keeps the privileged world state at the start and after every round, in memory (what a PARTNR-style
    evaluation reads: the state after every round, "PARTNR: A Benchmark for Planning and Reasoning in
    Embodied Multi-agent Tasks", section 4). ``states[0]`` is the start, ``states[i]`` the state after round i.
    """

    def __init__(self) -> None:
        self.states: list[WorldState] = []
        self.final: WorldState | None = None

    def on_start(self, trajectory: Trajectory, state: WorldState, observation: Observation | None) -> None:
        self.states = [state]
        self.final = None

    def on_round(self, record: RoundRecord, seen: Observation | None, state: WorldState) -> None:
        self.states.append(state)

    def on_end(self, trajectory: Trajectory, state: WorldState | None) -> None:
        self.final = state


def notify_start(observers: Sequence[EpisodeObserver], trajectory: Trajectory, state: WorldState,
                 observation: Observation | None) -> None:
    for observer in observers:
        observer.on_start(trajectory, state, observation)


def notify_round(observers: Sequence[EpisodeObserver], record: RoundRecord, seen: Observation | None,
                 state: WorldState) -> None:
    for observer in observers:
        observer.on_round(record, seen, state)


def notify_end(observers: Sequence[EpisodeObserver], trajectory: Trajectory, state: WorldState | None) -> None:
    for observer in observers:
        observer.on_end(trajectory, state)
