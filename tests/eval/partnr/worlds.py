"""Hand-made world states for the evaluation-language tests: a kitchen and a living room, a table, a counter,
a fridge, a lamp, and small objects whose support and position each test sets."""

from __future__ import annotations

from dataclasses import replace

from homiebot.types import EntityKind, EntityState, Pose2D, WorldState

HALF = 0.05  # half-size of a small object's box (m)


def _box(x: float, y: float, z: float, hx: float, hy: float, hz: float) -> dict:
    return {"position": (x, y, z), "bbox_min": (x - hx, y - hy, z - hz), "bbox_max": (x + hx, y + hy, z + hz)}


def _room(name: str, category: str) -> EntityState:
    return EntityState(name=name, category=category, kind=EntityKind.ROOM, aliases=(category,),
                       **_box(0, 0, 0, 3, 3, 0.01))


def _furniture(name: str, category: str, room: str, x: float, y: float, **extra: object) -> EntityState:
    return EntityState(name=name, category=category, kind=EntityKind.FURNITURE, aliases=(), room=room,
                       **_box(x, y, 0.4, 0.4, 0.4, 0.4), **extra)  # type: ignore[arg-type]


BASE = {
    "kitchen": _room("kitchen", "kitchen"),
    "living_room": _room("living_room", "living_room"),
    "table": _furniture("table", "table", "living_room", 2.0, 0.0),
    "counter": _furniture("counter", "counter", "kitchen", -2.0, 0.0),
    "sink": _furniture("sink", "sink", "kitchen", -2.0, 2.0),
    "fridge": _furniture("fridge", "fridge", "kitchen", -2.0, -2.0, articulated=True, is_open=False),
    "lamp": _furniture("lamp", "lamp", "living_room", 2.0, 2.0, appliance=True, powered_on=False),
}
HOMES = {"cup": "counter", "spoon_1": "counter", "spoon_2": "counter", "spoon_3": "counter",
         "ball": "table", "bat": "table", "book": "table"}


def obj(name: str, parent: str | None, relation: str | None = "on", x: float | None = None,
        y: float = 0.0, z: float = 0.85, held: bool = False) -> EntityState:
    """An object on/in ``parent`` (its room), at (x, y) (default: the parent's centre)."""
    room = None
    if parent is not None:
        p = BASE[parent]
        room = p.room
        x = p.position[0] if x is None else x
        y = p.position[1] if y == 0.0 and x == p.position[0] else y
    category = name.split("_", 1)[0]
    return EntityState(name=name, category=category, kind=EntityKind.OBJECT, aliases=(), room=room,
                       parent=None if held else parent, relation=None if held or parent is None else relation,
                       held=held, **_box(x or 0.0, y, z, HALF, HALF, HALF))


def world(*changes: EntityState, held: str | None = None, robot_room: str = "living_room",
          lamp_on: bool | None = False, fridge_open: bool | None = False) -> WorldState:
    """Every object at home unless ``changes`` moves it; the given lamp and fridge states."""
    entities = dict(BASE)
    entities["lamp"] = replace(BASE["lamp"], powered_on=lamp_on)
    entities["fridge"] = replace(BASE["fridge"], is_open=fridge_open)
    spread = 0.0
    for name, home in HOMES.items():
        entities[name] = obj(name, home, x=BASE[home].position[0] - 0.3 + spread, y=-0.3)
        spread += 0.1
    for change in changes:
        entities[change.name] = change
    return WorldState(robot=Pose2D(0, 0, 0), robot_radius=0.3, held=held, entities=entities, scene="test",
                      robot_room=robot_room)
