"""The robot's URDF (homiebot.sim.mujoco.urdf) against the simulator's own MuJoCo model.

The real check is forward kinematics: the URDF's joint origins and axes, composed here independently
(numpy + scipy's Rotation), put every link where MuJoCo's ``xpos`` / ``xquat`` have the body in the simulator
at the same joint positions, so rviz draws the robot where the simulator has it. Also: the XML is a tree
rooted at ``base_link``, joint names and limits are the MJCF's, the optical frames are the renderer's camera
poses seen from the base (what the sim bridge latches on ``/tf_static``), the visuals are the MJCF geoms, and
``homie sim urdf`` writes it.
"""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pytest
from scipy.spatial.transform import Rotation
from typer.testing import CliRunner

from homiebot.cli import build_app
from homiebot.sim.mujoco import robot
from homiebot.sim.mujoco import urdf as urdf_module
from homiebot.sim.mujoco.urdf import BASE_LINK, RobotKinematics, UrdfError, robot_urdf

MOVABLE = ["torso_lift", "head_pan", "head_tilt", *robot.ARM_JOINTS, *robot.FINGER_JOINTS]
VIEWS = list(robot.VIEW_YAWS)
BODY_LINKS = [
    "base_link", "torso_lift_link", "head_pan_link", "head_tilt_link", "shoulder_pan_link", "shoulder_lift_link",
    "upperarm_roll_link", "elbow_flex_link", "forearm_roll_link", "wrist_flex_link", "wrist_roll_link",
    "gripper_link", "finger_left_link", "finger_right_link",
]
TOLERANCE = 1e-6


@pytest.fixture(scope="module")
def root() -> ET.Element:
    return ET.fromstring(robot_urdf())


@pytest.fixture(scope="module")
def scene(headless):
    """The simulator's compiled scene (the robot inside a library scene) and its data."""
    headless.reset("apartment_1", seed=0)
    return headless._compiled, headless._data


# ------------------------------------------------------------------------------------------------ URDF maths


def _origin(element: ET.Element | None) -> np.ndarray:
    t = np.eye(4)
    if element is None:
        return t
    xyz = [float(v) for v in element.get("xyz", "0 0 0").split()]
    rpy = [float(v) for v in element.get("rpy", "0 0 0").split()]
    t[:3, :3] = Rotation.from_euler("xyz", rpy).as_matrix()  # extrinsic x, y, z = Rz(yaw) Ry(pitch) Rx(roll)
    t[:3, 3] = xyz
    return t


def _motion(joint: ET.Element, value: float) -> np.ndarray:
    t = np.eye(4)
    kind = joint.get("type")
    if kind == "fixed":
        return t
    axis = np.array([float(v) for v in joint.find("axis").get("xyz").split()])
    axis /= np.linalg.norm(axis)
    if kind == "revolute":
        t[:3, :3] = Rotation.from_rotvec(axis * value).as_matrix()
    elif kind == "prismatic":
        t[:3, 3] = axis * value
    else:
        raise AssertionError(f"unexpected joint type {kind}")
    return t


def urdf_fk(root: ET.Element, positions: dict[str, float]) -> dict[str, np.ndarray]:
    """Every link's pose in base_link from the URDF text alone."""
    joints = {j.find("child").get("link"): j for j in root.findall("joint")}
    poses: dict[str, np.ndarray] = {BASE_LINK: np.eye(4)}

    def pose(link: str) -> np.ndarray:
        if link not in poses:
            joint = joints[link]
            parent = pose(joint.find("parent").get("link"))
            poses[link] = parent @ _origin(joint.find("origin")) @ _motion(joint, positions.get(joint.get("name"), 0.0))
        return poses[link]

    for link in root.findall("link"):
        pose(link.get("name"))
    return poses


def _mj_pose(data, body: int) -> np.ndarray:
    t = np.eye(4)
    t[:3, :3] = Rotation.from_quat(data.xquat[body], scalar_first=True).as_matrix()
    t[:3, 3] = data.xpos[body]
    return t


