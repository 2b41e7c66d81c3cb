"""The sim bridge serves Nav2's NavigateToPose (nav2_msgs, the workspace's stand-in) on ``/navigate_to_pose``: a
real rclpy action client sends goals to a real bridge node over the module's DDS domain, both spun in this process.

Checked: a reachable goal succeeds with feedback at the start (the distance to go) and at the end (the base on the
goal, nothing left); a goal in a wall is aborted with Nav2's GOAL_OCCUPIED and a message that says where and what;
a goal in another frame is aborted; and the physical Go to runs through the action on the poses it chose.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

import pytest

pytestmark = pytest.mark.ros

GOAL_TIMEOUT_S = 30.0


@dataclass
class Graph:
    sim: object
    node: object
    client: object
    feedback: list = field(default_factory=list)

    def send(self, goal_msg):
        """Send one goal and wait for its end: (status, result), the feedback kept in ``self.feedback``."""
        from action_msgs.msg import GoalStatus

        self.feedback = []
        done = threading.Event()
        answer: dict = {}

        def on_result(future):
            answer["result"] = future.result()
            done.set()

        def on_goal(future):
            handle = future.result()
            if not handle.accepted:
                answer["result"] = None
                done.set()
                return
            handle.get_result_async().add_done_callback(on_result)

        sending = self.client.send_goal_async(goal_msg, feedback_callback=lambda msg: self.feedback.append(msg.feedback))
        sending.add_done_callback(on_goal)
        assert done.wait(GOAL_TIMEOUT_S), "no result from /navigate_to_pose"
        response = answer["result"]
        assert response is not None, "goal rejected"
        assert response.status in (GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_ABORTED), response.status
        return response.status, response.result


@pytest.fixture(scope="module")
def graph(ros_domain):
    """A bridge over a headless simulator with emmoe-084's scene loaded, a client node, one executor spinning both."""
    import rclpy
    from homie_msgs.srv import ResetEpisode
    from rclpy.action import ActionClient
    from rclpy.executors import MultiThreadedExecutor

    from homiebot.ros import nav2
    from homiebot.sim.mujoco.backend import MujocoSimulator
    from homiebot.tasks.suite import get_task

    rclpy.init(args=["--ros-args", "-p", "publish_camera_topics:=false", "-p", "prerender:=false"])
    from sim_bridge.node import SimBridge

    task = get_task("emmoe-084")
    sim = MujocoSimulator(render=False)
    bridge = SimBridge(simulator=sim)
    assert bridge._on_reset(ResetEpisode.Request(scene=task.scene, seed=task.seed), ResetEpisode.Response()).success
    node = rclpy.create_node("navigate_to_pose_client")
    client = ActionClient(node, nav2.NavigateToPose, nav2.NAVIGATE_TO_POSE)
    executor = MultiThreadedExecutor(num_threads=2)
    executor.add_node(bridge)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        assert client.wait_for_server(timeout_sec=GOAL_TIMEOUT_S), "the bridge serves no /navigate_to_pose"
        yield Graph(sim, node, client)
    finally:
        executor.shutdown()
        client.destroy()
        node.destroy_node()
        bridge.destroy_node()
        rclpy.try_shutdown()
        spinner.join(timeout=5)


def test_a_reachable_goal_succeeds_with_feedback_at_start_and_end(graph):
    from action_msgs.msg import GoalStatus

    from homiebot.ros import convert, nav2
    from homiebot.types import Pose2D

    start = graph.sim.base_pose()
    goal = Pose2D(2.013, 2.538, 1.0)
    status, result = graph.send(nav2.goal_msg(goal))
    assert status == GoalStatus.STATUS_SUCCEEDED
    assert (result.error_code, result.error_msg) == (0, "")
    here = graph.sim.base_pose()
    assert (here.x, here.y, here.yaw) == pytest.approx((goal.x, goal.y, goal.yaw))
    assert len(graph.feedback) >= 2
    first, last = graph.feedback[0], graph.feedback[-1]
    assert first.current_pose.header.frame_id == "map"
    assert convert.pose_to_pose2d(first.current_pose.pose).distance_to(start) < 1e-6
    assert first.distance_remaining == pytest.approx(math.hypot(goal.x - start.x, goal.y - start.y), abs=1e-4)
    assert last.distance_remaining == pytest.approx(0.0, abs=1e-4)
    assert convert.pose_to_pose2d(last.current_pose.pose).distance_to(goal) < 1e-4
    # Driving takes simulated time: the travel at 0.6 m/s at least.
    assert convert.time_seconds(last.navigation_time) >= first.distance_remaining / 0.6 - 1e-6


def test_a_goal_in_a_wall_is_aborted_with_goal_occupied(graph):
    from action_msgs.msg import GoalStatus

    from homiebot.ros import nav2
    from homiebot.sim.robot_driver import NavErrorCode
    from homiebot.types import Pose2D

    before = graph.sim.base_pose()
    status, result = graph.send(nav2.goal_msg(Pose2D(4.0, 3.5, 0.0)))
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == NavErrorCode.GOAL_OCCUPIED == 206
    assert result.error_msg == "goal (4.00, 3.50) is occupied: the base would touch a wall"
    assert graph.sim.base_pose() == before
    core = nav2.result_from_msg(False, result)
    assert core.error_code is NavErrorCode.GOAL_OCCUPIED and not core.succeeded


def test_a_goal_in_another_frame_is_aborted(graph):
    from action_msgs.msg import GoalStatus

    from homiebot.ros import nav2
    from homiebot.types import Pose2D

    goal = nav2.goal_msg(Pose2D(2.0, 2.5, 0.0))
    goal.pose.header.frame_id = "base_link"
    status, result = graph.send(goal)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == 0 and "frame 'base_link'" in result.error_msg


class ActionNavigator:
    """The physical skills' base interface through the action: each goal is sent and waited for; the base pose is
    the last feedback's (Nav2 reports it in the map frame), the simulator's before the first goal."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.pose = graph.sim.base_pose()

    def navigate_to_pose(self, goal):
        from action_msgs.msg import GoalStatus

        from homiebot.ros import convert, nav2

        status, result = self.graph.send(nav2.goal_msg(goal))
        if self.graph.feedback:
            self.pose = convert.pose_to_pose2d(self.graph.feedback[-1].current_pose.pose)
        return nav2.result_from_msg(status == GoalStatus.STATUS_SUCCEEDED, result)

    def base_pose(self):
        return self.pose


def test_the_physical_go_to_runs_through_the_action(graph):
    from homiebot.skills.physical.navigation import approach_poses, go_to
    from homiebot.types import SkillStatus

    world = graph.sim.state()
    navigator = ActionNavigator(graph)
    result = go_to(navigator, world, "kitchen_drawer")
    assert result.status is SkillStatus.SUCCESS, result
    assert min(navigator.base_pose().distance_to(p) for p in approach_poses(world, "kitchen_drawer")) < 1e-4
    after = graph.sim.state()
    assert 0.1 <= after.reach_distance("kitchen_drawer") <= 2.0
    assert after.robot.distance_to(navigator.base_pose()) < 1e-4
