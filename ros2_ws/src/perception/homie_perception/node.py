"""perception: the 3D world graph of the core (``homiebot.perception``) as a ROS 2 node.

Subscribes to the four views (``/homie/views``), the latched scene description (``/sim/scene_description``)
and the latched privileged state (``/sim/world_state``). Every MultiView is fused by the core's
:class:`~homiebot.perception.world_model.WorldModel` with the world state of the same ``state_sequence``.
Parameter ``builder``: ``privileged`` (default; PARTNR's privileged graph, for which the state is the panoptic
"sensor") or ``conceptgraph`` (the ConceptGraphs-style graph built from depth and class-agnostic masks; the
state only stands in for the detector's labels and for finding the simulator instance a node stands for).
``semantic_grounding`` (default false) adds the MiniLM tier to the exact ones (a model load at start).

The views and the state come from different publishers, so the views can arrive first: views newer than every
state received wait (the newest only) for their state; views of a state the bridge never published (an older
state is newer than nothing) are fused with the newest state before them. The graph is published as
``/perception/world_graph`` (homie_msgs/WorldGraph, latched) and ``/perception/markers``
(visualization_msgs/MarkerArray) for rviz. ``/perception/resolve_target`` (homie_msgs/ResolveTarget) grounds a
planner's words against the graph and answers with the simulator instance the chosen node stands for (the
model's :class:`~homiebot.perception.world_model.GraphGrounder`; nearest instance wins among equals).
``/perception/perceive_world`` (homie_msgs/PerceiveWorld) gives the physical skills their world through perception:
the robot-side state they send, with the objects replaced by the graph's (``WorldModel.perceived_state``), as the
in-process loop plans in it with ``--skills physical --perception ...``.

Looks (``/perception/look_views``, homie_msgs/MultiView; docs/ros.md, "Looks through the graph"): the head camera's
view a look on arrival took (one view, handed over by the planner node), and the four views the physical skills look
with before they read the world (taken by the robot on a skill executor's request), are fused as the in-process
loop fuses a look: the objects only (``WorldModel.look``; the privileged graph takes nothing from
them), and not at all when views of that time were already fused (the round's own views, an earlier look: one
process looks only when time passed since it last observed). Each is answered with a ``/perception/world_graph``
stamped with the views' time, changed or not: the planner node and the skill executors wait for it, so that what
comes next (the round's grounding, the skill's world) sees what the look saw.

Actions (``/perception/apply_action``, homie_msgs/ApplyAction; docs/ros.md, "Actions into the world graph"): after a
successful Pick, Put, Open or Close the graph changes from the action's arguments (PARTNR A.7.1: the next views may
not show the result, an object put into a drawer that was then closed), and it must change before the views after the
action are fused: the object in the hand, seen by them, is the picked node held, not a new object. The planner node
calls the service with the subtask in instance names, the state after it and a Put's release point
(``released_at``: the image-built graph places the object there, not on the middle of the place) as soon as the
executor has answered, before it asks for the next views, as one process calls ``WorldModel.record_action`` before it
observes. Without that call (a planner node without ``looks`` and ``perceived_names``) the round's
``/homie/episode_status`` still applies the action, grounding the planner's words through the graph, but only when it
comes, after the views; a round is applied once, whichever comes first. Either way the changed graph is stamped with
the time of the newest views fused, not the state's, which the next views share.
"""

from __future__ import annotations

import threading

from homie_msgs.msg import EpisodeStatus, Feedback, MultiView, WorldGraph
from homie_msgs.msg import WorldState as WorldStateMsg
from homie_msgs.srv import ApplyAction, PerceiveWorld, ResolveTarget
from rclpy.node import Node
from std_msgs.msg import String
from visualization_msgs.msg import MarkerArray

from homiebot.config import GRAPH_BUILDERS
from homiebot.perception.actions import ActionUpdateError
from homiebot.perception.world_model import PerceptionConfig, WorldModel
from homiebot.planner.prompt import split_subtask
from homiebot.ros import convert
from homiebot.ros.calls import EVENTS_QOS, LATCHED_QOS, VIEWS_QOS, announce_ready
from homiebot.ros.looks import LOOK_VIEWS
from homiebot.ros.perception_actions import APPLY_ACTION
from homiebot.ros.spin import spin_node
from homiebot.sim.scene import SceneSpec


