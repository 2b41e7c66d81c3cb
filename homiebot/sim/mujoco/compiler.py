"""Scene spec -> MuJoCo model.

The compiler writes MJCF text (one ``<mujoco>`` document) and compiles it with ``MjModel.from_xml_string``:

* one floor geom per room (a thin prism on the room's polygon), so that segmentation of the floor names
  the room;
* walls as boxes, with each doorway's gap cut out (:func:`geometry.split_walls`);
* furniture as bodies built from boxes by category (tables and desks on legs, sofas with back and arms,
  chairs, open shelves, hollow containers around an interior, solid blocks otherwise); articulated
  furniture gets a child body with a hinge (door) or a slide (drawer) joint, which Open/Close drives;
* small objects as primitives (box, cylinder, sphere) on free joints, in their colour; an open hollow cylinder (a
  bowl) as a floor disc and a ring of wall boxes;
* the Fetch-class robot of :mod:`homiebot.sim.mujoco.robot`.

Every geom is mapped to the instance it belongs to (``CompiledScene.geom_instance``), which turns
MuJoCo's segmentation (geom ids) into scene instance names. Walls, ceiling and robot map to 0.

Collision bits: walls, furniture, doors and drawers ``contype=1``; the robot's base ``conaffinity=1``, so
the only contacts MuJoCo reports are base-versus-walls/furniture: that is what the path follower checks.
Small objects take part in no collision (``contype=conaffinity=0``): the oracle skills place them
kinematically (as Habitat's oracle skills snap objects), so they never rest on anything physically.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from xml.sax.saxutils import quoteattr

import mujoco
import numpy as np

from homiebot.sim.mujoco import human as human_model
from homiebot.sim.mujoco import robot as robot_model
from homiebot.sim.mujoco.geometry import split_walls, triangulate
from homiebot.sim.mujoco.placement import half_height
from homiebot.sim.scene import FurnitureSpec, ObjectSpec, SceneSpec, rgba

#: Thickness of panels (sides, backs, shelves, doors) of furniture built from boxes, metres.
PANEL = 0.025
#: A drawer's tray: its walls' and floor's thickness (m), and the gap (m) between its floor and the cabinet's below.
DRAWER_WALL = 0.012
DRAWER_GAP = 0.004
#: A lamp's shade when off and when on (the simulator switches between them).
LAMP_OFF_RGBA = "0.5 0.48 0.45 1"
LAMP_ON_RGBA = (1.0, 0.95, 0.7, 1.0)
_STATIC = 'contype="1" conaffinity="0"'
#: Name prefix of the per-object grasp welds (CompiledScene.grasp_welds).
GRASP_WELD_PREFIX = "grasp/"
#: Name prefix of the per-door or drawer grasp welds (CompiledScene.articulation_welds).
LEAF_WELD_PREFIX = "grasp_leaf/"


@dataclass
class CompiledScene:
    """A compiled model plus the bookkeeping that maps MuJoCo ids back to the scene."""

    model: mujoco.MjModel
    xml: str
    instance_ids: dict[str, int]  # instance name -> segmentation id (1-based)
    geom_instance: np.ndarray  # (ngeom,) int32: segmentation id of each geom, 0 for unnamed
    object_qpos: dict[str, int] = field(default_factory=dict)  # object -> qpos address of its free joint
    articulation_qpos: dict[str, int] = field(default_factory=dict)  # furniture -> qpos address of its joint
    robot_qpos: dict[str, int] = field(default_factory=dict)  # robot joint (short name) -> qpos address
    robot_base_geoms: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    camera_ids: dict[str, int] = field(default_factory=dict)  # view name -> camera id
    grip_site: int = -1
    # Lamps (furniture with the "light" function): the shade geom recoloured and the light switched with the
    # lamp's power (MujocoSimulator._sync), so that a lamp that is on is lit in the views.
    lamp_shade_geoms: dict[str, int] = field(default_factory=dict)
    lamp_lights: dict[str, int] = field(default_factory=dict)
    # One inactive weld per object between the robot's gripper and the object: the physical skills' grasp
    # (homiebot/sim/mujoco/physical.py, FingerContactAttachment) switches it on only while both fingers touch the
    # object. Inactive welds change nothing for the kinematic (oracle) skills, which never step the physics.
    grasp_welds: dict[str, int] = field(default_factory=dict)
    # The same for each articulated furniture's moving body (its door or drawer, "<name>/moving"): the physical Open
    # and Close hold a handle through it while both fingers touch the door or drawer (physical.py,
    # FingerContactAttachment), furniture -> (weld id, moving body id).
    articulation_welds: dict[str, tuple[int, int]] = field(default_factory=dict)
    # The human partner (compiled only with ``human=True``; homiebot/sim/mujoco/human.py): its base joints'
    # qpos addresses, its collision geoms, every geom of its body (to name it in a contact), cameras, hand.
    human_qpos: dict[str, int] = field(default_factory=dict)
    human_base_geoms: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    human_geoms: frozenset[int] = frozenset()
    robot_geoms: frozenset[int] = frozenset()
    human_camera_ids: dict[str, int] = field(default_factory=dict)
    human_grip_site: int = -1

    @property
    def has_human(self) -> bool:
        return bool(self.human_qpos)


def _fmt(*values: float) -> str:
    return " ".join(f"{v:.5g}" for v in values)


def _rgba(color) -> str:
    return _fmt(*rgba(color))


class _GeomWriter:
    """Collects geoms of one body, names them uniquely and remembers which instance each belongs to."""

    def __init__(self, instance: str | None, owner: dict[str, str | None]):
        self.instance = instance
        self.owner = owner
        self.lines: list[str] = []

    def box(self, lo: tuple[float, float, float], hi: tuple[float, float, float], color: str, extra: str = _STATIC) -> None:
        size = [(high - low) / 2 for low, high in zip(lo, hi, strict=False)]
        if min(size) <= 0.0025:
            return  # a panel thinner than 5 mm is left out (e.g. an open front)
        centre = [(high + low) / 2 for low, high in zip(lo, hi, strict=False)]
        self._add(f'type="box" size="{_fmt(*size)}" pos="{_fmt(*centre)}" rgba="{color}" {extra}')

    def raw(self, attrs: str) -> None:
        self._add(attrs)

    def _add(self, attrs: str) -> None:
        name = f"{self.instance or 'static'}#{len(self.owner)}"
        self.owner[name] = self.instance
        self.lines.append(f"<geom name={quoteattr(name)} {attrs}/>")


def _shape_kind(f: FurnitureSpec) -> str:
    category = f.category.lower()
    if "light" in f.effective_functions:
        return "lamp"
    if f.interior is not None or f.articulation is not None:
        return "container"
    if any(k in category for k in ("sofa", "couch", "armchair", "bed")):
        return "upholstered"
    if any(k in category for k in ("chair", "stool")):
        return "chair"
    if any(k in category for k in ("table", "desk")) and "stand" not in category:
        return "table"
    if any(s.height < f.size[2] - 0.03 for s in f.surfaces):
        return "shelf"
    return "block"


def _furniture_geoms(f: FurnitureSpec, g: _GeomWriter, color: str) -> None:
    """The static part of a furniture (everything but a door or drawer), in its own frame."""
    sx, sy, sz = f.size
    hx, hy = sx / 2, sy / 2
    kind = _shape_kind(f)
    if kind == "container":
        lo, hi = f.interior.min, f.interior.max  # type: ignore[union-attr]
        # The cabinet's floor; under a drawer it lies below the tray (_articulated_body), so that what is in the
        # drawer rests on the tray alone, as a drawer box runs on its slides clear of the carcass. Level with the
        # tray's floor, it held a bowl back by friction while the tray slid out under it, until the tray's back
        # wall pushed it (docs/results/physical-articulation-2026-11-30.md, "The drawer's bowl").
        drawer = f.articulation is not None and f.articulation.kind == "sliding"
        floor = lo[2] - DRAWER_WALL - DRAWER_GAP if drawer else lo[2]
        g.box((-hx, -hy, 0), (hx, hy, floor), color)  # bottom
        g.box((-hx, -hy, hi[2]), (hx, hy, sz), color)  # top
        g.box((-hx, lo[1], floor), (lo[0], hy, hi[2]), color)  # left side
        g.box((hi[0], lo[1], floor), (hx, hy, hi[2]), color)  # right side
        g.box((lo[0], hi[1], floor), (hi[0], hy, hi[2]), color)  # back
        if f.articulation is None:
            g.box((-hx, -hy, lo[2]), (hx, lo[1], hi[2]), color)  # fixed front (a sink's apron)
        else:
            # The sides reach the front plane; the door or drawer front closes the opening.
            g.box((-hx, -hy, floor), (lo[0], lo[1], hi[2]), color)
            g.box((hi[0], -hy, floor), (hx, lo[1], hi[2]), color)
        # Lower the inside floor a touch darker so that interiors read as interiors.
        dim = _shade(color, 0.8)
        g.box((lo[0], lo[1], lo[2] - 0.004), (hi[0], hi[1], lo[2]), dim, 'contype="0" conaffinity="0"')
    elif kind == "lamp":
        # A base, a pole and a shade (the shade is the geom the simulator lights up); a desk lamp's surface,
        # when it has one, is its base.
        pole = min(0.02, hx / 3)
        g.box((-hx * 0.6, -hy * 0.6, 0), (hx * 0.6, hy * 0.6, 0.03), _shade(color, 0.6))
        g.box((-pole, -pole, 0.03), (pole, pole, sz * 0.75), _shade(color, 0.6))
        g.box((-hx, -hy, sz * 0.75), (hx, hy, sz), LAMP_OFF_RGBA)
    elif kind == "upholstered":
        seat = f.surfaces[0].height if f.surfaces else min(0.45, sz)
        back = min(0.22, sy * 0.3)
        arms = 0.16 if "bed" not in f.category.lower() and sx > 0.9 else 0.0
        g.box((-hx, -hy, 0.06), (hx, hy, seat), color)
        g.box((-hx, hy - back, seat), (hx, hy, sz), color)
        if arms:
            g.box((-hx, -hy, seat), (-hx + arms, hy - back, min(seat + 0.2, sz)), color)
            g.box((hx - arms, -hy, seat), (hx, hy - back, min(seat + 0.2, sz)), color)
        dark = _rgba("dark")
        for x in (-hx + 0.05, hx - 0.05):
            for y in (-hy + 0.05, hy - 0.05):
                g.box((x - 0.03, y - 0.03, 0), (x + 0.03, y + 0.03, 0.06), dark)
    elif kind == "chair":
        seat = f.surfaces[0].height if f.surfaces else min(0.46, sz)
        leg = 0.035
        for x in (-hx + leg, hx - leg):
            for y in (-hy + leg, hy - leg):
                g.box((x - leg / 2, y - leg / 2, 0), (x + leg / 2, y + leg / 2, seat - 0.04), color)
        g.box((-hx, -hy, seat - 0.04), (hx, hy, seat), color)
        if "stool" not in f.category.lower() and sz > seat + 0.1:
            g.box((-hx, hy - 0.04, seat), (hx, hy, sz), color)
    elif kind == "table":
        top = 0.04
        leg = 0.05
        g.box((-hx, -hy, sz - top), (hx, hy, sz), color)
        for x in (-hx + leg, hx - leg):
            for y in (-hy + leg, hy - leg):
                g.box((x - leg / 2, y - leg / 2, 0), (x + leg / 2, y + leg / 2, sz - top), color)
    elif kind == "shelf":
        g.box((-hx, -hy, 0), (-hx + PANEL, hy, sz), color)
        g.box((hx - PANEL, -hy, 0), (hx, hy, sz), color)
        g.box((-hx + PANEL, hy - PANEL, 0), (hx - PANEL, hy, sz), color)
        g.box((-hx + PANEL, -hy, 0), (hx - PANEL, hy - PANEL, 0.06), color)  # plinth
        for s in f.surfaces:
            g.box((-hx + PANEL, -hy, s.height - PANEL), (hx - PANEL, hy - PANEL, s.height), color)
        g.box((-hx, -hy, sz - PANEL), (hx, hy, sz), color)
    else:
        # A block with a slightly darker top slab, so that the top reads as a surface in the views.
        top = min(0.03, sz / 4)
        g.box((-hx, -hy, 0), (hx, hy, sz - top), color)
        g.box((-hx, -hy, sz - top), (hx, hy, sz), _shade(color, 0.78))


def _shade(color: str, factor: float) -> str:
    r, g, b, a = (float(v) for v in color.split())
    return _fmt(r * factor, g * factor, b * factor, a)


def _articulated_body(f: FurnitureSpec, owner: dict[str, str | None], color: str) -> str:
    """The door (hinge) or drawer (slide) body of an articulated furniture, as MJCF text."""
    art = f.articulation
    assert art is not None and f.interior is not None
    sx, sy, sz = f.size
    hx, hy = sx / 2, sy / 2
    lo, hi = f.interior.min, f.interior.max
    thick = max(0.02, lo[1] + hy)
    g = _GeomWriter(f.name, owner)
    handle = _rgba("silver")
    name = quoteattr(f"{f.name}/articulation")
    if art.kind == "hinged":
        # Hinge on the front edge of the named side (seen from the front); the door swings out (towards -y).
        sign = -1.0 if art.hinge_side == "left" else 1.0
        hinge_x = sign * hx
        g.box((min(0.0, -sign * sx), 0.0, 0.0), (max(0.0, -sign * sx), thick, sz), color)
        hx_handle = -sign * (sx - 0.07)
        g.box((hx_handle - 0.015, -0.05, sz * 0.35), (hx_handle + 0.015, -0.01, sz * 0.65), handle)
        g.box((hx_handle - 0.015, -0.03, sz * 0.35), (hx_handle + 0.015, 0.0, sz * 0.37), handle)
        g.box((hx_handle - 0.015, -0.03, sz * 0.63), (hx_handle + 0.015, 0.0, sz * 0.65), handle)
        # Opening is a positive joint angle that swings the free edge out of the front plane.
        axis = "0 0 -1" if art.hinge_side == "left" else "0 0 1"
        joint = f'<joint name={name} type="hinge" axis="{axis}" range="0 {art.range:.5g}" damping="5"/>'
        pos = _fmt(hinge_x, -hy, 0.0)
    else:
        # A drawer: a tray around the interior with a front panel covering the front face; it slides out (-y).
        wall = DRAWER_WALL
        g.box((-hx, 0.0, 0.0), (hx, thick, sz), color)  # front panel (local y measured from the front plane)
        depth_lo, depth_hi = thick, hi[1] + hy
        g.box((lo[0], depth_lo, lo[2] - wall), (hi[0], depth_hi, lo[2]), color)  # tray bottom
        g.box((lo[0], depth_lo, lo[2]), (lo[0] + wall, depth_hi, hi[2] - 0.01), color)
        g.box((hi[0] - wall, depth_lo, lo[2]), (hi[0], depth_hi, hi[2] - 0.01), color)
        g.box((lo[0], depth_hi - wall, lo[2]), (hi[0], depth_hi, hi[2] - 0.01), color)
        g.box((-0.12, -0.035, sz * 0.62), (0.12, -0.01, sz * 0.68), handle)
        joint = f'<joint name={name} type="slide" axis="0 -1 0" range="0 {art.range:.5g}" damping="5"/>'
        pos = _fmt(0.0, -hy, 0.0)
    return f'<body name={quoteattr(f.name + "/moving")} pos="{pos}">{joint}{"".join(g.lines)}</body>'


#: Mass of a small object (kg), spread over its geoms.
OBJECT_MASS = 0.2
#: Flat segments of an open hollow cylinder's wall (a bowl's): MuJoCo collides a mesh as its convex hull, which would
#: fill the hollow, so the wall is a ring of boxes.
HOLLOW_WALL_SEGMENTS = 16


def _object_geoms(obj: ObjectSpec, g: _GeomWriter) -> None:
    """The object's geoms on its body (origin at the centre of its box): one primitive, or for an open hollow cylinder
    (``wall_thickness``) a floor disc and a ring of wall boxes, so that a finger fits between the wall and the middle."""
    color = _rgba(obj.color)
    physics = 'contype="0" conaffinity="0"'
    if obj.shape == "box":
        g.raw(f'type="box" size="{_fmt(*(s / 2 for s in obj.size))}" rgba="{color}" mass="{OBJECT_MASS}" {physics}')
    elif obj.shape == "cylinder" and obj.wall_thickness is not None:
        radius, half, wall = obj.size[0] / 2, obj.size[2] / 2, obj.wall_thickness
        mass = OBJECT_MASS / (HOLLOW_WALL_SEGMENTS + 1)
        g.raw(f'type="cylinder" size="{_fmt(radius, wall / 2)}" pos="{_fmt(0.0, 0.0, -half + wall / 2)}" '
              f'rgba="{color}" mass="{mass:.5g}" {physics}')
        # Each segment's outer face touches the circle of the object's radius at its middle; its half length closes
        # the polygon at the wall's outer side.
        centre = radius - wall / 2
        half_length = radius * math.tan(math.pi / HOLLOW_WALL_SEGMENTS)
        for k in range(HOLLOW_WALL_SEGMENTS):
            angle = 2 * math.pi * k / HOLLOW_WALL_SEGMENTS
            g.raw(f'type="box" size="{_fmt(wall / 2, half_length, half)}" '
                  f'pos="{_fmt(centre * math.cos(angle), centre * math.sin(angle), 0.0)}" euler="0 0 {angle:.6f}" '
                  f'rgba="{color}" mass="{mass:.5g}" {physics}')
    elif obj.shape == "cylinder":
        g.raw(f'type="cylinder" size="{_fmt(obj.size[0] / 2, obj.size[2] / 2)}" rgba="{color}" mass="{OBJECT_MASS}" {physics}')
    else:
        g.raw(f'type="sphere" size="{_fmt(obj.size[0] / 2)}" rgba="{color}" mass="{OBJECT_MASS}" {physics}')


#: Depth of a room's floor slab (m), below z = 0. MuJoCo resolves a contact by pushing the geoms apart along the
#: shortest way out of their overlap (its MPR/GJK penetration; mujoco.readthedocs.io, "Computation", "Collision
#: detection"), and at 5 ms steps a can dropped from the tuck (1.1 m, 4.7 m/s at the floor) sinks 2.4 cm in one step:
#: into a 2 cm slab that is past its middle, and it was pushed out through the bottom and fell for ever. A slab as
#: deep as a building's (about 0.3 m of concrete) leaves the shortest way out upwards for anything slower than
#: 30 m/s. Only the physical skills give the floor collision bits (physical.py); the views never see below z = 0.
FLOOR_DEPTH = 0.3


def _floor_mesh(name: str, polygon: list[tuple[float, float]]) -> str:
    """A FLOOR_DEPTH prism on the room polygon (top face at z = 0), as a MuJoCo mesh asset."""
    pts = np.asarray(polygon, dtype=float)
    n = len(pts)
    vertices = [(x, y, 0.0) for x, y in pts] + [(x, y, -FLOOR_DEPTH) for x, y in pts]
    faces = []
    for a, b, c in triangulate(polygon):
        faces.append((a, b, c))
        faces.append((c + n, b + n, a + n))
    signed = sum(pts[i, 0] * pts[(i + 1) % n, 1] - pts[(i + 1) % n, 0] * pts[i, 1] for i in range(n))
    for i in range(n):
        j = (i + 1) % n
        if signed > 0:
            faces += [(i, i + n, j + n), (i, j + n, j)]
        else:
            faces += [(i, j + n, i + n), (i, j, j + n)]
    vert = " ".join(_fmt(*v) for v in vertices)
    face = " ".join(f"{a} {b} {c}" for a, b, c in faces)
    return f'<mesh name={quoteattr(name)} vertex="{vert}" face="{face}" inertia="shell"/>'


def scene_bounds(spec: SceneSpec) -> tuple[float, float, float, float]:
    pts = np.array([p for r in spec.rooms for p in r.polygon] + [w.start for w in spec.walls] + [w.end for w in spec.walls])
    return float(pts[:, 0].min()), float(pts[:, 1].min()), float(pts[:, 0].max()), float(pts[:, 1].max())


def compile_scene(spec: SceneSpec, width: int = 256, height: int = 256, human: bool = False) -> CompiledScene:
    """Build the MuJoCo model of ``spec``. Objects start at the origin; the simulator places them. ``human``:
    add PARTNR's second agent (:mod:`homiebot.sim.mujoco.human`); without it the model is the single-robot one."""
    owner: dict[str, str | None] = {}
    xmin, ymin, xmax, ymax = scene_bounds(spec)
    diag = math.hypot(xmax - xmin, ymax - ymin)
    extent = max(diag / 2, 1.0)
    wall_height = max((w.height for w in spec.walls), default=2.5)

    assets = [
        '<material name="matte" specular="0.05" shininess="0.05" reflectance="0"/>',
        # The ceiling faces away from every light; a little emission keeps it from reading as a dark slab.
        '<material name="ceiling" specular="0" shininess="0" emission="0.6"/>',
    ]
    world: list[str] = []
    for room in spec.rooms:
        mesh = f"floor_mesh/{room.name}"
        assets.append(_floor_mesh(mesh, room.polygon))
        g = _GeomWriter(room.name, owner)
        g.raw(f'type="mesh" mesh={quoteattr(mesh)} rgba="{_rgba(room.floor_color)}" contype="0" conaffinity="0"')
        world += g.lines

    static = _GeomWriter(None, owner)
    for wall, start, end in split_walls(spec.walls, spec.doorways):
        length = math.hypot(end[0] - start[0], end[1] - start[1])
        yaw = math.atan2(end[1] - start[1], end[0] - start[0])
        cx, cy = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2
        static.raw(
            f'type="box" size="{_fmt(length / 2, wall.thickness / 2, wall.height / 2)}" '
            f'pos="{_fmt(cx, cy, wall.height / 2)}" euler="0 0 {yaw:.6f}" rgba="{_rgba(wall.color)}" {_STATIC}'
        )
    # A ceiling, so that upward-looking pixels show a ceiling rather than the empty background.
    static.raw(
        f'type="box" size="{_fmt((xmax - xmin) / 2 + 0.5, (ymax - ymin) / 2 + 0.5, 0.01)}" '
        f'pos="{_fmt((xmin + xmax) / 2, (ymin + ymax) / 2, wall_height + 0.01)}" rgba="0.96 0.96 0.94 1" material="ceiling" '
        'contype="0" conaffinity="0" group="2"'
    )
    world += static.lines

    for f in spec.furniture:
        color = _rgba(f.color)
        g = _GeomWriter(f.name, owner)
        _furniture_geoms(f, g, color)
        moving = _articulated_body(f, owner, color) if f.articulation is not None else ""
        light = ""
        if _shape_kind(f) == "lamp":
            # Off at compile time; MujocoSimulator._sync sets light_active from the lamp's power.
            light = (
                f'<light name={quoteattr(f.name + "/light")} pos="0 0 {f.size[2] * 0.74:.4g}" dir="0 0 -1" '
                'cutoff="75" attenuation="1 0.4 0.2" diffuse="0.9 0.8 0.5" specular="0 0 0" castshadow="false" active="false"/>'
            )
        world.append(
            f'<body name={quoteattr("furniture/" + f.name)} pos="{_fmt(f.pose.x, f.pose.y, 0)}" '
            f'euler="0 0 {f.pose.yaw:.6f}">{"".join(g.lines)}{moving}{light}</body>'
        )

    for obj in spec.objects:
        g = _GeomWriter(obj.name, owner)
        _object_geoms(obj, g)
        world.append(
            f'<body name={quoteattr("object/" + obj.name)} pos="0 0 {half_height(obj):.5g}">'
            f'<freejoint name={quoteattr("object/" + obj.name)}/>{"".join(g.lines)}</body>'
        )

    robot_body, robot_actuators = robot_model.robot_mjcf()
    world.append(robot_body)
    if human:
        world.append(human_model.human_mjcf())
    sun = _fmt((xmin + xmax) / 2, (ymin + ymax) / 2, wall_height + 3)
    gripper = quoteattr(robot_model.ROBOT_PREFIX + "gripper_link")
    grasp_welds = "".join(
        f'<weld name={quoteattr(GRASP_WELD_PREFIX + o.name)} body1={gripper} body2={quoteattr("object/" + o.name)} active="false"/>'
        for o in spec.objects
    ) + "".join(
        f'<weld name={quoteattr(LEAF_WELD_PREFIX + f.name)} body1={gripper} body2={quoteattr(f.name + "/moving")} active="false"/>'
        for f in spec.furniture if f.articulation is not None
    )
    xml = f"""<mujoco model={quoteattr(spec.name)}>
  <compiler angle="radian" autolimits="true"/>
  <option timestep="0.005" integrator="implicitfast"/>
  <statistic extent="{extent:.5g}" center="{_fmt((xmin + xmax) / 2, (ymin + ymax) / 2, 1.0)}"/>
  <visual>
    <global offwidth="{width}" offheight="{height}"/>
    <quality shadowsize="0" offsamples="0"/>
    <headlight active="1" ambient="0.45 0.45 0.45" diffuse="0.5 0.5 0.5" specular="0.02 0.02 0.02"/>
    <map znear="{0.03 / extent:.6g}" zfar="{max(4 * diag, 30.0) / extent:.6g}"/>
  </visual>
  <default><geom material="matte"/></default>
  <asset>{"".join(assets)}</asset>
  <worldbody>
    <light name="sun" pos="{sun}" dir="0.3 0.2 -1" directional="true" castshadow="false" diffuse="0.35 0.35 0.33" specular="0 0 0"/>
    <light name="fill" pos="{sun}" dir="-0.4 -0.3 -1" directional="true" castshadow="false" diffuse="0.15 0.15 0.16" specular="0 0 0"/>
    {"".join(world)}
  </worldbody>
  <actuator>{robot_actuators}</actuator>
  <equality>{grasp_welds}</equality>
</mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    compiled = _index(spec, model, xml, owner)
    if human:
        _index_human(model, compiled)
    return compiled


def _index_human(model: mujoco.MjModel, compiled: CompiledScene) -> None:
    p = human_model.HUMAN_PREFIX
    compiled.human_qpos = {
        j: int(model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, p + j)])
        for j in human_model.BASE_JOINTS
    }
    body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, p + "base")
    human_bodies = {b for b in range(model.nbody) if b == body or model.body_parentid[b] == body}
    robot_root = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, robot_model.ROBOT_PREFIX + "base")
    robot_bodies = {robot_root}
    for b in range(model.nbody):  # bodies are numbered parents first
        if model.body_parentid[b] in robot_bodies:
            robot_bodies.add(b)
    compiled.human_geoms = frozenset(i for i in range(model.ngeom) if model.geom_bodyid[i] in human_bodies)
    compiled.robot_geoms = frozenset(i for i in range(model.ngeom) if model.geom_bodyid[i] in robot_bodies)
    compiled.human_base_geoms = np.array(
        [i for i in range(model.ngeom) if model.geom_bodyid[i] == body and model.geom_conaffinity[i]], dtype=np.int32
    )
    compiled.human_camera_ids = {
        view: mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, f"{p}cam_{view}") for view in robot_model.VIEW_YAWS
    }
    compiled.human_grip_site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, p + "grip")


def _index(spec: SceneSpec, model: mujoco.MjModel, xml: str, owner: dict[str, str | None]) -> CompiledScene:
    instance_ids = {name: i + 1 for i, name in enumerate(spec.all_names())}
    geom_instance = np.zeros(model.ngeom, dtype=np.int32)
    for geom_name, instance in owner.items():
        if instance is not None:
            geom_instance[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, geom_name)] = instance_ids[instance]

    def qpos_of(joint: str) -> int:
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint)
        if jid < 0:
            raise KeyError(joint)
        return int(model.jnt_qposadr[jid])

    robot_joints = (
        robot_model.BASE_JOINTS
        + ("torso_lift", "head_pan", "head_tilt")
        + robot_model.ARM_JOINTS
        + robot_model.FINGER_JOINTS
    )
    lamps = [f for f in spec.furniture if _shape_kind(f) == "lamp"]
    base_body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, robot_model.ROBOT_PREFIX + "base")
    base_geoms = np.array([i for i in range(model.ngeom) if model.geom_bodyid[i] == base_body and model.geom_conaffinity[i]], dtype=np.int32)
    return CompiledScene(
        model=model,
        xml=xml,
        instance_ids=instance_ids,
        geom_instance=geom_instance,
        object_qpos={o.name: qpos_of("object/" + o.name) for o in spec.objects},
        articulation_qpos={f.name: qpos_of(f.name + "/articulation") for f in spec.furniture if f.articulation},
        robot_qpos={j: qpos_of(robot_model.ROBOT_PREFIX + j) for j in robot_joints},
        robot_base_geoms=base_geoms,
        camera_ids={
            view: mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, f"{robot_model.ROBOT_PREFIX}cam_{view}")
            for view in robot_model.VIEW_YAWS
        },
        grip_site=mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, robot_model.ROBOT_PREFIX + "grip"),
        lamp_shade_geoms={f.name: _last_geom(model, owner, f.name) for f in lamps},
        lamp_lights={f.name: mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_LIGHT, f.name + "/light") for f in lamps},
        grasp_welds={o.name: mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_EQUALITY, GRASP_WELD_PREFIX + o.name) for o in spec.objects},
        articulation_welds={
            f.name: (mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_EQUALITY, LEAF_WELD_PREFIX + f.name),
                     mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f.name + "/moving"))
            for f in spec.furniture if f.articulation is not None
        },
    )


def _last_geom(model: mujoco.MjModel, owner: dict[str, str | None], instance: str) -> int:
    """The id of the last geom written for ``instance`` (a lamp's shade is written last)."""
    name = [g for g, i in owner.items() if i == instance][-1]
    return int(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, name))
