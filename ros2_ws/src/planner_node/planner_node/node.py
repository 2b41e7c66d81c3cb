"""planner_node: EMMOE's high-level planner as a ROS 2 node.

Per round (EMMOE appendix D): take the four views from the sim bridge (``/sim/render_views``), ask the
planner, publish its answer (``/homie/planner_output``), send the subtask with the current world state to
the executor (``/homie/execute_subtask`` action, with a deadline), fold the feedback and the state after the
subtask back in and publish ``/homie/episode_status``. The episode is built by
the one build path (:func:`homiebot.agent.build.build_episode`) from its run configuration, over this node's
clients (:class:`RosEpisodeBackend`): the core loop's order of calls, the planner built from the configuration (a
pair's by :func:`homiebot.multiagent.pair.pair_planners`), and the record keeping the configuration as
``summary.json``'s ``run``, so ``homie run --config RECORD/summary.json`` repeats a graph episode in one process.

Two agents (PARTNR's robot and human; docs/collaboration.md, docs/ros.md): ``role`` is the agent this node's
``planner`` drives, ``robot`` (its services and actions ``/sim/...``, ``/homie/execute_subtask``; its topics
``/homie/...``) or ``human`` (the same under ``/human``: the sim bridge with ``human:=true`` and the executors
remapped there, launch/config/graph_pair.yaml). With ``partner_planner`` set, the node drives the human too, in
the core loop's lock-step rounds (``homiebot.agent.loop.AgentSlot``): the pair of
:func:`homiebot.multiagent.pair.make_pair_planners` (``mode``: decentralized or centralized), each agent with
its role's action list, the human's rounds published on ``/human/homie/planner_output`` and
``/human/homie/episode_status``, and listed in the result file as ``partner_rounds``.

Looks (``looks``, default false; ``homie up --perception`` sets it): after a Go to or an Open succeeded, the loop
decides where the head camera looks (:func:`homiebot.agent.looks.look_target`, as in one process) and this node's
backend takes the look through the robot's head and torso controllers (control_msgs/FollowJointTrajectory on
``/head_controller`` and ``/torso_controller``), waiting until the perception node has fused the head camera's
view (:mod:`homiebot.ros.looks`; docs/ros.md, "Looks through the graph").

Perception's names (``perceived_names``, default false; ``homie up --perception`` sets it): a privileged planner
(the expert) is told the perception node's names of the instances it knows (``bowl_1`` for the bowl perception
found first, whatever the simulator calls it), as in one process (:mod:`homiebot.ros.perceived_names`), so that the
executor's grounding through perception finds what the planner names.

Actions into perception (with ``looks`` or ``perceived_names``, i.e. a perception node in the graph): each successful
subtask, in the instance names perception grounded it to, with the state after it and a Put's release point
(``released_at`` of the executor's result), goes to the perception node's ``/perception/apply_action`` as soon as the
executor has answered, before the loop asks for the next views, as one process records an action before it observes
(:mod:`homiebot.ros.perception_actions`; docs/ros.md, "Actions into the world graph").

Tasks come from the parameters (``task`` id or ``instruction`` + ``scene``) or from the latched
``/homie/task`` topic (homie_msgs/Task). With ``exit_when_done`` the node exits after one episode with
status 0 (episode ran; the result says whether it succeeded), 3 (a server did not answer in time) or
1 (anything else went wrong), after writing ``result_path`` (JSON) when given.
"""

from __future__ import annotations

import json
import logging
import queue
import sys
import threading
import time
from pathlib import Path
from typing import Any

import rclpy
from homie_msgs.action import ExecuteSubtask
from homie_msgs.msg import EpisodeStatus, PlannerOutput, Task
from homie_msgs.msg import WorldState as WorldStateMsg
from homie_msgs.srv import GetWorldState, RenderViews, ResetEpisode
from rclpy.action import ActionClient
from rclpy.duration import Duration
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node

from homiebot.agent.build import build_episode, resolved_skills
from homiebot.agent.knowledge import KnowledgeFactory, WorldKnowledge
from homiebot.agent.looks import LOOK_AFTER, Look
from homiebot.agent.loop import EpisodeOutcome
from homiebot.agent.observers import ObserverBase
from homiebot.agent.recording import MotionFeed
from homiebot.config import HISTORY_WINDOW, MAX_ROUNDS, NoiseMode, SkillsMode
from homiebot.config.run import run_config
from homiebot.data.record import EpisodeRecorder
from homiebot.eval.manifest import EXPERT_PLANNER, task_expert
from homiebot.eval.partnr.recording import StatesFileRecorder
from homiebot.files import atomic_write_json
from homiebot.planner.registry import configure_planner
from homiebot.recovery.cli import recovery_config_from_parameters, write_episode_stats
from homiebot.recovery.stats import summarize, summary_line
from homiebot.ros import convert
from homiebot.ros.calls import EVENTS_QOS, LATCHED_QOS, ReadinessWatch, call_action, call_service
from homiebot.ros.episode import ExecutionOutcome
from homiebot.ros.looks import HeadLooker, LookFailed
from homiebot.ros.motion_views import MotionCollector
from homiebot.ros.perceived_names import PerceivedNames, PerceivedNamesKnowledge
from homiebot.ros.perception_actions import ActionHandover
from homiebot.ros.spin import ShutdownSignals
from homiebot.sim.scene import SceneSpec
from homiebot.tasks.suite import TaskSpec, get_task
from homiebot.types import Action, Observation, RoundRecord, Subtask, Trajectory, WorldState

