"""Plane geometry shared by the scene compiler, the occupancy grid and the top-down map.

Furniture frame convention (documented in ``docs/scenes.md``): the origin is the centre of the footprint
on the floor, local x runs across the front (width), local y runs from the front (``-size_y/2``) to the
back (``+size_y/2``), z is up. The FRONT faces local -y: doors and drawers open towards -y and the robot
stands on that side to use them. World = ``Rz(yaw) @ local + (x, y)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from matplotlib.path import Path as MplPath

from homiebot.sim.scene import DoorwaySpec, FurnitureSpec, Pose, RoomSpec, WallSpec


def rotate(points: np.ndarray, yaw: float) -> np.ndarray:
    """Rotate (N, 2) points counter-clockwise by ``yaw``."""
    c, s = math.cos(yaw), math.sin(yaw)
    pts = np.asarray(points, dtype=float)
    return np.stack([c * pts[..., 0] - s * pts[..., 1], s * pts[..., 0] + c * pts[..., 1]], axis=-1)


def local_to_world(pose: Pose, points: np.ndarray) -> np.ndarray:
    return rotate(points, pose.yaw) + np.array([pose.x, pose.y])


def world_to_local(pose: Pose, points: np.ndarray) -> np.ndarray:
    return rotate(np.asarray(points, dtype=float) - np.array([pose.x, pose.y]), -pose.yaw)


@dataclass(frozen=True)
class OrientedRect:
    """A rectangle in the plane: centre, full extents along its own axes, rotation."""

    cx: float
    cy: float
    sx: float
    sy: float
    yaw: float

    def corners(self) -> np.ndarray:
        hx, hy = self.sx / 2, self.sy / 2
        local = np.array([[-hx, -hy], [hx, -hy], [hx, hy], [-hx, hy]])
        return rotate(local, self.yaw) + np.array([self.cx, self.cy])

    def aabb(self) -> tuple[float, float, float, float]:
        c = self.corners()
        return float(c[:, 0].min()), float(c[:, 1].min()), float(c[:, 0].max()), float(c[:, 1].max())

    def contains(self, points: np.ndarray, margin: float = 0.0) -> np.ndarray:
        """Boolean mask of (..., 2) points inside the rectangle grown by ``margin`` on every side."""
        local = rotate(np.asarray(points, dtype=float) - np.array([self.cx, self.cy]), -self.yaw)
        return (np.abs(local[..., 0]) <= self.sx / 2 + margin) & (np.abs(local[..., 1]) <= self.sy / 2 + margin)


def furniture_rect(f: FurnitureSpec) -> OrientedRect:
    return OrientedRect(f.pose.x, f.pose.y, f.size[0], f.size[1], f.pose.yaw)


def local_rect(pose: Pose, xmin: float, ymin: float, xmax: float, ymax: float) -> OrientedRect:
    """A rectangle given in a furniture's frame, as a world rectangle."""
    centre = local_to_world(pose, np.array([(xmin + xmax) / 2, (ymin + ymax) / 2]))
    return OrientedRect(float(centre[0]), float(centre[1]), xmax - xmin, ymax - ymin, pose.yaw)


def wall_rect(start: tuple[float, float], end: tuple[float, float], thickness: float) -> OrientedRect:
    (x0, y0), (x1, y1) = start, end
    return OrientedRect((x0 + x1) / 2, (y0 + y1) / 2, math.hypot(x1 - x0, y1 - y0), thickness, math.atan2(y1 - y0, x1 - x0))


