"""On/in relations from support geometry (ConceptGraphs-style builder; PARTNR A.7.2 "contained-within or
on-top-of any of the recognized furniture-pieces").

With the furniture's observed points (voxel centres), decided here and tested in
``tests/perception/test_relations.py``:

1. **support**: under the object's footprint (grown by ``xy_margin``) the furniture's highest point that is not
   above the object's bottom plus ``on_gap`` is its support height; the furniture supports the object when that
   height lies within ``on_gap`` of the object's bottom. Among several, the highest support wins (a cup on a tray
   on a table is on the tray).
2. **in or on**: a supported object is **in** the furniture when the furniture encloses it: it has points above
   the object's own footprint (a fridge's or cabinet's ceiling, a shelf above) or walls on all four sides within
   ``wall_reach`` rising ``wall_height`` above the object's bottom (a sink basin, an open drawer). Otherwise **on**
   (a table top, a sofa seat with a backrest behind it, a counter).
3. **fallback**: an object with no observed support whose centre lies inside a furniture box (shrunk by
   ``inside_margin`` at the top) is **in** the smallest such box; otherwise no placement (the floor, or not
   explained by any known furniture).

Without points (boxes only) the rules reduce to: **on** when the object's bottom lies within ``on_gap`` of a
box's top and its centre over that box; else **in** the smallest box holding its centre; else none.

Known limit: an object on an inner board of an open shelf has a board above it and comes out "in" the shelf; the
scenes' ground truth calls that "on", and the quality report counts it as a relation error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from homiebot.perception.geometry import Box3
from homiebot.perception.world_graph import Relation


@dataclass(frozen=True)
class SupportTolerances:
    #: Largest gap (m) between an object's bottom and a surface for "on". Depth noise and the voxel size put the
    #: observed bottom and surface up to about one voxel above or below the true contact plane.
    on_gap: float = 0.06
    #: Footprint margin (m): an object's centre may overhang a surface's observed edge by this much.
    xy_margin: float = 0.04
    #: An object's centre must lie this far (m) below a box's top to count as inside it (fallback rule).
    inside_margin: float = 0.02
    #: How far (m) beside the object a wall of an enclosing furniture may stand.
    wall_reach: float = 0.3
    #: How far (m) above the object's bottom a wall must rise.
    wall_height: float = 0.05
    #: Inset (m) of the object's footprint when looking for furniture above it (half a furniture voxel).
    cover_inset: float = 0.025


@dataclass(frozen=True)
class Furniture:
    """A piece of furniture as relation inference sees it: its box and, when known, its observed points."""

    id: str
    box: Box3
    points: np.ndarray | None = None  # (N, 3) surface points (voxel centres), map frame


def infer_placement(
    obj: Box3,
    furniture: Sequence[Furniture | tuple[str, Box3]],
    tolerances: SupportTolerances = SupportTolerances(),
) -> tuple[str, Relation] | None:
    """Where ``obj`` is among ``furniture``: ``(id, Relation.ON | Relation.IN)`` or None (module docstring)."""
    items = [f if isinstance(f, Furniture) else Furniture(f[0], f[1]) for f in furniture]
    if not items:
        return None
    # Only furniture whose (grown) footprint holds the object's centre can support or contain it: one numpy test.
    cx, cy, _ = obj.center
    lo = np.array([f.box.min[:2] for f in items]) - tolerances.xy_margin
    hi = np.array([f.box.max[:2] for f in items]) + tolerances.xy_margin
    over = (lo[:, 0] <= cx) & (cx <= hi[:, 0]) & (lo[:, 1] <= cy) & (cy <= hi[:, 1])
    items = [f for f, keep in zip(items, over, strict=False) if keep]
    best: tuple[float, str, Relation] | None = None
    for item in items:
        found = _supported(obj, item, tolerances)
        if found is not None and (best is None or found[0] > best[0]):
            best = (found[0], item.id, found[1])
    if best is not None:
        return best[1], best[2]
    return _inside_smallest(obj, items, tolerances)


def _supported(obj: Box3, item: Furniture, tol: SupportTolerances) -> tuple[float, Relation] | None:
    """(support height, relation) when ``item`` supports ``obj``, else None."""
    cx, cy, _ = obj.center
    bottom = obj.min[2]
    box = item.box
    over = (box.min[0] - tol.xy_margin <= cx <= box.max[0] + tol.xy_margin
            and box.min[1] - tol.xy_margin <= cy <= box.max[1] + tol.xy_margin)
    if not over:
        return None
    if item.points is None or len(item.points) == 0:
        if abs(bottom - box.max[2]) <= tol.on_gap:
            return box.max[2], Relation.ON
        return None
    pts = item.points
    lo = np.array(obj.min[:2]) - tol.xy_margin
    hi = np.array(obj.max[:2]) + tol.xy_margin
    under = np.all((pts[:, :2] >= lo) & (pts[:, :2] <= hi), axis=1)
    below = pts[under & (pts[:, 2] <= bottom + tol.on_gap), 2]
    if len(below) == 0:
        return None
    support = float(below.max())
    if bottom - support > tol.on_gap:
        return None
    return support, (Relation.IN if _encloses(obj, pts, tol) else Relation.ON)


def _encloses(obj: Box3, pts: np.ndarray, tol: SupportTolerances) -> bool:
    (x0, y0, z0), (x1, y1, z1) = obj.min, obj.max
    in_x = (pts[:, 0] >= x0) & (pts[:, 0] <= x1)
    in_y = (pts[:, 1] >= y0) & (pts[:, 1] <= y1)
    # Covered from above: points over the object's footprint shrunk by ``cover_inset`` (voxel centres of a wall
    # right behind the object, a sofa's backrest, can stray a few centimetres over its edge).
    sx = min(tol.cover_inset, (x1 - x0) / 2)
    sy = min(tol.cover_inset, (y1 - y0) / 2)
    over = ((pts[:, 0] >= x0 + sx) & (pts[:, 0] <= x1 - sx) & (pts[:, 1] >= y0 + sy) & (pts[:, 1] <= y1 - sy))
    if np.any(over & (pts[:, 2] > z1 + 0.02)):
        return True
    tall = pts[:, 2] >= z0 + tol.wall_height
    r = tol.wall_reach
    walls = (
        np.any(tall & in_y & (pts[:, 0] < x0) & (pts[:, 0] >= x0 - r)),
        np.any(tall & in_y & (pts[:, 0] > x1) & (pts[:, 0] <= x1 + r)),
        np.any(tall & in_x & (pts[:, 1] < y0) & (pts[:, 1] >= y0 - r)),
        np.any(tall & in_x & (pts[:, 1] > y1) & (pts[:, 1] <= y1 + r)),
    )
    return all(walls)


def _inside_smallest(obj: Box3, items: Sequence[Furniture], tol: SupportTolerances) -> tuple[str, Relation] | None:
    cx, cy, cz = obj.center
    best: tuple[float, str] | None = None
    for item in items:
        box = item.box
        inside = (box.min[0] <= cx <= box.max[0] and box.min[1] <= cy <= box.max[1]
                  and box.min[2] <= cz <= box.max[2] - tol.inside_margin)
        if inside and (best is None or box.volume() < best[0]):
            best = (box.volume(), item.id)
    return (best[1], Relation.IN) if best else None
