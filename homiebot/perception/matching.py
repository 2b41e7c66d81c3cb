"""Matching image-built graph nodes to simulator instances.

Two uses: the quality report (which predicted node is which ground-truth entity) and execution (PARTNR A.7.2,
"Using ConceptGraphs with Simulated Skills": simulated skills need the simulator's handle of a node a planner chose,
found by category and proximity, falling back on proximity alone).

Matching rules (decided here):

* **objects**: a predicted object matches a ground-truth object of the same category whose centre lies within
  ``max_distance`` (0.25 m: three object widths, well below the spacing of two same-category objects in the
  library scenes) of the node's position; pairs are taken greedily, nearest first, each side at most once.
* **furniture**: a predicted furniture node matches a ground-truth furniture of the same category when the
  intersection of their boxes is at least ``min_overlap`` of the smaller box (a partly seen counter is a part of
  the true box; an open fridge's observed box holds the true box, which excludes the swung door); greedy by
  overlap, each side once.

Greedy rather than an optimal assignment: with same-category pairs at least 0.25 m apart the greedy choice is the
optimal one, and it needs no solver.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from homiebot.perception.world_graph import GraphNode, NodeKind, WorldGraph
from homiebot.types import EntityKind, EntityState, WorldState


@dataclass(frozen=True)
class Match:
    node_id: str
    entity: str
    score: float  # distance (objects, metres) or overlap (furniture, 0..1)


def _distance(node: GraphNode, entity: EntityState) -> float:
    return math.dist(node.position, entity.position)


def _inside_share(node: GraphNode, entity: EntityState) -> float:
    """Intersection of the two boxes over the smaller one's volume (faces of zero thickness padded by 1 cm)."""
    pad = 0.01
    inter, node_volume, entity_volume = 1.0, 1.0, 1.0
    for k in range(3):
        lo, hi = node.bbox_min[k] - pad, node.bbox_max[k] + pad
        elo, ehi = entity.bbox_min[k] - pad, entity.bbox_max[k] + pad
        node_volume *= hi - lo
        entity_volume *= ehi - elo
        inter *= max(0.0, min(hi, ehi) - max(lo, elo))
    smaller = min(node_volume, entity_volume)
    return inter / smaller if smaller > 0 else 0.0


def match_objects(graph: WorldGraph, state: WorldState, max_distance: float = 0.25) -> list[Match]:
    pairs = []
    entities = [e for e in state.entities.values() if e.kind is EntityKind.OBJECT]
    for node in graph.nodes(NodeKind.OBJECT):
        for entity in entities:
            if entity.category == node.category:
                d = _distance(node, entity)
                if d <= max_distance:
                    pairs.append((d, node.id, entity.name))
    return _greedy(sorted(pairs))


def match_furniture(graph: WorldGraph, state: WorldState, min_overlap: float = 0.5) -> list[Match]:
    pairs = []
    entities = [e for e in state.entities.values() if e.kind is EntityKind.FURNITURE]
    for node in graph.nodes(NodeKind.FURNITURE):
        for entity in entities:
            if entity.category == node.category:
                share = _inside_share(node, entity)
                if share >= min_overlap:
                    pairs.append((-share, node.id, entity.name))
    return [Match(m.node_id, m.entity, -m.score) for m in _greedy(sorted(pairs))]


def _greedy(sorted_pairs: list[tuple[float, str, str]]) -> list[Match]:
    used_nodes: set[str] = set()
    used_entities: set[str] = set()
    out = []
    for score, node_id, entity in sorted_pairs:
        if node_id in used_nodes or entity in used_entities:
            continue
        used_nodes.add(node_id)
        used_entities.add(entity)
        out.append(Match(node_id, entity, score))
    return out


def resolve_instance(node: GraphNode, state: WorldState, radius: float = 1.0) -> str | None:
    """The simulator instance a graph node stands for (PARTNR's proximity + category heuristic): the nearest entity
    of the node's kind and category within ``radius`` metres, else the nearest entity of that kind; None when the
    world has none of that kind."""
    kind = {NodeKind.OBJECT: EntityKind.OBJECT, NodeKind.FURNITURE: EntityKind.FURNITURE, NodeKind.ROOM: EntityKind.ROOM}.get(node.kind)
    if kind is None:
        return None
    if kind is EntityKind.ROOM and node.name in state.entities:
        return node.name
    same_kind = [e for e in state.entities.values() if e.kind is kind]
    if not same_kind:
        return None
    same_category = [e for e in same_kind if e.category == node.category and _distance(node, e) <= radius]
    pool = same_category or same_kind
    return min(pool, key=lambda e: (_distance(node, e), e.name)).name
