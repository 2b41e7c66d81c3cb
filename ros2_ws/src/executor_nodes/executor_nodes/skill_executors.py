"""nav_executor and manip_executor: the low-level skill executors between the executor and the robot.

``nav_executor`` serves ``/navigate`` (homie_msgs/Navigate), ``manip_executor`` serves ``/manipulate``
(homie_msgs/Manipulate). Each advertises the low-level models it runs (parameter ``models``; EMMOE table E2:
NoMaD and PixNav navigate, octo opens and closes, RT-1-X picks and puts, M3 and the oracle do everything)
and forwards the goal to the robot side: here the sim bridge's ``/sim/navigate`` / ``/sim/manipulate``
oracle skills, on a real Fetch or Spot the driver's action of the same type (parameter ``robot_action``).

The forwarding is asynchronous (the execute callback awaits the robot side's futures) on a single-threaded
executor: no thread blocks, and no multi-threaded executor adds latency to the responses.

A model the executor does not run is answered with ``EXECUTION_FAILED`` and a reason, never a crash; with
the default (non-strict) executor configuration every listed model may run every action (the model name
selects a noise profile at most), so ``accept_any_model`` is true by default.
"""

from __future__ import annotations

from action_msgs.msg import GoalStatus
from homie_msgs.action import Manipulate, Navigate
from homie_msgs.msg import SkillResult
from rclpy.action import ActionClient, ActionServer
from rclpy.node import Node

from homiebot.ros.calls import announce_ready
from homiebot.ros.spin import spin_node


class SkillExecutorNode(Node):
    """Serves one skill action and forwards it to the robot side (see the module docstring)."""

    def __init__(self, name: str, action_type, action: str, robot_action: str, models: list[str]) -> None:
        super().__init__(name)
        self.declare_parameter("models", models)
        self.declare_parameter("accept_any_model", True)
        self.declare_parameter("robot_action", robot_action)
        # The action it serves: another agent's executor serves its own (PARTNR's human: /human/navigate,
        # launch/config/graph_pair.yaml; a parameter, as action names are not remapped by --ros-args -r here).
        self.declare_parameter("action", action)
        action = str(self.get_parameter("action").value)
        self.action_type = action_type
        self._robot = ActionClient(self, action_type, self.get_parameter("robot_action").value)
        self._server = ActionServer(self, action_type, action, self._execute)
        self.get_logger().info(f"{name} ready on {action}: models {', '.join(self.served_models)}")
        self._ready = announce_ready(self)  # its action server exists: the planner may start (calls.READY_TOPIC)

    @property
    def served_models(self) -> list[str]:
        return list(self.get_parameter("models").value)

    async def _execute(self, goal_handle):
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
        # The caller (the executor) holds the deadline; a robot side that never answers leaves this goal
        # pending, which costs nothing here because the callback only awaits.
        # Blocking is fine here: goals are served one at a time, and discovery runs in DDS's own threads.
        if not self._robot.server_is_ready() and not self._robot.wait_for_server(timeout_sec=30.0):
            self.get_logger().error(f"{self.get_parameter('robot_action').value} is not available")
            goal_handle.abort()
            return self.action_type.Result()
        handle = await self._robot.send_goal_async(goal, feedback_callback=lambda f: goal_handle.publish_feedback(f.feedback))
        if not handle.accepted:
            self.get_logger().error(f"{goal}: rejected by the robot side")
            goal_handle.abort()
            return self.action_type.Result()
        response = await handle.get_result_async()
        if response.status != GoalStatus.STATUS_SUCCEEDED:
            goal_handle.abort()
            return self.action_type.Result()
        goal_handle.succeed()
        return response.result


def nav_main() -> None:
    spin_node(lambda: SkillExecutorNode("nav_executor", Navigate, "/navigate", "/sim/navigate", ["NoMaD", "PixNav", "M3", "oracle"]))


def manip_main() -> None:
    spin_node(lambda: SkillExecutorNode("manip_executor", Manipulate, "/manipulate", "/sim/manipulate", ["octo", "RT-1-X", "M3", "oracle"]))