def _random_positions(model, rng: np.random.Generator) -> dict[str, float]:
    positions = {}
    for joint in MOVABLE:
        low, high = model.jnt_range[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, robot.ROBOT_PREFIX + joint)]
        positions[joint] = float(rng.uniform(low, high))
    return positions


def _pose_error(a: np.ndarray, b: np.ndarray) -> float:
    """Largest of the translation error (m) and the rotation error (rad) between two transforms."""
    rotation = Rotation.from_matrix(a[:3, :3].T @ b[:3, :3]).magnitude()
    return max(float(np.linalg.norm(a[:3, 3] - b[:3, 3])), float(rotation))


# ------------------------------------------------------------------------------------------------ structure


def test_parses_as_one_tree_rooted_at_base_link(root):
    assert root.tag == "robot"
    links = [link.get("name") for link in root.findall("link")]
    assert len(links) == len(set(links))
    joints = root.findall("joint")
    names = [j.get("name") for j in joints]
    assert len(names) == len(set(names))
    children = [j.find("child").get("link") for j in joints]
    parents = [j.find("parent").get("link") for j in joints]
    assert set(children) | set(parents) <= set(links)  # every joint's parent and child exists
    assert len(children) == len(set(children)) == len(links) - 1  # one parent per link but the root
    assert set(links) - set(children) == {BASE_LINK}
    parent_of = dict(zip(children, parents))
    for link in links:  # every link reaches base_link (no cycle, no second root)
        seen = set()
        node = link
        while node != BASE_LINK:
            assert node not in seen
            seen.add(node)
            node = parent_of[node]


def test_links_are_the_robot_bodies_and_the_optical_frames(root):
    links = {link.get("name") for link in root.findall("link")}
    assert links == set(BODY_LINKS) | {f"{v}_camera_optical_frame" for v in [*VIEWS, robot.HEAD_CAMERA]}
    assert not links & {"map", "odom", "world"}
    assert len(root.findall("link")) == 19 and len(root.findall("joint")) == 18


def test_movable_joints_are_the_joint_states_names_with_the_mjcf_limits(root, scene):
    compiled, _ = scene
    model = compiled.model
    movable = {j.get("name"): j for j in root.findall("joint") if j.get("type") != "fixed"}
    # /joint_states carries these plus the planar base (base_x, base_y, base_yaw: odom -> base_link on /tf).
    assert list(movable) == MOVABLE
    assert not set(robot.BASE_JOINTS) & {j.get("name") for j in root.findall("joint")}
    for name, joint in movable.items():
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, robot.ROBOT_PREFIX + name)
        expected_type = {int(mujoco.mjtJoint.mjJNT_HINGE): "revolute", int(mujoco.mjtJoint.mjJNT_SLIDE): "prismatic"}
        assert joint.get("type") == expected_type[int(model.jnt_type[jid])]
        limit = joint.find("limit")
        assert (float(limit.get("lower")), float(limit.get("upper"))) == tuple(model.jnt_range[jid])
        axis = [float(v) for v in joint.find("axis").get("xyz").split()]
        np.testing.assert_array_equal(axis, model.jnt_axis[jid])
        assert joint.find("child").get("link") == model.body(model.jnt_bodyid[jid]).name.removeprefix(robot.ROBOT_PREFIX)
    # The ranges are the ones robot.py writes (radians; the compiler takes them as they are).
    assert movable["torso_lift"].find("limit").get("upper") == "0.386"
    assert movable["elbow_flex"].find("limit").get("lower") == "-2.6"
    assert movable["finger_left"].find("limit").get("upper") == str(robot.FINGER_OPEN)


def test_fixed_joints_and_their_parents(root):
    fixed = {j.find("child").get("link"): j.find("parent").get("link") for j in root.findall("joint") if j.get("type") == "fixed"}
    assert fixed == {"gripper_link": "wrist_roll_link", **{f"{v}_camera_optical_frame": BASE_LINK for v in VIEWS},
                     f"{robot.HEAD_CAMERA}_camera_optical_frame": "head_tilt_link"}  # the head camera moves with the head


