"""skill_policy: a learned policy in a low-level model's slot, as a node of its own (docs/skills.md, "The policy as its
own ROS 2 node"; ``homie up sim --skills physical --skill-model RT-1-X=DIR`` starts one per slot).

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

Parameters: ``model`` (the slot, any case), ``policy`` (the folder), ``action``, ``step_budget`` (300: 30 s of the
robot's clock), ``threads`` (torch's, 1), ``frame_timeout_s`` (10), and the physical skills' (``state_service``,
``perception_service``, the interfaces' names, ``goal_timeout_s``, ``state_timeout_s``; see
:mod:`executor_nodes.skill_executors`). A folder that cannot serve stops the node with the reason.
"""

from __future__ import annotations

from homie_msgs.action import Manipulate
from homie_msgs.msg import SkillResult
from rclpy.action import ActionServer
from rclpy.node import Node

from homiebot.ros import convert
from homiebot.ros.calls import announce_ready
from homiebot.ros.spin import spin_node


def default_action(slot: str) -> str:
    """``/skill_policy/<slot>/manipulate`` (the slot in lower case, ``-`` as ``_``: a ROS name's characters)."""
    return f"/skill_policy/{slot.lower().replace('-', '_')}/manipulate"


class PolicyNode(Node):
    def __init__(self) -> None:
        super().__init__("skill_policy")
        from executor_nodes.skill_executors import PhysicalSkills
        from homiebot.ros.policy_skill import InterfacePick, TopicArmStream
        from homiebot.skills.learned import SkillPolicy
        from homiebot.skills.learned_skill import STEP_BUDGET, check_skill_model, slot_name
        from homiebot.skills.learned_stream import StreamLimits

        self.declare_parameter("model", "RT-1-X")
        self.declare_parameter("policy", "")
        self.declare_parameter("action", "")
        self.declare_parameter("step_budget", STEP_BUDGET)
        self.declare_parameter("threads", 1)
        self.declare_parameter("frame_timeout_s", 10.0)
        param = lambda name: self.get_parameter(name).value  # noqa: E731 - local shorthand
        self.slot = slot_name(str(param("model")))
        folder = str(param("policy"))
        inputs = check_skill_model(self.slot, folder)
        policy = SkillPolicy(folder, threads=int(param("threads")))
        self.physical = PhysicalSkills(self)
        size = next(iter(inputs.images.values()))[1]
        stream = TopicArmStream(self, [c for c in ("head", "wrist") if c in inputs.images], size,
                                timeout_s=float(param("frame_timeout_s")))
        self.learned = InterfacePick(self.slot, policy, inputs, stream, StreamLimits(step_budget=int(param("step_budget"))))
        action = str(param("action")) or default_action(self.slot)
        self._server = ActionServer(self, Manipulate, action, self._execute)
        self.get_logger().info(f"{self.slot} policy ({inputs.policy_type}, {folder}) ready on {action}: Pick, "
                               f"cameras {', '.join(stream.cameras)} at {size} px, budget {param('step_budget')} steps")
        self._ready = announce_ready(self)

    async def _execute(self, goal_handle):
        goal = goal_handle.request
        if goal.operation != Manipulate.Goal.PICK:
            goal_handle.succeed()
            return Manipulate.Result(result=SkillResult(
                status=SkillResult.EXECUTION_FAILED, detail=f"the {self.slot} policy serves Pick only"))
        try:
            result, state = await self.physical.run(lambda runner: self.learned.pick(runner, goal.object))
        except Exception as err:  # the graph failed (a server or topic that does not answer): abort, as the executors do
            self.get_logger().error(f"{self.get_name()}: {err}")
            goal_handle.abort()
            return Manipulate.Result()
        line = self.learned.log_line()
        if line:
            self.get_logger().info(line)
        goal_handle.succeed()
        return Manipulate.Result(result=convert.skill_result_to_msg(result), state=state)

    def destroy_node(self) -> None:
        self.physical.shutdown()
        super().destroy_node()


def main() -> None:
    spin_node(PolicyNode)


if __name__ == "__main__":
    main()
