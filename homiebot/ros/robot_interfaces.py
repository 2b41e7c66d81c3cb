"""Which of a robot profile's interfaces the ROS 2 graph has: the wait for a real robot's servers.

On a real robot the graph starts without the sim bridge and waits until the robot's drivers serve what the
profile names (:meth:`homiebot.config.robot.RobotProfile.awaited`): an action server with the named action type,
a publisher of the named topic with the named message type, a service with the named service type. The check is
by name *and* type, so a Humble Nav2 or a server of another package's ``NavigateToPose`` does not count as found
(docs/robots.md). Nothing here calls rclpy: :func:`graph_snapshot` asks a node, the rest is plain data, so the
rules are tested without a graph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from homiebot.config.robot import InterfaceKind, RobotInterface


@dataclass(frozen=True)
class GraphSnapshot:
    """What the graph offers, by name: the types of each topic's publishers, of each service, of each action server."""

    publishers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    services: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    action_servers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def types_of(self, interface: RobotInterface) -> tuple[str, ...]:
        table = {InterfaceKind.TOPIC: self.publishers, InterfaceKind.SERVICE: self.services,
                 InterfaceKind.ACTION: self.action_servers}[interface.kind]
        return tuple(table.get(interface.name, ()))


@dataclass(frozen=True)
class InterfaceStatus:
    """One awaited interface and what the graph has under its name."""

    label: str
    interface: RobotInterface
    #: The types the graph offers under the name (empty: nothing of that kind by that name).
    offered: tuple[str, ...]

    @property
    def found(self) -> bool:
        return self.interface.type in self.offered

    def line(self) -> str:
        """One line for the log: ``waiting for ...`` or ``found ...``, naming the kind, the name and the type."""
        what = f"{self.label}: {self.interface.kind} {self.interface.name} ({self.interface.type})"
        if self.found:
            return f"found {what}"
        if self.offered:
            return f"waiting for {what}; the graph has it as {', '.join(self.offered)}"
        return f"waiting for {what}"


def check(awaited: Sequence[tuple[str, RobotInterface]], graph: GraphSnapshot) -> tuple[InterfaceStatus, ...]:
    """The status of each awaited interface in ``graph``, in the profile's order."""
    return tuple(InterfaceStatus(label, interface, graph.types_of(interface)) for label, interface in awaited)


class InterfaceWatch:
    """The lines to log as the graph changes: every missing interface once when the wait starts, then one line
    whenever an interface is found, lost, or offered under another type."""

    def __init__(self) -> None:
        self._last: dict[str, InterfaceStatus] = {}

    def update(self, statuses: Sequence[InterfaceStatus]) -> list[str]:
        lines = []
        for status in statuses:
            previous = self._last.get(status.label)
            if previous is None:
                if not status.found:
                    lines.append(status.line())
            elif (previous.found, previous.offered) != (status.found, status.offered):
                lines.append(status.line() if status.found or not previous.found else
                             status.line().replace("waiting for", "lost; waiting for", 1))
            self._last[status.label] = status
        return lines


def graph_snapshot(node: Any, awaited: Sequence[tuple[str, RobotInterface]]) -> GraphSnapshot:
    """Ask ``node`` (an rclpy node) for the graph's offers under the awaited names: the publishers of each awaited
    topic (a subscriber alone is not the robot serving it), the services, and the action servers. An action server
    is known by what only a server publishes: ``<name>/_action/feedback``, typed ``<action type>_FeedbackMessage``
    (an action client alone publishes nothing there)."""
    publishers: dict[str, tuple[str, ...]] = {}
    actions: dict[str, tuple[str, ...]] = {}
    for _label, interface in awaited:
        if interface.kind == InterfaceKind.TOPIC and interface.name not in publishers:
            publishers[interface.name] = _publisher_types(node, interface.name)
        elif interface.kind == InterfaceKind.ACTION and interface.name not in actions:
            feedback = _publisher_types(node, f"{interface.name}/_action/feedback")
            actions[interface.name] = tuple(t.removesuffix(_FEEDBACK_SUFFIX) for t in feedback)
    services = {name: tuple(types) for name, types in node.get_service_names_and_types()}
    return GraphSnapshot(publishers=publishers, services=services, action_servers=actions)


_FEEDBACK_SUFFIX = "_FeedbackMessage"


def _publisher_types(node: Any, topic: str) -> tuple[str, ...]:
    return tuple(sorted({info.topic_type for info in node.get_publishers_info_by_topic(topic)}))
