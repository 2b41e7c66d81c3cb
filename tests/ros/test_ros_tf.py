"""The sim bridge's frames and joints on the wire: /tf, /tf_static and /joint_states during an episode.

* tf2_msgs in use (a ROS install's own, or the workspace's stand-in ros2_ws/compat/tf2_msgs where the ROS 2
  wheels lack it) has Jazzy's type hashes, so a real tf2 / rviz on another machine matches its topics;
* the bridge (its own process, over DDS) publishes ``map -> odom -> base_link`` on /tf (one message per instant;
  the robot's links travel in a message of their own, checked in test_robot_description.py) and the four camera
  mounts ``base_link -> <view>_camera_optical_frame`` latched on /tf_static; chained, they give the camera
  poses the views carry;
* /joint_states holds the base, torso, head, the seven arm joints and the fingers: the stowed arm after a
  reset, the carry pose after a pick.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pytest
from ros_helpers import graph_environment

pytestmark = [pytest.mark.ros, pytest.mark.slow]

#: RIHS01 type hashes of ROS 2 Jazzy's tf2_msgs (tf2_msgs 0.36), as Jazzy's rosidl generates them. The same
#: values appear in third-party code generated against a Jazzy install (the ``*__EXPECTED_HASH`` /
#: ``*__TYPE_HASH`` tables of rosidl_generator_c output that uses tf2_msgs) and, for the messages, are what
#: ``rosbags``' own ROS2_JAZZY type store computes from its copy of the definitions.
JAZZY_TF2_MSGS_HASHES = {
    "msg/TFMessage": "RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087",
    "msg/TF2Error": "RIHS01_db2485e7d6a0ec75bf087e058ee45df682acc3a621ca7780503d10aac141809a",
    "srv/FrameGraph": "RIHS01_0d1fbc6222c018ba5f33822904a2fdd4063705289956d3fdde07cd8c50fe8067",
    "action/LookupTransform": "RIHS01_0b8adf6bc0b5958879e3265b41a457e03558fe523890a81252c70eba97a82c5d",
}

SCENE, OBJECT, RECEPTACLE = "apartment_1", "green_can", "brown_table"
VIEWS = ("front", "left", "back", "right")


def _generated_hash(share: Path, interface: str) -> str:
    """The hash rosidl wrote for ``tf2_msgs/<interface>`` into the package's ``<interface>.json``."""
    description = json.loads((share / f"{interface}.json").read_text())
    hashes = {entry["type_name"]: entry["hash_string"] for entry in description["type_hashes"]}
    return hashes[f"tf2_msgs/{interface}"]


def test_tf2_msgs_in_use_has_jazzys_type_hashes():
    from ament_index_python.packages import get_package_share_directory

    share = Path(get_package_share_directory("tf2_msgs"))
    assert {name: _generated_hash(share, name) for name in JAZZY_TF2_MSGS_HASHES} == JAZZY_TF2_MSGS_HASHES


def test_tf2_msgs_hashes_agree_with_rosbags_jazzy_store():
    """An independent implementation of RIHS01 over an independent copy of the definitions."""
    rosbags_typesys = pytest.importorskip("rosbags.typesys")
    store = rosbags_typesys.get_typestore(rosbags_typesys.Stores.ROS2_JAZZY)
    for name in ("msg/TFMessage", "msg/TF2Error"):
        assert store.hash_rihs01(f"tf2_msgs/{name}") == JAZZY_TF2_MSGS_HASHES[name]


# ---------------------------------------------------------------------------------------------- on the wire


