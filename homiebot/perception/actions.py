"""Deterministic graph updates after a successful action (PARTNR A.7.1 and A.7.2 "Actions").

The cameras are not guaranteed to see the result of the last action (the placed object may be hidden by the
gripper, the opened door may face away), so after a *successful* skill the graph is changed from the action's
arguments alone: pick moves the object to ``held_by`` the agent, put moves it onto/into the place, open/close flip
``is_open``. Failed actions change nothing. Both builders call :func:`apply_action`.

The object's box moves with it (:func:`moved_box`), its size kept: on a pick it is centred on the robot's position
(and travels with it while held); on a put it is centred where the hand let go of it when the skill says
(``released_at``: a physical Put knows it from the arm's joints and the grasp, as a robot does), else set on the
middle of the place's top (``on``) or in the middle of the place's box (``in``). Until a view shows the object again,
that is all the graph knows of where it is; a box left where the object was taken from stood for it in the skills'
world (emmoe-089: a sponge put in the sink stayed on the table there, and the next Put released a bottle on top of
the real sponge; with the middle of the sink instead, the next Put failed six rounds in a row, the held bottle
against the sink's wall). Where the object came to rest after it left the hand only a view tells: the look at the place after a
Put (:mod:`homiebot.agent.looks`) shows it when nothing hides it, and the first sighting of a moved object replaces
the action's geometry (:class:`homiebot.perception.conceptgraph.ConceptGraphBuilder`).

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


def moved_box(node: GraphNode, position: tuple[float, float, float], resting: bool = False) -> tuple[
        tuple[float, float, float], tuple[float, float, float]]:
    """``node``'s box, its size kept, moved to ``position``: centred on it, or, when ``resting``, centred on it in x
    and y with its bottom there (an object set down on a top)."""
    half = [(b - a) / 2 for a, b in zip(node.bbox_min, node.bbox_max, strict=True)]
    z = position[2] + half[2] if resting else position[2]
    return ((position[0] - half[0], position[1] - half[1], z - half[2]),
            (position[0] + half[0], position[1] + half[1], z + half[2]))


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
    released_at: tuple[float, float, float] | None = None,
) -> list[str]:
    """Apply a successful action's effect; returns the ids of the nodes it changed.

    ``target`` / ``place`` are node ids or names (what the planner wrote, already grounded to the graph).
    ``released_at``: where a Put's hand let go of the object (its centre, map frame), when the skill knows it: the
    object is placed there, its box centred on it, rather than on the middle of the place.
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
        low, high = moved_box(node, agent.position)
        graph.update_node(node.id, position=agent.position, bbox_min=low, bbox_max=high,
                          states={**node.states, "held": True})
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
        # Until the next observation localises it, the object sits where the hand let go of it, else at the middle of
        # the top (on) or of the box (in).
        if released_at is not None:
            position = released_at
            low, high = moved_box(node, position)
        else:
            position = ((x0 + x1) / 2, (y0 + y1) / 2, z1 if rel is Relation.ON else (z0 + z1) / 2)
            low, high = moved_box(node, position, resting=rel is Relation.ON)
        graph.update_node(node.id, position=position, bbox_min=low, bbox_max=high, states={**node.states, "held": False})
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