def test_visuals_are_the_mjcf_geoms_with_their_colours(root, scene):
    compiled, _ = scene
    model = compiled.model
    materials = {m.get("name"): [float(c) for c in m.find("color").get("rgba").split()] for m in root.findall("material")}
    by_link = {link.get("name"): link for link in root.findall("link")}
    shapes = {int(mujoco.mjtGeom.mjGEOM_BOX): ["box"], int(mujoco.mjtGeom.mjGEOM_CYLINDER): ["cylinder"],
              int(mujoco.mjtGeom.mjGEOM_CAPSULE): ["cylinder", "sphere", "sphere"]}
    for name in BODY_LINKS:
        body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, robot.ROBOT_PREFIX + ("base" if name == BASE_LINK else name))
        geoms = range(model.body_geomadr[body], model.body_geomadr[body] + model.body_geomnum[body])
        visuals = by_link[name].findall("visual")
        expected = [(shape, tuple(model.geom_rgba[g])) for g in geoms for shape in shapes[int(model.geom_type[g])]]
        got = [(v.find("geometry")[0].tag, tuple(np.float32(materials[v.find("material").get("name")]))) for v in visuals]
        assert got == expected, name
    base = by_link[BASE_LINK].findall("visual")
    cylinder = base[0].find("geometry/cylinder")
    assert (float(cylinder.get("radius")), float(cylinder.get("length"))) == (robot.BASE_RADIUS, 0.34)
    # Collision geometry: only what collides in the simulator (the base shell).
    assert [c.get("name") for link in root.findall("link") for c in link.findall("collision")] == ["base_shell_collision"]


def test_deterministic_text():
    assert robot_urdf() == robot_urdf()


# ------------------------------------------------------------------------------------------------ kinematics


def test_forward_kinematics_matches_the_simulators_mujoco_model(root, scene):
    """URDF FK (composed here) == MuJoCo's xpos / xquat of the simulator's scene, relative to the base body, at
    random joint positions within the limits and random base poses: rviz draws each link where MuJoCo has it."""
    compiled, data = scene
    model = compiled.model
    saved = data.qpos.copy()
    rng = np.random.default_rng(7)
    bodies = {name: mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, robot.ROBOT_PREFIX + ("base" if name == BASE_LINK else name))
              for name in BODY_LINKS}
    worst = 0.0
    try:
        configurations = [dict.fromkeys(MOVABLE, 0.0), {**dict.fromkeys(MOVABLE, 0.0), **robot.STOW_POSE},
                          {**dict.fromkeys(MOVABLE, 0.0), **robot.CARRY_POSE}]
        configurations += [_random_positions(model, rng) for _ in range(20)]
        for positions in configurations:
            for joint, value in positions.items():
                data.qpos[compiled.robot_qpos[joint]] = value
            for joint, value in zip(robot.BASE_JOINTS, (rng.uniform(0, 5), rng.uniform(0, 5), rng.uniform(-math.pi, math.pi))):
                data.qpos[compiled.robot_qpos[joint]] = value
            mujoco.mj_kinematics(model, data)
            base_inverse = np.linalg.inv(_mj_pose(data, bodies[BASE_LINK]))
            fk = urdf_fk(root, positions)
            for name, body in bodies.items():
                worst = max(worst, _pose_error(fk[name], base_inverse @ _mj_pose(data, body)))
    finally:
        data.qpos[:] = saved
        mujoco.mj_kinematics(model, data)
    print(f"URDF FK vs MuJoCo: max error {worst:.2e} over {len(configurations)} configurations x {len(bodies)} links")
    assert worst < TOLERANCE