EXIT_TIMEOUT = 3


class RosEpisodeBackend:
    """:class:`homiebot.ros.episode.EpisodeBackend` over the sim bridge's services and the executor's action.

    Round trips are what a graph round costs (``benchmarks/bench_ros.py``), so the backend keeps what it
    already knows: the last world state it received (from the reset, the bridge or the executor's result)
    goes out with the next ``ExecuteSubtask`` goal, the result's state is the state after the round, and
    the views of a state it has already rendered (same ``state_sequence``: a round that executed nothing)
    are not fetched again. Views are fetched as RGB only, or with the instance segmentation (``observe``) for
    planners that read the observation (:func:`homiebot.ros.episode.reads_observation`: not the expert).
    """

    def __init__(self, node: PlannerNode, namespace: str = "", partner_namespace: str | None = None) -> None:
        """``namespace``: where the agent this node drives is served ("" the robot, "/human" the human);
        ``partner_namespace``: the second agent's, in a two-agent episode (the loop then passes ``agent=``)."""
        self.node = node
        self._reset = node.create_client(ResetEpisode, "/sim/reset")
        self._ports = {0: _AgentPort(node, namespace)}
        self._begin_round = None
        if partner_namespace is not None:
            self._ports[1] = _AgentPort(node, partner_namespace)
            self._begin_round = node.create_client(GetWorldState, "/sim/begin_round")
        self.sim_time = 0.0  # the simulated time of the newest state or views received (docs/ros.md, "Time")
        #: The physical skills' reaching views from the bridge's topics, when the record keeps them (PlannerNode).
        self.motion: MotionCollector | None = None
        # Per agent, (round index, state version) of the last subtask sent: the world its round was planned on.
        self._acted_on: dict[int, tuple[int, int]] = {}
        #: The head's looks for the perception node (PlannerNode's ``looks``), or None: the loop then takes none.
        self.looker: HeadLooker | None = None
        #: The perception node's names for a privileged planner (PlannerNode's ``perceived_names``), or None.
        self.perceived: PerceivedNames | None = None
        #: Successful subtasks handed to the perception node before the next views (PlannerNode's ``looks`` or
        #: ``perceived_names``: the graph has a perception node), or None: perception reads the round's status.
        self.actions: ActionHandover | None = None
        self.views_time: float | None = None  # the stamp of the robot's newest views (s)

    @property
    def knowledge_factory(self) -> KnowledgeFactory | None:
        """What the loop knows of the world when the graph has a perception node: perception's names for a
        privileged planner, as in one process (:mod:`homiebot.ros.perceived_names`); None: the views' segmentation."""
        names = self.perceived
        if names is None:
            return None

        def knowledge(scene: SceneSpec | None, initial: WorldState) -> WorldKnowledge:
            return PerceivedNamesKnowledge(names, lambda: self.views_time)

        return knowledge

    @property
    def perception_looks(self) -> bool:
        """The loop looks on arrival although its own knowledge does not perceive: the perception node fuses the
        head camera's view (:class:`homiebot.agent.loop.LooksInto`)."""
        return self.looker is not None

    def look_at(self, target: tuple[float, float, float], raise_torso: bool = True) -> Observation | None:
        """The look the loop decided (:class:`homiebot.agent.loop.LooksInto`), through the robot's head and torso
        controllers; None always: the perception node has fused the view when this returns. A look that cannot be
        taken (a goal refused or aborted) is logged and skipped, as in one process a robot without a head looks
        nowhere."""
        port = self._ports[0]
        if self.looker is None or port.state_msg is None:
            return None
        base = convert.pose_to_pose2d(port.state_msg.robot_pose)
        try:
            motion = self.looker.look(Look(target, raise_torso), base)
        except LookFailed as err:
            self.node.get_logger().warning(f"look at {tuple(round(v, 2) for v in target)} not taken: {err}")
            return None
        self.node.get_logger().info(
            f"looked at {tuple(round(v, 2) for v in target)}: {len(motion.goals())} joint goals"
            f"{' (torso up)' if raise_torso else ''}")
        return None

    def _received(self, header: Any) -> None:
        self.sim_time = max(self.sim_time, convert.time_seconds(header.stamp))

    @property
    def state_sequence(self) -> int:
        """The simulator state version the planner's next answer is based on."""
        return self.state_sequence_of(0)

    def state_sequence_of(self, agent: int) -> int:
        port = self._ports[agent]
        return port.state_msg.state_sequence if port.state_msg is not None else 0

    def planned_on(self, agent: int, round_index: int) -> int:
        """The world version ``agent``'s round ``round_index`` was planned on, asked after the round: the state its
        subtask's goal carried, or, when the round executed nothing (End, Wait, an unparseable answer), the state
        known now (nothing moved in between)."""
        acted = self._acted_on.get(agent)
        if acted is not None and acted[0] == round_index:
            return acted[1]
        return self.state_sequence_of(agent)

    def motion_feed(self) -> MotionFeed | None:
        """The reaching views for the episode's record (homiebot.agent.recording.MotionFeed), or None."""
        if self.motion is None:
            return None
        return MotionFeed(self.motion.take, lambda: self.sim_time, self.motion.drain)

    def reset(self, scene: str, seed: int):
        if self.motion is not None:
            self.motion.clear()
        for port in self._ports.values():
            port.state_msg, port.views = None, None
        self.views_time = None
        if self.perceived is not None:  # the last episode's graph names nothing of this one
            self.perceived.reset()
        response = call_service(self._reset, ResetEpisode.Request(scene=scene, seed=seed), self.node.service_timeout_s)
        if not response.success:
            raise RuntimeError(response.message)
        spec = SceneSpec.model_validate_json(response.scene_description) if response.scene_description else None
        self.sim_time = convert.time_seconds(response.state.header.stamp)  # a reset restarts the clock
        if self._ports[0].namespace:  # the node drives the human: its first state is the human's view of the world
            return self.state(), spec
        self._ports[0].state_msg = response.state
        return self._with_agents(0, convert.world_state_from_msg(response.state)), spec

    def begin_round(self) -> None:
        """A lock-step round of a two-agent episode begins: the bridge syncs the agents' clocks (as in-process)."""
        if self._begin_round is None:
            return
        response = call_service(self._begin_round, GetWorldState.Request(), self.node.service_timeout_s)
        self._received(response.state.header)  # nothing moved: the states known stay current

    def render(self, agent: int = 0):
        return self._fetch_views(agent, segmentation=False)

    def observe(self, agent: int = 0) -> Observation:
        return self._fetch_views(agent, segmentation=True)

    def _fetch_views(self, agent: int, segmentation: bool):
        """The RGB images, or the observation with segmentation; not fetched again for an unchanged state."""
        port = self._ports[agent]
        if port.views is None or port.views[0] != (self.state_sequence_of(agent), segmentation):
            request = RenderViews.Request(include_depth=False, include_segmentation=segmentation)
            views = call_service(port.render, request, self.node.service_timeout_s).views
            self._received(views.header)
            if agent == 0:
                self.views_time = convert.time_seconds(views.header.stamp)
            value = convert.observation_from_msg(views) if segmentation else convert.multiview_images(views)
            port.views = ((views.state_sequence, segmentation), value)
        return port.views[1]

    def state(self, agent: int = 0):
        port = self._ports[agent]
        response = call_service(port.state, GetWorldState.Request(), self.node.service_timeout_s)
        port.state_msg = response.state
        self._received(response.state.header)
        return self._with_agents(agent, convert.world_state_from_msg(response.state))

    def _with_agents(self, agent: int, state: WorldState) -> WorldState:
        """In a two-agent episode, ``state`` (``agent``'s view) with both agents listed (``WorldState.agents``, as the
        in-process simulator gives it: a centralized planner reads both from one state). The message carries only
        the viewing agent, so the other's pose and hand come from its own state of the same world version (asked
        of the bridge when the one known is older)."""
        if len(self._ports) == 1:
            return state
        other = 1 - agent
        port, mine = self._ports[other], self._ports[agent].state_msg
        if port.state_msg is None or mine is None or port.state_msg.state_sequence != mine.state_sequence:
            port.state_msg = call_service(port.state, GetWorldState.Request(), self.node.service_timeout_s).state
        return convert.with_both_agents(state, agent, convert.world_state_from_msg(port.state_msg))

    def execute(self, subtask: Subtask, model: str, inventory: tuple[str, ...], round_index: int, agent: int = 0):
        port = self._ports[agent]
        goal = ExecuteSubtask.Goal(
            subtask=convert.subtask_to_msg(subtask), model=model, inventory=list(inventory), round_index=round_index,
            state=port.state_msg or WorldStateMsg(),
        )
        self._acted_on[agent] = (round_index, goal.state.state_sequence)
        started = time.perf_counter()
        # Before the goal, as the executor grounds them: after a Pick or a Put the object's node is where the hand
        # took it, and its name may ground elsewhere until perception has seen it again.
        grounded = self._grounded(subtask) if agent == 0 else None
        for other in self._ports.values():  # the world changes now; an aborted goal leaves it unknown
            other.state_msg = None
        result = call_action(port.execute, goal, self.node.execute_timeout_s)
        timings = {"execute_s": time.perf_counter() - started}
        feedback = convert.feedback_from_msg(result.feedback)
        if self.looker is not None and agent == 0:
            self.looker.robot_moved()
        after = None
        if result.state.state_sequence > 0:
            port.state_msg = result.state
            self._received(result.state.header)
            after = self._with_agents(agent, convert.world_state_from_msg(result.state))
        # A successful Put's release point (the skill's SkillResult.released_at), for the world graph.
        released = convert.released_at_from_msg(result.has_released_at, result.released_at) if feedback.success else None
        if self.actions is not None and feedback.success and grounded is not None and after is not None:
            # Perception changes its graph now, before the loop asks for the views after the subtask, as one process
            # records the action before it observes (homiebot.ros.perception_actions).
            self.actions.apply(grounded, round_index, result.state, released)
        return ExecutionOutcome(feedback, float(result.path_length), timings, after, grounded, released_at=released)

    def _grounded(self, subtask: Subtask) -> Subtask | None:
        """The round's subtask in simulator instances, as perception grounds the planner's words (the executor's
        result does not name them; asked before the goal, as the executor asks): for the loop's look at the
        furniture a Go to, an Open or a Put reached (homiebot.ros.looks), and, for every round with a target, when the
        planner speaks perception's names (the record's grounding, which the EMMOE judge reads) or when the backend
        hands successful subtasks to perception (homiebot.ros.perception_actions)."""
        if not subtask.target or (self.looker is None and self.perceived is None):
            return None
        if self.perceived is None and self.actions is None and Action.parse(subtask.action) not in LOOK_AFTER:
            return None
        ground = self.perceived.ground if self.perceived is not None else self.looker.ground  # type: ignore[union-attr]
        target = ground(subtask.target)
        if target is None:
            return None
        return Subtask(subtask.action, target, ground(subtask.place) if subtask.place else None)


