"""Deterministic graph updates after a successful action (PARTNR A.7.1 and A.7.2 "Actions").

The cameras are not guaranteed to see the result of the last action (the placed object may be hidden by the
gripper, the opened door may face away), so after a *successful* skill the graph is changed from the action's
arguments alone: pick moves the object to ``held_by`` the agent, put moves it onto/into the place, open/close flip
``is_open``. Failed actions change nothing. Both builders call :func:`apply_action`.

Put's relation (decided here): ``in`` when the place is a container without a surface, or an open container; ``on``
otherwise (a closed cabinet with a top, a table, a counter). Image-built furniture knows no interior or surface:
``in`` when it is open (the robot opened it to put something inside), ``on`` otherwise. Builders that know the simulator's answer pass
``relation`` explicitly.
"""

from __future__ import annotations

from homiebot.perception.layout import CONTAINER, OPENABLE, SURFACE
from homiebot.perception.world_graph import ROBOT_ID, GraphNode, NodeKind, Relation, WorldGraph
from homiebot.types import Action


class ActionUpdateError(ValueError):
    """An action named a node the graph does not hold, or of the wrong kind."""


def place_relation(place: GraphNode) -> Relation:
    """The relation a put onto ``place`` creates (see the module docstring)."""
    container = CONTAINER in place.affordances
    surface = SURFACE in place.affordances
    is_open = place.states.get("is_open") is True
    if not container and not surface:
        # Image-built furniture does not know its interior; one the robot opened was opened to put inside.
        return Relation.IN if is_open else Relation.ON
    if container and (not surface or is_open):
        return Relation.IN
    return Relation.ON


def _node_by_name(graph: WorldGraph, name: str, role: str) -> GraphNode:
    node = graph.node(name) if graph.has(name) else graph.by_name(name)
    if node is None:
        raise ActionUpdateError(f"{role} {name!r} is not in the world graph")
    return node


def apply_action(
    graph: WorldGraph,
    action: Action | str,
    target: str | None,
    place: str | None = None,
    *,
    agent_id: str = ROBOT_ID,
    relation: Relation | None = None,
) -> list[str]:
    """Apply a successful action's effect; returns the ids of the nodes it changed.

    ``target`` / ``place`` are node ids or names (what the planner wrote, already grounded to the graph).
    """
    act = action if isinstance(action, Action) else Action.parse(action)
    if act is None:
        raise ActionUpdateError(f"unknown action {action!r}")
    if act in (Action.GO_TO, Action.END):
        return []  # the robot's own pose comes with the next observation
    if target is None:
        raise ActionUpdateError(f"{act.value} needs a target")
    node = _node_by_name(graph, target, "target")
    if act is Action.PICK:
        if node.kind is not NodeKind.OBJECT:
            raise ActionUpdateError(f"cannot pick {node.kind.value} {node.name!r}")
        agent = graph.node(agent_id)
        graph.set_placement(node.id, agent.id, Relation.HELD_BY)
        graph.update_node(node.id, position=agent.position, states={**node.states, "held": True})
        graph.set_room(node.id, graph.room_of(agent.id))
        return [node.id]
    if act is Action.PUT:
        if place is None:
            raise ActionUpdateError("Put needs a place")
        where = _node_by_name(graph, place, "place")
        if where.kind is not NodeKind.FURNITURE:
            raise ActionUpdateError(f"cannot put onto {where.kind.value} {where.name!r}")
        rel = relation or place_relation(where)
        graph.set_placement(node.id, where.id, rel)
        (x0, y0, z0), (x1, y1, z1) = where.bbox_min, where.bbox_max
        # Until the next observation localises it, the object sits at the middle of the top (on) or of the box (in).
        position = ((x0 + x1) / 2, (y0 + y1) / 2, z1 if rel is Relation.ON else (z0 + z1) / 2)
        graph.update_node(node.id, position=position, states={**node.states, "held": False})
        graph.set_room(node.id, graph.room_of(where.id))
        return [node.id]
    if act in (Action.OPEN, Action.CLOSE):
        if node.kind is not NodeKind.FURNITURE:
            raise ActionUpdateError(f"cannot {act.value.lower()} {node.kind.value} {node.name!r}")
        graph.set_state(node.id, "is_open", act is Action.OPEN)
        if OPENABLE not in node.affordances and node.detections > 0:
            # An image-built node learns the affordance from the successful action.
            graph.update_node(node.id, affordances=tuple(node.affordances) + (OPENABLE,))
        return [node.id]
    raise ActionUpdateError(f"no graph update for {act.value}")  # pragma: no cover - every action handled above