class _Client:
    """An rclpy node in its own context, spun from the test's thread (textbook single-threaded use)."""

    def __init__(self) -> None:
        import rclpy
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from nav_msgs.msg import Path
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import JointState
        from tf2_msgs.msg import TFMessage

        self.rclpy = rclpy
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("tf_test_client", context=self.context)
        self.executor = rclpy.executors.SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.messages: dict[str, list] = {"/tf": [], "/tf_static": [], "/joint_states": [], "/sim/path": [], "/clock": []}
        reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        # What tf2_ros's static listener asks for: reliable, transient local (the mounts are sent once).
        latched = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        for topic, msg_type, qos in (("/tf", TFMessage, reliable), ("/tf_static", TFMessage, latched),
                                     ("/joint_states", JointState, reliable), ("/sim/path", Path, latched),
                                     ("/clock", Clock, reliable)):
            self.node.create_subscription(msg_type, topic, self.messages[topic].append, qos)

    def wait(self, future, timeout_s: float):
        self.executor.spin_until_future_complete(future, timeout_sec=timeout_s)
        assert future.done(), "no answer from the sim bridge"
        return future.result()

    def at(self, stamp, topic: str) -> list:
        """The messages of ``topic`` stamped ``stamp``; on /tf, the base chain's (the ones that hold base_link)."""
        found = [m for m in self.messages[topic] if _stamp(m) == stamp]
        if topic == "/tf":
            found = [m for m in found if any(t.child_frame_id == "base_link" for t in m.transforms)]
        return found

    def spin_until(self, predicate, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not predicate() and time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=0.05)
        return predicate()

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


def _stamp(msg):
    """A /tf message's stamp (its transforms', all alike) or a JointState's."""
    return msg.transforms[0].header.stamp if hasattr(msg, "transforms") else msg.header.stamp


def _edges(tf_messages) -> dict[tuple[str, str], np.ndarray]:
    """(parent, child) -> the latest transform between them."""
    return {(t.header.frame_id, t.child_frame_id): _matrix(t.transform) for msg in tf_messages for t in msg.transforms}


@pytest.fixture(scope="module")
def episode(tmp_path_factory, ros_domain):
    """The bridge alone in its own process; reset, look, go to the table, pick the can, look again."""
    from homie_msgs.action import Manipulate, Navigate
    from homie_msgs.srv import RenderViews, ResetEpisode
    from rclpy.action import ActionClient

    from homiebot.ros import convert
    from homiebot.ros.supervisor import GraphSpec, Supervisor, load_graph

    tmp_path = tmp_path_factory.mktemp("tf")
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
        assert client.wait(reset.call_async(ResetEpisode.Request(scene=SCENE, seed=0)), 60).success

        def look(key: str) -> None:
            """Render until the bridge (which sends /tf and /joint_states only to matched subscribers) has sent
            both for the rendered instant (same stamp: the simulation time); keep the views and those two."""
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                views = client.wait(render.call_async(RenderViews.Request()), 30).views
                stamp = views.header.stamp
                if client.spin_until(lambda: client.at(stamp, "/joint_states") and client.at(stamp, "/tf"), 0.5):  # noqa: B023
                    record[f"views_{key}"] = views
                    record[f"joints_{key}"] = client.at(stamp, "/joint_states")[-1]
                    record[f"tf_{key}"] = client.at(stamp, "/tf")[-1]
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
        after = record["views_after"].header.stamp
        client.spin_until(lambda: any(m.header.stamp == after for m in client.messages["/sim/path"]), 5.0)
        record["paths"] = list(client.messages["/sim/path"])
        record["clock"] = list(client.messages["/clock"])
    finally:
        if client is not None:
            client.close()
        codes = supervisor.stop()
    logs = "\n".join(p.read_text()[-3000:] for p in (tmp_path / "logs").glob("*.log"))
    assert all(code == 0 for code in codes.values()), f"{codes}\n{logs}"
    return record


