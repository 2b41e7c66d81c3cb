"""launch_testing version of the crashed-executor test (skipped where launch_testing is not installed; the
same check runs in test_ros_graph.py over `homie up`'s supervisor): the executor is killed once the planner
answered round 1, and the planner must publish TIMEOUT within its deadline instead of hanging."""

from __future__ import annotations

import os
import signal
import time
import unittest

import pytest

if os.environ.get("HOMIE_LAUNCH_TESTING_PROBLEM"):  # set by tests/conftest.py
    pytest.skip(os.environ["HOMIE_LAUNCH_TESTING_PROBLEM"], allow_module_level=True)
pytest.importorskip(
    "launch_testing",
    reason="launch_testing is not installable from PyPI; the same timeout check runs in test_ros_graph.py over `homie up`",
)
import launch  # noqa: E402
import launch_testing.actions  # noqa: E402
import rclpy  # noqa: E402
from ament_index_python.packages import get_package_share_directory  # noqa: E402
from launch_ros.actions import Node  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow]

DEADLINE_S = 4.0


@pytest.mark.launch_test
def generate_test_description():
    params = os.path.join(get_package_share_directory("homie"), "config", "homie.yaml")

    def node(package, executable, name, **overrides):
        return Node(package=package, executable=executable, name=name, parameters=[params, overrides], output="screen")

    executor = node("executor_nodes", "executor", "executor")
    description = launch.LaunchDescription([
        node("sim_bridge", "sim_bridge", "sim_bridge"),
        node("executor_nodes", "nav_executor", "nav_executor"),
        node("executor_nodes", "manip_executor", "manip_executor"),
        executor,
        node("planner_node", "planner_node", "planner_node", task="demo-green-can", execute_timeout_s=DEADLINE_S),
        launch_testing.actions.ReadyToTest(),
    ])
    return description, {"executor": executor}


class TestKilledExecutor(unittest.TestCase):
    def test_planner_reports_timeout(self, executor, proc_info):
        from homie_msgs.msg import EpisodeStatus, PlannerOutput
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

        rclpy.init()
        node = rclpy.create_node("launch_timeout_listener")
        qos = QoSProfile(depth=100, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)
        statuses, outputs = [], []
        node.create_subscription(EpisodeStatus, "/homie/episode_status", statuses.append, qos)
        node.create_subscription(PlannerOutput, "/homie/planner_output", outputs.append, qos)
        try:
            deadline = time.monotonic() + 120
            while not outputs and time.monotonic() < deadline:
                rclpy.spin_once(node, timeout_sec=0.1)
            os.kill(executor.process_details["pid"], signal.SIGKILL)
            killed = time.monotonic()
            while time.monotonic() - killed < DEADLINE_S + 10 and not any(s.state == EpisodeStatus.TIMEOUT for s in statuses):
                rclpy.spin_once(node, timeout_sec=0.1)
            reported = time.monotonic() - killed
        finally:
            node.destroy_node()
            rclpy.shutdown()
        self.assertTrue(any(s.state == EpisodeStatus.TIMEOUT for s in statuses))
        self.assertLess(reported, DEADLINE_S + 10)
