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
from pathlib import Path

import numpy as np
import pytest

from homiebot.testing.ros_helpers import PICK_OBJECT, bridge_pick_episode, tf_edges

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


@pytest.fixture(scope="module")
def episode(tmp_path_factory, ros_domain):
    """The bridge alone in its own process; reset, look, go to the table, pick the can, look again
    (:func:`ros_helpers.bridge_pick_episode`). Here ``tf_<key>`` is the base chain's /tf message of the instant
    (the robot links' message is checked in test_robot_description.py)."""
    record = bridge_pick_episode(tmp_path_factory.mktemp("tf"), ros_domain)
    for key in ("before", "after"):
        record[f"tf_{key}"] = [m for m in record[f"tf_{key}"] if any(t.child_frame_id == "base_link" for t in m.transforms)][-1]
    return record


def test_tf_tree_from_map_to_the_camera_optical_frames(episode):
    from homiebot.ros import convert

    static = tf_edges(episode["tf_static"])
    assert set(static) == {(convert.BASE_FRAME, convert.optical_frame(v)) for v in VIEWS}
    # Sent once: the mounts do not move on this robot, however far the base drove.
    assert len(episode["tf_static"]) == 1
    for key in ("before", "after"):
        dynamic = tf_edges([episode[f"tf_{key}"]])
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
    before = tf_edges([episode["tf_before"]])[(convert.ODOM_FRAME, convert.BASE_FRAME)]
    after = tf_edges([episode["tf_after"]])[(convert.ODOM_FRAME, convert.BASE_FRAME)]
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
    assert views.held_object == PICK_OBJECT


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
