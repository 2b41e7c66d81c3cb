"""On/in relations from support geometry (ConceptGraphs-style builder; PARTNR A.7.2 "contained-within or
on-top-of any of the recognized furniture-pieces").

Rules, in this order (decided here; tested in ``tests/perception/test_relations.py``):

1. **on**: the object's box bottom lies within ``on_gap`` of a furniture box's top, and the object's footprint
   centre lies over that furniture's footprint (grown by ``xy_margin``). Among several, the furniture whose top is
   nearest the object's bottom wins (a cup on a tray on a table is on the tray).
2. **in**: otherwise, the object's centre lies inside a furniture box (shrunk by ``inside_margin`` at the top, so
   that something resting on the top is not "in"). Among several, the smallest box wins (an apple in a drawer of a
   counter is in the drawer).
3. otherwise no placement: on the floor, or not explained by any known furniture.

"On" is tried first because an open door widens a furniture's observed box: an object on the counter next to an
open fridge lies inside the fridge's box but is supported by the counter's top. An object on an inner shelf of a
cabinet comes out "in" the cabinet; the scene ground truth may call it "on" the cabinet's shelf surface, which
the quality report counts as a relation error (it is reported, not hidden).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from homiebot.perception.geometry import Box3
from homiebot.perception.world_graph import Relation


@dataclass(frozen=True)
class SupportTolerances:
    #: Largest gap (m) between an object's bottom and a surface for "on". Depth noise and the voxel size put the
    #: observed bottom up to about one voxel above or below the true contact plane.
    on_gap: float = 0.06
    #: Footprint margin (m): an object's centre may overhang a surface's observed edge by this much.
    xy_margin: float = 0.04
    #: An object's centre must lie this far (m) below a box's top to count as inside it.
    inside_margin: float = 0.02


def infer_placement(
    obj: Box3,
    furniture: Sequence[tuple[str, Box3]],
    tolerances: SupportTolerances = SupportTolerances(),
) -> tuple[str, Relation] | None:
    """Where ``obj`` is, given the furniture boxes ``(id, box)``: ``(id, Relation.ON | Relation.IN)`` or None."""
    cx, cy, cz = obj.center
    bottom = obj.min[2]
    best_on: tuple[float, str] | None = None
    best_in: tuple[float, str] | None = None
    for furniture_id, box in furniture:
        over = (
            box.min[0] - tolerances.xy_margin <= cx <= box.max[0] + tolerances.xy_margin
            and box.min[1] - tolerances.xy_margin <= cy <= box.max[1] + tolerances.xy_margin
        )
        if not over:
            continue
        gap = abs(bottom - box.max[2])
        if gap <= tolerances.on_gap and (best_on is None or gap < best_on[0]):
            best_on = (gap, furniture_id)
        inside = (
            box.min[0] <= cx <= box.max[0]
            and box.min[1] <= cy <= box.max[1]
            and box.min[2] <= cz <= box.max[2] - tolerances.inside_margin
        )
        if inside and (best_in is None or box.volume() < best_in[0]):
            best_in = (box.volume(), furniture_id)
    if best_on is not None:
        return best_on[1], Relation.ON
    if best_in is not None:
        return best_in[1], Relation.IN
    return None
