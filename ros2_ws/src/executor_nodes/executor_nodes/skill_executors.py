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

**Physical skills** (parameter ``skills: physical``; default ``oracle``, the forwarding above): the executors run
the core's physical skills themselves (:class:`homiebot.ros.physical_skills.PhysicalSkillRunner`) on the robot's
standard interfaces (:class:`homiebot.ros.robot_driver.ActionRobotDriver`: ``NavigateToPose``,
``FollowJointTrajectory``, ``GripperCommand``, ``/joint_states``, ``/odom``), planning in the world graph of the
state service (``state_service``, ``/sim/get_world_state`` here), its objects replaced by perception's when
``perception_service`` names one (``/perception/perceive_world``: ``homie up --perception ...`` sets it, as
``homie run`` plans the physical skills in perception's world), and with the arm's inverse kinematics on the URDF
latched on ``/robot_description``. ``nav_executor`` runs every Go to; ``manip_executor`` runs Pick, Put, Open, Close
(the core's arm articulation, parameter ``articulation: physical``, the in-process default) and the arm's reset (a
tuck through the trajectory controller), and still forwards the household skills to ``robot_action`` (the
simulator's oracle skills), and Open and Close with ``articulation: oracle`` (the simulator sets the joint), after
tucking the arm itself when the goal asks for a reset first. So Go to, Pick, Put, Open and Close never reach the
simulator's private actions. The blocking skill runs in one worker thread while the goal's execute callback awaits it, as the
executor node does.

**Learned skills** (parameter ``learned_skills``: ``SLOT=ACTION`` pairs, comma-separated; ``homie up --skill-model``
sets it): a Pick whose model names a slot that holds a policy is forwarded by ``manip_executor`` to that slot's policy
node (executor_nodes/policy_node.py) on ``ACTION`` (homie_msgs/Manipulate), and a Go to whose model names one
(``NoMaD``, ``PixNav``) by ``nav_executor`` on its ``ACTION`` (homie_msgs/Navigate); the node runs the policy through
the standard interfaces and answers with the outcome (each executor takes the pairs of its own kind of slot); every
other goal is served as above (docs/skills.md).

**Cancelling.** A forwarded goal accepts a cancel, and the cancel goes on to the goal it was forwarded to (the robot
side's, or the slot's policy node, which stops the base and answers canceled): the goal is answered canceled with the
forwarded goal's result. A skill run here (``skills: physical``), or a goal not yet accepted where it was forwarded,
refuses the cancel: a physical skill in flight is not stopped halfway, as the executor node does not stop a subtask.
The executor's calls cancel their goal when their deadline passes (homiebot/ros/calls.py), so a policy that never
ends is stopped rather than left driving the base.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from action_msgs.msg import GoalStatus
from homie_msgs.action import Manipulate, Navigate
from homie_msgs.msg import SkillResult
from homie_msgs.srv import GetWorldState, PerceiveWorld
from rclpy.action import ActionClient, ActionServer, CancelResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.task import Future

from homiebot.ros import convert
from homiebot.ros.calls import announce_ready, call_service
from homiebot.ros.spin import spin_node
from homiebot.types import SkillResult as CoreSkillResult

#: The skill settings (homiebot.config.SkillsMode): forward to the robot side's skill action, or run the physical
#: skills on the standard interfaces (module docstring).
ORACLE_SKILLS = "oracle"
PHYSICAL_SKILLS = "physical"


class SkillExecutorNode(Node):
    """Serves one skill action: forwards it to the robot side, or runs it as a physical skill on the standard
    interfaces with ``skills: physical`` (see the module docstring)."""

    def __init__(self, name: str, action_type, action: str, robot_action: str, models: list[str]) -> None:
        super().__init__(name)
        self.declare_parameter("models", models)
        self.declare_parameter("accept_any_model", True)
        self.declare_parameter("robot_action", robot_action)
        # The action it serves: another agent's executor serves its own (PARTNR's human: /human/navigate,
        # launch/config/graph_pair.yaml; a parameter, as action names are not remapped by --ros-args -r here).
        self.declare_parameter("action", action)
        self.declare_parameter("skills", ORACLE_SKILLS)
        self.declare_parameter("learned_skills", "")
        action = str(self.get_parameter("action").value)
        self.action_type = action_type
        self._robot = ActionClient(self, action_type, self.get_parameter("robot_action").value)
        self.physical: PhysicalSkills | None = None
        mode = str(self.get_parameter("skills").value)
        if mode == PHYSICAL_SKILLS:
            self.physical = PhysicalSkills(self)
        elif mode != ORACLE_SKILLS:
            raise ValueError(f"skills {mode!r}: use {ORACLE_SKILLS} or {PHYSICAL_SKILLS}")
        # The slots of this executor's kind: navigation slots' Go tos (Navigate), the others' Picks (Manipulate).
        learned = {slot: name for slot, name in learned_skills(str(self.get_parameter("learned_skills").value)).items()
                   if _navigation_slot(slot) == (action_type is Navigate)}
        self._learned = {slot.lower(): (name, ActionClient(self, action_type, name)) for slot, name in learned.items()}
        self._forwarded: dict[bytes, Any] = {}  # goal id -> the client handle of the goal it was forwarded as
        self._server = ActionServer(self, action_type, action, self._execute, cancel_callback=self._cancel)
        self.get_logger().info(f"{name} ready on {action} ({mode} skills): models {', '.join(self.served_models)}")
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
        # A Pick, or a Go to, whose model names a slot with a policy (module docstring, "Learned skills").
        forwards = isinstance(goal, Navigate.Goal) or getattr(goal, "operation", None) == Manipulate.Goal.PICK
        learned = self._learned.get(goal.model.strip().lower()) if forwards else None
        if learned is not None:  # the slot's policy node runs it (module docstring, "Learned skills")
            return await self._forward(goal_handle, goal, *learned)
        if self.physical is not None:
            run = self.physical.handles(goal)
            if run is not None:
                try:
                    result, state = await self.physical.run(run)
                except Exception as err:  # the graph failed (a server or topic that does not answer): abort
                    self.get_logger().error(f"{self.get_name()}: {err}")
                    goal_handle.abort()
                    return self.action_type.Result()
                goal_handle.succeed()
                return self.action_type.Result(result=convert.skill_result_to_msg(result), state=state)
            if getattr(goal, "reset_arm_first", False):
                # The forwarded skill is the simulator's, the arm is the physical one: tuck it here.
                try:
                    await self.physical.run(lambda runner: runner.tuck())
                except Exception as err:
                    self.get_logger().error(f"{self.get_name()}: {err}")
                    goal_handle.abort()
                    return self.action_type.Result()
                goal.reset_arm_first = False
        return await self._forward(goal_handle, goal)

    def _cancel(self, goal_handle) -> CancelResponse:
        """Pass a cancel on to the forwarded goal (module docstring, "Cancelling"); refuse one for a goal run here."""
        forwarded = self._forwarded.get(bytes(goal_handle.goal_id.uuid))
        if forwarded is None:
            return CancelResponse.REJECT
        forwarded.cancel_goal_async()
        return CancelResponse.ACCEPT

    async def _forward(self, goal_handle, goal, name: str = "", client: ActionClient | None = None):
        # The caller (the executor) holds the deadline; a robot side that never answers leaves this goal
        # pending, which costs nothing here because the callback only awaits.
        # Blocking is fine here: goals are served one at a time, and discovery runs in DDS's own threads.
        client = client or self._robot
        if not client.server_is_ready() and not client.wait_for_server(timeout_sec=30.0):
            self.get_logger().error(f"{name or self.get_parameter('robot_action').value} is not available")
            goal_handle.abort()
            return self.action_type.Result()
        handle = await client.send_goal_async(goal, feedback_callback=lambda f: goal_handle.publish_feedback(f.feedback))
        if not handle.accepted:
            self.get_logger().error(f"{goal}: rejected by the robot side")
            goal_handle.abort()
            return self.action_type.Result()
        key = bytes(goal_handle.goal_id.uuid)
        self._forwarded[key] = handle
        try:
            response = await handle.get_result_async()
        finally:
            del self._forwarded[key]
        if response.status == GoalStatus.STATUS_CANCELED and goal_handle.is_cancel_requested:
            goal_handle.canceled()
            return response.result
        if response.status != GoalStatus.STATUS_SUCCEEDED:
            goal_handle.abort()
            return self.action_type.Result()
        goal_handle.succeed()
        return response.result

    def destroy_node(self) -> None:
        if self.physical is not None:
            self.physical.shutdown()
        super().destroy_node()


def learned_skills(text: str) -> dict[str, str]:
    """``SLOT=ACTION`` pairs, comma-separated (the ``learned_skills`` parameter), as slot -> action name."""
    pairs = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        slot, sep, action = item.partition("=")
        if not sep or not slot.strip() or not action.strip():
            raise ValueError(f"learned_skills {item!r}: give SLOT=ACTION")
        pairs[slot.strip()] = action.strip()
    return pairs


def _navigation_slot(slot: str) -> bool:
    """Whether ``slot`` (any case) is a navigation model's (``NoMaD``, ``PixNav``); an unknown slot stops the node."""
    from homiebot.skills.learned_skill import slot_name
    from homiebot.skills.skillset import NAVIGATION_MODELS

    return slot_name(slot) in NAVIGATION_MODELS


#: One physical skill on the runner, in the worker thread.
SkillCall = Callable[[Any], CoreSkillResult]


class PhysicalSkills:
    """A skill executor's physical side (module docstring): the runner, built on the first goal (the URDF comes
    from ``/robot_description``), and the worker thread it runs in."""

    def __init__(self, node: SkillExecutorNode) -> None:
        from homiebot.ros.robot_driver import ActionRobotDriver, DriverInterfaces, DriverTimeouts, LatchedText

        self.node = node
        node.declare_parameter("state_service", "/sim/get_world_state")
        # With perception on: the objects the skills plan with come from perception (homie_msgs/PerceiveWorld on
        # /perception/perceive_world), as in-process; empty: from the state service.
        node.declare_parameter("perception_service", "")
        # With perception's image-built graph: a look before each read of the world after the robot moved (the four
        # views fused objects-only, homiebot.ros.looks.SkillLooker), as in-process; the robot takes them on
        # look_views_service.
        node.declare_parameter("skill_looks", False)
        node.declare_parameter("look_views_service", "/sim/look_views")
        node.declare_parameter("navigate_to_pose_action", DriverInterfaces.navigate)
        node.declare_parameter("arm_trajectory_action", DriverInterfaces.arm_trajectory)
        node.declare_parameter("gripper_action", DriverInterfaces.gripper)
        node.declare_parameter("robot_description_topic", "/robot_description")
        node.declare_parameter("goal_timeout_s", DriverTimeouts.goal_s)
        node.declare_parameter("state_timeout_s", 10.0)
        # How Open and Close run (homiebot.skills.physical.skillset.ARTICULATIONS): "physical", the arm (the core's
        # default), or "oracle", forwarded to robot_action.
        node.declare_parameter("articulation", PHYSICAL_SKILLS)
        param = lambda name: node.get_parameter(name).value  # noqa: E731 - local shorthand
        group = ReentrantCallbackGroup()
        self.state_timeout_s = float(param("state_timeout_s"))
        self.driver = ActionRobotDriver(
            node,
            DriverInterfaces(navigate=str(param("navigate_to_pose_action")), arm_trajectory=str(param("arm_trajectory_action")),
                             gripper=str(param("gripper_action"))),
            DriverTimeouts(goal_s=float(param("goal_timeout_s")), state_s=self.state_timeout_s),
            callback_group=group,
        )
        self._state = node.create_client(GetWorldState, str(param("state_service")), callback_group=group)
        perception = str(param("perception_service"))
        self._perceive = node.create_client(PerceiveWorld, perception, callback_group=group) if perception else None
        self._told_perception = False
        self._looker = None
        if self._perceive is not None and bool(param("skill_looks")):
            from homiebot.ros.looks import SkillLooker

            self._looker = SkillLooker(node, str(param("look_views_service")), self.state_timeout_s,
                                       callback_group=group)
        self._description = LatchedText(node, str(param("robot_description_topic")), callback_group=group)
        self._runner: Any = None  # homiebot.ros.physical_skills.PhysicalSkillRunner, built on the first goal
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="physical-skill")
        articulation = str(param("articulation"))
        if articulation not in (ORACLE_SKILLS, PHYSICAL_SKILLS):
            raise ValueError(f"articulation {articulation!r}: use {ORACLE_SKILLS} or {PHYSICAL_SKILLS}")
        self.articulation = articulation == PHYSICAL_SKILLS

    def handles(self, goal) -> SkillCall | None:
        """The physical skill for a goal, or None when the goal is forwarded (household skills; Open and Close with
        ``articulation: oracle``)."""
        if isinstance(goal, Navigate.Goal):
            return lambda runner: runner.go_to(goal.target)
        operations: dict[int, SkillCall] = {
            Manipulate.Goal.PICK: lambda runner: runner.pick(goal.object),
            Manipulate.Goal.PUT: lambda runner: runner.put(goal.object, goal.place),
            Manipulate.Goal.RESET_ARM: lambda runner: runner.tuck(),
        }
        if self.articulation:
            operations[Manipulate.Goal.OPEN] = lambda runner: runner.open(goal.object)
            operations[Manipulate.Goal.CLOSE] = lambda runner: runner.close(goal.object)
        # Each starts with a tuck anyway: a goal's reset-first asks for nothing more.
        return operations.get(goal.operation)

    async def run(self, call: SkillCall):
        """Run ``call`` on the runner in the worker thread; (its result, the world state after it)."""
        done = Future(executor=self.node.executor)
        # A coroutine awaiting a future is resumed when the executor wakes up; completing the future from the
        # worker thread wakes it only through a done callback (scheduled as an executor task), hence this one.
        done.add_done_callback(lambda _future: None)

        def work() -> None:
            try:
                result = call(self._runner_now())
                done.set_result((result, self._world_msg()))
            except Exception as err:
                done.set_exception(err)

        self._worker.submit(work)
        return await done

    def _runner_now(self):
        if self._runner is None:
            from homiebot.ros.physical_skills import PhysicalSkillRunner
            from homiebot.skills.physical.manipulation import sim_arm_setup

            urdf = self._description.get(self.state_timeout_s)
            # A Put's outcome from the state service (what happened), whatever the skills plan in.
            self._runner = PhysicalSkillRunner(self.driver, self._world, urdf, sim_arm_setup(),
                                               outcome=lambda: convert.world_state_from_msg(self._world_msg()))
        return self._runner

    def _world_msg(self):
        return call_service(self._state, GetWorldState.Request(), self.state_timeout_s).state

    def _world(self):
        """The world the skills plan in: the state service's, its objects perception's when perception is on (the
        skills' result still carries the state service's world: what happened, not what was seen)."""
        msg = self._world_msg()
        if self._looker is not None:
            self._looker.look_if_due(msg)  # the objects from where the robot stands now, first
        if self._perceive is not None:
            answer = call_service(self._perceive, PerceiveWorld.Request(state=msg), self.state_timeout_s)
            if not answer.ok:
                raise RuntimeError(f"perception cannot give the skills a world: {answer.error}")
            msg = answer.state
            if not self._told_perception:
                self._told_perception = True
                self.node.get_logger().info(f"the skills plan with perception's objects ({self._perceive.srv_name})")
        return convert.world_state_from_msg(msg)

    def shutdown(self) -> None:
        self._worker.shutdown(wait=False, cancel_futures=True)
        self.driver.destroy()


def nav_main() -> None:
    spin_node(lambda: SkillExecutorNode("nav_executor", Navigate, "/navigate", "/sim/navigate", ["NoMaD", "PixNav", "M3", "oracle"]))


def manip_main() -> None:
    spin_node(lambda: SkillExecutorNode("manip_executor", Manipulate, "/manipulate", "/sim/manipulate", ["octo", "RT-1-X", "M3", "oracle"]))

