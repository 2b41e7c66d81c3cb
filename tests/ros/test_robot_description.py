"""The robot model on the wire: the sim bridge latches its URDF on /robot_description and sends a transform for
every robot link, so rviz's RobotModel draws the robot with no robot_state_publisher.

The bridge runs alone in its own process (as in test_ros_tf.py); a client that joins after it has started
still receives the URDF (transient local), which is the text :func:`homiebot.sim.mujoco.urdf.robot_urdf`
generates. The URDF's links cover every robot frame on /tf and /tf_static with the same parents, every link
but the root has a transform, and the arm links' /tf equal the URDF's forward kinematics at the /joint_states
of the same instant (after a reset: the stowed arm; after a pick: the carry pose).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from homiebot.testing.ros_helpers import bridge_pick_episode, tf_edges

pytestmark = [pytest.mark.ros, pytest.mark.slow]


@pytest.fixture(scope="module")
def wire(tmp_path_factory, ros_domain):
    """The bridge alone; the client joins once it runs (a late joiner), resets, looks, goes to the table, picks
    the can and looks again (:func:`ros_helpers.bridge_pick_episode`): per look, the /tf messages and the
    /joint_states of the rendered instant."""
    return bridge_pick_episode(tmp_path_factory.mktemp("robot_description"), ros_domain)


def test_robot_description_is_the_generated_urdf(wire):
    from homiebot.sim.mujoco.urdf import robot_urdf

    assert len(wire["descriptions"]) == 1  # sent once
    text = wire["descriptions"][0].data
    assert text == robot_urdf()
    assert ET.fromstring(text).tag == "robot"


def test_urdf_links_cover_the_robot_frames_on_tf_and_tf_static(wire):
    """Every child frame on /tf and /tf_static but odom (map -> odom is localisation) is a URDF link hung from
    the same parent; every URDF link but base_link has a transform, so rviz can place each one."""
    from homiebot.ros import convert

    root = ET.fromstring(wire["descriptions"][0].data)
    links = {link.get("name") for link in root.findall("link")}
    urdf_parent = {j.find("child").get("link"): j.find("parent").get("link") for j in root.findall("joint")}
    for key in ("before", "after"):
        edges = {**tf_edges(wire[f"tf_{key}"]), **tf_edges(wire["tf_static"])}
        robot_edges = {(parent, child) for parent, child in edges if child != convert.ODOM_FRAME}
        assert {child for _, child in robot_edges} <= links
        for parent, child in robot_edges:
            if child != convert.BASE_FRAME:  # odom -> base_link: the base pose, the URDF's root
                assert urdf_parent[child] == parent, child
        assert {child for _, child in robot_edges} == links  # base_link from odom, the others from their parents
        assert (convert.ODOM_FRAME, convert.BASE_FRAME) in robot_edges
    static_children = {child for _, child in tf_edges(wire["tf_static"])}
    assert static_children == {convert.optical_frame(v) for v in ("front", "left", "back", "right")}


def test_link_transforms_are_the_urdf_kinematics_at_the_joint_states(wire):
    """Each arm link's /tf equals the URDF's joint origin and motion at the /joint_states of the same instant
    (URDF composed here, independently of the bridge's MuJoCo kinematics); the camera mounts equal the URDF's
    fixed optical joints."""
    from scipy.spatial.transform import Rotation

    from homiebot.sim.mujoco import robot

    root = ET.fromstring(wire["descriptions"][0].data)
    joints = {j.find("child").get("link"): j for j in root.findall("joint")}

    def local(joint: ET.Element, positions: dict[str, float]) -> np.ndarray:
        origin = joint.find("origin")
        t = np.eye(4)
        t[:3, :3] = Rotation.from_euler("xyz", [float(v) for v in origin.get("rpy").split()]).as_matrix()
        t[:3, 3] = [float(v) for v in origin.get("xyz").split()]
        motion = np.eye(4)
        if joint.get("type") != "fixed":
            axis = np.array([float(v) for v in joint.find("axis").get("xyz").split()])
            value = positions[joint.get("name")]
            if joint.get("type") == "revolute":
                motion[:3, :3] = Rotation.from_rotvec(axis * value).as_matrix()
            else:
                motion[:3, 3] = axis * value
        return t @ motion

    worst = 0.0
    for key, arm in (("before", robot.STOW_POSE), ("after", robot.CARRY_POSE)):
        message = wire[f"joints_{key}"]
        positions = dict(zip(message.name, message.position))
        assert {j: positions[j] for j in robot.ARM_JOINTS} == pytest.approx(arm)
        arm_edges = {edge: m for edge, m in tf_edges(wire[f"tf_{key}"]).items() if edge[0] not in ("map", "odom")}
        assert len(arm_edges) == 14  # 13 links hung from their parents, and the head camera's mount on the head
        for (_, child), matrix in arm_edges.items():
            worst = max(worst, float(np.abs(matrix - local(joints[child], positions)).max()))
    for (_, child), matrix in tf_edges(wire["tf_static"]).items():
        worst = max(worst, float(np.abs(matrix - local(joints[child], {})).max()))
    assert worst < 1e-6
