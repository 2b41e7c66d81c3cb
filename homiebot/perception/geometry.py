"""Geometry shared by the graph builders: depth back-projection, voxel sets, boxes, floor polygons.

Everything is vectorised numpy. Conventions follow :class:`homiebot.types.CameraView`: depth is metres
along the optical axis, the optical frame has x right, y down, z forward, and ``camera_to_world`` maps
optical-frame points into the ``map`` frame (x east, y north, z up).

Why hand-written instead of Open3D: Open3D is a 300 MB dependency for three operations (back-projection,
voxel keys, box overlap) that are a few lines of numpy each and that must stay inside a 50 ms budget for four
views on two cores, where Python-level per-point work is ruled out anyway.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.path import Path as _PolygonPath

from homiebot.types import CameraView

#: Points farther than this (metres) are dropped: beyond it the simulated depth is a far plane or sky,
#: and a real RGB-D sensor is too noisy to localise a household object.
DEFAULT_MAX_DEPTH = 8.0
#: Points nearer than this are dropped (the camera's own housing, numerical zero depth).
DEFAULT_MIN_DEPTH = 0.05

# Voxel keys pack three signed 21-bit integer coordinates into one int64 so that set operations on voxel
# clouds are 1-D ``np.intersect1d`` / ``np.union1d`` calls. 21 bits at 2 cm cover +-20 km: plenty.
_KEY_BITS = 21
_KEY_OFFSET = 1 << (_KEY_BITS - 1)
_KEY_MASK = (1 << _KEY_BITS) - 1


def pixel_rays(view: CameraView, stride: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Normalised ray directions (x/z, y/z) of the pixel grid sampled every ``stride`` pixels.

    Returns two arrays shaped like the strided image. Kept separate from :func:`backproject` so that callers
    that process the same intrinsics repeatedly can cache them.
    """
    h, w = view.depth.shape
    us = np.arange(0, w, stride, dtype=np.float32)
    vs = np.arange(0, h, stride, dtype=np.float32)
    rx = (us - np.float32(view.cx)) / np.float32(view.fx)
    ry = (vs - np.float32(view.cy)) / np.float32(view.fy)
    return np.broadcast_to(rx[None, :], (len(vs), len(us))), np.broadcast_to(ry[:, None], (len(vs), len(us)))


