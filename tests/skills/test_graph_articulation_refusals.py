"""The graph's Open and Close (homiebot.ros.physical_skills.PhysicalSkillRunner) refuse from the world graph what the
simulator's precheck refuses before the arm moves (homiebot/sim/mujoco/backend.py, ``precheck``), in the same order and
with the same statuses, so that the executor's error codes mean the same in one process and through the graph."""

from __future__ import annotations

from homiebot.ros.physical_skills import articulate_refusal
from homiebot.types import EntityKind, EntityState, Pose2D, SkillStatus, WorldState


def _entity(name: str, kind: EntityKind, articulated: bool = False, interactive: bool = False) -> EntityState:
    return EntityState(name=name, category=name, kind=kind, aliases=(), position=(1.0, 1.0, 0.4),
                       bbox_min=(0.8, 0.8, 0.0), bbox_max=(1.2, 1.2, 0.8), articulated=articulated,
                       interactive=interactive, is_open=False if articulated else None)


def _world(held: str | None = None) -> WorldState:
    entities = [
        _entity("kitchen_drawer", EntityKind.FURNITURE, articulated=True, interactive=True),
        _entity("display_cabinet", EntityKind.FURNITURE, articulated=True, interactive=False),
        _entity("table", EntityKind.FURNITURE),
        _entity("apple", EntityKind.OBJECT),
    ]
    return WorldState(robot=Pose2D(0.0, 0.0, 0.0), robot_radius=0.3, held=held, entities={e.name: e for e in entities})


def test_an_openable_piece_with_the_hand_empty_is_not_refused() -> None:
    assert articulate_refusal(_world(), "kitchen_drawer", opening=True) is None
    assert articulate_refusal(_world(), "kitchen_drawer", opening=False) is None


def test_refusals_follow_the_precheck() -> None:
    missing = articulate_refusal(_world(), "fridge", opening=True)
    assert missing is not None and missing.status is SkillStatus.NOT_FOUND
    full = articulate_refusal(_world(held="apple"), "kitchen_drawer", opening=True)
    assert full is not None and full.status is SkillStatus.HAND_FULL and "apple" in full.detail
    for target in ("table", "apple", "display_cabinet"):
        refused = articulate_refusal(_world(), target, opening=False)
        assert refused is not None and refused.status is SkillStatus.NOT_INTERACTIVE, target
        assert refused.detail.endswith("cannot be closed")