class _AgentPort:
    """One agent's clients (its world state, views and executor, under its namespace) and what the backend
    already knows of it: the last state received and the views of a state version."""

    def __init__(self, node: Node, namespace: str) -> None:
        self.namespace = namespace
        self.state = node.create_client(GetWorldState, f"{namespace}/sim/get_world_state")
        self.render = node.create_client(RenderViews, f"{namespace}/sim/render_views")
        self.execute = ActionClient(node, ExecuteSubtask, f"{namespace}/homie/execute_subtask")
        self.state_msg: WorldStateMsg | None = None
        self.views: tuple[tuple[int, bool], Any] | None = None  # ((state_sequence, with segmentation), views)


def _rounds_json(rounds: list[RoundRecord]) -> list[dict]:
    return [
        {
            "index": r.index,
            "subtask": r.subtask_text,
            "model": r.output.model,
            "code": r.feedback.code.value,
            "message": r.feedback.message,
            "inventory": list(r.feedback.inventory),
            "attempts": r.feedback.attempts,
            "path_length": r.path_length,
            "timings": r.timings,
        }
        for r in rounds
    ]


def trajectory_summary(trajectory: Trajectory, timed_out: bool, sim_time: float | None = None) -> dict:
    """The result file: what `homie up sim` prints and the graph tests compare with the in-process loop
    (``sim_time``: the simulated time of the newest state or views the planner received)."""
    summary = {
        "task_id": trajectory.task_id,
        "instruction": trajectory.instruction,
        "scene": trajectory.scene,
        "seed": trajectory.seed,
        "planner": trajectory.planner,
        "ended": trajectory.ended,
        "goal_satisfied": trajectory.goal_satisfied,
        "timed_out": timed_out,
        "error": trajectory.error,
        "path_length": trajectory.path_length,
        "wall_time_s": trajectory.wall_time_s,
        "sim_time_s": sim_time,
        "rounds": _rounds_json(trajectory.rounds),
    }
    if trajectory.partner_planner is not None:  # a two-agent episode: the human's planner and rounds
        summary["partner_planner"] = trajectory.partner_planner
        summary["partner_rounds"] = _rounds_json(trajectory.partner_rounds)
    return summary


