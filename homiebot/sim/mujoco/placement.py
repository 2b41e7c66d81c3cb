"""Seeded, collision-free spots for small objects on a receptacle's surface or inside its interior.

Spots live in the receptacle's frame (see :mod:`homiebot.sim.mujoco.geometry`), so an object in a drawer
moves with the drawer. Objects are approximated by their footprint circle (half the diagonal of a box,
the radius of a cylinder or sphere); two spots on the same surface or interior are accepted only when
their circles keep :data:`CLEARANCE` apart. Sampling is rejection sampling driven by the caller's
``numpy.random.Generator``, so the same seed and the same request order give the same spots.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from homiebot.sim.mujoco.geometry import wrap_angle
from homiebot.sim.scene import FurnitureSpec, ObjectSpec

#: Gap kept between two objects' footprint circles, metres.
CLEARANCE = 0.02
#: Inset of a surface's default usable area from the furniture's edges, metres (see SurfaceSpec).
DEFAULT_INSET = 0.05
_TRIES = 200


@dataclass(frozen=True)
class Spot:
    """Where an object rests, in its receptacle's frame (``relation`` "on" or "in")."""

    receptacle: str
    relation: str
    surface: str  # surface name for "on"; "interior" for "in"
    x: float
    y: float
    z: float  # height of the object's centre above the floor (drawer: when closed)
    yaw: float  # relative to the receptacle's yaw


def footprint_radius(obj: ObjectSpec) -> float:
    if obj.shape == "box":
        return 0.5 * math.hypot(obj.size[0], obj.size[1])
    return obj.size[0] / 2


def half_height(obj: ObjectSpec) -> float:
    return obj.size[0] / 2 if obj.shape == "sphere" else obj.size[2] / 2


def object_box(obj: ObjectSpec, yaw: float) -> tuple[tuple[float, float, float], float | None]:
    """The object's half extents in its own frame and its heading, as the world state carries them
    (``EntityState.half_extents`` / ``yaw``): a box keeps its yaw; a cylinder or a sphere is round about z, so its
    heading is None and its x half extent is its radius."""
    if obj.shape == "box":
        return (obj.size[0] / 2, obj.size[1] / 2, obj.size[2] / 2), wrap_angle(yaw)
    radius = obj.size[0] / 2
    return (radius, radius, half_height(obj)), None


def surface_area(furniture: FurnitureSpec, surface_index: int) -> tuple[float, float, float, float]:
    """Usable area (xmin, ymin, xmax, ymax) of one surface, in the furniture's frame."""
    surface = furniture.surfaces[surface_index]
    sx, sy = furniture.size[0], furniture.size[1]
    lo = surface.min if surface.min is not None else (-sx / 2 + DEFAULT_INSET, -sy / 2 + DEFAULT_INSET)
    hi = surface.max if surface.max is not None else (sx / 2 - DEFAULT_INSET, sy / 2 - DEFAULT_INSET)
    return lo[0], lo[1], hi[0], hi[1]


def sample_spot(
    rng: np.random.Generator,
    furniture: FurnitureSpec,
    relation: str,
    obj: ObjectSpec,
    occupied: list[Spot],
    radii: dict[Spot, float] | None = None,
    near: Spot | None = None,
    near_radius: float = 0.0,
) -> Spot | None:
    """A free spot for ``obj`` on/in ``furniture``; None when none was found in a bounded number of tries.

    ``occupied`` are the spots already taken on/in this furniture; ``radii`` their footprint radii
    (the new object's radius is assumed where missing). ``near``: a spot on the same surface whose centre
    is at most ``near_radius`` from that spot's centre (the "next to" placement of docs/partnr.md).
    """
    radius = footprint_radius(obj)
    radii = radii or {}
    if relation == "on":
        if not furniture.surfaces:
            return None
        areas = [surface_area(furniture, i) for i in range(len(furniture.surfaces))]
        weights = np.array([max(a[2] - a[0], 1e-3) * max(a[3] - a[1], 1e-3) for a in areas])
        weights = weights / weights.sum()
    else:
        if furniture.interior is None:
            return None
        lo, hi = furniture.interior.min, furniture.interior.max
        areas = [(lo[0], lo[1], hi[0], hi[1])]
        weights = np.array([1.0])
    for _ in range(_TRIES):
        index = int(rng.choice(len(areas), p=weights)) if len(areas) > 1 else 0
        xmin, ymin, xmax, ymax = areas[index]
        # Keep the whole footprint on the area when it fits; a too-large object sits at the centre.
        if near is not None:
            # Sample in the square around the reference, keep the footprint on the area, then test the disc.
            lo_x, hi_x = max(xmin + radius, near.x - near_radius), min(xmax - radius, near.x + near_radius)
            lo_y, hi_y = max(ymin + radius, near.y - near_radius), min(ymax - radius, near.y + near_radius)
            if lo_x > hi_x or lo_y > hi_y:
                return None
            x, y = float(rng.uniform(lo_x, hi_x)), float(rng.uniform(lo_y, hi_y))
            same_surface = (near.surface == "interior") if relation == "in" else (
                furniture.surfaces[index].name == near.surface)
            if not same_surface or math.hypot(x - near.x, y - near.y) > near_radius:
                continue
        else:
            x = float(rng.uniform(xmin + radius, xmax - radius)) if xmax - xmin > 2 * radius else (xmin + xmax) / 2
            y = float(rng.uniform(ymin + radius, ymax - radius)) if ymax - ymin > 2 * radius else (ymin + ymax) / 2
        yaw = float(rng.uniform(-math.pi, math.pi))
        if relation == "on":
            name = furniture.surfaces[index].name
            z = furniture.surfaces[index].height + half_height(obj)
        else:
            name = "interior"
            z = furniture.interior.min[2] + half_height(obj)  # type: ignore[union-attr]
        clash = any(
            o.surface == name and math.hypot(o.x - x, o.y - y) < radius + radii.get(o, radius) + CLEARANCE
            for o in occupied
        )
        if not clash:
            return Spot(furniture.name, relation, name, x, y, z, yaw)
    return None
