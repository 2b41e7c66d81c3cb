"""An object's full pose and size from the part of it the views show, completed with its known model.

A depth camera sees the near side and (from above) the top of an object: the box of those points is shallower than
the object and its centre lies towards the camera. A grasp planned on that box opens the fingers too little or
closes them in front of the object. A robot that knows which object it looks at (the detector names its class) and
the size of that class's model completes what it sees, as model-based pose estimation does (e.g. PoseCNN, Xiang et
al. 2018; here with a known model and only a heading to find, since household objects stand upright):

* **Heading of a box** from its footprint, the seen points projected on the floor. A camera level with or below a
  box's top sees one or two of its sides: a segment or an L. The minimum-area enclosing rectangle (Freeman and
  Shapira 1975) cannot tell an L's true corner from its diagonal (a triangle's three edge-aligned rectangles have
  the same area), so the heading is searched as for L-shape fitting of partly seen vehicles in laser scans (Zhang
  et al. 2017, "Efficient L-shape fitting for vehicle detection using laser scanners", IEEE IV): every heading in
  one-degree steps over a quarter turn, then a tenth of a degree within eight about the best, scored by *closeness* (the sum over
  points of 1 / their distance to the nearer rectangle edge, floored at :data:`CLOSENESS_FLOOR`); headings under
  which the seen footprint does not fit in the model's footprint are passed over when any fits. The model's two
  horizontal sides are given to the rectangle's axes the way that leaves no seen point outside the model and
  matches the longer seen side best.
* **Where the unseen part lies.** Along each horizontal axis the seen points span ``[lo, hi]``; the model spans its
  full length. A face turned to the camera is seen, the one behind it is not: when the camera stands before ``lo``
  the object runs from ``lo`` away from it, when beyond ``hi`` back from ``hi``, and when the camera is level with
  the span (the axis lies across the line of sight) the seen span is the object's full width, centred. A round
  object is done the same way along the line of sight and across it. When something nearer hides the object's
  near end (a sink's front wall before a bowl in the basin, seen from above: the wall's edge borders the seen
  points from below, ``SeenPoints.hidden``), the near end is not the object's: the far end is, and the object runs
  back from it towards the camera.
* **Height**: the seen top is the object's top (a camera sees a face up to its top edge), the model's height below.

Everything here reads the points and the camera position only, never a simulator pose.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from homiebot.perception.world_graph import Vec3

#: Fewer seen points than this, and a box's fit is not tried (the caller keeps the seen box): a heading needs a few
#: points along a side.
MIN_POINTS = 6
#: A round object needs only its near side and its width across the line of sight.
MIN_ROUND_POINTS = 3
#: A seen side may exceed the model's by this much (m) and still be that side (depth noise, a mixed edge pixel).
SIDE_TOLERANCE = 0.01
#: How much a model that leaves seen points outside it costs against one that matches the longer side worse.
OVERFLOW_WEIGHT = 10.0
#: Hidden points within this (m) of the near end of the seen span along an axis: that end is hidden.
HIDDEN_END_TOLERANCE = 0.015
#: Least distance (m) to an edge counted in the closeness score (Zhang et al. 2017's d0): about the depth noise, so
#: that a few points exactly on an edge do not outweigh all the others.
CLOSENESS_FLOOR = 0.004


@dataclass(frozen=True)
class ObjectModel:
    """What a robot knows a priori of an object class: its shape and full size (x, y, z; a sphere's diameter in
    ``size[0]``), and the wall of an open hollow one (a bowl), None when solid."""

    category: str
    shape: str  # "box", "cylinder" or "sphere"
    size: Vec3
    wall_thickness: float | None = None

    @property
    def round(self) -> bool:
        return self.shape in ("cylinder", "sphere")

    @property
    def height(self) -> float:
        return self.size[0] if self.shape == "sphere" else self.size[2]


class ObjectCatalog:
    """Object models by the class the detector names (the robot's model library). A class with several models
    (two apples of slightly different sizes) is resolved by the seen extents (:meth:`model_for`)."""

    def __init__(self, models: Iterable[ObjectModel]):
        self._by_category: dict[str, list[ObjectModel]] = {}
        for model in models:
            known = self._by_category.setdefault(model.category, [])
            if model not in known:
                known.append(model)

    def categories(self) -> tuple[str, ...]:
        return tuple(self._by_category)

    def model_for(self, category: str, seen_extent: Vec3 | None = None) -> ObjectModel | None:
        """The model of ``category`` (None: not in the library); of several, the one whose sorted sides lie nearest
        the seen box's (a seen box is a part of the object, so a larger model is not penalised for its unseen part
        beyond the seen sides' shortfall)."""
        models = self._by_category.get(category)
        if not models:
            return None
        if len(models) == 1 or seen_extent is None:
            return models[0]
        seen = sorted(seen_extent, reverse=True)

        def mismatch(model: ObjectModel) -> float:
            sides = sorted(model.size if model.shape != "sphere" else (model.size[0],) * 3, reverse=True)
            return sum(abs(a - b) for a, b in zip(sides, seen, strict=True))

        return min(models, key=mismatch)


@dataclass(frozen=True)
class SeenPoints:
    """The points of one object the latest views show (``map`` frame, (N, 3)) and where the camera stood; ``hidden``:
    those of its points that something nearer borders from below (its near part hidden there), None when none."""

    points: np.ndarray
    viewer: Vec3
    hidden: np.ndarray | None = None


@dataclass(frozen=True)
class ObjectFit:
    """A completed object: its centre, half extents along its own axes, its heading (rad, about z, of its x axis;
    None for a round object, which has none to give), and the axis-aligned box around it."""

    centre: Vec3
    half_extents: Vec3
    yaw: float | None
    bbox_min: Vec3
    bbox_max: Vec3


def closeness(xy: np.ndarray, heading: float) -> float:
    """Zhang et al. 2017's closeness score of the rectangle at ``heading`` around 2-D points: per axis the nearer
    of the two edges (the one the points hug overall), then per point the nearer of the two axes' edges."""
    c, s = math.cos(heading), math.sin(heading)
    distances = []
    for axis in (np.array([c, s]), np.array([-s, c])):
        proj = xy @ axis
        to_low, to_high = proj - proj.min(), proj.max() - proj
        distances.append(to_low if np.linalg.norm(to_low) <= np.linalg.norm(to_high) else to_high)
    nearest = np.minimum(distances[0], distances[1])
    return float(np.sum(1.0 / np.maximum(nearest, CLOSENESS_FLOOR)))


def _sides_cost(seen: tuple[float, float], lengths: tuple[float, float]) -> float:
    """How badly a model with ``lengths`` along two axes explains seen extents along them: seen points outside it
    (heavily), then the mismatch of the longer seen side (the one a face shows whole)."""
    overflow = max(0.0, seen[0] - lengths[0] - SIDE_TOLERANCE) + max(0.0, seen[1] - lengths[1] - SIDE_TOLERANCE)
    longer = abs(seen[0] - lengths[0]) if seen[0] >= seen[1] else abs(seen[1] - lengths[1])
    return OVERFLOW_WEIGHT * overflow + longer


def _extents(xy: np.ndarray, heading: float) -> tuple[float, float]:
    c, s = math.cos(heading), math.sin(heading)
    return float(np.ptp(xy @ np.array([c, s]))), float(np.ptp(xy @ np.array([-s, c])))


def box_heading(xy: np.ndarray, footprint: tuple[float, float] | None = None) -> float:
    """The heading (rad, in [0, pi/2)) of a box's footprint from 2-D points on it (module docstring); with the
    model's ``footprint`` (its two horizontal sides), headings under which the points do not fit in it are passed
    over when any fits."""
    xy = np.asarray(xy, dtype=float)

    def fits(heading: float) -> bool:
        if footprint is None:
            return True
        (su, sv), (a, b) = _extents(xy, heading), footprint
        room = SIDE_TOLERANCE
        return (su <= a + room and sv <= b + room) or (su <= b + room and sv <= a + room)

    def scores(headings: np.ndarray) -> list[tuple[bool, float]]:
        return [(fits(h), closeness(xy, h)) for h in headings]

    grid = np.radians(np.arange(0.0, 90.0, 1.0))
    coarse = float(grid[max(range(len(grid)), key=scores(grid).__getitem__)])
    # Points nearer an edge than the floor all score the same, so the score is flat over a small range of headings
    # about the best: the middle of that range.
    fine = coarse + np.radians(np.arange(-8.0, 8.0001, 0.1))
    scored = scores(fine)
    top = max(scored)
    plateau = [float(h) for h, score in zip(fine, scored, strict=True)
               if score[0] == top[0] and score[1] >= top[1] * (1 - 1e-6)]
    return ((plateau[0] + plateau[-1]) / 2) % (math.pi / 2)


def span_from_view(lo: float, hi: float, length: float, viewer: float, near_hidden: bool = False) -> tuple[float, float]:
    """Where an object ``length`` long lies along an axis on which its seen points span ``[lo, hi]`` and the camera
    stands at ``viewer`` (module docstring, "Where the unseen part lies"); ``near_hidden``: something nearer hides
    the end towards the camera, so the far end is the object's."""
    if hi - lo >= length:
        middle = (lo + hi) / 2
        return middle - length / 2, middle + length / 2
    if viewer < lo:
        return (hi - length, hi) if near_hidden else (lo, lo + length)
    if viewer > hi:
        return (lo, lo + length) if near_hidden else (hi - length, hi)
    middle = (lo + hi) / 2
    return middle - length / 2, middle + length / 2


def _axes_fit(xy: np.ndarray, viewer: np.ndarray, u: np.ndarray, lengths: tuple[float, float],
              hidden: np.ndarray | None = None) -> np.ndarray:
    """The footprint centre of an object with sides ``lengths`` along ``u`` and the axis square to it; ``hidden``:
    the 2-D points where something nearer hides it from below (:class:`SeenPoints`)."""
    v = np.array([-u[1], u[0]])
    centre = np.zeros(2)
    for axis, length in zip((u, v), lengths, strict=True):
        proj = xy @ axis
        lo, hi, at = float(proj.min()), float(proj.max()), float(viewer @ axis)
        near_hidden = False
        if hidden is not None and len(hidden) and (at < lo or at > hi):
            near = lo if at < lo else hi
            near_hidden = bool(np.any(np.abs(hidden @ axis - near) <= HIDDEN_END_TOLERANCE))
        lo, hi = span_from_view(lo, hi, length, at, near_hidden)
        centre += (lo + hi) / 2 * axis
    return centre


def _hidden_xy(seen: SeenPoints) -> np.ndarray | None:
    return None if seen.hidden is None else np.asarray(seen.hidden, dtype=float)[:, :2]


def _vertical(points: np.ndarray, height: float) -> tuple[float, float]:
    """(centre z, top z): the seen top is the object's top."""
    top = float(points[:, 2].max())
    return top - height / 2, top


def fit_box(seen: SeenPoints, model: ObjectModel) -> ObjectFit | None:
    """An upright box of ``model``'s size around the seen points, turned as their footprint (module docstring);
    None with too few points."""
    points = np.asarray(seen.points, dtype=float)
    if len(points) < MIN_POINTS:
        return None
    xy = points[:, :2]
    viewer = np.asarray(seen.viewer[:2], dtype=float)
    sx, sy, sz = model.size
    heading = box_heading(xy, (sx, sy))
    u = np.array([math.cos(heading), math.sin(heading)])
    v = np.array([-u[1], u[0]])
    extents = _extents(xy, heading)
    # The model's x side along u (heading), or along v (heading + 90 degrees): the better fit.
    if _sides_cost(extents, (sx, sy)) <= _sides_cost(extents, (sy, sx)):
        yaw, x_axis, lengths = heading, u, (sx, sy)
    else:
        yaw, x_axis, lengths = heading + math.pi / 2, v, (sx, sy)
    centre_xy = _axes_fit(xy, viewer, x_axis, lengths, _hidden_xy(seen))
    cz, _ = _vertical(points, sz)
    yaw = math.remainder(yaw, math.pi)  # a box looks the same turned half round
    half = (sx / 2, sy / 2, sz / 2)
    c, s = abs(math.cos(yaw)), abs(math.sin(yaw))
    reach = (half[0] * c + half[1] * s, half[0] * s + half[1] * c)
    centre = (float(centre_xy[0]), float(centre_xy[1]), cz)
    return ObjectFit(centre, half, yaw,
                     (centre[0] - reach[0], centre[1] - reach[1], cz - half[2]),
                     (centre[0] + reach[0], centre[1] + reach[1], cz + half[2]))


def fit_round(seen: SeenPoints, model: ObjectModel) -> ObjectFit | None:
    """A cylinder or sphere of ``model``'s size around the seen points: its near side where the seen points' near
    side is along the line of sight, centred across it (module docstring); None with too few points."""
    points = np.asarray(seen.points, dtype=float)
    if len(points) < MIN_ROUND_POINTS:
        return None
    xy = points[:, :2]
    viewer = np.asarray(seen.viewer[:2], dtype=float)
    sight = xy.mean(axis=0) - viewer
    norm = float(np.linalg.norm(sight))
    u = sight / norm if norm > 1e-9 else np.array([1.0, 0.0])
    diameter = model.size[0]
    centre_xy = _axes_fit(xy, viewer, u, (diameter, diameter), _hidden_xy(seen))
    height = model.height
    cz, _ = _vertical(points, height)
    r = diameter / 2
    half = (r, r, height / 2)
    centre = (float(centre_xy[0]), float(centre_xy[1]), cz)
    return ObjectFit(centre, half, None, (centre[0] - r, centre[1] - r, cz - half[2]),
                     (centre[0] + r, centre[1] + r, cz + half[2]))


def fit_object(seen: SeenPoints, model: ObjectModel) -> ObjectFit | None:
    """:func:`fit_round` or :func:`fit_box` by the model's shape."""
    return fit_round(seen, model) if model.round else fit_box(seen, model)
