"""A tiny exact ray caster of axis-aligned boxes: hand-made RGB-D + instance masks for unit tests.

It renders what the MuJoCo backend renders (``CameraView`` with metric optical-axis depth, instance ids, intrinsics
and an optical-frame pose), for scenes simple enough that the expected back-projection is known in closed form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from homiebot.types import VIEW_NAMES, CameraView, Observation, Pose2D


@dataclass(frozen=True)
class SynthBox:
    instance_id: int
    name: str
    min: tuple[float, float, float]
    max: tuple[float, float, float]


def optical_pose(eye: tuple[float, float, float], yaw: float, pitch: float = 0.0) -> np.ndarray:
    """Camera-to-world of an optical frame at ``eye`` looking along ``yaw`` and ``pitch`` radians down."""
    forward = np.array([math.cos(yaw) * math.cos(pitch), math.sin(yaw) * math.cos(pitch), -math.sin(pitch)])
    right = np.array([math.sin(yaw), -math.cos(yaw), 0.0])
    down = np.cross(forward, right)
    pose = np.eye(4)
    pose[:3, 0], pose[:3, 1], pose[:3, 2], pose[:3, 3] = right, down, forward, eye
    return pose


def render_view(boxes: list[SynthBox], pose: np.ndarray, size: int = 128, fovy_deg: float = 90.0,
                name: str = "front") -> CameraView:
    f = (size / 2) / math.tan(math.radians(fovy_deg) / 2)
    c = (size - 1) / 2
    us, vs = np.meshgrid(np.arange(size), np.arange(size))
    rays_cam = np.stack(((us - c) / f, (vs - c) / f, np.ones_like(us, dtype=float)), axis=-1).reshape(-1, 3)
    rays = rays_cam @ pose[:3, :3].T  # world directions whose optical z component is 1: t is the depth
    origin = pose[:3, 3]
    depth = np.full(len(rays), np.inf)
    seg = np.zeros(len(rays), dtype=np.int32)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / rays
        for box in boxes:
            t1 = (np.asarray(box.min) - origin) * inv
            t2 = (np.asarray(box.max) - origin) * inv
            t_near = np.nanmax(np.minimum(t1, t2), axis=1)
            t_far = np.nanmin(np.maximum(t1, t2), axis=1)
            hit = (t_far >= t_near) & (t_far > 0) & (t_near > 0) & (t_near < depth)
            depth[hit] = t_near[hit]
            seg[hit] = box.instance_id
    depth[~np.isfinite(depth)] = 0.0
    rgb = np.zeros((size, size, 3), dtype=np.uint8)
    rgb[..., 0] = (seg.reshape(size, size) * 37 % 255).astype(np.uint8)
    return CameraView(name, rgb, depth.reshape(size, size).astype(np.float32), seg.reshape(size, size), f, f, c, c, pose)


def observe(boxes: list[SynthBox], x: float, y: float, yaw: float = 0.0, height: float = 1.10,
            pitch: float = math.radians(15), size: int = 256, held: str | None = None) -> Observation:
    """Four views (front, left, back, right: yaw + 0, 90, 180, 270 degrees) from a robot at (x, y, yaw)."""
    views = {}
    for k, view_name in enumerate(VIEW_NAMES):
        pose = optical_pose((x, y, height), yaw + k * math.pi / 2, pitch)
        views[view_name] = render_view(boxes, pose, size, name=view_name)
    return Observation(views, {b.instance_id: b.name for b in boxes}, Pose2D(x, y, yaw), held)


# ------------------------------------------------------------------------------------------- a two-room test flat
from homiebot.perception.layout import (
    CONTAINER,
    OPENABLE,
    SURFACE,
    FurnitureLayout,
    RoomLayout,
    SceneLayout,
    VocabularyEntry,
)
from homiebot.types import EntityKind, EntityState, WorldState


@dataclass(frozen=True)
class SynthScene:
    boxes: list[SynthBox]
    layout: SceneLayout
    state: WorldState
    category_of: dict[str, str]
    vocabulary: dict[str, VocabularyEntry]
    #: robot stops (x, y, yaw) from which every visible object is seen
    stops: tuple[tuple[float, float, float], ...]


_FURNITURE = [
    # name, category, room, min, max, affordances, aliases
    ("kitchen_counter", "counter", "kitchen", (1.0, 3.0, 0.0), (3.0, 3.6, 0.9), (SURFACE,), ("kitchen counter", "sink")),
    ("fridge", "refrigerator", "kitchen", (0.2, 0.2, 0.0), (0.9, 0.9, 1.8), (OPENABLE, CONTAINER), ("fridge",)),
    ("coffee_table", "table", "living_room", (5.0, 1.5, 0.0), (6.2, 2.5, 0.75), (SURFACE,), ("brown table",)),
]
_OBJECTS = [
    # name, category, parent, min, max, aliases, colour
    ("red_can", "tomato_soup_can", "kitchen_counter", (1.50, 3.20, 0.90), (1.57, 3.27, 1.02), ("red can", "soup can"), "red"),
    ("apple_1", "apple", "kitchen_counter", (2.40, 3.20, 0.90), (2.48, 3.28, 0.98), ("apple",), "red"),
    ("bowl", "bowl", "coffee_table", (5.45, 1.85, 0.75), (5.65, 2.05, 0.82), ("red bowl",), "red"),
    ("apple_2", "apple", "coffee_table", (5.90, 1.70, 0.75), (5.98, 1.78, 0.83), ("apple",), "red"),
    ("milk", "milk_carton", "fridge", (0.4, 0.4, 0.5), (0.5, 0.5, 0.7), ("milk",), "white"),  # in the closed fridge
]


def two_room_scene() -> SynthScene:
    rooms = (
        RoomLayout("kitchen", "kitchen", ("cooking area",), ((0.0, 0.0), (4.0, 0.0), (4.0, 4.0), (0.0, 4.0))),
        RoomLayout("living_room", "living_room", ("lounge",), ((4.0, 0.0), (8.0, 0.0), (8.0, 4.0), (4.0, 4.0))),
    )
    furniture = tuple(
        FurnitureLayout(n, c, a, r, tuple((x + y) / 2 for x, y in zip(lo, hi)), lo, hi, aff,
                        False if OPENABLE in aff else None)
        for n, c, r, lo, hi, aff, a in _FURNITURE
    )
    layout = SceneLayout("synthetic_flat", rooms, furniture)
    boxes = [SynthBox(i + 1, f[0], f[3], f[4]) for i, f in enumerate(_FURNITURE)]
    boxes += [SynthBox(10 + i, o[0], o[3], o[4]) for i, o in enumerate(_OBJECTS)]
    entities: dict[str, EntityState] = {}
    for r in rooms:
        xs, ys = [p[0] for p in r.polygon], [p[1] for p in r.polygon]
        entities[r.name] = EntityState(r.name, r.category, EntityKind.ROOM, r.aliases,
                                       ((min(xs) + max(xs)) / 2, (min(ys) + max(ys)) / 2, 0.0),
                                       (min(xs), min(ys), 0.0), (max(xs), max(ys), 2.5))
    for f in furniture:
        entities[f.name] = EntityState(f.name, f.category, EntityKind.FURNITURE, f.aliases, f.position, f.bbox_min,
                                       f.bbox_max, room=f.room, articulated=OPENABLE in f.affordances,
                                       interactive=OPENABLE in f.affordances, is_open=f.is_open)
    for n, c, parent, lo, hi, aliases, colour in _OBJECTS:
        room = next(f.room for f in furniture if f.name == parent)
        relation = "in" if parent == "fridge" else "on"
        entities[n] = EntityState(n, c, EntityKind.OBJECT, aliases, tuple((x + y) / 2 for x, y in zip(lo, hi)),  # type: ignore[arg-type]
                                  lo, hi, room=room, parent=parent, relation=relation, color=colour)
    state = WorldState(Pose2D(2.0, 2.0, math.pi / 2), 0.3, None, entities, "synthetic_flat", "kitchen")
    category_of = {n: e.category for n, e in entities.items()}
    vocabulary = {}
    for e in entities.values():
        if e.kind is not EntityKind.ROOM:
            vocabulary[e.category] = VocabularyEntry(e.category, e.kind, (e.category.replace("_", " "), *e.aliases))
    stops = ((2.0, 2.0, math.pi / 2), (5.6, 0.5, math.pi / 2))
    return SynthScene(boxes, layout, state, category_of, vocabulary, stops)