ROLE_NAMESPACES = convert.ROLE_NAMESPACES


class _RoundsPublished(ObserverBase):
    """Publishes the robot's episode status after every round (/homie/episode_status)."""

    def __init__(self, node: PlannerNode, task_id: str) -> None:
        self.node = node
        self.task_id = task_id
        self.trajectory: Trajectory | None = None

    def on_start(self, trajectory: Trajectory, state: Any, observation: Observation | None) -> None:
        self.trajectory = trajectory

    def on_round(self, record: RoundRecord, seen: Observation | None, state: Any) -> None:
        assert self.trajectory is not None  # on_start comes first
        self.node._publish_round(self.task_id, record, self.trajectory)


class _PartnerRounds(ObserverBase):
    """Publishes the human's rounds of a two-agent episode on /human/homie/planner_output and
    /human/homie/episode_status, as the robot's are published on /homie/... (after the round: the output names the
    world version it was planned on, :meth:`RosEpisodeBackend.planned_on`)."""

    def __init__(self, node: PlannerNode, task_id: str) -> None:
        self.node = node
        self.task_id = task_id

    def on_partner_round(self, record: RoundRecord, seen: Observation | None, state: Any) -> None:
        node = self.node
        output = convert.planner_output_to_msg(record.output, record.index, record.instruction, node.backend.sim_time)
        # The world version the human planned on, as the robot's outputs carry theirs: bag replay matches the human's
        # round with its views and state by it (homiebot.ros.replay).
        output.state_sequence = node.backend.planned_on(record.agent, record.index)
        node._partner_output_pub.publish(output)
        status = EpisodeStatus(header=convert.header(node.backend.sim_time), task_id=self.task_id,
                               state=EpisodeStatus.RUNNING, goal=EpisodeStatus.GOAL_UNKNOWN,
                               round_index=record.index, last_subtask=record.subtask_text,
                               last_feedback=convert.feedback_to_msg(record.feedback))
        node._partner_status_pub.publish(status)


