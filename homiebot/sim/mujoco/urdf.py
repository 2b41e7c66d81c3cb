"""A URDF of the embedded simulator's robot, generated from its MJCF so that the two cannot drift apart.

:func:`robot_urdf` compiles :func:`homiebot.sim.mujoco.robot.robot_mjcf` with MuJoCo (the compiler settings of
the scene compiler: radians, ``autolimits``) and walks the compiled bodies from the base:

* **links** are named as the frames the sim bridge publishes: the base body is ``base_link``, every other body
  its MJCF name without the ``robot/`` prefix (``torso_lift_link``, ``shoulder_pan_link`` ... ``gripper_link``,
  ``finger_left_link``); each camera gives a link ``<view>_camera_optical_frame`` (x right, y down, z forward:
  MuJoCo's camera frame times ``diag(1, -1, -1)``, as the renderer's ``camera_to_world``), the frames the
  bridge latches on ``/tf_static``.
* A body with no joint, no geom and no mass (``camera_rig``, a mounting point for the four cameras) is not a
  link: its children and cameras hang from its parent's link with the composed transform. So the optical
  frames' URDF parent is ``base_link``, their parent on ``/tf_static``.
* **joints**: a body's hinge is ``revolute``, its slide ``prismatic``, named as the MJCF joint without the
  prefix, which are the names on ``/joint_states``; axis and limits from the compiled model (``jnt_axis``,
  ``jnt_range``); a body without a joint hangs from its parent by a ``fixed`` joint ``<link>_joint``. The
  planar base joints (``base_x``, ``base_y``, ``base_yaw``) are not URDF joints: the base pose is
  ``odom -> base_link`` on ``/tf``, and ``map`` / ``odom`` are not robot frames, so the URDF's root is
  ``base_link``. MJCF has no effort or velocity limits; the URDF's mandatory ``effort`` / ``velocity``
  attributes are written as 0 (not modelled).
* **visuals**: box, cylinder and sphere geoms as they are; a capsule as a cylinder and two end spheres (URDF has
  no capsule); colours from the geoms' ``rgba``, as named robot-level materials. Every geom is drawn, including
  the ones the first-person cameras hide (group 3). **collisions**: the geoms that take part in contacts
  (``contype`` or ``conaffinity`` set: the base shell). **inertials**: each body's mass, centre of mass and
  principal inertia.

A hinge or slide whose anchor is not at its body's origin, a body with more than one joint (other than the root)
and ball / free joints have no URDF form here: the walk raises :class:`UrdfError` rather than write a model
that rviz would draw elsewhere than the simulator has it.

:class:`RobotKinematics` holds the compiled robot and the same link tree; the sim bridge uses it to publish
each link's transform from its URDF parent on ``/tf`` (MuJoCo's forward kinematics, ``xpos`` / ``xquat``, at
the joint positions it also publishes on ``/joint_states``), so that rviz's RobotModel needs no
robot_state_publisher (not among the ROS 2 wheels).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import mujoco
import numpy as np

from homiebot.sim.mujoco import robot as robot_model

#: The root link: the base body, named as the REP 105 frame the bridge publishes (``odom -> base_link``).
BASE_LINK = "base_link"
#: The robot's name in the URDF.
ROBOT_NAME = "homiebot"
#: MuJoCo's camera frame (x right, y up, looking along -z) -> the optical frame (x right, y down, z forward).
OPTICAL = np.diag([1.0, -1.0, -1.0])
_CAMERA_PREFIX = robot_model.ROBOT_PREFIX + "cam_"


class UrdfError(ValueError):
    """The robot MJCF holds something this exporter cannot express faithfully in URDF."""


def optical_frame(view: str) -> str:
    """A view's optical frame name: the same as ``homiebot.ros.convert.optical_frame`` (which needs ROS)."""
    return f"{view}_camera_optical_frame"


def _strip(name: str) -> str:
    return name.removeprefix(robot_model.ROBOT_PREFIX)


@dataclass(frozen=True, eq=False)
class Visual:
    """One URDF primitive in its link's frame: ``kind`` box (full sizes), cylinder (radius, length) or sphere
    (radius); ``collision`` when the MJCF geom takes part in contacts."""

    name: str
    kind: str
    size: tuple[float, ...]
    origin: np.ndarray
    rgba: tuple[float, float, float, float]
    collision: bool


