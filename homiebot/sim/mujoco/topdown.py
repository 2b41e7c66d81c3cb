"""Top-down map: rooms, walls, furniture (front edge marked, open doors and drawers), objects, the robot
and the path it travelled, drawn with Pillow from the privileged state.

Drawn rather than rendered by MuJoCo because a map must be legible at a glance: flat colours, names,
the front of every furniture and a robot marker, at any size, without a GL context (it also works with
``render=False``).
"""

from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from homiebot.sim.mujoco.geometry import (
    OrientedRect,
    furniture_rect,
    polygon_centroid,
    split_walls,
    wall_rect,
)
from homiebot.sim.scene import SceneSpec, rgba
from homiebot.types import EntityKind, Pose2D, WorldState

_BACKGROUND = (38, 40, 46)
_WALL = (70, 70, 76)
_PATH = (255, 140, 0)
_ROBOT = (30, 144, 255)
#: The human partner (homiebot/sim/mujoco/human.py): its shirt's magenta, and its path in pink.
_HUMAN = (217, 64, 140)
_HUMAN_PATH = (255, 150, 200)
#: Another agent on the map: its pose, footprint radius, held object and travelled path.
Partner = tuple[Pose2D, float, str | None, list[tuple[float, float]]]


def _rgb(color, scale: float = 1.0) -> tuple[int, int, int]:
    r, g, b, _ = rgba(color)
    return tuple(int(max(0, min(255, round(255 * c * scale)))) for c in (r, g, b))  # type: ignore[return-value]


def draw_topdown(
    spec: SceneSpec,
    state: WorldState,
    path: list[tuple[float, float]],
    open_parts: list[OrientedRect],
    size: int = 512,
    partners: list[Partner] | None = None,
) -> np.ndarray:
    """The map as an (size, size, 3) uint8 array, north up. ``partners``: other agents (the human), drawn as a
    magenta figure (a head over shoulders, not the robot's disc) with their pink paths."""
    pts = np.array([p for r in spec.rooms for p in r.polygon] + [w.start for w in spec.walls] + [w.end for w in spec.walls])
    x0, y0 = pts.min(axis=0) - 0.4
    x1, y1 = pts.max(axis=0) + 0.4
    scale = size / max(x1 - x0, y1 - y0)
    ox = (size - (x1 - x0) * scale) / 2
    oy = (size - (y1 - y0) * scale) / 2

    def px(x: float, y: float) -> tuple[float, float]:
        return ox + (x - x0) * scale, size - (oy + (y - y0) * scale)

    def poly(corners: np.ndarray) -> list[tuple[float, float]]:
        return [px(float(x), float(y)) for x, y in corners]

    image = Image.new("RGB", (size, size), _BACKGROUND)
    draw = ImageDraw.Draw(image)
    small = ImageFont.load_default(size=max(9, size // 60))
    large = ImageFont.load_default(size=max(11, size // 36))

    for room in spec.rooms:
        draw.polygon(poly(np.asarray(room.polygon)), fill=_rgb(room.floor_color, 0.9))
    for room in spec.rooms:
        cx, cy = polygon_centroid(room.polygon)
        draw.text(px(cx, cy), room.name.replace("_", " ").upper(), fill=(90, 90, 90), font=large, anchor="mm")
    for wall, a, b in split_walls(spec.walls, spec.doorways):
        draw.polygon(poly(wall_rect(a, b, wall.thickness + 0.02).corners()), fill=_WALL)

    for f in spec.furniture:
        rect = furniture_rect(f)
        corners = rect.corners()
        draw.polygon(poly(corners), fill=_rgb(f.color), outline=(20, 20, 20))
        # Corners 0 and 1 span the local -y edge: the front.
        draw.line(poly(corners[:2]), fill=(230, 60, 60), width=max(2, size // 200))
    for part in open_parts:
        draw.polygon(poly(part.corners()), fill=(150, 150, 160), outline=(20, 20, 20))

    if len(path) >= 2:
        draw.line([px(x, y) for x, y in path], fill=_PATH, width=max(2, size // 170), joint="curve")

    for _, _, _, partner_path in partners or []:
        if len(partner_path) >= 2:
            draw.line([px(x, y) for x, y in partner_path], fill=_HUMAN_PATH, width=max(2, size // 170), joint="curve")

    colors = {o.name: o.color for o in spec.objects}
    for name, entity in state.entities.items():
        if entity.kind is not EntityKind.OBJECT or entity.held:
            continue
        r = max(3.0, (entity.bbox_max[0] - entity.bbox_min[0]) / 2 * scale)
        cx, cy = px(entity.position[0], entity.position[1])
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=_rgb(colors[name]), outline=(0, 0, 0))

    robot = state.robot
    rx, ry = px(robot.x, robot.y)
    rr = state.robot_radius * scale
    draw.ellipse((rx - rr, ry - rr, rx + rr, ry + rr), fill=_ROBOT, outline=(255, 255, 255), width=2)
    hx, hy = px(robot.x + state.robot_radius * 1.4 * math.cos(robot.yaw), robot.y + state.robot_radius * 1.4 * math.sin(robot.yaw))
    draw.line([(rx, ry), (hx, hy)], fill=(255, 255, 255), width=max(2, size // 170))
    if state.held is not None:
        r = max(3.0, rr * 0.35)
        draw.ellipse((rx - r, ry - r, rx + r, ry + r), fill=_rgb(colors[state.held]), outline=(0, 0, 0))

    for pose, radius, held, _ in partners or []:
        hx0, hy0 = px(pose.x, pose.y)
        hr = radius * scale
        # Shoulders: an ellipse across the heading; head: a disc; nose: a tick along the heading.
        c, s_ = math.cos(pose.yaw), math.sin(pose.yaw)
        shoulders = [px(pose.x + radius * (-s_ * t) + 0.08 * c * u, pose.y + radius * (c * t) + 0.08 * s_ * u)
                     for t, u in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
        draw.polygon(shoulders, fill=_HUMAN, outline=(255, 255, 255))
        head = hr * 0.45
        draw.ellipse((hx0 - head, hy0 - head, hx0 + head, hy0 + head), fill=(222, 173, 140), outline=(255, 255, 255), width=2)
        nx_, ny_ = px(pose.x + radius * 1.3 * c, pose.y + radius * 1.3 * s_)
        draw.line([(hx0, hy0), (nx_, ny_)], fill=_HUMAN, width=max(2, size // 170))
        if held is not None:
            r = max(3.0, hr * 0.3)
            gx_, gy_ = px(pose.x + radius * 0.9 * c, pose.y + radius * 0.9 * s_)
            draw.ellipse((gx_ - r, gy_ - r, gx_ + r, gy_ + r), fill=_rgb(colors[held]), outline=(0, 0, 0))

    for f in spec.furniture:
        cx, cy = px(f.pose.x, f.pose.y)
        draw.text((cx, cy), f.name, fill=(255, 255, 255), font=small, anchor="mm", stroke_width=2, stroke_fill=(0, 0, 0))
    return np.asarray(image, dtype=np.uint8)