class PerceptionNode(Node):
    def __init__(self) -> None:
        super().__init__("perception")
        self.declare_parameter("builder", PerceptionConfig().builder)
        self.declare_parameter("semantic_grounding", False)
        builder = self.get_parameter("builder").value
        if builder not in GRAPH_BUILDERS:
            raise ValueError(f"unknown world-graph builder {builder!r}; choose {' or '.join(GRAPH_BUILDERS)}")
        self._config = PerceptionConfig(builder=builder, describe_world=False,
                                        semantic_grounding=bool(self.get_parameter("semantic_grounding").value))
        self._lock = threading.Lock()
        self._spec: SceneSpec | None = None
        self._model: WorldModel | None = None
        self._states: dict[int, object] = {}
        self._latest_state = None
        self._latest_seconds = 0.0  # simulated time of the newest state: the stamp of ResolveTarget's poses
        self._latest_sequence = 0
        self._waiting_views: MultiView | None = None  # views that arrived before their state
        self._fused_sequence = 0
        self._graph_pub = self.create_publisher(WorldGraph, "/perception/world_graph", LATCHED_QOS)
        self._markers_pub = self.create_publisher(MarkerArray, "/perception/markers", LATCHED_QOS)
        inputs = [
            self.create_subscription(String, "/sim/scene_description", self._on_scene, LATCHED_QOS),
            self.create_subscription(WorldStateMsg, "/sim/world_state", self._on_state, EVENTS_QOS),
            self.create_subscription(MultiView, "/homie/views", self._on_views, VIEWS_QOS),
        ]
        self.create_subscription(EpisodeStatus, "/homie/episode_status", self._on_status, EVENTS_QOS)
        self.create_subscription(MultiView, LOOK_VIEWS, self._on_look, VIEWS_QOS)
        self._observed_at = -1.0  # the time of the newest views fused (four views or a look)
        self._applied_round = 0
        self.create_service(ResolveTarget, "/perception/resolve_target", self._on_resolve)
        self.create_service(PerceiveWorld, "/perception/perceive_world", self._on_perceive)
        self.create_service(ApplyAction, APPLY_ACTION, self._on_apply)
        # Ready (calls.READY_TOPIC) only once the bridge's scene, state and views publishers have matched these
        # subscriptions: an episode the planner starts then cannot run past a perception that hears nothing.
        self._ready = announce_ready(self, lambda: all(sub.get_publisher_count() > 0 for sub in inputs))
        self.get_logger().info(f"perception started ({builder} world graph); ready once the bridge is matched")

    def _on_scene(self, msg: String) -> None:
        with self._lock:
            self._spec = SceneSpec.model_validate_json(msg.data)
            self._model = None  # rebuilt from the first state of the new scene
            self._states.clear()
            self._latest_sequence = 0
            self._waiting_views = None
            self._fused_sequence = 0
            self._applied_round = 0
            self._observed_at = -1.0

    def _on_state(self, msg: WorldStateMsg) -> None:
        state = convert.world_state_from_msg(msg)
        with self._lock:
            self._states[msg.state_sequence] = state
            while len(self._states) > 8:  # only the last few are ever matched with a view
                self._states.pop(min(self._states))
            self._latest_state = state
            self._latest_seconds = convert.time_seconds(msg.header.stamp)
            self._latest_sequence = max(self._latest_sequence, msg.state_sequence)
            if self._model is None and self._spec is not None and self._spec.name == state.scene:
                self._model = WorldModel(self._spec, state, self._config)
            waiting = self._waiting_views
            if waiting is None or waiting.state_sequence > msg.state_sequence:
                return
            self._waiting_views = None
        self._on_views(waiting)

    def _on_views(self, msg: MultiView) -> None:
        with self._lock:
            model = self._model
            if msg.state_sequence > self._latest_sequence:
                self._waiting_views = msg  # its state is on its way (published before the views were rendered)
                return
            state = self._states.get(msg.state_sequence)
            if state is None:  # a state the bridge did not publish: the newest one before these views
                older = [seq for seq in self._states if seq < msg.state_sequence]
                state = self._states[max(older)] if older else self._latest_state
            # Views older than ones already fused (a late join receives the last few) would move objects back.
            if model is None or state is None or msg.state_sequence < self._fused_sequence:
                return
            self._fused_sequence = msg.state_sequence
            self._observed_at = max(self._observed_at, convert.time_seconds(msg.header.stamp))
            model.observe(convert.observation_from_msg(msg), state)
            export = model.graph.to_export()
        seconds = convert.time_seconds(msg.header.stamp)
        self._publish_graph(export, seconds)

    def _on_look(self, msg: MultiView) -> None:
        """A look (module docstring): its objects fused unless views of its time were, the graph published either
        way."""
        seconds = convert.time_seconds(msg.header.stamp)
        with self._lock:
            model = self._model
            if model is None:
                return
            added = None
            if abs(seconds - self._observed_at) > 1e-6:
                self._observed_at = max(self._observed_at, seconds)
                added = model.look(convert.observation_from_msg(msg))
            export = model.graph.to_export()
        if added:
            what = "head view" if len(msg.views) == 1 else "look"
            self.get_logger().info(f"{what} at t={seconds:.2f} s: {len(added)} object node(s) fused")
        self._publish_graph(export, seconds)

    def _on_perceive(self, request: PerceiveWorld.Request, response: PerceiveWorld.Response) -> PerceiveWorld.Response:
        """The robot-side state with the objects as perception knows them (the physical skills' world through
        perception, as ``homie run --skills physical --perception ...`` plans in it)."""
        state = convert.world_state_from_msg(request.state)
        with self._lock:
            model = self._model
            error = self._no_graph_of(state.scene)
            if error:
                response.ok, response.error = False, error
                return response
            assert model is not None  # a graph of the scene (above)
            perceived = model.perceived_state(state)
        response.ok = True
        response.state = convert.world_state_to_msg(perceived, convert.time_seconds(request.state.header.stamp))
        return response

    def _on_apply(self, request: ApplyAction.Request, response: ApplyAction.Response) -> ApplyAction.Response:
        """A successful subtask from the planner node, in instance names, before the views after it (module
        docstring, "Actions"): the graph changed as one process changes it right after the execution."""
        subtask = convert.subtask_from_msg(request.subtask)
        state = convert.world_state_from_msg(request.state)
        released = convert.released_at_from_msg(request.has_released_at, request.released_at)
        with self._lock:
            model = self._model
            error = self._no_graph_of(state.scene)
            if error:
                response.applied, response.error = False, error
                return response
            assert model is not None  # a graph of the scene (above)
            response.applied = True
            if int(request.round_index) <= self._applied_round:  # asked again after a lost answer: applied once
                return response
            self._applied_round = int(request.round_index)
            try:
                changed = model.record_action(subtask.action, subtask.target, subtask.place, state, released_at=released)
            except ActionUpdateError as err:  # an object perception has not seen yet: the views will bring it
                self.get_logger().debug(f"round {request.round_index} {subtask.text()}: graph not updated ({err})")
                changed = []
            export = model.graph.to_export() if changed else None
            seconds = self._graph_seconds()
            names = [model.graph.node(node_id).name for node_id in changed]
        response.changed = names
        if released is not None and names:
            where = ", ".join(f"{v:.4f}" for v in released)
            self.get_logger().info(f"round {request.round_index} {subtask.text()}: {names[0]} placed where the hand "
                                   f"let go, ({where})")
        if export is not None:
            self._publish_graph(export, seconds)
        return response

    def _on_status(self, msg: EpisodeStatus) -> None:
        """After a successful pick / put / open / close that the planner node did not hand over itself
        (:meth:`_on_apply`), change the graph from the round's status: the planner's words grounded through the graph
        (module docstring, "Actions")."""
        if msg.round_index <= self._applied_round or msg.last_feedback.code != Feedback.OK or not msg.last_subtask:
            return
        subtask = split_subtask(msg.last_subtask)
        with self._lock:
            model, state = self._model, self._latest_state
            if model is None or state is None:
                return
            self._applied_round = msg.round_index
            # The planner's words, grounded as the executor grounded them (through the graph), to instances.
            grounder = model.grounder()
            target = grounder.ground(subtask.target, state).instance if subtask.target else None
            place = grounder.ground(subtask.place, state).instance if subtask.place else None
            try:
                changed = model.record_action(subtask.action, target, place, state)
            except ActionUpdateError as err:  # an object perception has not seen yet: the views will bring it
                self.get_logger().debug(f"round {msg.round_index} {msg.last_subtask}: graph not updated ({err})")
                return
            export = model.graph.to_export() if changed else None
            seconds = self._graph_seconds()
        if export is not None:
            self._publish_graph(export, seconds)

    def _no_graph_of(self, scene: str) -> str:
        """Why perception cannot answer for ``scene`` (called holding the lock), or "" when its graph is that
        scene's."""
        if self._model is not None and self._spec is not None and self._spec.name == scene:
            return ""
        return f"perception has no world graph of scene {scene!r} yet (it has {self._spec.name if self._spec else 'no scene'})"

    def _graph_seconds(self) -> float:
        """The stamp of a graph an action changed: the time of the newest views fused (called holding the lock). Not
        the state's time, which the views after the action share: a node waiting for the graph of those views
        (:class:`homiebot.ros.perceived_names.PerceivedNames`) must not take this one for it."""
        return max(self._observed_at, 0.0)

    def _publish_graph(self, export, seconds: float) -> None:
        self._graph_pub.publish(convert.world_graph_to_msg(export, seconds))
        if self._markers_pub.get_subscription_count() > 0:
            self._markers_pub.publish(convert.world_graph_markers(export, seconds))

    def _on_resolve(self, request: ResolveTarget.Request, response: ResolveTarget.Response) -> ResolveTarget.Response:
        with self._lock:
            model, state, seconds = self._model, self._latest_state, self._latest_seconds
            if model is None or state is None:
                return response
            result = model.grounder().ground(request.name, state)
            node = model.node_for_instance(result.instance, state) if result.instance is not None else None
        response.method = result.method
        response.candidates = list(result.candidates)
        if result.instance is not None and node is not None:
            # The pose is where perception has the instance (its node), not the simulator's truth.
            response.found = True
            response.instance = result.instance
            response.score = float(result.score)
            response.pose.header = convert.header(seconds)
            response.pose.pose.position = convert.point(node.position)
            response.pose.pose.orientation.w = 1.0
        return response


def main(args: list[str] | None = None) -> None:
    spin_node(PerceptionNode, args)


if __name__ == "__main__":
    main()