@dataclass(frozen=True, eq=False)
class Link:
    """A URDF link and the joint that hangs it from its parent (``parent`` None for the root).

    ``origin`` is the parent link -> this link transform at joint position 0 (the URDF joint origin); ``body``
    the MuJoCo body whose frame this link is (-1 for a camera's optical frame); ``qpos_adr`` the joint's
    qpos address in the robot model (movable joints only)."""

    name: str
    parent: str | None
    joint: str
    joint_type: str  # "root", "fixed", "revolute" or "prismatic"
    origin: np.ndarray
    body: int
    axis: tuple[float, float, float] | None = None
    limits: tuple[float, float] | None = None
    qpos_adr: int | None = None
    visuals: tuple[Visual, ...] = ()
    mass: float = 0.0
    inertia_origin: np.ndarray | None = None
    inertia: tuple[float, float, float] | None = None
    children: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------------------------ small maths


def _quat_matrix(quat) -> np.ndarray:
    out = np.zeros(9)
    mujoco.mju_quat2Mat(out, np.asarray(quat, dtype=np.float64))
    return out.reshape(3, 3)


def _transform(pos, quat) -> np.ndarray:
    t = np.eye(4)
    t[:3, :3] = _quat_matrix(quat)
    t[:3, 3] = pos
    return t


def _inverse(t: np.ndarray) -> np.ndarray:
    inv = np.eye(4)
    inv[:3, :3] = t[:3, :3].T
    inv[:3, 3] = -t[:3, :3].T @ t[:3, 3]
    return inv


def _axis_angle(axis, angle: float) -> np.ndarray:
    quat = np.zeros(4)
    mujoco.mju_axisAngle2Quat(quat, np.asarray(axis, dtype=np.float64), float(angle))
    return _quat_matrix(quat)


def joint_motion(joint_type: str, axis, value: float) -> np.ndarray:
    """The URDF joint's motion at ``value``: rotation about ``axis`` (revolute) or translation along it."""
    t = np.eye(4)
    if joint_type == "revolute":
        t[:3, :3] = _axis_angle(axis, value)
    elif joint_type == "prismatic":
        t[:3, 3] = np.asarray(axis, dtype=np.float64) * value
    return t


def rpy(rotation: np.ndarray) -> tuple[float, float, float]:
    """URDF roll, pitch, yaw of a rotation matrix: ``R = Rz(yaw) @ Ry(pitch) @ Rx(roll)`` (fixed axes x, y, z);
    at pitch +-90 degrees (gimbal lock) yaw is 0 and roll takes the rest."""
    r = np.asarray(rotation, dtype=np.float64)
    pitch = math.atan2(-r[2, 0], math.hypot(r[0, 0], r[1, 0]))
    if math.hypot(r[0, 0], r[1, 0]) > 1e-9:
        return math.atan2(r[2, 1], r[2, 2]), pitch, math.atan2(r[1, 0], r[0, 0])
    return math.atan2(-r[1, 2], r[1, 1]), pitch, 0.0


def _num(value: float) -> str:
    value = float(value)
    return "0" if abs(value) < 1e-12 else f"{value:.15g}"


def _nums(values) -> str:
    return " ".join(_num(v) for v in values)


# ------------------------------------------------------------------------------------------------ the model


def robot_model_xml() -> str:
    """The robot alone as a MuJoCo model, with the scene compiler's settings (angles in radians, autolimits)."""
    body, actuators = robot_model.robot_mjcf()
    return (
        f'<mujoco model="{ROBOT_NAME}"><compiler angle="radian" autolimits="true"/>'
        f"<worldbody>{body}</worldbody><actuator>{actuators}</actuator></mujoco>"
    )


