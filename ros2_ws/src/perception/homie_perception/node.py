"""perception: the 3D world graph of the core (``homiebot.perception``) as a ROS 2 node.

Subscribes to the four views (``/homie/views``), the latched scene description (``/sim/scene_description``)
and the latched privileged state (``/sim/world_state``, the panoptic "sensor" of PARTNR's privileged
graph). Every MultiView is fused by :class:`homiebot.perception.privileged.PrivilegedGraphBuilder` with the
world state of the same ``state_sequence``. The two come from different publishers, so the views can arrive
first: views newer than every state received wait (the newest only) for their state; views of a state the
bridge never published (an older state is newer than nothing) are fused with the newest state before them.
the graph is published as ``/perception/world_graph`` (homie_msgs/WorldGraph, latched) and
``/perception/markers`` (visualization_msgs/MarkerArray) for rviz. ``/perception/resolve_target``
(homie_msgs/ResolveTarget) grounds a planner's words against what perception knows, with the core's
grounder (EMMOE's alias map; nearest instance wins).
"""

from __future__ import annotations

import threading
import time

from homie_msgs.msg import EpisodeStatus, Feedback, MultiView, WorldGraph
from homie_msgs.msg import WorldState as WorldStateMsg
from homie_msgs.srv import ResolveTarget
from rclpy.node import Node
from std_msgs.msg import String
from visualization_msgs.msg import MarkerArray

from homiebot.perception.actions import ActionUpdateError
from homiebot.perception.grounding import AliasGrounder
from homiebot.perception.layout import SceneLayout
from homiebot.perception.privileged import PrivilegedGraphBuilder
from homiebot.ros import convert
from homiebot.ros.spin import spin_node
from homiebot.planner.prompt import split_subtask
from homiebot.ros.calls import EVENTS_QOS, LATCHED_QOS, VIEWS_QOS
from homiebot.sim.scene import SceneSpec


class PerceptionNode(Node):
    def __init__(self) -> None:
        super().__init__("perception")
        self.declare_parameter("builder", "privileged")
        builder = self.get_parameter("builder").value
        if builder != "privileged":
            raise ValueError(f"unknown world-graph builder {builder!r}; this node runs 'privileged'")
        self._lock = threading.Lock()
        self._spec: SceneSpec | None = None
        self._builder: PrivilegedGraphBuilder | None = None
        self._states: dict[int, object] = {}
        self._latest_state = None
        self._latest_sequence = 0
        self._waiting_views: MultiView | None = None  # views that arrived before their state
        self._fused_sequence = 0
        self._grounder = AliasGrounder()
        self._graph_pub = self.create_publisher(WorldGraph, "/perception/world_graph", LATCHED_QOS)
        self._markers_pub = self.create_publisher(MarkerArray, "/perception/markers", LATCHED_QOS)
        self.create_subscription(String, "/sim/scene_description", self._on_scene, LATCHED_QOS)
        self.create_subscription(WorldStateMsg, "/sim/world_state", self._on_state, EVENTS_QOS)
        self.create_subscription(MultiView, "/homie/views", self._on_views, VIEWS_QOS)
        self.create_subscription(EpisodeStatus, "/homie/episode_status", self._on_status, EVENTS_QOS)
        self._applied_round = 0
        self.create_service(ResolveTarget, "/perception/resolve_target", self._on_resolve)
        self.get_logger().info("perception ready (privileged world graph)")

    def _on_scene(self, msg: String) -> None:
        with self._lock:
            self._spec = SceneSpec.model_validate_json(msg.data)
            self._builder = None  # rebuilt from the first state of the new scene
            self._states.clear()
            self._latest_sequence = 0
            self._waiting_views = None
            self._fused_sequence = 0
            self._applied_round = 0

    def _on_state(self, msg: WorldStateMsg) -> None:
        state = convert.world_state_from_msg(msg)
        with self._lock:
            self._states[msg.state_sequence] = state
            while len(self._states) > 8:  # only the last few are ever matched with a view
                self._states.pop(min(self._states))
            self._latest_state = state
            self._latest_sequence = max(self._latest_sequence, msg.state_sequence)
            if self._builder is None and self._spec is not None and self._spec.name == state.scene:
                self._builder = PrivilegedGraphBuilder(SceneLayout.from_scene(self._spec, state))
            waiting = self._waiting_views
            if waiting is None or waiting.state_sequence > msg.state_sequence:
                return
            self._waiting_views = None
        self._on_views(waiting)

    def _on_views(self, msg: MultiView) -> None:
        with self._lock:
            builder = self._builder
            if msg.state_sequence > self._latest_sequence:
                self._waiting_views = msg  # its state is on its way (published before the views were rendered)
                return
            state = self._states.get(msg.state_sequence)
            if state is None:  # a state the bridge did not publish: the newest one before these views
                older = [seq for seq in self._states if seq < msg.state_sequence]
                state = self._states[max(older)] if older else self._latest_state
            # Views older than ones already fused (a late join receives the last few) would move objects back.
            if builder is None or state is None or msg.state_sequence < self._fused_sequence:
                return
            self._fused_sequence = msg.state_sequence
            builder.update(convert.observation_from_msg(msg), state)
            export = builder.graph.to_export()
        seconds = convert.time_seconds(msg.header.stamp)
        self._graph_pub.publish(convert.world_graph_to_msg(export, seconds))
        if self._markers_pub.get_subscription_count() > 0:
            self._markers_pub.publish(convert.world_graph_markers(export, seconds))

    def _on_status(self, msg: EpisodeStatus) -> None:
        """After a successful pick / put / open / close, change the graph from the action's arguments (PARTNR
        A.7.1): the next views may not show the result (an object put into a drawer that was then closed)."""
        if msg.round_index <= self._applied_round or msg.last_feedback.code != Feedback.OK or not msg.last_subtask:
            return
        subtask = split_subtask(msg.last_subtask)
        with self._lock:
            builder = self._builder
            if builder is None:
                return
            self._applied_round = msg.round_index
            known = builder.graph.as_world_state()
            target = self._grounder.ground(subtask.target, known).instance if subtask.target else None
            place = self._grounder.ground(subtask.place, known).instance if subtask.place else None
            try:
                changed = builder.apply_action(subtask.action, target, place)
            except ActionUpdateError as err:  # an object perception has not seen yet: the views will bring it
                self.get_logger().debug(f"round {msg.round_index} {msg.last_subtask}: graph not updated ({err})")
                return
            export = builder.graph.to_export() if changed else None
        if export is not None:
            seconds = convert.time_seconds(msg.header.stamp)
            self._graph_pub.publish(convert.world_graph_to_msg(export, seconds))
            if self._markers_pub.get_subscription_count() > 0:
                self._markers_pub.publish(convert.world_graph_markers(export, seconds))

    def _on_resolve(self, request: ResolveTarget.Request, response: ResolveTarget.Response) -> ResolveTarget.Response:
        with self._lock:
            if self._builder is None:
                return response
            graph = self._builder.graph
            known = graph.as_world_state(robot=self._latest_state.robot if self._latest_state else None)
        result = self._grounder.ground(request.name, known)
        response.method = result.method
        response.candidates = list(result.candidates)
        if result.instance is not None:
            entity = known.entities[result.instance]
            response.found = True
            response.instance = result.instance
            response.score = float(result.score)
            response.pose.header = convert.header(time.time())
            response.pose.pose.position = convert.point(entity.position)
            response.pose.pose.orientation.w = 1.0
        return response


def main(args: list[str] | None = None) -> None:
    spin_node(PerceptionNode, args)


if __name__ == "__main__":
    main()
