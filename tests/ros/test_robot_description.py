"""The robot model on the wire: the sim bridge latches its URDF on /robot_description and sends a transform for
every robot link, so rviz's RobotModel draws the robot with no robot_state_publisher.

The bridge runs alone in its own process (as in test_ros_tf.py); a client that joins after it has started
still receives the URDF (transient local), which is the text :func:`homiebot.sim.mujoco.urdf.robot_urdf`
generates. The URDF's links cover every robot frame on /tf and /tf_static with the same parents, every link
but the root has a transform, and the arm links' /tf equal the URDF's forward kinematics at the /joint_states
of the same instant (after a reset: the stowed arm; after a pick: the carry pose).
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from ros_helpers import graph_environment

pytestmark = [pytest.mark.ros, pytest.mark.slow]

SCENE, OBJECT, RECEPTACLE = "apartment_1", "green_can", "brown_table"


class _Client:
    """An rclpy node in its own context, spun from the test's thread."""

    def __init__(self) -> None:
        import rclpy
        import rclpy.executors
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String
        from tf2_msgs.msg import TFMessage

        self.rclpy = rclpy
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("robot_description_test_client", context=self.context)
        self.executor = rclpy.executors.SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.messages: dict[str, list] = {"/robot_description": [], "/tf": [], "/tf_static": [], "/joint_states": []}
        reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        # What rviz's RobotModel (set to transient local in launch/rviz/homie.rviz) and tf2's static listener ask for.
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        for topic, msg_type, qos in (("/robot_description", String, latched), ("/tf", TFMessage, reliable),
                                     ("/tf_static", TFMessage, latched), ("/joint_states", JointState, reliable)):
            self.node.create_subscription(msg_type, topic, self.messages[topic].append, qos)

    def wait(self, future, timeout_s: float):
        self.executor.spin_until_future_complete(future, timeout_sec=timeout_s)
        assert future.done(), "no answer from the sim bridge"
        return future.result()

    def spin_until(self, predicate, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not predicate() and time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=0.05)
        return predicate()

    def at(self, stamp, topic: str) -> list:
        return [m for m in self.messages[topic]
                if (m.transforms[0].header.stamp if hasattr(m, "transforms") else m.header.stamp) == stamp]

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self.rclpy.try_shutdown(context=self.context)


def _matrix(transform) -> np.ndarray:
    from geometry_msgs.msg import Pose

    from homiebot.ros import convert

    pose = Pose()
    pose.position.x, pose.position.y, pose.position.z = (transform.translation.x, transform.translation.y,
                                                         transform.translation.z)
    pose.orientation = transform.rotation
    return convert.pose_to_matrix(pose)


def _edges(messages) -> dict[tuple[str, str], np.ndarray]:
    return {(t.header.frame_id, t.child_frame_id): _matrix(t.transform) for msg in messages for t in msg.transforms}


@pytest.fixture(scope="module")
def wire(tmp_path_factory, ros_domain):
    """The bridge alone; the client joins once it runs (a late joiner), resets, looks, goes to the table, picks
    the can and looks again: per look, the /tf messages and the /joint_states of the rendered instant."""
    from homie_msgs.action import Manipulate, Navigate
    from homie_msgs.srv import RenderViews, ResetEpisode
    from rclpy.action import ActionClient

    from homiebot.ros import convert
    from homiebot.ros.supervisor import GraphSpec, Supervisor, load_graph

    tmp_path = tmp_path_factory.mktemp("robot_description")
    nodes = [n for n in load_graph().nodes if n.name == "sim_bridge"]
    supervisor = Supervisor(GraphSpec(nodes=nodes), overrides={"sim_bridge": {"render": False}},
                            env=graph_environment(ros_domain), log_dir=tmp_path / "logs")
    client = None
    record: dict = {}
    try:
        supervisor.start()
        client = _Client()
        reset = client.node.create_client(ResetEpisode, "/sim/reset")
        render = client.node.create_client(RenderViews, "/sim/render_views")
        assert reset.wait_for_service(timeout_sec=60) and render.wait_for_service(timeout_sec=60)
        # Published once at start-up, before this client existed: received only because it is latched.
        assert client.spin_until(lambda: client.messages["/robot_description"], 10.0), "no /robot_description"
        assert client.wait(reset.call_async(ResetEpisode.Request(scene=SCENE, seed=0)), 60).success

        def look(key: str) -> None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                views = client.wait(render.call_async(RenderViews.Request()), 30).views
                stamp = views.header.stamp

                def arrived() -> bool:
                    tf = client.at(stamp, "/tf")  # noqa: B023
                    return bool(client.at(stamp, "/joint_states")) and len(tf) >= 2  # noqa: B023

                if client.spin_until(arrived, 0.5):
                    record[f"joints_{key}"] = client.at(stamp, "/joint_states")[-1]
                    record[f"tf_{key}"] = client.at(stamp, "/tf")
                    return
            raise AssertionError("no /joint_states or /tf from the sim bridge")

        look("before")
        navigate = ActionClient(client.node, Navigate, "/sim/navigate")
        manipulate = ActionClient(client.node, Manipulate, "/sim/manipulate")
        assert navigate.wait_for_server(timeout_sec=30) and manipulate.wait_for_server(timeout_sec=30)
        for action, goal in ((navigate, Navigate.Goal(target=RECEPTACLE, reset_arm_first=True)),
                             (manipulate, Manipulate.Goal(operation=Manipulate.Goal.PICK, object=OBJECT))):
            handle = client.wait(action.send_goal_async(goal), 30)
            assert handle.accepted
            result = client.wait(handle.get_result_async(), 60).result
            assert convert.skill_result_from_msg(result.result).success, result.result
        look("after")
        client.spin_until(lambda: client.messages["/tf_static"], 5.0)
        record["tf_static"] = list(client.messages["/tf_static"])
        record["descriptions"] = list(client.messages["/robot_description"])
    finally:
        if client is not None:
            client.close()
        codes = supervisor.stop()
    logs = "\n".join(p.read_text()[-3000:] for p in (tmp_path / "logs").glob("*.log"))
    assert all(code == 0 for code in codes.values()), f"{codes}\n{logs}"
    return record


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
        edges = {**_edges(wire[f"tf_{key}"]), **_edges(wire["tf_static"])}
        robot_edges = {(parent, child) for parent, child in edges if child != convert.ODOM_FRAME}
        assert {child for _, child in robot_edges} <= links
        for parent, child in robot_edges:
            if child != convert.BASE_FRAME:  # odom -> base_link: the base pose, the URDF's root
                assert urdf_parent[child] == parent, child
        assert {child for _, child in robot_edges} == links  # base_link from odom, the others from their parents
        assert (convert.ODOM_FRAME, convert.BASE_FRAME) in robot_edges
    static_children = {child for _, child in _edges(wire["tf_static"])}
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
        arm_edges = {edge: m for edge, m in _edges(wire[f"tf_{key}"]).items() if edge[0] not in ("map", "odom")}
        assert len(arm_edges) == 13
        for (_, child), matrix in arm_edges.items():
            worst = max(worst, float(np.abs(matrix - local(joints[child], positions)).max()))
    for (_, child), matrix in _edges(wire["tf_static"]).items():
        worst = max(worst, float(np.abs(matrix - local(joints[child], {})).max()))
    assert worst < 1e-6
