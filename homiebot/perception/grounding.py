"""Grounding: map a planner's target string ("the fridge", "red_can", "kitchen drawer") to a scene instance.

``AliasGrounder`` is the EMMOE-faithful tier (the paper's hand-written name map): exact instance name,
category or alias after normalisation. When several instances share the name ("apple" with two apples),
the one nearest the robot wins (EMMOE appendix H.1: "select the nearest object"). A name that matches
nothing returns ``None``, which the executor reports as F2.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from homiebot.types import EntityKind, EntityState, WorldState

_ARTICLES = re.compile(r"^(the|a|an|some|my|your)\s+")


def normalize_name(text: str) -> str:
    """Lower-case, drop a leading article, unify spaces/underscores/hyphens: "The Kitchen-Counter" -> "kitchen_counter"."""
    key = " ".join(text.strip().lower().split())
    key = _ARTICLES.sub("", key)
    return re.sub(r"[\s\-]+", "_", key).strip("_.,;:!?'\"")


@dataclass(frozen=True)
class GroundingResult:
    instance: str | None
    score: float = 0.0  # 1.0 for an exact name/alias match; a similarity for semantic matches
    method: str = "none"  # "name" | "alias" | "semantic" | "none"
    candidates: tuple[str, ...] = ()


@runtime_checkable
class Grounder(Protocol):
    def ground(self, target: str, state: WorldState) -> GroundingResult: ...


def _planar_distance(state: WorldState, entity: EntityState) -> float:
    return math.hypot(entity.position[0] - state.robot.x, entity.position[1] - state.robot.y)


class AliasGrounder:
    """Exact name, then category/alias match; ties broken by distance to the robot, then by name."""

    def ground(self, target: str, state: WorldState) -> GroundingResult:
        key = normalize_name(target)
        if not key:
            return GroundingResult(None)
        for name in state.entities:
            if normalize_name(name) == key:
                return GroundingResult(name, 1.0, "name", (name,))
        matches = [
            e
            for e in state.entities.values()
            if normalize_name(e.category) == key or key in {normalize_name(a) for a in e.aliases}
        ]
        if not matches:
            return GroundingResult(None)
        # Prefer objects over furniture over rooms for the same word ("sink" the basin, not a room name).
        rank = {EntityKind.OBJECT: 0, EntityKind.FURNITURE: 1, EntityKind.ROOM: 2}
        best_rank = min(rank[e.kind] for e in matches)
        matches = [e for e in matches if rank[e.kind] == best_rank]
        matches.sort(key=lambda e: (_planar_distance(state, e), e.name))
        return GroundingResult(matches[0].name, 1.0, "alias", tuple(e.name for e in matches))
