"""robot_interfaces node: waits for a real robot's interfaces, named by a robot profile (docs/robots.md).

With a profile whose robot is not the simulator, the graph starts without the sim bridge and this node watches the
ROS 2 graph for what the profile names (navigation, arm and gripper actions, odometry, joint states, tf, cameras):
after ``discovery_grace_s`` it logs one line per interface still missing (label, kind, name, type), then one line
whenever an interface is found or lost. Once all are there it says so and announces itself on ``/homie/ready``
(the readiness handshake the planner waits for, docs/ros.md); with ``exit_when_done`` it then exits 0.

Parameters: ``robot`` (a built-in profile name or a YAML path), ``poll_period_s`` (0.5), ``discovery_grace_s``
(2.0: DDS discovery of a running robot takes about a second; a line for every interface before then would be
noise), ``exit_when_done`` (false). A profile that does not load is one error line and exit code 2.
"""

from __future__ import annotations

import sys
import time

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node

from homiebot.config.robot import SIM_PROFILE, RobotProfile, RobotProfileError, load_profile
from homiebot.ros.calls import announce_ready
from homiebot.ros.robot_interfaces import InterfaceWatch, check, graph_snapshot
from homiebot.ros.spin import ShutdownSignals


class RobotInterfacesNode(Node):
    def __init__(self, profile: RobotProfile | None = None) -> None:
        super().__init__("robot_interfaces")
        self.declare_parameter("robot", SIM_PROFILE)
        self.declare_parameter("poll_period_s", 0.5)
        self.declare_parameter("discovery_grace_s", 2.0)
        self.declare_parameter("exit_when_done", False)
        self.profile = profile or load_profile(str(self.get_parameter("robot").value))
        self.awaited = self.profile.awaited()
        self.done = False
        self._watch = InterfaceWatch()
        self._all_found = False
        self._ready_pub = None
        self._start = time.monotonic()
        self._grace_s = float(self.get_parameter("discovery_grace_s").value)
        self.get_logger().info(
            f"robot {self.profile.name!r} ({self.profile.adapter} adapter, {self.profile.ros_distro}): "
            f"waiting for {len(self.awaited)} interfaces")
        self.create_timer(float(self.get_parameter("poll_period_s").value), self._poll)

    def _poll(self) -> None:
        if time.monotonic() - self._start < self._grace_s:
            return
        statuses = check(self.awaited, graph_snapshot(self, self.awaited))
        for line in self._watch.update(statuses):
            # Two call sites: rclpy's logger refuses one call site logging at two severities.
            if line.startswith("found"):
                self.get_logger().info(line)
            else:
                self.get_logger().warning(line)
        all_found = all(status.found for status in statuses)
        if all_found and not self._all_found:
            self.get_logger().info(f"robot {self.profile.name!r}: all {len(statuses)} interfaces found")
            if self._ready_pub is None:
                self._ready_pub = announce_ready(self)
            if self.get_parameter("exit_when_done").value:
                self.done = True
        self._all_found = all_found


def main(args: list[str] | None = None) -> None:
    """Spin until every interface is found (with ``exit_when_done``), Ctrl-C or SIGTERM; exit 0 then, 2 for a
    profile that does not load."""
    signals = ShutdownSignals().install()
    node: RobotInterfacesNode | None = None
    code = 0
    try:
        rclpy.init(args=args)
        try:
            node = RobotInterfacesNode()
        except RobotProfileError as err:
            print(f"error: {err}", file=sys.stderr)
            code = 2
        if node is not None:
            executor = SingleThreadedExecutor()
            executor.add_node(node)
            while rclpy.ok() and not node.done:
                executor.spin_once(timeout_sec=0.2)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        signals.quiet()
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    sys.exit(code)


if __name__ == "__main__":
    main()
