"""skill_policy: a learned policy in a low-level model's slot, as a node of its own (docs/skills.md, "The policy as its
own ROS 2 node"; ``homie up sim --skills physical --skill-model RT-1-X=DIR`` starts one per slot, and so does
``--skill-model NoMaD=DIR`` for a Go to policy: "A Go to policy in the graph").

It loads the LeRobot policy folder with the core's loader (:class:`homiebot.skills.learned.SkillPolicy`, after the
same checks as in-process: :func:`homiebot.skills.learned_skill.check_skill_model`) and serves homie_msgs/Manipulate
on ``action`` (default ``/skill_policy/<slot>/manipulate``), to which the manipulation executor forwards a Pick that
names the slot (its ``learned_skills`` parameter). A Pick (:class:`homiebot.ros.policy_skill.InterfacePick`) goes
through the robot's standard interfaces only: the scripted physical skills' refusals, tuck and stance on
FollowJointTrajectory, GripperCommand and NavigateToPose with the world graph of ``state_service``; then the policy's
closed loop on ``/joint_states``, ``/odom``, the skill cameras (``/skill_camera/<camera>/image_raw`` and
``camera_info``) and the arm controller's streamed targets (``/arm_controller/joint_trajectory``); the outcome
from the joints and the world graph, with EMMOE's codes given by the executor (E1 once its tries are spent). Other
operations are answered ``EXECUTION_FAILED`` (the policy serves Pick only).

A policy in a navigation slot (``NoMaD``, ``PixNav``: a Go to policy, the base's velocity) serves homie_msgs/Navigate
instead, on ``action`` (default ``/skill_policy/<slot>/navigate``), to which the navigation executor forwards a Go to
that names the slot: :class:`homiebot.ros.policy_goto.InterfaceGoTo`, the scripted Go to's refusals and the arm's tuck,
then the policy's closed loop on ``/odom``, the head camera (``/skill_camera/head/image_raw``), the goal photo
(asked for on ``/skill_camera/goal/pose``) and ``/cmd_vel`` (geometry_msgs/Twist), the outcome from odometry. Every
run ends with one zero Twist on ``/cmd_vel`` (the base stopped), whether it arrived, failed, raised or its goal was
cancelled (a Go to goal accepts a cancel: the run ends before the next step and the goal is answered canceled with
where the base stopped).

Parameters: ``model`` (the slot, any case), ``policy`` (the folder), ``action``, ``step_budget`` (300 for Pick, 30 s
of the robot's clock; 600 for Go to, 60 s; 0: the skill's), ``threads`` (torch's, 1), ``frame_timeout_s`` (10); for
Go to the base's ``max_linear_speed`` (0.6 m/s) and ``max_angular_speed`` (1 rad/s) and ``short_share`` (0.9: a twist
the base covered less of counts towards blocked); and the physical skills' (``state_service``,
``perception_service``, the interfaces' names, ``goal_timeout_s``, ``state_timeout_s``; see
:mod:`executor_nodes.skill_executors`). A folder that cannot serve stops the node with the reason.
"""

from __future__ import annotations

from typing import Any

from homie_msgs.action import Manipulate, Navigate
from homie_msgs.msg import SkillResult
from rclpy.action import ActionServer, CancelResponse
from rclpy.node import Node

from homiebot.ros import convert
from homiebot.ros.calls import announce_ready
from homiebot.ros.spin import spin_node


def default_action(slot: str) -> str:
    """``/skill_policy/<slot>/manipulate``, for a navigation slot ``/skill_policy/<slot>/navigate`` (the slot in lower
    case, ``-`` as ``_``: a ROS name's characters)."""
    from homiebot.skills.learned_skill import slot_name
    from homiebot.skills.skillset import NAVIGATION_MODELS

    kind = "navigate" if slot_name(slot) in NAVIGATION_MODELS else "manipulate"
    return f"/skill_policy/{slot.lower().replace('-', '_')}/{kind}"