def test_tf_tree_from_map_to_the_camera_optical_frames(episode):
    from homiebot.ros import convert

    static = _edges(episode["tf_static"])
    assert set(static) == {(convert.BASE_FRAME, convert.optical_frame(v)) for v in VIEWS}
    # Sent once: the mounts do not move on this robot, however far the base drove.
    assert len(episode["tf_static"]) == 1
    for key in ("before", "after"):
        dynamic = _edges([episode[f"tf_{key}"]])
        assert set(dynamic) == {(convert.MAP_FRAME, convert.ODOM_FRAME), (convert.ODOM_FRAME, convert.BASE_FRAME)}
        np.testing.assert_allclose(dynamic[(convert.MAP_FRAME, convert.ODOM_FRAME)], np.eye(4), atol=1e-12)
        map_to_base = dynamic[(convert.MAP_FRAME, convert.ODOM_FRAME)] @ dynamic[(convert.ODOM_FRAME, convert.BASE_FRAME)]
        views = episode[f"views_{key}"]
        np.testing.assert_allclose(map_to_base[:3, 3], [views.robot_pose.position.x, views.robot_pose.position.y, 0.0], atol=1e-9)
        for view in views.views:
            # map -> odom -> base_link -> optical frame is where the view says its camera was.
            chained = map_to_base @ static[(convert.BASE_FRAME, convert.optical_frame(view.name))]
            np.testing.assert_allclose(chained, convert.pose_to_matrix(view.camera_pose), atol=1e-6)
    # The base drove to the table: odom -> base_link moved.
    before = _edges([episode["tf_before"]])[(convert.ODOM_FRAME, convert.BASE_FRAME)]
    after = _edges([episode["tf_after"]])[(convert.ODOM_FRAME, convert.BASE_FRAME)]
    assert np.linalg.norm(after[:2, 3] - before[:2, 3]) > 0.1


def test_joint_states_carry_the_arm_and_follow_a_pick(episode):
    from homiebot.sim.mujoco import robot

    before = dict(zip(episode["joints_before"].name, episode["joints_before"].position))
    after = dict(zip(episode["joints_after"].name, episode["joints_after"].position))
    expected = set(robot.BASE_JOINTS) | {"torso_lift", "head_pan", "head_tilt"} | set(robot.ARM_JOINTS) | set(robot.FINGER_JOINTS)
    assert set(before) == set(after) == expected
    for joint in robot.ARM_JOINTS:
        assert before[joint] == pytest.approx(robot.STOW_POSE[joint])
        assert after[joint] == pytest.approx(robot.CARRY_POSE[joint])
    assert any(not math.isclose(before[j], after[j]) for j in robot.ARM_JOINTS)
    # Open before the grasp, closed on the can (a 5.5 cm wide box) after it.
    assert before["finger_left"] == pytest.approx(robot.FINGER_OPEN)
    assert after["finger_left"] == after["finger_right"] < robot.FINGER_OPEN
    views = episode["views_after"]
    assert (after["base_x"], after["base_y"]) == pytest.approx((views.robot_pose.position.x, views.robot_pose.position.y))
    assert views.held_object == OBJECT


def test_travelled_path_is_published(episode):
    """/sim/path (nav_msgs/Path, map frame) grows with the Go to and ends where the base stands."""
    after = episode["views_after"].header.stamp
    paths = [m for m in episode["paths"] if m.header.stamp == after]  # topics arrive in no fixed order
    assert paths, "no /sim/path from the sim bridge for the views after the Go to"
    last = paths[-1]
    assert last.header.frame_id == "map" and len(last.poses) >= 2
    base = episode["tf_after"]
    odom_to_base = next(t for t in base.transforms if t.child_frame_id == "base_link").transform.translation
    end = last.poses[-1].pose.position
    assert abs(end.x - odom_to_base.x) < 0.05 and abs(end.y - odom_to_base.y) < 0.05


def test_clock_is_the_simulated_time(episode):
    """/clock starts at 0 at the reset, advances with the skills, and the views are stamped on it."""
    from homiebot.ros import convert

    seconds = [convert.time_seconds(m.clock) for m in episode["clock"]]
    assert seconds and seconds[0] == 0.0
    assert seconds == sorted(seconds) and seconds[-1] > 0.0
    assert seconds[-1] == pytest.approx(convert.time_seconds(episode["views_after"].header.stamp))
