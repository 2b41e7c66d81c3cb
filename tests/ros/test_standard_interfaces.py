"""The standard interfaces the skill layer talks to (nav2_msgs NavigateToPose, control_msgs FollowJointTrajectory
and GripperCommand) in the ROS 2 in use: a ROS install's own packages, or the workspace's stand-ins
ros2_ws/compat/{nav2_msgs,control_msgs} where the ROS 2 wheels lack them. A real robot's servers interoperate only
if the types are the upstream ones, so:

* the type hashes (RIHS01) rosidl wrote for them equal the hashes of the upstream Jazzy definitions
  (navigation2 1.3.13 @ f4108e5, control_msgs 5.8.0 @ f901df2). Those expected values were computed here, not
  read from a Jazzy install (no Jazzy nav2_msgs / control_msgs is reachable from this machine): by
  scripts/upstream_type_hashes.py, i.e. Jazzy's own rosidl (rosidl_adapter + rosidl_generator_type_description
  4.6.6), over the upstream files taken from those commits with git;
* an independent implementation of RIHS01 (rosbags' type store) over the workspace's definition text gives the
  same hashes for every message type it can express (the messages and each action's goal, result, feedback);
* the constants, which the hash does not cover, and the field lists equal the upstream ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.ros

#: RIHS01 hashes of the upstream Jazzy definitions (see the module docstring for how they were obtained).
UPSTREAM_HASHES = {
    "control_msgs/action/FollowJointTrajectory": "RIHS01_738ebcb7a2d7cfa42f9f1001cc99ce3a4383d1cfe508015d9be8485e4b1c66f6",
    "control_msgs/action/FollowJointTrajectory_Feedback": "RIHS01_3fd0aaecf71725121ae1ff7f01098a5e0da581e672be18a6b2c286cb43d96b49",
    "control_msgs/action/FollowJointTrajectory_FeedbackMessage": "RIHS01_80398fcb9674a79081a9906e2ccf0c804dd7cb15e22e362e606ee87186beab71",
    "control_msgs/action/FollowJointTrajectory_Goal": "RIHS01_8a9060704b269608f5a340934cc26e66869dd14bdac29e2e7fd9ec8b9882d205",
    "control_msgs/action/FollowJointTrajectory_Result": "RIHS01_8002e99ed2c14c6faa522f2a93c26d744c5982f254f9e98ff9c6f19789bdb220",
    "control_msgs/action/GripperCommand": "RIHS01_e17c0e644eccf14bea84a0a93e0977182872c2eb7873ca6694900059b46dbc84",
    "control_msgs/action/GripperCommand_Feedback": "RIHS01_8f7c520077bab528bb9161ee3b83c81eee1f8aecadb8922ce82c79d667a819c4",
    "control_msgs/action/GripperCommand_FeedbackMessage": "RIHS01_392ff03fcd872f9dc2405cbeb2897fcf011ad9998458b6aa85c603b8a49e431d",
    "control_msgs/action/GripperCommand_Goal": "RIHS01_607d9f41eb241e1922e90f02125e87ae6bfb78f7f64a71dc92630263d01f8b6d",
    "control_msgs/action/GripperCommand_Result": "RIHS01_bf512d5aa6a0e4fe4d8be22b2ec4a1973c3d250fa1f65e47450322c25c45c0a0",
    "control_msgs/msg/GripperCommand": "RIHS01_57eb8f326c9889ca8bb34ead82cc94cc09bf6bc5c3b6c09546dca3a00b589890",
    "control_msgs/msg/JointComponentTolerance": "RIHS01_739ea7566931944d33830fa10f1bf5e7a7fbdc3172bce7a7eaac642bd6e3ffa4",
    "control_msgs/msg/JointTolerance": "RIHS01_c254f9cece0f3b733017b6990fd46d1326e25242d6b8844398c97d9a88e7d648",
    "nav2_msgs/action/NavigateToPose": "RIHS01_a56dba8a3234a1215e610180dc703ae25bbf406dded8b54887891c9732857eab",
    "nav2_msgs/action/NavigateToPose_Feedback": "RIHS01_9ebc544c7d41bd8c6060b191bf9f5e4ddca6c2f61ee9e04fcb62ed5d67218a33",
    "nav2_msgs/action/NavigateToPose_FeedbackMessage": "RIHS01_9d1f6fa2eb975ce733b419ac2e97b134d8ff92b6478b6559feed9a50bdfd82b3",
    "nav2_msgs/action/NavigateToPose_Goal": "RIHS01_22a9dffbd6733011220460bd52edbc7843c8fc86282d40bc7ad3ca176a9dec10",
    "nav2_msgs/action/NavigateToPose_Result": "RIHS01_ddbff7fc6d1e51d774d5defdb8398a57cb23fa8709355002d676408bb4860b85",
}

COMPAT = Path(__file__).resolve().parents[2] / "ros2_ws" / "compat"
#: The top-level interfaces, each with the file rosidl describes it in.
INTERFACES = ("nav2_msgs/action/NavigateToPose", "control_msgs/action/FollowJointTrajectory",
              "control_msgs/action/GripperCommand", "control_msgs/msg/GripperCommand",
              "control_msgs/msg/JointTolerance", "control_msgs/msg/JointComponentTolerance")


def _generated_hashes(interface: str) -> dict[str, str]:
    """Every hash rosidl wrote into the installed ``<interface>.json`` (the type and each type it holds)."""
    from ament_index_python.packages import get_package_share_directory

    package, rest = interface.split("/", 1)
    description = json.loads((Path(get_package_share_directory(package)) / f"{rest}.json").read_text())
    return {entry["type_name"]: entry["hash_string"] for entry in description["type_hashes"]}


def test_the_built_interfaces_have_the_upstream_type_hashes():
    generated: dict[str, str] = {}
    for interface in INTERFACES:
        generated.update(_generated_hashes(interface))
    assert {name: generated.get(name) for name in UPSTREAM_HASHES} == UPSTREAM_HASHES


def test_the_hashes_on_the_wire_are_the_upstream_ones(ros_domain):
    """What a running server announces to its peers (the endpoint's type hash, as ``ros2 topic info -v`` shows it),
    not only the JSON beside the package: an action server of each type, and the feedback topic's hash."""
    import rclpy
    from control_msgs.action import FollowJointTrajectory, GripperCommand
    from nav2_msgs.action import NavigateToPose
    from rclpy.action import ActionServer

    rclpy.init()
    try:
        node = rclpy.create_node("hash_probe")
        servers = [ActionServer(node, action_type, name, lambda goal: None) for action_type, name in (
            (NavigateToPose, "/navigate_to_pose"), (FollowJointTrajectory, "/arm_controller/follow_joint_trajectory"),
            (GripperCommand, "/gripper_controller/gripper_cmd"))]
        announced = {}
        for name in ("/navigate_to_pose", "/arm_controller/follow_joint_trajectory", "/gripper_controller/gripper_cmd"):
            for info in node.get_publishers_info_by_topic(f"{name}/_action/feedback"):
                announced[info.topic_type] = str(info.topic_type_hash)
        for server in servers:
            server.destroy()
        node.destroy_node()
    finally:
        rclpy.shutdown()
    wanted = {name: UPSTREAM_HASHES[name] for name in UPSTREAM_HASHES if name.endswith("_FeedbackMessage")}
    assert announced == wanted


def _rosbags_store(overrides: dict[str, str] | None = None):
    """rosbags' Jazzy type store with the workspace's definitions of the messages (and of each action's goal, result
    and feedback, as messages named as rosidl names them); ``overrides`` replaces a definition's text."""
    typesys = pytest.importorskip("rosbags.typesys")
    store = typesys.get_typestore(typesys.Stores.ROS2_JAZZY)
    texts: dict[str, str] = {}
    for path in sorted(COMPAT.glob("*/msg/*.msg")):
        package = path.parts[-3]
        texts[f"{package}/msg/{path.stem}"] = path.read_text()
    for path in sorted(COMPAT.glob("*/action/*.action")):
        package = path.parts[-3]
        for part, suffix in zip(path.read_text().split("\n---\n"), ("Goal", "Result", "Feedback")):
            texts[f"{package}/action/{path.stem}_{suffix}"] = part
    texts.update(overrides or {})
    types = {}
    for name, text in texts.items():
        package = name.split("/")[0]
        # rosbags resolves a bare type name in a .msg against the message's own package only for msg/ names; an
        # action part names its package's messages bare, so qualify them as rosidl does.
        lines = []
        for line in text.splitlines():
            first = line.split("#", 1)[0].strip().split(" ", 1)[0].rstrip("[]")
            local = first and first[0].isupper() and "/" not in first and (COMPAT / package / "msg" / f"{first}.msg").is_file()
            lines.append(f"{package}/msg/{line.strip()}" if local else line)
        types.update(typesys.get_types_from_msg("\n".join(lines), name))
    store.register(types)
    return store


def test_an_independent_rihs01_implementation_agrees():
    store = _rosbags_store()
    checked = {name: store.hash_rihs01(name) for name in UPSTREAM_HASHES if store.fielddefs.get(name) is not None}
    assert len(checked) == 12  # the three messages and the nine goals, results and feedbacks
    assert checked == {name: UPSTREAM_HASHES[name] for name in checked}


def test_a_changed_field_changes_the_hash():
    """The comparison above can fail: a float32 where upstream has float64 gives another hash."""
    store = _rosbags_store({"control_msgs/msg/JointTolerance": "string name\nfloat32 position\nfloat64 velocity\n"
                                                               "float64 acceleration\n"})
    assert store.hash_rihs01("control_msgs/msg/JointTolerance") != UPSTREAM_HASHES["control_msgs/msg/JointTolerance"]


def test_constants_and_fields_equal_upstream():
    """Constants are not hashed: compare them, and each field's name and type, with the upstream definitions."""
    from control_msgs.action import FollowJointTrajectory, GripperCommand
    from control_msgs.msg import JointComponentTolerance, JointTolerance
    from nav2_msgs.action import NavigateToPose

    assert NavigateToPose.Result.NONE == 0
    assert {k: getattr(FollowJointTrajectory.Result, k) for k in (
        "SUCCESSFUL", "INVALID_GOAL", "INVALID_JOINTS", "OLD_HEADER_TIMESTAMP", "PATH_TOLERANCE_VIOLATED",
        "GOAL_TOLERANCE_VIOLATED")} == {"SUCCESSFUL": 0, "INVALID_GOAL": -1, "INVALID_JOINTS": -2,
                                        "OLD_HEADER_TIMESTAMP": -3, "PATH_TOLERANCE_VIOLATED": -4,
                                        "GOAL_TOLERANCE_VIOLATED": -5}
    assert [getattr(JointComponentTolerance, k) for k in ("X_AXIS", "Y_AXIS", "Z_AXIS", "TRANSLATION", "ROTATION")] == [1, 2, 3, 4, 5]
    assert NavigateToPose.Goal.get_fields_and_field_types() == {"pose": "geometry_msgs/PoseStamped", "behavior_tree": "string"}
    assert NavigateToPose.Result.get_fields_and_field_types() == {"error_code": "uint16", "error_msg": "string"}
    assert NavigateToPose.Feedback.get_fields_and_field_types() == {
        "current_pose": "geometry_msgs/PoseStamped", "navigation_time": "builtin_interfaces/Duration",
        "estimated_time_remaining": "builtin_interfaces/Duration", "number_of_recoveries": "int16",
        "distance_remaining": "float"}
    assert list(FollowJointTrajectory.Goal.get_fields_and_field_types()) == [
        "trajectory", "multi_dof_trajectory", "path_tolerance", "component_path_tolerance", "goal_tolerance",
        "component_goal_tolerance", "goal_time_tolerance"]
    assert FollowJointTrajectory.Result.get_fields_and_field_types() == {"error_code": "int32", "error_string": "string"}
    assert GripperCommand.Goal.get_fields_and_field_types() == {"command": "control_msgs/GripperCommand"}
    assert GripperCommand.Result.get_fields_and_field_types() == GripperCommand.Feedback.get_fields_and_field_types() == {
        "position": "double", "effort": "double", "stalled": "boolean", "reached_goal": "boolean"}
    assert JointTolerance.get_fields_and_field_types() == {"name": "string", "position": "double", "velocity": "double",
                                                           "acceleration": "double"}
