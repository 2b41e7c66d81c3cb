"""When a target counts as within the robot's reach: one rule for the expert and for the text planning mode.

The expert planner decides between ``[Go to, X]`` and acting on X (Pick, Put, Open, Close) by this rule, and
the text planning mode (:mod:`homiebot.planner.text_planning`) states in every prompt which names it holds
for, so that a model that reads the prompt has what the expert decided by (its distance to the target is
otherwise nowhere in the prompt).

A target is within reach when its reach distance (:meth:`homiebot.types.WorldState.reach_distance`) lies in
[``near_m``, ``interact_m``], or in [``near_m``, ``far_m``] when the last subtask was ``[Go to, X]`` for that
very target: the navigation may stop a little farther away than the interaction range, and EMMOE's executor
only refuses beyond ``far_m`` (D1) or under ``near_m`` (D2), appendix E.1.
"""

from __future__ import annotations

from dataclasses import dataclass

from homiebot.config import FAR_THRESHOLD_M, NEAR_THRESHOLD_M
from homiebot.types import Action, EntityKind, Subtask, WorldState

#: The expert's interaction range (metres of reach distance): it walks up to anything farther.
INTERACT_RANGE_M = 1.0


@dataclass(frozen=True)
class ReachRule:
    """The thresholds of the rule (module docstring); the defaults are the expert's."""

    near_m: float = NEAR_THRESHOLD_M
    interact_m: float = INTERACT_RANGE_M
    far_m: float = FAR_THRESHOLD_M

    def reachable(self, state: WorldState, name: str, last: Subtask | None) -> bool:
        """Whether ``name`` is within reach in ``state`` after the subtask ``last`` (None in round 1)."""
        distance = state.reach_distance(name)
        if distance < self.near_m:
            return False
        if distance <= self.interact_m:
            return True
        just_arrived = last is not None and Action.parse(last.action) is Action.GO_TO and last.target == name
        return just_arrived and distance <= self.far_m

    def within_reach(self, state: WorldState, last: Subtask | None) -> list[str]:
        """The furniture and objects within reach (not the held one, not rooms), sorted by name."""
        return sorted(
            name
            for name, entity in state.entities.items()
            if entity.kind is not EntityKind.ROOM and not entity.held and self.reachable(state, name, last)
        )
