"""nav_executor and manip_executor: the low-level skill executors between the executor and the robot.

``nav_executor`` serves ``/navigate`` (homie_msgs/Navigate), ``manip_executor`` serves ``/manipulate``
(homie_msgs/Manipulate). Each advertises the low-level models it runs (parameter ``models``; EMMOE table E2:
NoMaD and PixNav navigate, octo opens and closes, RT-1-X picks and puts, M3 and the oracle do everything)
and forwards the goal to the robot side: here the sim bridge's ``/sim/navigate`` / ``/sim/manipulate``
oracle skills, on a real Fetch or Spot the driver's action of the same type (parameter ``robot_action``).

A model the executor does not run is answered with ``EXECUTION_FAILED`` and a reason, never a crash; with
the default (non-strict) executor configuration every listed model may run every action (the model name
selects a noise profile at most), so ``accept_any_model`` is true by default.
"""

from __future__ import annotations

import logging

import rclpy
from homie_msgs.action import Manipulate, Navigate
from homie_msgs.msg import SkillResult
from rclpy.action import ActionClient, ActionServer
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node

from homiebot.ros.calls import call_action


class SkillExecutorNode(Node):
    """Serves one skill action and forwards it to the robot side (see the module docstring)."""

    def __init__(self, name: str, action_type, action: str, robot_action: str, models: list[str]) -> None:
        super().__init__(name)
        self.declare_parameter("models", models)
        self.declare_parameter("accept_any_model", True)
        self.declare_parameter("robot_action", robot_action)
        self.declare_parameter("skill_timeout_s", 120.0)
        self.action_type = action_type
        group = ReentrantCallbackGroup()
        self._robot = ActionClient(self, action_type, self.get_parameter("robot_action").value, callback_group=group)
        self._server = ActionServer(self, action_type, action, self._execute, callback_group=group)
        self.get_logger().info(f"{name} ready on {action}: models {', '.join(self.served_models)}")

    @property
    def served_models(self) -> list[str]:
        return list(self.get_parameter("models").value)

    def _execute(self, goal_handle):
        goal = goal_handle.request
        served = {m.lower() for m in self.served_models}
        if not self.get_parameter("accept_any_model").value and goal.model.lower() not in served:
            goal_handle.succeed()
            return self.action_type.Result(
                result=SkillResult(
                    status=SkillResult.EXECUTION_FAILED,
                    detail=f"model {goal.model!r} is not run by {self.get_name()} (runs {', '.join(self.served_models)})",
                )
            )
        try:
            result = call_action(
                self._robot,
                goal,
                float(self.get_parameter("skill_timeout_s").value),
                feedback_callback=lambda feedback: goal_handle.publish_feedback(feedback.feedback),
            )
        except Exception as err:  # the robot side did not answer: abort, the executor reports it
            self.get_logger().error(f"{goal}: {err}")
            goal_handle.abort()
            return self.action_type.Result()
        goal_handle.succeed()
        return result


def _run(node_factory) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    rclpy.init()
    node = node_factory()
    executor = MultiThreadedExecutor(num_threads=3)
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def nav_main() -> None:
    _run(lambda: SkillExecutorNode("nav_executor", Navigate, "/navigate", "/sim/navigate", ["NoMaD", "PixNav", "M3", "oracle"]))


def manip_main() -> None:
    _run(lambda: SkillExecutorNode("manip_executor", Manipulate, "/manipulate", "/sim/manipulate", ["octo", "RT-1-X", "M3", "oracle"]))