def test_mujocos_own_urdf_importer_agrees(root, scene):
    """A third reading of the text: MuJoCo's URDF importer (static links kept) puts every link where the
    simulator has it, with the same joint names and ranges."""
    compiled, data = scene
    model = compiled.model
    copy = ET.fromstring(ET.tostring(root))
    ET.SubElement(ET.SubElement(copy, "mujoco"), "compiler", fusestatic="false", discardvisual="false")
    imported = mujoco.MjModel.from_xml_string(ET.tostring(copy, encoding="unicode"))
    imported_data = mujoco.MjData(imported)
    assert [imported.joint(j).name for j in range(imported.njnt)] == MOVABLE
    for j in range(imported.njnt):
        source = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, robot.ROBOT_PREFIX + imported.joint(j).name)
        np.testing.assert_allclose(imported.jnt_range[j], model.jnt_range[source], atol=1e-12)
    saved = data.qpos.copy()
    rng = np.random.default_rng(11)
    base = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, robot.ROBOT_PREFIX + "base")
    try:
        for _ in range(5):
            positions = _random_positions(model, rng)
            for joint, value in positions.items():
                data.qpos[compiled.robot_qpos[joint]] = value
                imported_data.qpos[imported.jnt_qposadr[mujoco.mj_name2id(imported, mujoco.mjtObj.mjOBJ_JOINT, joint)]] = value
            mujoco.mj_kinematics(model, data)
            mujoco.mj_kinematics(imported, imported_data)
            base_inverse = np.linalg.inv(_mj_pose(data, base))
            for name in BODY_LINKS:
                body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, robot.ROBOT_PREFIX + ("base" if name == BASE_LINK else name))
                mine = mujoco.mj_name2id(imported, mujoco.mjtObj.mjOBJ_BODY, name)
                assert _pose_error(_mj_pose(imported_data, mine), base_inverse @ _mj_pose(data, body)) < TOLERANCE, name
    finally:
        data.qpos[:] = saved
        mujoco.mj_kinematics(model, data)


def test_fk_moves_the_gripper(root):
    """Not vacuous: the gripper is somewhere else in the stowed and the carry pose (and where robot.py says)."""
    stowed = urdf_fk(root, robot.STOW_POSE)["gripper_link"][:3, 3]
    carry = urdf_fk(root, robot.CARRY_POSE)["gripper_link"][:3, 3]
    assert np.linalg.norm(stowed - carry) > 0.3
    assert carry[0] > 0.3 and carry[2] > 0.8


def test_robot_kinematics_is_the_urdf(root):
    """RobotKinematics (what the sim bridge publishes on /tf) agrees with the URDF text: poses and parents."""
    kinematics = RobotKinematics()
    assert kinematics.joint_names == tuple(MOVABLE)
    parents = {j.find("child").get("link"): j.find("parent").get("link") for j in root.findall("joint")}
    rng = np.random.default_rng(3)
    for _ in range(10):
        positions = _random_positions(kinematics.model, rng)
        fk = urdf_fk(root, positions)
        poses = kinematics.link_poses(positions)
        assert set(poses) == set(BODY_LINKS)
        for name, pose in poses.items():
            assert _pose_error(pose, fk[name]) < TOLERANCE
        transforms = kinematics.link_transforms(positions)
        # Every body link but the root, each from its URDF parent, and the head camera's optical frame on the head
        # (the base's camera mounts are /tf_static's).
        head = f"{robot.HEAD_CAMERA}_camera_optical_frame"
        assert sorted(child for _, child, _ in transforms) == sorted([n for n in BODY_LINKS if n != BASE_LINK] + [head])
        for parent, child, transform in transforms:
            assert parents[child] == parent
            assert _pose_error(fk[parent] @ transform, fk[child]) < TOLERANCE