def backproject(
    view: CameraView,
    stride: int = 1,
    min_depth: float = DEFAULT_MIN_DEPTH,
    max_depth: float = DEFAULT_MAX_DEPTH,
    border: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Back-project a depth image into ``map``-frame points.

    Returns ``(points, segment_ids, on_border)``: ``points`` is (N, 3) float32 for the valid pixels (depth finite
    and in ``[min_depth, max_depth]``) of the grid sampled every ``stride`` pixels, ``segment_ids`` the
    segmentation value of each of those pixels, ``on_border`` whether the pixel lies within ``border`` grid cells
    of the image edge (where a mask is cut off by the field of view); all in the same order.
    """
    depth = view.depth[::stride, ::stride]
    seg = view.segmentation[::stride, ::stride]
    rx, ry = pixel_rays(view, stride)
    valid = np.isfinite(depth) & (depth >= min_depth) & (depth <= max_depth)
    z = depth[valid].astype(np.float32)
    cam = np.stack((rx[valid] * z, ry[valid] * z, z), axis=1)
    transform = np.asarray(view.camera_to_world, dtype=np.float32)
    points = cam @ transform[:3, :3].T + transform[:3, 3]
    if border > 0:
        edge = np.zeros(depth.shape, dtype=bool)
        edge[:border, :] = edge[-border:, :] = True
        edge[:, :border] = edge[:, -border:] = True
        on_border = edge[valid]
    else:
        on_border = np.zeros(len(z), dtype=bool)
    return points, seg[valid], on_border


def backproject_where(view: CameraView, mask: np.ndarray, min_depth: float = DEFAULT_MIN_DEPTH,
                      max_depth: float = DEFAULT_MAX_DEPTH) -> tuple[np.ndarray, np.ndarray]:
    """Back-project the pixels of a full-resolution boolean ``mask`` (with valid depth) into ``map``-frame points:
    ``(points (N, 3) float64, segment ids)``. For a few small masks (the objects of a view) at every pixel, where
    :func:`backproject` over the whole image would do the rest of the image's work too."""
    depth = view.depth
    valid = mask & np.isfinite(depth) & (depth >= min_depth) & (depth <= max_depth)
    vs, us = np.nonzero(valid)
    z = depth[vs, us].astype(np.float64)
    cam = np.stack(((us - view.cx) / view.fx * z, (vs - view.cy) / view.fy * z, z), axis=1)
    transform = np.asarray(view.camera_to_world, dtype=np.float64)
    return cam @ transform[:3, :3].T + transform[:3, 3], view.segmentation[vs, us]


def voxel_keys(points: np.ndarray, voxel_size: float) -> np.ndarray:
    """Unique packed int64 keys of the voxels (edge ``voxel_size`` metres) the points fall in, sorted."""
    if len(points) == 0:
        return np.empty(0, dtype=np.int64)
    idx = np.floor(points / voxel_size).astype(np.int64) + _KEY_OFFSET
    keys = (idx[:, 0] << (2 * _KEY_BITS)) | (idx[:, 1] << _KEY_BITS) | idx[:, 2]
    return np.unique(keys)


def voxel_centers(keys: np.ndarray, voxel_size: float) -> np.ndarray:
    """(N, 3) float64 centres of packed voxel keys (inverse of :func:`voxel_keys` up to quantisation)."""
    ix = ((keys >> (2 * _KEY_BITS)) & _KEY_MASK) - _KEY_OFFSET
    iy = ((keys >> _KEY_BITS) & _KEY_MASK) - _KEY_OFFSET
    iz = (keys & _KEY_MASK) - _KEY_OFFSET
    return (np.stack((ix, iy, iz), axis=1).astype(np.float64) + 0.5) * voxel_size


def overlap_ratio(a: np.ndarray, b: np.ndarray) -> float:
    """Shared voxels over the smaller set: 1 when one voxel cloud lies inside the other, 0 when disjoint.

    ConceptGraphs scores geometric similarity by the share of one cloud's points that have a neighbour in the
    other; over voxel sets that is exactly this ratio, and dividing by the smaller set keeps a partial view of a
    large piece of furniture from looking unrelated to the whole.
    """
    if len(a) == 0 or len(b) == 0:
        return 0.0
    shared = np.intersect1d(a, b, assume_unique=True).size
    return shared / min(len(a), len(b))


@dataclass(frozen=True)
class Box3:
    """An axis-aligned box in the ``map`` frame."""

    min: tuple[float, float, float]
    max: tuple[float, float, float]

    @classmethod
    def of_points(cls, points: np.ndarray, pad: float = 0.0) -> Box3:
        lo = points.min(axis=0) - pad
        hi = points.max(axis=0) + pad
        return cls(tuple(float(v) for v in lo), tuple(float(v) for v in hi))  # type: ignore[arg-type]

    @property
    def center(self) -> tuple[float, float, float]:
        return tuple((a + b) / 2.0 for a, b in zip(self.min, self.max, strict=False))  # type: ignore[return-value]

    @property
    def size(self) -> tuple[float, float, float]:
        return tuple(b - a for a, b in zip(self.min, self.max, strict=False))  # type: ignore[return-value]

    def volume(self) -> float:
        sx, sy, sz = self.size
        return max(sx, 0.0) * max(sy, 0.0) * max(sz, 0.0)


def box_iou(a: Box3, b: Box3) -> float:
    """Intersection over union of two axis-aligned boxes (0 when disjoint)."""
    inter = 1.0
    for k in range(3):
        lo = max(a.min[k], b.min[k])
        hi = min(a.max[k], b.max[k])
        if hi <= lo:
            return 0.0
        inter *= hi - lo
    union = a.volume() + b.volume() - inter
    return inter / union if union > 0 else 0.0


def boxes_touch(a: Box3, b: Box3, margin: float) -> bool:
    """Whether the boxes overlap once each is grown by ``margin`` metres (a cheap pre-filter)."""
    return all(a.min[k] - margin <= b.max[k] and b.min[k] - margin <= a.max[k] for k in range(3))


class FloorPlan:
    """Room floor polygons: which room a point stands in.

    A point on no polygon (a wall, a doorway gap) is given the room whose polygon edge is nearest, because
    the builders call this with furniture footprints and object positions that may sit a few centimetres over
    a polygon's edge; ``None`` only when the plan is empty.
    """

    def __init__(self, rooms: dict[str, list[tuple[float, float]]], levels: dict[str, int] | None = None):
        self._names = list(rooms)
        self._paths = [_PolygonPath(np.asarray(rooms[n], dtype=np.float64)) for n in self._names]
        self._polygons = {n: np.asarray(rooms[n], dtype=np.float64) for n in self._names}
        self._levels = dict(levels or {})

    @property
    def room_names(self) -> list[str]:
        return list(self._names)

    def polygon(self, room: str) -> np.ndarray:
        return self._polygons[room]

    def room_at(self, x: float, y: float, level: int | None = None) -> str | None:
        candidates = [
            (n, p)
            for n, p in zip(self._names, self._paths, strict=False)
            if level is None or self._levels.get(n, 0) == level
        ]
        if not candidates:
            return None
        for name, path in candidates:
            if path.contains_point((x, y)):
                return name
        return min(candidates, key=lambda c: _distance_to_polygon(self._polygons[c[0]], x, y))[0]


def _distance_to_polygon(polygon: np.ndarray, x: float, y: float) -> float:
    """Distance from (x, y) to the nearest edge of a closed polygon (vectorised over edges)."""
    a = polygon
    b = np.roll(polygon, -1, axis=0)
    ab = b - a
    ap = np.array([x, y]) - a
    denom = np.maximum((ab * ab).sum(axis=1), 1e-12)
    t = np.clip((ap * ab).sum(axis=1) / denom, 0.0, 1.0)
    closest = a + ab * t[:, None]
    return float(np.min(np.hypot(closest[:, 0] - x, closest[:, 1] - y)))