def _geom_visuals(model: mujoco.MjModel, geom: int, in_link: np.ndarray, link: str) -> list[Visual]:
    """The URDF primitives of one geom (``in_link``: the geom's body frame in the link's frame)."""
    kind = int(model.geom_type[geom])
    size = model.geom_size[geom]
    origin = in_link @ _transform(model.geom_pos[geom], model.geom_quat[geom])
    name = _strip(model.geom(geom).name) or f"{link}_geom{geom - int(model.body_geomadr[model.geom_bodyid[geom]])}"
    red, green, blue, alpha = (float(c) for c in model.geom_rgba[geom])
    rgba = (red, green, blue, alpha)
    collision = bool(model.geom_contype[geom] or model.geom_conaffinity[geom])
    if kind == mujoco.mjtGeom.mjGEOM_BOX:
        return [Visual(name, "box", tuple(2 * float(s) for s in size[:3]), origin, rgba, collision)]
    if kind == mujoco.mjtGeom.mjGEOM_CYLINDER:
        return [Visual(name, "cylinder", (float(size[0]), 2 * float(size[1])), origin, rgba, collision)]
    if kind == mujoco.mjtGeom.mjGEOM_SPHERE:
        return [Visual(name, "sphere", (float(size[0]),), origin, rgba, collision)]
    if kind == mujoco.mjtGeom.mjGEOM_CAPSULE:  # along the geom's z, half-length size[1]
        radius, half = float(size[0]), float(size[1])
        ends = []
        for suffix, z in (("end0", -half), ("end1", half)):
            shift = np.eye(4)
            shift[2, 3] = z
            ends.append(Visual(f"{name}_{suffix}", "sphere", (radius,), origin @ shift, rgba, collision))
        return [Visual(name, "cylinder", (radius, 2 * half), origin, rgba, collision), *ends]
    raise UrdfError(f"geom {name!r} of link {link!r}: MuJoCo geom type {mujoco.mjtGeom(kind).name} has no URDF primitive")


def _walk(model: mujoco.MjModel) -> list[Link]:
    """The URDF links in tree order (parents before children), root first."""
    root = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, robot_model.ROBOT_PREFIX + "base")
    if root < 0:
        raise UrdfError(f"the robot model has no body {robot_model.ROBOT_PREFIX}base")
    children: dict[int, list[int]] = {}
    for body in range(1, model.nbody):
        children.setdefault(int(model.body_parentid[body]), []).append(body)
    cameras: dict[int, list[int]] = {}
    for cam in range(model.ncam):
        cameras.setdefault(int(model.cam_bodyid[cam]), []).append(cam)

    links: list[Link] = []
    by_name: dict[str, Link] = {}
    visuals: dict[str, list[Visual]] = {}

    def folded(body: int) -> bool:
        return body != root and model.body_jntnum[body] == 0 and model.body_geomnum[body] == 0 and model.body_mass[body] == 0

    def add(link: Link) -> None:
        if link.name in by_name:
            raise UrdfError(f"two links named {link.name!r}")
        links.append(link)
        by_name[link.name] = link
        visuals[link.name] = []
        if link.parent is not None:
            by_name[link.parent].children.append(link.name)

    def visit(body: int, owner: str, in_owner: np.ndarray) -> None:
        """``body``'s geoms, cameras and children, ``body`` being (part of) link ``owner`` at ``in_owner``."""
        for geom in range(int(model.body_geomadr[body]), int(model.body_geomadr[body] + model.body_geomnum[body])):
            visuals[owner].extend(_geom_visuals(model, geom, in_owner, owner))
        for cam in cameras.get(body, []):
            cam_name = model.camera(cam).name
            if not cam_name.startswith(_CAMERA_PREFIX):
                raise UrdfError(f"camera {cam_name!r} is not named {_CAMERA_PREFIX}<view>")
            mount = in_owner @ _transform(model.cam_pos[cam], model.cam_quat[cam])
            mount[:3, :3] = mount[:3, :3] @ OPTICAL
            frame = optical_frame(cam_name[len(_CAMERA_PREFIX):])
            add(Link(frame, owner, f"{frame}_joint", "fixed", mount, -1))
        for child in children.get(body, []):
            local = in_owner @ _transform(model.body_pos[child], model.body_quat[child])
            if folded(child):
                visit(child, owner, local)
                continue
            link = _body_link(model, child, owner, local)
            add(link)
            visit(child, link.name, np.eye(4))

    add(_body_link(model, root, None, np.eye(4)))
    visit(root, BASE_LINK, np.eye(4))
    return [replace(link, visuals=tuple(visuals[link.name])) for link in links]


