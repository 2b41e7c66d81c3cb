"""The graph on a real robot, without the simulator (``homie up robot``, docs/robots.md):

* with the Fetch profile and nothing serving it, the graph starts (no sim bridge), says one line per interface it
  waits for (label, kind, name, type), and Ctrl-C shuts it down cleanly (the node exits 0, homie 130);
* an rclpy NavigateToPose server started by the test makes the line ``found navigate ...`` appear; once the test
  serves every other interface of a profile too (the trajectory and gripper actions, odometry, joint states, tf),
  ``--exit-when-done`` ends the graph by itself with exit code 0.
"""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from homiebot.testing.ros_helpers import graph_environment

pytestmark = [pytest.mark.ros, pytest.mark.slow]

HOMIE = str(Path(sys.executable).with_name("homie"))
REPO = Path(__file__).resolve().parents[2]
FETCH_WAITS = [
    "waiting for navigate: action /navigate_to_pose (nav2_msgs/action/NavigateToPose)",
    "waiting for arm_trajectory: action /arm_controller/follow_joint_trajectory (control_msgs/action/FollowJointTrajectory)",
    "waiting for gripper: action /gripper_controller/gripper_action (control_msgs/action/GripperCommand)",
    "waiting for odom: topic /odom (nav_msgs/msg/Odometry)",
    "waiting for joint_states: topic /joint_states (sensor_msgs/msg/JointState)",
    "waiting for tf: topic /tf (tf2_msgs/msg/TFMessage)",
    "waiting for tf_static: topic /tf_static (tf2_msgs/msg/TFMessage)",
    "waiting for camera.head.image: topic /head_camera/rgb/image_raw (sensor_msgs/msg/Image)",
    "waiting for camera.head.camera_info: topic /head_camera/rgb/camera_info (sensor_msgs/msg/CameraInfo)",
]


class GraphOutput:
    """``homie up robot`` in its own process, its output read line by line in a thread."""

    def __init__(self, arguments: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen([HOMIE, "up", "robot", "--localhost", *arguments], env=env,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True)
        self.lines: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))

    def wait_for(self, *texts: str, timeout_s: float = 60.0) -> None:
        """Until every text is in some line so far; fails naming what is missing and showing the output."""
        deadline = time.monotonic() + timeout_s
        while not all(any(text in line for line in self.lines) for text in texts):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (self.process.poll() is not None and self._queue.empty()):
                missing = [t for t in texts if not any(t in line for line in self.lines)]
                pytest.fail(f"not seen: {missing}\n--- output ---\n" + "\n".join(self.lines))
            try:
                self.lines.append(self._queue.get(timeout=min(remaining, 0.5)))
            except queue.Empty:
                pass

    def finish(self, timeout_s: float = 30.0) -> int:
        code = self.process.wait(timeout=timeout_s)
        time.sleep(0.2)
        while not self._queue.empty():
            self.lines.append(self._queue.get())
        return code


def test_fetch_without_a_simulator_waits_for_its_interfaces_and_stops_cleanly(ros_domain):
    graph = GraphOutput(["--robot", "fetch"], graph_environment(ros_domain))
    try:
        graph.wait_for("robot 'fetch' (generic adapter, jazzy): waiting for 9 interfaces", *FETCH_WAITS)
    finally:
        graph.process.send_signal(signal.SIGINT)
    assert graph.finish() == 130
    waits = [line.split("]: ", 1)[-1] for line in graph.lines if "]: waiting for " in line]
    assert waits == FETCH_WAITS  # one line each, in the profile's order, none twice
    assert "graph stopped: robot_interfaces=0" in graph.lines
    assert any("the graph was shut down cleanly" in line for line in graph.lines)
    assert not any("sim_bridge" in line or "Traceback" in line for line in graph.lines)


def test_a_served_interface_is_found_and_the_graph_ends_when_all_are(ros_domain, tmp_path):
    import rclpy
    from control_msgs.action import FollowJointTrajectory, GripperCommand
    from nav2_msgs.action import NavigateToPose
    from nav_msgs.msg import Odometry
    from rclpy.action import ActionServer
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from sensor_msgs.msg import JointState
    from tf2_msgs.msg import TFMessage

    # Fetch's profile without its camera: every other interface is served by this test.
    profile = yaml.safe_load((REPO / "homiebot" / "config" / "robots" / "fetch.yaml").read_text())
    profile["cameras"] = []
    path = tmp_path / "fetch_no_camera.yaml"
    path.write_text(yaml.safe_dump(profile))

    graph = GraphOutput(["--robot", str(path), "--exit-when-done", "--timeout", "120"], graph_environment(ros_domain))
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("fake_robot", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinning = threading.Event()
    spinning.set()

    def spin() -> None:
        while spinning.is_set():
            executor.spin_once(timeout_sec=0.1)

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    servers = []
    try:
        graph.wait_for(FETCH_WAITS[0], FETCH_WAITS[3])
        servers.append(ActionServer(node, NavigateToPose, "/navigate_to_pose", lambda goal: None))
        graph.wait_for("found navigate: action /navigate_to_pose (nav2_msgs/action/NavigateToPose)")
        assert not any("found odom" in line for line in graph.lines)  # only what is served is found
        servers.append(ActionServer(node, FollowJointTrajectory, "/arm_controller/follow_joint_trajectory", lambda goal: None))
        servers.append(ActionServer(node, GripperCommand, "/gripper_controller/gripper_action", lambda goal: None))
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        publishers = [node.create_publisher(Odometry, "/odom", 10), node.create_publisher(JointState, "/joint_states", 10),
                      node.create_publisher(TFMessage, "/tf", 10), node.create_publisher(TFMessage, "/tf_static", latched)]
        code = graph.finish(timeout_s=90)
        del publishers
    finally:
        if graph.process.poll() is None:
            graph.process.send_signal(signal.SIGINT)
            graph.finish()
        spinning.clear()
        spinner.join(timeout=5)
        for server in servers:
            server.destroy()
        node.destroy_node()
        rclpy.shutdown(context=context)
    assert code == 0, "\n".join(graph.lines)
    assert any("robot 'fetch': all 7 interfaces found" in line for line in graph.lines)
    assert "graph stopped: robot_interfaces=0" in graph.lines