def split_walls(walls: list[WallSpec], doorways: list[DoorwaySpec]) -> list[tuple[WallSpec, tuple[float, float], tuple[float, float]]]:
    """Cut each doorway's gap out of every wall segment passing through its centre.

    Returns (wall, start, end) pieces; a wall without doorway comes back whole. Pieces reach half a
    thickness beyond the wall's own end points (so that corners close) but not into a doorway's gap:
    the gap keeps the doorway's full width. Compiler, occupancy grid and map all use these pieces.
    """
    pieces: list[tuple[WallSpec, tuple[float, float], tuple[float, float]]] = []
    for wall in walls:
        start = np.array(wall.start, dtype=float)
        end = np.array(wall.end, dtype=float)
        length = float(np.linalg.norm(end - start))
        if length < 1e-9:
            continue
        direction = (end - start) / length
        cuts: list[tuple[float, float]] = []
        for door in doorways:
            rel = np.array(door.center) - start
            along = float(rel @ direction)
            across = abs(float(rel[0] * direction[1] - rel[1] * direction[0]))
            if across <= wall.thickness / 2 + 0.05 and -door.width / 2 < along < length + door.width / 2:
                cuts.append((max(along - door.width / 2, 0.0), min(along + door.width / 2, length)))
        cuts.sort()
        cursor = 0.0
        half = wall.thickness / 2
        for lo, hi in cuts + [(length, length)]:
            if lo - cursor > 0.02:
                a = cursor - half if cursor <= 0.0 else cursor
                b = lo + half if lo >= length else lo
                pieces.append((wall, tuple(start + direction * a), tuple(start + direction * b)))
            cursor = max(cursor, hi)
    return pieces


def polygon_contains(polygon: list[tuple[float, float]], points: np.ndarray) -> np.ndarray:
    """Boolean mask of (N, 2) points inside the polygon (matplotlib's even-odd test)."""
    return MplPath(np.asarray(polygon, dtype=float)).contains_points(np.asarray(points, dtype=float).reshape(-1, 2))


def polygon_centroid(polygon: list[tuple[float, float]]) -> tuple[float, float]:
    pts = np.asarray(polygon, dtype=float)
    x, y = pts[:, 0], pts[:, 1]
    x1, y1 = np.roll(x, -1), np.roll(y, -1)
    cross = x * y1 - x1 * y
    area = cross.sum() / 2
    if abs(area) < 1e-12:
        return float(x.mean()), float(y.mean())
    return float(((x + x1) * cross).sum() / (6 * area)), float(((y + y1) * cross).sum() / (6 * area))


def triangulate(polygon: list[tuple[float, float]]) -> list[tuple[int, int, int]]:
    """Ear-clipping triangulation of a simple polygon (any winding), as index triples, counter-clockwise.

    Written here because room floors may be concave (L-shaped) and neither MuJoCo nor the kept libraries
    offer a constrained triangulation (Delaunay would fill the notch); rooms have a handful of vertices,
    so the O(n^3) worst case is irrelevant.
    """
    pts = np.asarray(polygon, dtype=float)
    order = list(range(len(pts)))
    signed = 0.5 * sum(pts[i, 0] * pts[(i + 1) % len(pts), 1] - pts[(i + 1) % len(pts), 0] * pts[i, 1] for i in range(len(pts)))
    if signed < 0:
        order.reverse()

    def cross(o: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
        return float((a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]))

    triangles: list[tuple[int, int, int]] = []
    guard = 0
    while len(order) > 3 and guard < 10 * len(pts) ** 2:
        guard += 1
        n = len(order)
        for k in range(n):
            i, j, nxt = order[(k - 1) % n], order[k], order[(k + 1) % n]
            a, b, c = pts[i], pts[j], pts[nxt]
            if cross(a, b, c) <= 1e-12:
                continue  # reflex or degenerate corner: not an ear
            inside = False
            for m in order:
                if m in (i, j, nxt):
                    continue
                p = pts[m]
                if cross(a, b, p) >= 0 and cross(b, c, p) >= 0 and cross(c, a, p) >= 0:
                    inside = True
                    break
            if not inside:
                triangles.append((i, j, nxt))
                order.pop(k)
                break
        else:
            break  # no ear found: degenerate input; fall back to a fan for what is left
    if len(order) >= 3:
        triangles.extend((order[0], order[k], order[k + 1]) for k in range(1, len(order) - 1))
    return triangles


def room_of_point(rooms: list[RoomSpec], x: float, y: float) -> str | None:
    for room in rooms:
        if polygon_contains(room.polygon, np.array([[x, y]]))[0]:
            return room.name
    return None


def wrap_angle(angle: float) -> float:
    return (angle + math.pi) % (2 * math.pi) - math.pi
