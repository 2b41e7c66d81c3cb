"""executor: the EMMOE low-level executor as a ROS 2 action server (``/homie/execute_subtask``).

Each ``ExecuteSubtask`` goal (subtask, model, inventory, optionally the planner's current world state) runs
the core's :class:`homiebot.executor.executor.Executor` unchanged: the checks (F1/F2, L1-L4, D1/D2), the
three tries and the EMMOE messages are the core's. The executor reaches the world through
:class:`homiebot.ros.remote.RemoteSimulator` (skills through the navigation and manipulation executors, whose
results carry the state after each skill; the sim bridge is asked for the state only when the goal carried
none) and runs skills with :class:`homiebot.ros.remote.RemoteSkills`, which knows the skill layer's model
table: a goal carries the model the in-process skill layer would run (a serving one when the planner's
listed model does not serve the action). The result carries the state after the subtask, so the planner
need not ask for it, and a successful Put's release point (``released_at``), which the planner hands to
perception. A subtask the checks reject is a *succeeded* goal whose result carries the error code; a goal is
aborted only when the graph itself fails (a skill server that does not answer).

Threads: the node spins a single-threaded executor; each goal's blocking core call runs in one worker
thread while the goal's (asynchronous) execute callback awaits it, so the responses the worker waits for are
taken by the free executor thread. (A multi-threaded rclpy executor delivered some service responses to
waiting callbacks only after hundreds of milliseconds, up to 2.6 s, under load.)

Parameters (config/homie.yaml): ``grounder`` (``alias``: EMMOE's name map over the simulator state, as
in-process; ``perception``: the perception node's ResolveTarget), ``strict_models``, ``max_tries``,
``far_threshold_m``, ``near_threshold_m``, ``actions``, ``models``, ``state_timeout_s``, ``skill_timeout_s``.

``role`` (``""``: the only agent; ``robot`` or ``human``: one agent of PARTNR's pair) gives the executor its role's
action list and the actions the role lacks, as in-process (:func:`homiebot.multiagent.pair.role_config`: the robot
has no Turn on / Turn off / Clean, answered F1 naming why; both have Wait). The human's executor is this node
remapped into ``/human`` (launch/config/graph_pair.yaml).

The action list follows the episode: on each task the planner node starts (the latched
``/homie/task_started``), a suite task gets :func:`homiebot.tasks.suite.task_actions` (PARTNR-style
tasks switch and clean: the household list; EMMOE's tasks the paper's), the same list the planner offers, and a
free-text instruction the ``actions`` parameter. The task is published before the episode's reset, so it
arrives ahead of the episode's first goal.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

from homie_msgs.action import ExecuteSubtask
from homie_msgs.msg import Task
from homie_msgs.srv import GetWorldState
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.task import Future

from homiebot.executor.executor import Executor, ExecutorConfig
from homiebot.perception.grounding import AliasGrounder
from homiebot.ros import convert
from homiebot.ros.calls import LATCHED_QOS, announce_ready, call_service
from homiebot.ros.remote import RemoteSimulator, RemoteSkills, RemoteTimeouts, ServiceGrounder
from homiebot.ros.spin import spin_node
from homiebot.tasks.suite import TaskError, get_task, task_actions
from homiebot.types import EMMOE_ACTIONS, EMMOE_MODELS, WorldState


class ExecutorNode(Node):
    def __init__(self) -> None:
        super().__init__("executor")
        self.declare_parameter("grounder", "alias")
        self.declare_parameter("strict_models", False)
        defaults = ExecutorConfig()  # the core's defaults (homiebot.config), not copies of them
        self.declare_parameter("max_tries", defaults.max_tries)
        self.declare_parameter("far_threshold_m", defaults.far_threshold_m)
        self.declare_parameter("near_threshold_m", defaults.near_threshold_m)
        self.declare_parameter("actions", list(EMMOE_ACTIONS))
        self.declare_parameter("models", list(EMMOE_MODELS))
        self.declare_parameter("state_timeout_s", 10.0)
        self.declare_parameter("skill_timeout_s", 120.0)
        self.declare_parameter("role", "")
        # Where this executor serves and reaches the world: another agent's executor (PARTNR's human) uses its
        # own, under /human (launch/config/graph_pair.yaml; parameters, as action names are not remapped by
        # --ros-args -r here).
        self.declare_parameter("execute_action", "/homie/execute_subtask")
        self.declare_parameter("navigate_action", "/navigate")
        self.declare_parameter("manipulate_action", "/manipulate")
        self.declare_parameter("state_service", "/sim/get_world_state")

        group = ReentrantCallbackGroup()
        param = lambda name: self.get_parameter(name).value  # noqa: E731 - local shorthand
        self.sim = RemoteSimulator(
            self,
            navigate_action=str(param("navigate_action")),
            manipulate_action=str(param("manipulate_action")),
            state_service=str(param("state_service")),
            timeouts=RemoteTimeouts(state_s=float(param("state_timeout_s")), skill_s=float(param("skill_timeout_s"))),
            callback_group=group,
        )
        self._state_timeout_s = float(param("state_timeout_s"))
        grounder_name = param("grounder")
        if grounder_name == "alias":
            grounder = AliasGrounder()
        elif grounder_name == "perception":
            grounder = ServiceGrounder(self, timeout_s=float(param("state_timeout_s")), callback_group=group)
        else:
            raise ValueError(f"unknown grounder {grounder_name!r}; use 'alias' or 'perception'")
        config = ExecutorConfig(
            actions=tuple(param("actions")),
            models=tuple(param("models")),
            max_tries=int(param("max_tries")),
            far_threshold_m=float(param("far_threshold_m")),
            near_threshold_m=float(param("near_threshold_m")),
            strict_models=bool(param("strict_models")),
        )
        # The skill runner knows which model serves which action (the skill layer's table), as in-process.
        self._role = str(param("role"))
        # In a pair, the other agent's state (its pose and hand: WorldState.agents, which the message lacks) is read
        # of its own service, so the checks name the holder of what the other agent holds as in-process.
        self._other_state = None
        if self._role:
            other = "human" if self._role == "robot" else "robot"
            self._other_state = self.create_client(GetWorldState, f"{convert.ROLE_NAMESPACES[other]}/sim/get_world_state",
                                                   callback_group=group)
        self._grounder, self._skills, self._config = grounder, RemoteSkills(self.sim), config
        self.executor_core = Executor(self.sim, grounder=grounder, config=self._for_role(config.actions),
                                      skills=self._skills)
        self.create_subscription(Task, "/homie/task_started", self._on_task, LATCHED_QOS, callback_group=group)
        # One subtask at a time (the robot has one body): a single worker runs them in order.
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="subtask")
        self._server = ActionServer(
            self,
            ExecuteSubtask,
            str(param("execute_action")),
            self._execute,
            goal_callback=lambda _goal: GoalResponse.ACCEPT,
            cancel_callback=lambda _handle: CancelResponse.REJECT,  # a skill in flight cannot be stopped halfway
            callback_group=group,
        )
        self.get_logger().info(f"executor ready (grounder {grounder_name}, models {', '.join(config.models)})")
        self._ready = announce_ready(self)  # its action server exists: the planner may start (calls.READY_TOPIC)

    def _on_task(self, task: Task) -> None:
        """Offer the episode's action list: what the planner node offers for the same task."""
        actions = self._config.actions  # a free-text instruction: the configured list
        if task.task_id:
            try:
                actions = task_actions(get_task(task.task_id))
            except TaskError as err:  # the planner node refuses the task too; keep the configured list
                self.get_logger().warning(f"task {task.task_id!r}: {err}")
        config = self._for_role(tuple(actions))
        if config.actions != self.executor_core.config.actions:
            # Tasks come between episodes: the worker thread is idle, and it reads the attribute once per goal.
            self.executor_core = Executor(self.sim, grounder=self._grounder, config=config, skills=self._skills)
            self.get_logger().info(f"task {task.task_id or '(free text)'}: actions {', '.join(config.actions)}")

    def _for_role(self, actions: tuple[str, ...]) -> ExecutorConfig:
        """The executor configuration for ``actions``, restricted to this executor's role in a pair."""
        if not self._role:
            return dataclasses.replace(self._config, actions=actions)
        from homiebot.multiagent.centralized import AgentRole
        from homiebot.multiagent.pair import role_executor

        return role_executor(AgentRole[self._role.upper()], dataclasses.replace(self._config, actions=actions))

    async def _execute(self, goal_handle) -> ExecuteSubtask.Result:
        goal = goal_handle.request
        subtask = convert.subtask_from_msg(goal.subtask)
        done = Future(executor=self.executor)
        # A coroutine awaiting a future is resumed when the executor wakes up; completing the future from the
        # worker thread wakes it only through a done callback (scheduled as an executor task), hence this one.
        done.add_done_callback(lambda _future: None)

        def on_phase(phase: str, attempt: int) -> None:
            goal_handle.publish_feedback(ExecuteSubtask.Feedback(phase=phase, attempt=attempt))

        core = self.executor_core  # this goal's episode's executor (see _on_task)

        def work() -> None:
            on_phase("checking", 0)
            # The goal's state (when the planner sent one) is what the checks judge, as in-process.
            self.sim.begin_subtask(goal.model, on_phase, goal.state)
            try:
                state = self._with_agents(self.sim.state()) if self._other_state is not None else None
                report = core.execute_detailed(subtask, goal.model, tuple(goal.inventory), state)
                done.set_result((report, self.sim.current_state_msg()))
            except Exception as err:  # the graph failed (timeout, rejected skill goal): not an EMMOE error
                done.set_exception(err)

        self._worker.submit(work)
        try:
            report, state = await done
        except Exception as err:
            self.get_logger().error(f"round {goal.round_index} {subtask.text()}: {err}")
            goal_handle.abort()
            return ExecuteSubtask.Result()
        goal_handle.succeed()
        result = ExecuteSubtask.Result(
            feedback=convert.feedback_to_msg(report.feedback), path_length=float(report.path_length), state=state
        )
        # A successful Put's release point, from the manipulation executor's SkillResult (docs/ros.md, "Actions
        # into the world graph").
        result.has_released_at, result.released_at = convert.released_at_to_msg(report.released_at)
        return result

    def _with_agents(self, state: WorldState) -> WorldState:
        """``state`` (this agent's view) with both agents listed, as the in-process simulator lists them."""
        other_msg = call_service(self._other_state, GetWorldState.Request(), self._state_timeout_s).state
        mine = next(i for i, name in convert.AGENT_NAMES.items() if name == self._role)
        return convert.with_both_agents(state, mine, convert.world_state_from_msg(other_msg))

    def destroy_node(self) -> None:
        self._worker.shutdown(wait=False, cancel_futures=True)
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    spin_node(ExecutorNode, args)


if __name__ == "__main__":
    main()