def test_optical_frames_are_the_camera_mounts_the_bridge_latches(root, headless):
    """base_link -> <view>_camera_optical_frame: each view's camera_to_world (the renderer's optical frame)
    seen from the base pose, as the sim bridge computes it for /tf_static, at two base poses."""
    fk = urdf_fk(root, {})
    for scene_name, seed in (("apartment_1", 0), ("apartment_1", 3)):
        observation = headless.reset(scene_name, seed=seed)
        pose = observation.robot_pose
        base = np.eye(4)
        base[:3, :3] = Rotation.from_euler("z", pose.yaw).as_matrix()
        base[:3, 3] = [pose.x, pose.y, 0.0]
        for view in VIEWS:
            mount = np.linalg.inv(base) @ observation.views[view].camera_to_world
            assert _pose_error(fk[f"{view}_camera_optical_frame"], mount) < TOLERANCE, view
    # Optical convention: z forward (front camera looks along +x, tilted down), y down.
    front = fk["front_camera_optical_frame"]
    assert front[0, 2] > 0.9 and front[2, 2] < 0 and front[2, 1] < 0
    assert front[2, 3] == pytest.approx(robot.CAMERA_HEIGHT)


def test_rpy_matches_scipy_including_gimbal_lock():
    rng = np.random.default_rng(0)
    rotations = list(Rotation.random(50, random_state=1).as_matrix())
    rotations += [Rotation.from_euler("xyz", [r, s * math.pi / 2, y]).as_matrix()
                  for r, y, s in zip(rng.uniform(-3, 3, 6), rng.uniform(-3, 3, 6), (1, -1, 1, -1, 1, -1))]
    for matrix in rotations:
        back = Rotation.from_euler("xyz", urdf_module.rpy(matrix)).as_matrix()
        np.testing.assert_allclose(back, matrix, atol=1e-9)


def test_unsupported_mjcf_is_refused():
    """A joint anchored off its body's origin (or a ball joint) has no faithful URDF here: an error, not a
    model drawn in the wrong place."""
    p = robot.ROBOT_PREFIX
    for joint in (f'<joint name="{p}j" type="hinge" pos="0.1 0 0" range="-1 1"/>', f'<joint name="{p}j" type="ball"/>'):
        model = mujoco.MjModel.from_xml_string(
            f'<mujoco><worldbody><body name="{p}base"><geom type="sphere" size="0.1"/>'
            f'<body name="{p}link" pos="0 0 1">{joint}<geom type="box" size="0.1 0.1 0.1"/></body></body></worldbody></mujoco>'
        )
        with pytest.raises(UrdfError, match="j"):
            urdf_module._walk(model)


# ------------------------------------------------------------------------------------------------ CLI

runner = CliRunner()


def test_cli_prints_the_urdf():
    result = runner.invoke(build_app(), ["sim", "urdf"])
    assert result.exit_code == 0, result.output
    assert result.stdout == robot_urdf()


def test_cli_writes_the_urdf_atomically(tmp_path):
    target = tmp_path / "homiebot.urdf"
    result = runner.invoke(build_app(), ["sim", "urdf", "-o", str(target)])
    assert result.exit_code == 0, result.output
    assert target.read_text() == robot_urdf()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["homiebot.urdf"]  # no temporary file left
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # a new file's mode, not mkstemp's 0600
    target.write_text("old")
    assert runner.invoke(build_app(), ["sim", "urdf", "--out", str(target)]).exit_code == 0
    assert target.read_text() == robot_urdf()


@pytest.mark.parametrize("where", ["missing_dir", "directory"])
def test_cli_unwritable_path_is_a_clear_error(tmp_path, where):
    target = tmp_path / "no" / "such" / "dir" / "x.urdf" if where == "missing_dir" else tmp_path
    result = runner.invoke(build_app(), ["sim", "urdf", "-o", str(target)])
    assert result.exit_code == 2  # an output path that cannot be written is bad input (docs/cli.md, exit codes)
    wanted = f"cannot write the URDF to {target}" if where == "missing_dir" else f"{target} is a directory"
    assert wanted in result.output and result.output.count("\n") == 1
    assert list(tmp_path.iterdir()) == []
