"""Perception's names for a privileged planner in the ROS 2 graph: the names the perception node's world graph gives
the simulator's instances, so that the expert says ``bowl_1`` (what perception calls the bowl it found) and not
``bowl_2`` (the simulator's name), as it does in one process with ``homie run --perception``
(:meth:`homiebot.perception.world_model.WorldModel.perceived_names`, :class:`homiebot.agent.knowledge.WorldKnowledge`).

In one process the names are the inverse of grounding. Here they are built the same way over the graph's
interfaces, without a new message: the node names come from the latest ``/perception/world_graph``, and each is
grounded with ``/perception/resolve_target`` (the service the executor grounds the planner's words with), so that
saying a name grounds back to the same instance. Where two nodes ground to one instance, the node nearest the
instance's position in the state wins (as in one process). The table is rebuilt only when a new graph has come.

**When.** In one process the round's views are fused before the planner is asked. Here the perception node fuses
them when the bridge publishes them, beside the planner's round, so the names wait for a graph stamped at least at
the views' time (the perception node stamps the graph of fused views with their time). A graph the perception
node publishes after an action (``/perception/apply_action``, or ``/homie/episode_status`` without it) carries the
time of the newest views it had fused, not the state's, which the views after the action share: it is never taken
for the graph of those views (docs/ros.md, "Actions into the world graph").
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Mapping

from homie_msgs.msg import WorldGraph
from homie_msgs.srv import ResolveTarget
from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node

from homiebot.agent.knowledge import SegmentationKnowledge
from homiebot.ros import convert
from homiebot.ros.calls import LATCHED_QOS, call_service
from homiebot.types import WorldState

#: The perception node's graph and grounding service (ros2_ws/src/perception).
WORLD_GRAPH = "/perception/world_graph"
RESOLVE_TARGET = "/perception/resolve_target"
#: Stamps are compared after a round trip through builtin_interfaces/Time (nanoseconds).
STAMP_TOLERANCE_S = 1e-6

log = logging.getLogger(__name__)


class PerceivedNames:
    """The perception node's names of the simulator's instances (module docstring)."""

    def __init__(self, node: Node, timeout_s: float = 10.0, callback_group: CallbackGroup | None = None) -> None:
        self._resolve = node.create_client(ResolveTarget, RESOLVE_TARGET, callback_group=callback_group)
        self.timeout_s = timeout_s
        self._changed = threading.Condition()
        self._graph: tuple[int, tuple[str, ...]] = (0, ())  # (graphs received, node names but the agents')
        self._newest = -1.0  # the newest graph's stamp (s)
        self._table: tuple[int, dict[str, tuple[str, float, float, float]]] | None = None
        node.create_subscription(WorldGraph, WORLD_GRAPH, self._on_graph, LATCHED_QOS, callback_group=callback_group)

    def _on_graph(self, msg: WorldGraph) -> None:
        names = tuple(n.name for n in msg.nodes if n.kind != "agent" and n.name)
        with self._changed:
            self._graph = (self._graph[0] + 1, names)
            self._newest = max(self._newest, convert.time_seconds(msg.header.stamp))
            self._changed.notify_all()

    def ground(self, name: str) -> str | None:
        """The simulator instance perception grounds ``name`` to (None: it knows none)."""
        response = call_service(self._resolve, ResolveTarget.Request(name=name), self.timeout_s)
        return str(response.instance) if response.found else None

    def reset(self) -> None:
        """A new episode: nothing known until its first graph."""
        with self._changed:
            self._graph, self._table, self._newest = (0, ()), None, -1.0

    def names(self, state: WorldState, views_time: float | None = None) -> dict[str, str]:
        """Simulator instance -> the graph's name that grounds to it (empty before perception's first graph), from a
        graph stamped at ``views_time`` or later when given (module docstring, "When"; waited for up to the
        timeout, then the newest graph is used and the wait logged)."""
        with self._changed:
            if views_time is not None and not self._changed.wait_for(
                    lambda: self._newest >= views_time - STAMP_TOLERANCE_S, timeout=self.timeout_s):
                log.warning("no world graph of the views at t=%.3f s within %.0f s: perception's names are older",
                            views_time, self.timeout_s)
            version, nodes = self._graph
        if self._table is None or self._table[0] != version:
            grounded: dict[str, tuple[str, float, float, float]] = {}
            for name in nodes:
                response = call_service(self._resolve, ResolveTarget.Request(name=name), self.timeout_s)
                if response.found:
                    p = response.pose.pose.position
                    grounded[name] = (str(response.instance), float(p.x), float(p.y), float(p.z))
            self._table = (version, grounded)
        names: dict[str, str] = {}
        best: dict[str, float] = {}
        for name, (instance, x, y, z) in self._table[1].items():
            entity = state.entities.get(instance)
            if entity is None:
                continue
            distance = math.dist((x, y, z), entity.position)
            if distance < best.get(instance, math.inf):
                names[instance], best[instance] = name, distance
        return names


class PerceivedNamesKnowledge(SegmentationKnowledge):
    """The planner node's knowledge when the graph has a perception node: the views' segmentation as without one,
    and perception's names for a privileged planner (:class:`PerceivedNames`). The planner's words are then
    perception's, so the loop records each round's grounding (``perception_names``), which the EMMOE judge reads
    (homiebot/eval/keypaths.py), as it does in one process."""

    perception_names = True

    def __init__(self, names: PerceivedNames, views_time: Callable[[], float | None]) -> None:
        super().__init__()
        self._names = names
        self._views_time = views_time

    def perceived_names(self, state: WorldState) -> Mapping[str, str] | None:
        return self._names.names(state, self._views_time())
