"""What perception may know before looking: the floor plan, the furniture layout, and the detector vocabulary.

PARTNR (A.7.1) starts the privileged graph from the ground-truth room regions and furniture placements; the
ConceptGraphs-style builder of this package starts from the floor plan only (room names and floor polygons, as a
robot gets from a map) and discovers furniture and objects in the images. Both read these plain records, built
from a :class:`SceneSpec` plus the simulator's :class:`WorldState` (for the furniture boxes after placement).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from homiebot.perception.geometry import FloorPlan
from homiebot.sim.scene import SceneSpec
from homiebot.types import EntityKind, WorldState

#: Affordance names stored on furniture nodes.
OPENABLE = "openable"
CONTAINER = "container"
SURFACE = "surface"
APPLIANCE = "appliance"


@dataclass(frozen=True)
class RoomLayout:
    name: str
    category: str
    aliases: tuple[str, ...]
    polygon: tuple[tuple[float, float], ...]
    level: int = 0


@dataclass(frozen=True)
class FurnitureLayout:
    name: str
    category: str
    aliases: tuple[str, ...]
    room: str | None
    position: tuple[float, float, float]
    bbox_min: tuple[float, float, float]
    bbox_max: tuple[float, float, float]
    affordances: tuple[str, ...]
    is_open: bool | None = None


@dataclass(frozen=True)
class VocabularyEntry:
    """One class of the detector's closed vocabulary: its kind and the text prompts that name it."""

    category: str
    kind: EntityKind
    prompts: tuple[str, ...]


@dataclass(frozen=True)
class SceneLayout:
    scene: str
    rooms: tuple[RoomLayout, ...]
    furniture: tuple[FurnitureLayout, ...]

    def floor_plan(self) -> FloorPlan:
        return FloorPlan({r.name: list(r.polygon) for r in self.rooms}, {r.name: r.level for r in self.rooms})

    @classmethod
    def from_scene(cls, spec: SceneSpec, state: WorldState | None = None) -> SceneLayout:
        """Rooms from the spec; furniture boxes from ``state`` when given (the simulator's placement), else from the
        spec's pose and size (exact for yaw multiples of 90 degrees, a bounding box otherwise)."""
        rooms = tuple(
            RoomLayout(r.name, r.category, tuple(r.aliases), tuple(tuple(p) for p in r.polygon), r.level)  # type: ignore[misc]
            for r in spec.rooms
        )
        plan = FloorPlan({r.name: list(r.polygon) for r in rooms}, {r.name: r.level for r in rooms})
        furniture = []
        for f in spec.furniture:
            affordances = []
            if f.articulation is not None:
                affordances.append(OPENABLE)
            if f.interior is not None:
                affordances.append(CONTAINER)
            if f.surfaces:
                affordances.append(SURFACE)
            if f.appliance:
                affordances.append(APPLIANCE)
            entity = state.entities.get(f.name) if state is not None else None
            if entity is not None:
                bbox_min, bbox_max, position = entity.bbox_min, entity.bbox_max, entity.position
                room = entity.room or f.room
                is_open = entity.is_open
            else:
                bbox_min, bbox_max = _footprint_box(f.pose.x, f.pose.y, f.pose.yaw, f.size)
                position = tuple((a + b) / 2 for a, b in zip(bbox_min, bbox_max, strict=False))
                room = f.room or plan.room_at(f.pose.x, f.pose.y, f.level)
                is_open = f.articulation.open if f.articulation is not None else None
            furniture.append(
                FurnitureLayout(
                    f.name, f.category, tuple(f.aliases), room, tuple(position), tuple(bbox_min), tuple(bbox_max),  # type: ignore[arg-type]
                    tuple(affordances), is_open,
                )
            )
        return cls(spec.name, rooms, tuple(furniture))


def _footprint_box(x: float, y: float, yaw: float, size: tuple[float, float, float]):
    import math

    hx, hy = size[0] / 2, size[1] / 2
    c, s = abs(math.cos(yaw)), abs(math.sin(yaw))
    ex, ey = c * hx + s * hy, s * hx + c * hy
    return (x - ex, y - ey, 0.0), (x + ex, y + ey, size[2])


def vocabulary_from_scene(spec: SceneSpec, extra_prompts: dict[str, Iterable[str]] | None = None) -> dict[str, VocabularyEntry]:
    """The detector vocabulary: one entry per furniture/object category of the scene, prompted by the category and
    the aliases of every instance of it (category-level, so a detection never carries an instance's identity).

    ``extra_prompts`` adds synonyms per category (for example the EMMOE aliases of that category)."""
    prompts: dict[str, list[str]] = {}
    kinds: dict[str, EntityKind] = {}
    for f in spec.furniture:
        kinds.setdefault(f.category, EntityKind.FURNITURE)
        prompts.setdefault(f.category, []).extend(f.aliases)
    for o in spec.objects:
        kinds.setdefault(o.category, EntityKind.OBJECT)
        prompts.setdefault(o.category, []).extend(o.aliases)
    for category, extra in (extra_prompts or {}).items():
        if category in prompts:
            prompts[category].extend(extra)
    return {
        c: VocabularyEntry(c, kinds[c], tuple(dict.fromkeys([c.replace("_", " ")] + prompts[c])))
        for c in sorted(kinds)
    }