class PlannerNode(Node):
    def __init__(self) -> None:
        super().__init__("planner_node")
        for name, default in (
            ("planner", "expert"),
            ("planner_options", "{}"),
            ("task", ""),
            ("instruction", ""),
            ("scene", ""),
            ("seed", 0),
            ("max_rounds", MAX_ROUNDS),  # the core's defaults (homiebot.config), not copies of them
            ("history_window", HISTORY_WINDOW),
            ("render", True),
            ("execute_timeout_s", 300.0),
            ("service_timeout_s", 30.0),
            ("result_path", ""),
            # The episode record homie run writes (homiebot.data.record), for homie metrics and the eval tables.
            ("record_dir", ""),
            ("record_images", False),
            ("exit_when_done", False),
            ("await_subscribers", 0),
            # Comma-separated node names that must report ready (calls.READY_TOPIC) before an episode starts.
            ("await_nodes", ""),
            ("ready_timeout_s", 120.0),
            # The Foxglove live view (homiebot.live; docs/reports.md) on this loopback port; -1: none, 0: a free one.
            ("live_port", -1),
            # Failure recovery around the planner (homie up --recovery/--recovery-stages/--recovery-search;
            # docs/recovery.md): "" leaves the planner alone / the wrapper's defaults.
            ("recovery", ""),
            ("recovery_stages", ""),
            ("recovery_search", ""),
            # Two agents (module docstring): the agent this node's planner drives, the human's planner ("": none)
            # and how the pair is controlled.
            ("role", "robot"),
            ("partner_planner", ""),
            ("mode", "decentralized"),
            # The graph's simulator and skill settings (the sim bridge's and the executor nodes' own parameters,
            # which the launch file sets here too): what the record's run configuration says the episode ran with.
            ("simulator", "mujoco"),
            ("noise", NoiseMode.OFF.value),
            ("skills", SkillsMode.ORACLE.value),
            # How the physical skills open and close doors and drawers (homie up --articulation, docs/robots.md); ""
            # the skill set's default, which the record names as homie run's does.
            ("articulation", ""),
            # The learned policies in model slots (JSON: slot -> folder; homie up --skill-model), served by the
            # policy nodes: the record's skills.models, as homie run's.
            ("skill_models", "{}"),
            # Looks on arrival through the head and torso controllers, fused by the perception node (module docstring).
            ("looks", False),
            # A privileged planner speaks the perception node's names (module docstring).
            ("perceived_names", False),
        ):
            self.declare_parameter(name, default)
        role = str(self.param("role"))
        if role not in ROLE_NAMESPACES:
            raise ValueError(f"unknown role {role!r}; choose {' or '.join(ROLE_NAMESPACES)}")
        if self.param("partner_planner") and role != "robot":
            raise ValueError("partner_planner: the robot's node drives the pair (role robot)")
        self.live = None
        if int(self.param("live_port")) >= 0:
            from homiebot.live import FoxgloveLiveView, LiveViewConfig

            self.live = FoxgloveLiveView(LiveViewConfig(port=int(self.param("live_port")))).start()
            self.get_logger().info(f"live view on ws://127.0.0.1:{self.live.port}")
        self.execute_timeout_s = float(self.param("execute_timeout_s"))
        self.service_timeout_s = float(self.param("service_timeout_s"))
        namespace = ROLE_NAMESPACES[role]
        self.pair = bool(self.param("partner_planner"))
        self.backend = RosEpisodeBackend(self, namespace, ROLE_NAMESPACES["human"] if self.pair else None)
        if self.param("looks"):
            if self.pair or role != "robot":
                raise ValueError("looks: the graph's perception node sees through the robot's cameras only (one agent)")
            self.backend.looker = HeadLooker(self, goal_timeout_s=self.service_timeout_s,
                                             fuse_timeout_s=self.service_timeout_s)
        if self.param("perceived_names"):
            if self.pair or role != "robot":
                raise ValueError("perceived_names: the graph's perception node sees through the robot's cameras only")
            self.backend.perceived = PerceivedNames(self, timeout_s=self.service_timeout_s)
        if self.param("looks") or self.param("perceived_names"):  # the graph has a perception node (module docstring)
            self.backend.actions = ActionHandover(self, timeout_s=self.service_timeout_s)
        if self.param("record_images") and role == "robot":
            # The record keeps the physical skills' reaching views too, when the bridge publishes them (physical
            # mode with motion_views: homiebot.ros.motion_views).
            self.backend.motion = MotionCollector()
            self.backend.motion.subscribe(self)
        self._readiness = ReadinessWatch(self)
        self._output_pub = self.create_publisher(PlannerOutput, f"{namespace}/homie/planner_output", EVENTS_QOS)
        self._status_pub = self.create_publisher(EpisodeStatus, f"{namespace}/homie/episode_status", EVENTS_QOS)
        self._partner_output_pub = self._partner_status_pub = None
        if self.pair:
            human = ROLE_NAMESPACES["human"]
            self._partner_output_pub = self.create_publisher(PlannerOutput, f"{human}/homie/planner_output", EVENTS_QOS)
            self._partner_status_pub = self.create_publisher(EpisodeStatus, f"{human}/homie/episode_status", EVENTS_QOS)
        self._task_pub = self.create_publisher(Task, "/homie/task_started", LATCHED_QOS)
        self.tasks: queue.Queue[Task] = queue.Queue()
        self.exit_code: int | None = None
        #: Set when the process shuts down (a signal, the executor stopped): an episode cut short then is not a failure.
        self.stopping = threading.Event()
        self.create_subscription(Task, "/homie/task", self.tasks.put, LATCHED_QOS)
        if self.param("task") or self.param("instruction"):
            self.tasks.put(self._task_from_parameters())
        self._publish_status(EpisodeStatus.WAITING, task_id="")

    def param(self, name: str):
        return self.get_parameter(name).value

    def _task_from_parameters(self) -> Task:
        task_id = self.param("task")
        if task_id:
            spec = get_task(task_id)
            return convert.task_msg(spec.id, self.param("instruction") or spec.instruction, self.param("scene") or spec.scene,
                                    int(self.param("seed")), int(self.param("max_rounds")))
        if not self.param("scene"):
            raise ValueError("a free-text instruction needs the 'scene' parameter")
        return convert.task_msg("", self.param("instruction"), self.param("scene"), int(self.param("seed")), int(self.param("max_rounds")))

    # ------------------------------------------------------------------------------------ episodes

    def _await_subscribers(self) -> None:
        """With ``await_subscribers`` = N, start an episode only once N subscribers (a recorder, a test's
        listener) listen to the planner outputs and the episode status: an episode can be over before a
        new process has discovered the planner, and a late joiner would then miss it."""
        wanted = int(self.param("await_subscribers"))
        deadline = time.monotonic() + self.service_timeout_s
        while wanted > 0 and time.monotonic() < deadline:
            if min(self._output_pub.get_subscription_count(), self._status_pub.get_subscription_count()) >= wanted:
                return
            time.sleep(0.02)
        if wanted > 0:
            self.get_logger().warning(f"fewer than {wanted} subscribers after {self.service_timeout_s:.0f} s; starting anyway")

    def _await_nodes(self) -> None:
        """Start an episode only once every node of ``await_nodes`` has said it is ready: a handshake, so that a
        node that starts slowly (perception, niced, under load) is part of the episode from its first round."""
        names = [name.strip() for name in str(self.param("await_nodes")).split(",") if name.strip()]
        missing = self._readiness.wait(names, float(self.param("ready_timeout_s")))
        if missing:
            raise RuntimeError(f"node(s) {', '.join(missing)} did not report ready within "
                               f"{float(self.param('ready_timeout_s')):.0f} s (see their logs)")

    def run_task(self, task: Task) -> EpisodeOutcome:
        self._await_nodes()
        self._await_subscribers()
        self.backend.sim_time = 0.0  # the episode's reset restarts the simulated clock
        spec = get_task(task.task_id) if task.task_id else None
        if spec is not None:  # a Task with only its id: the suite knows its scene and instruction
            task.scene = task.scene or spec.scene
            task.instruction = task.instruction or spec.instruction
        options = json.loads(self.param("planner_options") or "{}")
        planner = human = None
        if self.pair:  # the pair's planners, as homie eval --agents makes them; the build gives each its role
            from homiebot.config.collaboration import CollaborationConfig
            from homiebot.multiagent.pair import pair_planners

            pair = CollaborationConfig.from_options(options=options, suite="", mode=str(self.param("mode")),
                                                    planner_robot=str(self.param("planner")),
                                                    planner_human=str(self.param("partner_planner")))
            setting = pair.robot_planner_config()
            partner: dict[str, object] | None = {"planner": pair.planner_human, "mode": pair.mode}
            planner, human = pair_planners(pair)
        else:
            name = str(self.param("planner"))
            if name == EXPERT_PLANNER and task.task_id:
                name = task_expert(task.task_id)  # a PARTNR-style task's expert, as homie run and homie eval play it
            # The planner's run configuration (homiebot.config.planners), typed and checked as homie run's.
            setting = recovery_config_from_parameters(configure_planner(name, options), self.param("recovery"),
                                                      self.param("recovery_stages"), self.param("recovery_search"))
            partner = None
        if spec is not None and task.instruction != spec.instruction:
            self.get_logger().warning(f"{spec.id} keeps its own instruction ({spec.instruction!r}); "
                                      f"{task.instruction!r} is not used")
        # The run configuration of the graph's episode (what its record keeps as summary.json's "run", and what
        # homie run --config repeats in one process): PARTNR-style tasks switch and clean (the household list),
        # EMMOE's and free text keep the paper's; the executor node picks the same list from /homie/task_started.
        config = run_config({
            "task": task.task_id or None,
            "instruction": None if spec is not None else task.instruction,
            "scene": task.scene if spec is None or task.scene != spec.scene else None,
            "seed": int(task.seed),
            "max_rounds": int(task.max_rounds or self.param("max_rounds")),
            "history_window": int(self.param("history_window")),
            "planner": setting.model_dump(mode="json"),
            "simulator": {"backend": str(self.param("simulator")), "render": bool(self.param("render")),
                          "human": self.pair},
            "skills": {"noise": str(self.param("noise")), "mode": str(self.param("skills")),
                       "models": json.loads(str(self.param("skill_models")) or "{}"),
                       "articulation": str(self.param("articulation")) or None},
            "recording": {"images": bool(self.param("record_images")), "video": False},
            "partner": partner,
        })
        # The physical skills' Open/Close setting as the graph runs it: the given one, else the skill set's default
        # (the bridge's and the manipulation executor's), as homie run's record names it (docs/robots.md).
        config = config.model_copy(update={"skills": resolved_skills(config.skills)})
        scene_seed = (spec.seed if spec is not None else 0) + int(task.seed)
        self.get_logger().info(f"episode {task.task_id or '(free text)'}: {task.instruction!r} in {task.scene} (seed {scene_seed})")
        record_dir = Path(self.param("record_dir")) if self.param("record_dir") else None

        def states(recorder: EpisodeRecorder, spec: TaskSpec | None, _sim: object) -> StatesFileRecorder:
            # states.jsonl (and, for a suite task, evaluation.json) as homie run's records keep them, so that
            # homie metrics recomputes PARTNR's percent complete from the record alone (docs/partnr.md). The
            # clock is the simulated time of the newest state the backend received.
            return StatesFileRecorder(recorder, task=spec, clock=lambda: self.backend.sim_time)

        rounds = _RoundsPublished(self, task.task_id)
        try:  # the record (RECORD_DIR, its views when record_images) is the build path's, as homie run's
            episode = build_episode(config, task=spec, backend=self.backend, planner=planner, partner=human,
                                    out=record_dir, judge=states,
                                    observers=[o for o in (self.live, _PartnerRounds(self, task.task_id)
                                                           if self.pair else None, rounds) if o is not None])
        except BaseException:
            for made in {id(p): p for p in (planner, human) if p is not None}.values():
                made.close()
            raise
        self._task_pub.publish(task)
        self._publish_status(EpisodeStatus.RUNNING, task.task_id)
        try:
            # The live view shows the four views of every round, as a record with images keeps them.
            outcome = episode.run_outcome(on_output=self._publish_output, always_observe=self.live is not None)
        finally:
            episode.close()
            for made in {id(p): p for p in (planner, human) if p is not None}.values():
                made.close()
        planner = episode.planner
        trajectory = outcome.trajectory
        if self.param("record_dir") and write_episode_stats(planner, Path(self.param("record_dir"))) is not None:
            self.get_logger().info(f"recovery: {summary_line(summarize([planner.stats.to_json()]))}")
        if outcome.timed_out:
            state = EpisodeStatus.TIMEOUT
        elif trajectory.error:
            state = EpisodeStatus.FAILED
        elif trajectory.ended:
            state = EpisodeStatus.ENDED
        else:
            state = EpisodeStatus.ROUND_LIMIT
        last = trajectory.rounds[-1] if trajectory.rounds else None
        self._publish_status(state, task.task_id, last, trajectory)
        self.get_logger().info(
            f"episode done: {len(trajectory.rounds)} rounds, ended={trajectory.ended}, goal={trajectory.goal_satisfied}, "
            f"error={trajectory.error}"
        )
        result_path = self.param("result_path")
        if result_path:
            atomic_write_json(Path(result_path), trajectory_summary(trajectory, outcome.timed_out, self.backend.sim_time))
        return outcome

    def _publish_output(self, round_index: int, instruction: str, output) -> None:
        msg = convert.planner_output_to_msg(output, round_index, instruction, self.backend.sim_time)
        msg.state_sequence = self.backend.state_sequence
        self._output_pub.publish(msg)

    def _publish_round(self, task_id: str, record: RoundRecord, trajectory: Trajectory) -> None:
        self._publish_status(EpisodeStatus.RUNNING, task_id, record, trajectory)

    def _publish_status(self, state: int, task_id: str, record: RoundRecord | None = None, trajectory: Trajectory | None = None) -> None:
        # Stamped in simulated time, like every message of the graph (the clock /clock publishes).
        msg = EpisodeStatus(header=convert.header(self.backend.sim_time), task_id=task_id, state=state, goal=EpisodeStatus.GOAL_UNKNOWN)
        if record is not None:
            msg.round_index = record.index
            msg.last_subtask = record.subtask_text
            msg.last_feedback = convert.feedback_to_msg(record.feedback)
        if trajectory is not None:
            msg.path_length = trajectory.path_length
            msg.wall_time = trajectory.wall_time_s
            msg.error = trajectory.error or ""
            if trajectory.goal_satisfied is not None:
                msg.goal = EpisodeStatus.GOAL_MET if trajectory.goal_satisfied else EpisodeStatus.GOAL_NOT_MET
        self._status_pub.publish(msg)

    def work(self) -> None:
        """The episode thread: run tasks as they come; with exit_when_done, stop after the first."""
        while rclpy.ok() and not self.stopping.is_set():
            try:
                task = self.tasks.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                outcome = self.run_task(task)
                code = EXIT_TIMEOUT if outcome.timed_out else 1 if outcome.trajectory.error else 0
            except Exception as err:  # a bad task id or planner option: report it, keep the node alive
                if self.stopping.is_set() or not rclpy.ok():
                    return  # the process is shutting down under the episode: nothing to report on a closed node
                self.get_logger().error(f"task {task.task_id or task.instruction!r} failed: {err}")
                self._publish_status(EpisodeStatus.FAILED, task.task_id)
                code = 1
            if self.param("exit_when_done"):
                # Let subscribers (a bag recorder, the supervisor) receive the final status before exiting.
                for publisher in (self._status_pub, self._output_pub):
                    publisher.wait_for_all_acked(Duration(seconds=2.0))
                self.exit_code = code
                return


def main(args: list[str] | None = None) -> None:
    """Spin the node beside its episode thread; exit with the episode's code (``exit_when_done``), 2 for a bad
    parameter, and 0 on SIGINT / SIGTERM, however often they come (homiebot.ros.spin.ShutdownSignals)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    signals = ShutdownSignals().install()
    try:
        rclpy.init(args=args)
        node = PlannerNode()
    except KeyboardInterrupt:
        signals.quiet()
        rclpy.try_shutdown()
        sys.exit(0)
    except Exception as err:
        signals.quiet()
        rclpy.try_shutdown()
        if signals.requested:  # a signal shut the context down while the node was being built
            sys.exit(0)
        print(f"planner_node: {err}", file=sys.stderr)
        sys.exit(2)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    worker = threading.Thread(target=node.work, name="episode", daemon=True)
    worker.start()
    try:
        while rclpy.ok() and worker.is_alive():
            executor.spin_once(timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        signals.quiet()
        node.stopping.set()
        code = node.exit_code
        if node.live is not None:
            node.live.stop()
        node.destroy_node()
        rclpy.try_shutdown()
    sys.exit(code or 0)


if __name__ == "__main__":
    main()