class PolicyNode(Node):
    def __init__(self) -> None:
        super().__init__("skill_policy")
        from executor_nodes.skill_executors import PhysicalSkills
        from homiebot.skills.learned import SkillPolicy
        from homiebot.skills.learned_skill import check_graph_serves, check_skill_model, slot_name
        from homiebot.skills.skillset import NAVIGATION_MODELS

        self.declare_parameter("model", "RT-1-X")
        self.declare_parameter("policy", "")
        self.declare_parameter("action", "")
        self.declare_parameter("step_budget", 0)
        self.declare_parameter("threads", 1)
        self.declare_parameter("frame_timeout_s", 10.0)
        param = lambda name: self.get_parameter(name).value  # noqa: E731 - local shorthand
        self.slot = slot_name(str(param("model")))
        folder = str(param("policy"))
        # An arm policy must take plain cameras: the bridge publishes no image with the target marked.
        check = check_skill_model if self.slot in NAVIGATION_MODELS else check_graph_serves
        inputs = check(self.slot, folder)
        policy = SkillPolicy(folder, threads=int(param("threads")))
        self.physical = PhysicalSkills(self)
        size = next(iter(inputs.images.values()))[1]
        budget = int(param("step_budget"))
        action = str(param("action")) or default_action(self.slot)
        self.learned: Any
        if self.slot in NAVIGATION_MODELS:  # a Go to policy: Navigate, the base on /cmd_vel
            from homiebot.ros.policy_goto import InterfaceGoTo, TopicBaseStream
            from homiebot.skills.learned_goto import GO_TO_STEP_BUDGET, BaseLimits

            # What a twist should move the base by: its speed limits, and the share of that below which a command
            # counts as stopped short (learned_goto.stopped_short; a robot with acceleration limits may need less).
            defaults = BaseLimits()
            self.declare_parameter("max_linear_speed", defaults.max_linear)
            self.declare_parameter("max_angular_speed", defaults.max_angular)
            self.declare_parameter("short_share", defaults.short_share)
            base = TopicBaseStream(self, [c for c in ("head", "goal") if c in inputs.images], size,
                                   timeout_s=float(param("frame_timeout_s")))
            limits = BaseLimits(step_budget=budget or GO_TO_STEP_BUDGET, max_linear=float(param("max_linear_speed")),
                                max_angular=float(param("max_angular_speed")), short_share=float(param("short_share")))
            self.learned = InterfaceGoTo(self.slot, policy, inputs, base, limits)
            # A Go to may be cancelled (``ros2 action send_goal`` interrupted, a client's cancel): the run ends at
            # the next step, with the base stopped as at every end of a run (policy_goto, "The run's end").
            self._server = ActionServer(self, Navigate, action, self._execute_go_to,
                                        cancel_callback=lambda _request: CancelResponse.ACCEPT)
            serves, cameras = "Go to", base.cameras
        else:
            from homiebot.ros.policy_skill import InterfacePick, TopicArmStream
            from homiebot.skills.learned_skill import STEP_BUDGET
            from homiebot.skills.learned_stream import StreamLimits

            stream = TopicArmStream(self, [c for c in ("head", "wrist") if c in inputs.images], size,
                                    timeout_s=float(param("frame_timeout_s")))
            self.learned = InterfacePick(self.slot, policy, inputs, stream, StreamLimits(step_budget=budget or STEP_BUDGET))
            self._server = ActionServer(self, Manipulate, action, self._execute)
            serves, cameras = "Pick", stream.cameras
        self.get_logger().info(f"{self.slot} policy ({inputs.policy_type}, {folder}) ready on {action}: {serves}, "
                               f"cameras {', '.join(cameras)} at {size} px, budget "
                               f"{self.learned.limits.step_budget} steps")
        self._ready = announce_ready(self)

    async def _execute(self, goal_handle):
        goal = goal_handle.request
        if goal.operation != Manipulate.Goal.PICK:
            goal_handle.succeed()
            return Manipulate.Result(result=SkillResult(
                status=SkillResult.EXECUTION_FAILED, detail=f"the {self.slot} policy serves Pick only"))
        return await self._serve(goal_handle, lambda runner: self.learned.pick(runner, goal.object), Manipulate.Result)

    async def _execute_go_to(self, goal_handle):
        goal = goal_handle.request
        cancelled = lambda: goal_handle.is_cancel_requested  # noqa: E731 - asked from the worker thread each step
        return await self._serve(goal_handle, lambda runner: self.learned.go_to(runner, goal.target, cancelled),
                                 Navigate.Result)

    async def _serve(self, goal_handle, skill, result_type):
        """Run the policy's ``skill`` on the robot's interfaces and answer the goal with its result and state."""
        try:
            result, state = await self.physical.run(skill)
        except Exception as err:  # the graph failed (a server or topic that does not answer): abort, as the executors do
            self.get_logger().error(f"{self.get_name()}: {err}")
            goal_handle.abort()
            return result_type()
        line = self.learned.log_line()
        if line:
            self.get_logger().info(line)
        if goal_handle.is_cancel_requested:  # only a Go to accepts a cancel; its result says where it stopped
            goal_handle.canceled()
        else:
            goal_handle.succeed()
        return result_type(result=convert.skill_result_to_msg(result), state=state)

    def destroy_node(self) -> None:
        self.physical.shutdown()
        super().destroy_node()


def main() -> None:
    spin_node(PolicyNode)


if __name__ == "__main__":
    main()