def _body_link(model: mujoco.MjModel, body: int, parent: str | None, origin: np.ndarray) -> Link:
    name = BASE_LINK if parent is None else _strip(model.body(body).name)
    mass = float(model.body_mass[body])
    inertia_origin: np.ndarray | None = None
    inertia: tuple[float, float, float] | None = None
    if mass > 0:
        inertia_origin = _transform(model.body_ipos[body], model.body_iquat[body])
        ixx, iyy, izz = (float(v) for v in model.body_inertia[body])
        inertia = (ixx, iyy, izz)
    else:
        mass = 0.0  # a massless link has no <inertial>
    if parent is None:  # the root: its joints (the planar base) are odom -> base_link, not URDF joints
        return Link(name, None, "", "root", np.eye(4), body, mass=mass, inertia_origin=inertia_origin, inertia=inertia)
    njnt = int(model.body_jntnum[body])
    if njnt == 0:
        return Link(name, parent, f"{name}_joint", "fixed", origin, body, mass=mass, inertia_origin=inertia_origin, inertia=inertia)
    if njnt > 1:
        raise UrdfError(f"body {model.body(body).name!r} has {njnt} joints; a URDF link has one")
    jnt = int(model.body_jntadr[body])
    joint_name = _strip(model.joint(jnt).name)
    kinds = {int(mujoco.mjtJoint.mjJNT_HINGE): "revolute", int(mujoco.mjtJoint.mjJNT_SLIDE): "prismatic"}
    kind = kinds.get(int(model.jnt_type[jnt]))
    if kind is None:
        raise UrdfError(f"joint {joint_name!r}: {mujoco.mjtJoint(int(model.jnt_type[jnt])).name} has no URDF form here")
    if np.any(np.abs(model.jnt_pos[jnt]) > 1e-12):
        raise UrdfError(f"joint {joint_name!r} is anchored off its body's origin ({model.jnt_pos[jnt]}); not supported")
    if not model.jnt_limited[jnt]:
        raise UrdfError(f"joint {joint_name!r} has no range; a URDF {kind} joint needs limits")
    ax, ay, az = (float(v) for v in model.jnt_axis[jnt])
    axis = (ax, ay, az)
    adr = int(model.jnt_qposadr[jnt])
    # MuJoCo's body frame is (pos, quat) at qpos0 (the joint's ``ref``); the URDF origin is the frame at 0.
    origin = origin @ joint_motion(kind, axis, -float(model.qpos0[adr]))
    limits = (float(model.jnt_range[jnt][0]), float(model.jnt_range[jnt][1]))
    return Link(name, parent, joint_name, kind, origin, body, axis, limits, adr, mass=mass, inertia_origin=inertia_origin, inertia=inertia)


# ------------------------------------------------------------------------------------------------ URDF text


def _origin(parent: ET.Element, transform: np.ndarray) -> None:
    ET.SubElement(parent, "origin", xyz=_nums(transform[:3, 3]), rpy=_nums(rpy(transform[:3, :3])))


def _geometry(parent: ET.Element, visual: Visual) -> None:
    geometry = ET.SubElement(parent, "geometry")
    if visual.kind == "box":
        ET.SubElement(geometry, "box", size=_nums(visual.size))
    elif visual.kind == "cylinder":
        ET.SubElement(geometry, "cylinder", radius=_num(visual.size[0]), length=_num(visual.size[1]))
    else:
        ET.SubElement(geometry, "sphere", radius=_num(visual.size[0]))


def _material_name(rgba) -> str:
    return "rgba_" + "_".join(f"{c:.3g}" for c in rgba)


def urdf_xml(links: list[Link], name: str = ROBOT_NAME) -> ET.Element:
    """The ``<robot>`` element of a link tree from :func:`_walk`."""
    robot = ET.Element("robot", name=name)
    robot.append(ET.Comment(" Generated by homiebot.sim.mujoco.urdf from the simulator's robot MJCF; do not edit. "))
    colours = sorted({v.rgba for link in links for v in link.visuals})
    for rgba in colours:
        material = ET.SubElement(robot, "material", name=_material_name(rgba))
        ET.SubElement(material, "color", rgba=" ".join(f"{c:.6g}" for c in rgba))
    for link in links:
        element = ET.SubElement(robot, "link", name=link.name)
        if link.mass > 0:
            assert link.inertia_origin is not None and link.inertia is not None  # _body_link sets them with a mass
            inertial = ET.SubElement(element, "inertial")
            _origin(inertial, link.inertia_origin)
            ET.SubElement(inertial, "mass", value=_num(link.mass))
            ixx, iyy, izz = link.inertia
            ET.SubElement(inertial, "inertia", ixx=_num(ixx), ixy="0", ixz="0", iyy=_num(iyy), iyz="0", izz=_num(izz))
        for v in link.visuals:
            visual = ET.SubElement(element, "visual", name=v.name)
            _origin(visual, v.origin)
            _geometry(visual, v)
            ET.SubElement(visual, "material", name=_material_name(v.rgba))
        for v in link.visuals:
            if v.collision:
                collision = ET.SubElement(element, "collision", name=f"{v.name}_collision")
                _origin(collision, v.origin)
                _geometry(collision, v)
    for link in links:
        if link.parent is None:
            continue
        joint = ET.SubElement(robot, "joint", name=link.joint, type=link.joint_type)
        _origin(joint, link.origin)
        ET.SubElement(joint, "parent", link=link.parent)
        ET.SubElement(joint, "child", link=link.name)
        if link.joint_type != "fixed":
            ET.SubElement(joint, "axis", xyz=_nums(link.axis))
            assert link.limits is not None  # _body_link gives every movable joint its range
            lower, upper = link.limits
            ET.SubElement(joint, "limit", lower=_num(lower), upper=_num(upper), effort="0", velocity="0")
    ET.indent(robot, space="  ")
    return robot


