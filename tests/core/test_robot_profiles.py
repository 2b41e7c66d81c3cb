"""Robot profiles (homiebot/config/robot.py, docs/robots.md): the built-in ones load; the simulator's names are the
ones the sim bridge and the MuJoCo robot use today; a bad profile is one line naming the problem; and the wait for
a real robot's interfaces (homiebot/ros/robot_interfaces.py) finds an interface only by name *and* type."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from homiebot.config.robot import (
    ADAPTER_ROLES,
    Adapter,
    InterfaceKind,
    RobotInterface,
    RobotProfileError,
    builtin_profiles,
    load_profile,
)
from homiebot.ros.robot_interfaces import GraphSnapshot, InterfaceWatch, check

REPO = Path(__file__).resolve().parents[2]
BRIDGE = REPO / "ros2_ws" / "src" / "sim_bridge" / "sim_bridge" / "node.py"


def test_the_builtin_profiles_load():
    assert builtin_profiles() == ("fetch", "sim", "spot")
    fetch, sim, spot = (load_profile(name) for name in builtin_profiles())
    assert (sim.simulated, fetch.simulated, spot.simulated) == (True, False, False)
    assert (sim.adapter, fetch.adapter, spot.adapter) == (Adapter.SIMULATOR, Adapter.GENERIC, Adapter.SPOT)
    assert fetch.interfaces["navigate"].kind == InterfaceKind.ACTION
    assert spot.interfaces["gripper_open"].kind == InterfaceKind.SERVICE
    assert fetch.interfaces["odom"].kind == InterfaceKind.TOPIC
    # What a real Fetch is waited for: the adapter's roles, then the head camera's image and CameraInfo.
    assert [label for label, _ in fetch.awaited()] == [*ADAPTER_ROLES[Adapter.GENERIC],
                                                       "camera.head.image", "camera.head.camera_info"]


@pytest.mark.ros  # homiebot.ros.convert imports homie_msgs, built by scripts/setup_ros.sh
def test_the_sim_profile_names_what_the_bridge_and_the_robot_use():
    from homiebot.ros import control, convert, looks, nav2, policy_goto
    from homiebot.sim.mujoco import robot
    from homiebot.types import VIEW_NAMES

    sim = load_profile("sim")
    source = BRIDGE.read_text()
    # The standard interfaces are served under the names their conversion modules give (the ROS driver's defaults).
    standard = {"navigate_to_pose": ("nav2.NAVIGATE_TO_POSE", nav2.NAVIGATE_TO_POSE),
                "arm_trajectory": ("control.FOLLOW_JOINT_TRAJECTORY", control.FOLLOW_JOINT_TRAJECTORY),
                "gripper": ("control.GRIPPER_COMMAND", control.GRIPPER_COMMAND),
                # A learned Go to's base command (homiebot.ros.policy_goto).
                "cmd_vel": ("policy_goto.CMD_VEL", policy_goto.CMD_VEL),
                # The look's head, torso and head camera (homiebot.ros.looks).
                "torso_trajectory": ("looks.TORSO_TRAJECTORY", looks.TORSO_TRAJECTORY),
                "head_trajectory": ("looks.HEAD_TRAJECTORY", looks.HEAD_TRAJECTORY),
                "head_image": ("looks.HEAD_IMAGE", looks.HEAD_IMAGE),
                "head_depth": ("looks.HEAD_DEPTH", looks.HEAD_DEPTH),
                "head_camera_info": ("looks.HEAD_CAMERA_INFO", looks.HEAD_CAMERA_INFO),
                "head_views": ("looks.HEAD_VIEWS", looks.HEAD_VIEWS),
                "look_views": ("looks.LOOK_VIEWS_SERVICE", looks.LOOK_VIEWS_SERVICE)}
    for role, interface in sim.interfaces.items():
        if role in standard:
            constant, name = standard[role]
            assert interface.name == name and constant in source, f"{role}: the bridge serves no {interface.name}"
        else:
            assert f'"{interface.name}"' in source, f"{role}: the bridge names no {interface.name}"
    assert set(standard) <= set(sim.interfaces)
    assert (sim.frames.map, sim.frames.odom, sim.frames.base) == (convert.MAP_FRAME, convert.ODOM_FRAME, convert.BASE_FRAME)
    assert tuple(c.name for c in sim.cameras) == tuple(VIEW_NAMES)
    assert 'f"{namespace}/camera/{view}"' in source and 'f"{base}/image_raw"' in source and 'f"{base}/camera_info"' in source
    for camera in sim.cameras:
        assert camera.image.name == f"/camera/{camera.name}/image_raw"
        assert camera.camera_info.name == f"/camera/{camera.name}/camera_info"
        assert camera.optical_frame == convert.optical_frame(camera.name)
    assert sim.arm.joints == robot.ARM_JOINTS
    assert sim.gripper.joints == robot.FINGER_JOINTS
    assert sim.gripper.open_position == pytest.approx(2 * robot.FINGER_OPEN)  # two fingers: the gap
    # The arm chain: walking the URDF (the one rviz gets) from the tip up to the chain's base meets the arm's
    # movable joints, in the profile's order, and only them.
    from homiebot.sim.mujoco.urdf import RobotKinematics

    kinematics = RobotKinematics()
    link, joints = kinematics.link(sim.arm.tip_link), []
    while link.name != sim.arm.base_link:
        if link.joint_type != "fixed":
            joints.append(link.joint)
        assert link.parent is not None, f"{sim.arm.base_link} is not above {sim.arm.tip_link}"
        link = kinematics.link(link.parent)
    assert tuple(reversed(joints)) == sim.arm.joints


@pytest.fixture
def fetch_data() -> dict:
    return yaml.safe_load((REPO / "homiebot" / "config" / "robots" / "fetch.yaml").read_text())


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "robot.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["interfaces"].pop("gripper"), "adapter generic needs interfaces gripper"),
    (lambda d: d["interfaces"]["navigate"].update(type="nav2_msgs/action/NavigateToPos"),
     "interfaces.navigate: adapter generic calls it as nav2_msgs/action/NavigateToPose, not nav2_msgs/action/NavigateToPos"),
    (lambda d: d["interfaces"]["odom"].update(name="odom"), "is not a fully qualified ROS 2 name"),
    (lambda d: d["interfaces"]["odom"].update(type="nav_msgs/Odometry"), "is not a ROS 2 interface type"),
    (lambda d: d.update(speed=2), "speed: unknown option"),
    (lambda d: d["cameras"][0]["camera_info"].update(type="sensor_msgs/msg/Image"), "camera_info must be sensor_msgs/msg/CameraInfo"),
    (lambda d: d["arm"].update(joints=["a", "a"]), "joint names repeat"),
    (lambda d: d.update(wait_for=["lidar"]), "wait_for names roles that interfaces lacks: lidar"),
])
def test_a_bad_profile_is_one_line_naming_the_problem(tmp_path, fetch_data, change, message):
    change(fetch_data)
    with pytest.raises(RobotProfileError) as caught:
        load_profile(_write(tmp_path, fetch_data))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_an_unknown_name_or_a_missing_file_is_refused():
    with pytest.raises(RobotProfileError, match="no robot profile 'stretch': the built-in ones are fetch, sim, spot"):
        load_profile("stretch")
    with pytest.raises(RobotProfileError, match="no such file"):
        load_profile("/nonexistent/robot.yaml")


NAV = RobotInterface(name="/navigate_to_pose", type="nav2_msgs/action/NavigateToPose")
ODOM = RobotInterface(name="/odom", type="nav_msgs/msg/Odometry")
OPEN = RobotInterface(name="/spot/open_gripper", type="std_srvs/srv/Trigger")
AWAITED = (("navigate", NAV), ("odom", ODOM), ("gripper_open", OPEN))


def test_an_interface_is_found_by_name_and_type_in_the_table_of_its_kind():
    empty = check(AWAITED, GraphSnapshot())
    assert [s.line() for s in empty] == [
        "waiting for navigate: action /navigate_to_pose (nav2_msgs/action/NavigateToPose)",
        "waiting for odom: topic /odom (nav_msgs/msg/Odometry)",
        "waiting for gripper_open: service /spot/open_gripper (std_srvs/srv/Trigger)",
    ]
    # A Humble-era or foreign type under the right name is not the interface; a topic is not a service.
    wrong = check(AWAITED, GraphSnapshot(action_servers={"/navigate_to_pose": ("other_msgs/action/NavigateToPose",)},
                                         services={"/odom": ("nav_msgs/msg/Odometry",)}))
    assert not any(s.found for s in wrong)
    assert wrong[0].line().endswith("; the graph has it as other_msgs/action/NavigateToPose")
    right = check(AWAITED, GraphSnapshot(action_servers={"/navigate_to_pose": (NAV.type,)},
                                         publishers={"/odom": (ODOM.type,)}, services={OPEN.name: (OPEN.type,)}))
    assert all(s.found for s in right)


def test_the_watch_says_each_missing_interface_once_then_only_changes():
    watch = InterfaceWatch()
    assert len(watch.update(check(AWAITED, GraphSnapshot()))) == 3
    assert watch.update(check(AWAITED, GraphSnapshot())) == []
    found = GraphSnapshot(action_servers={"/navigate_to_pose": (NAV.type,)})
    assert watch.update(check(AWAITED, found)) == ["found navigate: action /navigate_to_pose (nav2_msgs/action/NavigateToPose)"]
    assert watch.update(check(AWAITED, GraphSnapshot())) == [
        "lost; waiting for navigate: action /navigate_to_pose (nav2_msgs/action/NavigateToPose)"]
    # Found at the first look: nothing to say.
    assert InterfaceWatch().update(check(AWAITED[:1], found)) == []


def test_the_looks_use_fetchs_head_torso_and_head_camera_names():
    """The graph's looks (homiebot.ros.looks) go to the controllers and read the camera a Fetch profile names, so the
    same planner node looks through a Fetch's drivers (docs/robots.md, "Looks")."""
    from homiebot.ros import looks

    fetch = load_profile("fetch")
    assert fetch.interfaces["head_trajectory"].name == looks.HEAD_TRAJECTORY
    assert fetch.interfaces["torso_trajectory"].name == looks.TORSO_TRAJECTORY
    head = next(camera for camera in fetch.cameras if camera.name == "head")
    assert (head.image.name, head.camera_info.name) == (looks.HEAD_IMAGE, looks.HEAD_CAMERA_INFO)
    assert head.depth is not None and head.depth.name == looks.HEAD_DEPTH
