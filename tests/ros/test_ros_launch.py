"""launch_testing version of the graph test, for machines with a ROS 2 install (``launch_testing`` is not on
PyPI, so here the module is skipped with that reason; ``test_ros_graph.py`` runs the same checks over
``homie up``'s supervisor everywhere).

Run on a ROS 2 machine with ``launch_test tests/ros/test_ros_launch.py`` or plain pytest (launch_testing's
pytest plugin collects modules with a ``generate_test_description``).
"""

from __future__ import annotations

import os
import time
import unittest

import pytest

if os.environ.get("HOMIE_LAUNCH_TESTING_PROBLEM"):  # set by tests/conftest.py
    pytest.skip(os.environ["HOMIE_LAUNCH_TESTING_PROBLEM"], allow_module_level=True)
pytest.importorskip(
    "launch_testing",
    reason="launch_testing is not installable from PyPI; the same graph checks run in test_ros_graph.py over `homie up`",
)
import launch  # noqa: E402
import launch_testing.actions  # noqa: E402
import launch_testing.asserts  # noqa: E402
import rclpy  # noqa: E402
from ament_index_python.packages import get_package_share_directory  # noqa: E402
from launch.actions import IncludeLaunchDescription  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow]

TASK = "demo-green-can"


@pytest.mark.launch_test
def generate_test_description():
    sim_launch = os.path.join(get_package_share_directory("homie"), "launch", "sim.launch.py")
    graph = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(sim_launch), launch_arguments={"task": TASK, "rviz": "false"}.items()
    )
    return launch.LaunchDescription([graph, launch_testing.actions.ReadyToTest()])


class TestEpisodeOnTheWire(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        rclpy.init()
        cls.node = rclpy.create_node("launch_test_listener")

    @classmethod
    def tearDownClass(cls):
        cls.node.destroy_node()
        rclpy.shutdown()

    def test_task_runs_to_end(self):
        from homie_msgs.msg import EpisodeStatus, PlannerOutput
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

        qos = QoSProfile(depth=100, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)
        statuses, outputs = [], []
        self.node.create_subscription(EpisodeStatus, "/homie/episode_status", statuses.append, qos)
        self.node.create_subscription(PlannerOutput, "/homie/planner_output", outputs.append, qos)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not any(s.state == EpisodeStatus.ENDED for s in statuses):
            rclpy.spin_once(self.node, timeout_sec=0.1)
        final = [s for s in statuses if s.state != EpisodeStatus.WAITING][-1]
        self.assertEqual(final.state, EpisodeStatus.ENDED)
        self.assertEqual(final.goal, EpisodeStatus.GOAL_MET)
        self.assertEqual(final.last_subtask, "[End]")
        self.assertEqual([o.round_index for o in outputs], list(range(1, len(outputs) + 1)))


@launch_testing.post_shutdown_test()
class TestCleanShutdown(unittest.TestCase):
    def test_every_node_exits_cleanly(self, proc_info):
        # SIGINT at the end of the launch: rclpy nodes exit 0 (or -2 when the signal lands before rclpy's handler)
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0, -2])