class RobotKinematics:
    """The compiled robot and its URDF link tree; forward kinematics by MuJoCo at given joint positions.

    Not thread-safe (one ``MjData``); the base sits at the origin, so MuJoCo's world frame is ``base_link``."""

    def __init__(self) -> None:
        self.model = mujoco.MjModel.from_xml_string(robot_model_xml())
        self.data = mujoco.MjData(self.model)
        self.links: tuple[Link, ...] = tuple(_walk(self.model))
        self._by_name = {link.name: link for link in self.links}
        self._body_links = [(link.parent, link) for link in self.links if link.body >= 0 and link.parent is not None]
        # A camera on a moving link (the head camera on the head tilt link): its fixed mount on that link goes on /tf
        # with the links, as robot_state_publisher sends every fixed joint; the base's camera mounts are /tf_static's.
        self._head_mounts = [(link.parent, link) for link in self.links
                             if link.body < 0 and link.parent is not None and link.parent != BASE_LINK]
        self._movable = {link.joint: link.qpos_adr for link in self.links if link.qpos_adr is not None}

    def link(self, name: str) -> Link:
        return self._by_name[name]

    @property
    def joint_names(self) -> tuple[str, ...]:
        """The movable joints, in tree order: the URDF's revolute and prismatic joints."""
        return tuple(self._movable)

    def urdf(self) -> str:
        return '<?xml version="1.0"?>\n' + ET.tostring(urdf_xml(list(self.links)), encoding="unicode") + "\n"

    def _forward(self, positions: Mapping[str, float]) -> None:
        """MuJoCo's forward kinematics at ``positions`` (by URDF joint name; others at the reference pose)."""
        self.data.qpos[:] = self.model.qpos0
        for joint, value in positions.items():
            adr = self._movable.get(joint)
            if adr is not None:
                self.data.qpos[adr] = value
        mujoco.mj_kinematics(self.model, self.data)

    def _body_pose(self, body: int) -> np.ndarray:
        return _transform(self.data.xpos[body], self.data.xquat[body])

    def link_poses(self, positions: Mapping[str, float]) -> dict[str, np.ndarray]:
        """Every body link's pose in ``base_link`` (4x4) by MuJoCo's ``xpos`` / ``xquat`` at ``positions``."""
        self._forward(positions)
        base = _inverse(self._body_pose(self.link(BASE_LINK).body))
        return {link.name: base @ self._body_pose(link.body) for link in self.links if link.body >= 0}

    def link_transforms(self, positions: Mapping[str, float]) -> list[tuple[str, str, np.ndarray]]:
        """``(parent, child, parent -> child 4x4)`` for every link hung from a body link by a joint (movable or
        fixed), at ``positions``, and the optical frame of a camera on a moving link (its fixed mount): what ``/tf``
        needs beside ``odom -> base_link`` and the base's camera mounts."""
        self._forward(positions)
        return [
            (parent, link.name, _inverse(self._body_pose(self._by_name[parent].body)) @ self._body_pose(link.body))
            for parent, link in self._body_links
        ] + [(parent, link.name, link.origin.copy()) for parent, link in self._head_mounts]


def robot_urdf() -> str:
    """The robot's URDF (XML text) from the simulator's own MJCF: see the module docstring."""
    return RobotKinematics().urdf()
