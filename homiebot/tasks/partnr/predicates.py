"""PARTNR's evaluation predicates over HomieBot's privileged :class:`~homiebot.types.WorldState`.

PARTNR ("PARTNR: A Benchmark for Planning and Reasoning in Embodied Multi-agent Tasks", table 6 and
appendix A.5.2) evaluates predicates with Habitat ray casts. The embedded simulator already knows the
support relation of every object (``EntityState.parent`` / ``relation``), so is_on_top / is_inside read it
instead of casting rays; is_next_to keeps PARTNR's geometric test on the axis-aligned boxes. docs/partnr.md
has the table of definitions and the predicates that are HomieBot extensions (marked ``extension=True``).

Every predicate takes OR-lists of entities and an optional ``number`` (subset count), evaluated exactly as
PARTNR's set evaluation: pairs are tried in list order and the first ``number`` successes satisfy it; the
result's ``info`` names the argument values of the last success (empty strings when unsatisfied), which is
what the same/different-argument constraints read.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from homiebot.types import EntityState, WorldState

#: PARTNR's horizontal threshold of is_next_to (table 6: "less than or equal to 0.50m").
NEXT_TO_THRESHOLD_M = 0.5
#: The argument name is_clustered uses for its groups in PARTNR's JSON (``is_clustered(*args)``).
CLUSTER_GROUPS_ARG = "*args"


@dataclass(frozen=True)
class PropositionResult:
    """One proposition at one instant: satisfied or not, and which argument values satisfied it."""

    is_satisfied: bool
    info: Mapping[str, Any] = field(default_factory=dict)


PairTest = Callable[[WorldState, str, str], bool]
UnaryTest = Callable[[WorldState, str], bool]
Evaluator = Callable[[WorldState, Mapping[str, Any]], PropositionResult]


@dataclass(frozen=True)
class PredicateSpec:
    """What the loader and the constraints need to know about one predicate."""

    name: str
    category: str  # PARTNR table 6: rearrange | spatial | state; "extension" for HomieBot's own
    entity_args: tuple[str, ...]  # the OR-list arguments, in positional order
    info_keys: tuple[str, ...]  # the keys of PropositionResult.info (what Same/DifferentArg may name)
    optional_args: tuple[str, ...]
    evaluate: Evaluator | None  # None: the simulator cannot evaluate it (see ``unsupported_reason``)
    unsupported_reason: str = ""
    extension: bool = False
    # Which entity argument holds objects and which receptacles/rooms (for explanations and the expert).
    object_arg: str | None = None
    target_arg: str | None = None


# ------------------------------------------------------------------------------------------------ helpers


def entity(state: WorldState, name: str) -> EntityState | None:
    return state.entities.get(name)


def room_of(state: WorldState, name: str) -> str | None:
    """The room an entity is in; a held object travels with the robot."""
    ent = state.entities.get(name)
    if ent is None:
        return None
    if ent.held:
        return state.robot_room
    return ent.room


def room_matches(state: WorldState, room: str | None, wanted: str) -> bool:
    """``wanted`` names the room itself or one of its aliases (a room category, a level)."""
    if room is None:
        return False
    if room == wanted:
        return True
    ent = state.entities.get(room)
    return ent is not None and wanted in ent.aliases


def _supported_by(state: WorldState, obj: str, receptacle: str, relation: str | None) -> bool:
    ent = state.entities.get(obj)
    if ent is None or ent.held or ent.parent != receptacle:
        return False
    return relation is None or ent.relation == relation


def box_gap(a: EntityState, b: EntityState) -> float:
    """Horizontal L2 distance between two axis-aligned footprints (0 when they overlap)."""
    dx = max(a.bbox_min[0] - b.bbox_max[0], 0.0, b.bbox_min[0] - a.bbox_max[0])
    dy = max(a.bbox_min[1] - b.bbox_max[1], 0.0, b.bbox_min[1] - a.bbox_max[1])
    return math.hypot(dx, dy)


def next_to(state: WorldState, a: str, b: str, threshold: float = NEXT_TO_THRESHOLD_M) -> bool:
    """PARTNR table 6: the boxes overlap vertically and their horizontal distance is at most 0.5 m.

    An entity is not next to itself (PARTNR's handles of a pair are always two different objects).
    """
    if a == b:
        return False
    ea, eb = state.entities.get(a), state.entities.get(b)
    if ea is None or eb is None:
        return False
    overlaps_vertically = ea.bbox_min[2] <= eb.bbox_max[2] and eb.bbox_min[2] <= ea.bbox_max[2]
    return overlaps_vertically and box_gap(ea, eb) <= threshold


def _empty_info(keys: Sequence[str]) -> dict[str, Any]:
    return {k: "" for k in keys}


def set_pair_predicate(
    test: PairTest,
    state: WorldState,
    first: Sequence[str],
    second: Sequence[str],
    keys: tuple[str, str],
    number: int = 1,
    same_second: bool = False,
) -> PropositionResult:
    """PARTNR's set evaluation of a two-argument predicate over OR-lists (appendix A.5.2).

    Without ``same_second`` the satisfying (a, b) pairs are counted over the product, so one ``a`` next to
    two ``b`` counts twice, as upstream does; with it, ``number`` successes must share one ``b``.
    """
    if same_second:
        for b in second:
            count = 0
            for a in first:
                if test(state, a, b):
                    count += 1
                    if count >= number:
                        return PropositionResult(True, {keys[0]: a, keys[1]: b})
        return PropositionResult(False, _empty_info(keys))
    count = 0
    for a, b in itertools.product(first, second):
        if test(state, a, b):
            count += 1
            if count >= number:
                return PropositionResult(True, {keys[0]: a, keys[1]: b})
    return PropositionResult(False, _empty_info(keys))


def set_unary_predicate(
    test: UnaryTest, state: WorldState, items: Sequence[str], key: str, number: int = 1
) -> PropositionResult:
    count = 0
    for a in items:
        if test(state, a):
            count += 1
            if count >= number:
                return PropositionResult(True, {key: a})
    return PropositionResult(False, _empty_info((key,)))


# ---------------------------------------------------------------------------------------------- predicates


def _pair_evaluator(test: PairTest, keys: tuple[str, str], same_flag: str) -> Evaluator:
    def evaluate(state: WorldState, args: Mapping[str, Any]) -> PropositionResult:
        return set_pair_predicate(
            test, state, args[keys[0]], args[keys[1]], keys, int(args.get("number", 1)), bool(args.get(same_flag, False))
        )

    return evaluate


def _unary_evaluator(test: UnaryTest, key: str = "object_handles") -> Evaluator:
    def evaluate(state: WorldState, args: Mapping[str, Any]) -> PropositionResult:
        return set_unary_predicate(test, state, args[key], key, int(args.get("number", 1)))

    return evaluate


def _next_to_evaluator(state: WorldState, args: Mapping[str, Any]) -> PropositionResult:
    threshold = float(args.get("l2_threshold", NEXT_TO_THRESHOLD_M))
    return set_pair_predicate(
        lambda s, a, b: next_to(s, a, b, threshold),
        state,
        args["entity_handles_a"],
        args["entity_handles_b"],
        ("entity_handles_a", "entity_handles_b"),
        int(args.get("number", 1)),
        bool(args.get("is_same_b", False)),
    )


def cluster_numbers(args: Mapping[str, Any]) -> list[int]:
    groups = args[CLUSTER_GROUPS_ARG]
    numbers = args.get("number")
    return [1] * len(groups) if numbers is None else [int(n) for n in numbers]


def _clustered_evaluator(state: WorldState, args: Mapping[str, Any]) -> PropositionResult:
    """PARTNR's is_clustered: one connected component of the next-to graph over every handle holds at least
    ``number[i]`` handles of each group i."""
    groups: list[list[str]] = [list(g) for g in args[CLUSTER_GROUPS_ARG]]
    numbers = cluster_numbers(args)
    threshold = float(args.get("l2_threshold", NEXT_TO_THRESHOLD_M))
    handles = sorted({h for g in groups for h in g})
    graph = nx.Graph()
    graph.add_nodes_from(handles)
    graph.add_edges_from((a, b) for a, b in itertools.combinations(handles, 2) if next_to(state, a, b, threshold))
    for component in nx.connected_components(graph):
        members = [[h for h in g if h in component] for g in groups]
        if all(len(m) >= n for m, n in zip(members, numbers, strict=False)):
            return PropositionResult(True, {CLUSTER_GROUPS_ARG: tuple(tuple(m) for m in members)})
    return PropositionResult(False, {CLUSTER_GROUPS_ARG: tuple(() for _ in groups)})


def _powered(value: bool) -> UnaryTest:
    def test(state: WorldState, name: str) -> bool:
        ent = state.entities.get(name)
        return ent is not None and ent.powered_on is value

    return test


def _clean(value: bool) -> UnaryTest:
    # PARTNR: cleanable objects only; is_clean None means the object has no cleanliness state.
    def test(state: WorldState, name: str) -> bool:
        ent = state.entities.get(name)
        return ent is not None and ent.is_clean is value

    return test


def _filled(value: bool) -> UnaryTest:
    # PARTNR's is_filled / is_empty hold for containers only: the simulator's is_filled is None for an object
    # that cannot hold water (an apple is neither filled nor empty), as is_clean is for cleanliness.
    def test(state: WorldState, name: str) -> bool:
        ent = state.entities.get(name)
        return ent is not None and ent.is_filled is value

    return test


def _open(value: bool) -> UnaryTest:
    def test(state: WorldState, name: str) -> bool:
        ent = state.entities.get(name)
        return ent is not None and ent.is_open is value

    return test


def _on_floor(state: WorldState, name: str) -> bool:
    ent = state.entities.get(name)
    return ent is not None and ent.parent is None and not ent.held


def _held(state: WorldState, name: str) -> bool:
    return state.held == name


def _robot_in_room(state: WorldState, args: Mapping[str, Any]) -> PropositionResult:
    for room in args["room_ids"]:
        if room_matches(state, state.robot_room, room):
            return PropositionResult(True, {"room_ids": room})
    return PropositionResult(False, {"room_ids": ""})


def _relation_test(relation: str) -> PairTest:
    wanted = None if relation == "on_or_in" else relation
    return lambda s, o, r: _supported_by(s, o, r, wanted)


def _count_equals(state: WorldState, args: Mapping[str, Any]) -> PropositionResult:
    """Exactly ``equals`` of the objects stand on/in one of the receptacles ("keep five red boxes")."""
    test = _relation_test(args["relation"])
    there = [o for o in args["object_handles"] if any(test(state, o, r) for r in args["receptacle_handles"])]
    ok = len(there) == int(args["equals"])
    return PropositionResult(ok, {"object_handles": tuple(there) if ok else ""})


def _distinct_categories(state: WorldState, args: Mapping[str, Any]) -> PropositionResult:
    """At least ``number`` objects of pairwise different categories stand on/in the receptacles."""
    test = _relation_test(args["relation"])
    seen: dict[str, str] = {}
    for o in args["object_handles"]:
        ent = state.entities.get(o)
        if ent is None or ent.category in seen:
            continue
        if any(test(state, o, r) for r in args["receptacle_handles"]):
            seen[ent.category] = o
            if len(seen) >= int(args.get("number", 1)):
                return PropositionResult(True, {"object_handles": o})
    return PropositionResult(False, {"object_handles": ""})


def _registry() -> dict[str, PredicateSpec]:
    place = ("number", "is_same_receptacle")
    specs = [
        PredicateSpec("is_on_top", "rearrange", ("object_handles", "receptacle_handles"),
                      ("object_handles", "receptacle_handles"), place,
                      _pair_evaluator(_relation_test("on"), ("object_handles", "receptacle_handles"), "is_same_receptacle"),
                      object_arg="object_handles", target_arg="receptacle_handles"),
        PredicateSpec("is_inside", "rearrange", ("object_handles", "receptacle_handles"),
                      ("object_handles", "receptacle_handles"), place,
                      _pair_evaluator(_relation_test("in"), ("object_handles", "receptacle_handles"), "is_same_receptacle"),
                      object_arg="object_handles", target_arg="receptacle_handles"),
        PredicateSpec("is_in_room", "rearrange", ("object_handles", "room_ids"), ("object_handles", "room_ids"),
                      ("number", "is_same_room"),
                      _pair_evaluator(lambda s, o, r: room_matches(s, room_of(s, o), r),
                                      ("object_handles", "room_ids"), "is_same_room"),
                      object_arg="object_handles", target_arg="room_ids"),
        PredicateSpec("is_on_floor", "rearrange", ("object_handles",), ("object_handles",), ("number",),
                      _unary_evaluator(_on_floor), object_arg="object_handles"),
        PredicateSpec("is_next_to", "spatial", ("entity_handles_a", "entity_handles_b"),
                      ("entity_handles_a", "entity_handles_b"), ("number", "is_same_b", "l2_threshold"),
                      _next_to_evaluator, object_arg="entity_handles_a", target_arg="entity_handles_b"),
        PredicateSpec("is_clustered", "spatial", (CLUSTER_GROUPS_ARG,), (CLUSTER_GROUPS_ARG,),
                      ("number", "l2_threshold"), _clustered_evaluator, object_arg=CLUSTER_GROUPS_ARG),
        PredicateSpec("is_powered_on", "state", ("object_handles",), ("object_handles",), ("number",),
                      _unary_evaluator(_powered(True)), object_arg="object_handles"),
        PredicateSpec("is_powered_off", "state", ("object_handles",), ("object_handles",), ("number",),
                      _unary_evaluator(_powered(False)), object_arg="object_handles"),
        PredicateSpec("is_clean", "state", ("object_handles",), ("object_handles",), ("number",),
                      _unary_evaluator(_clean(True)), object_arg="object_handles"),
        PredicateSpec("is_dirty", "state", ("object_handles",), ("object_handles",), ("number",),
                      _unary_evaluator(_clean(False)), object_arg="object_handles"),
    ]
    specs += [
        PredicateSpec("is_filled", "state", ("object_handles",), ("object_handles",), ("number",),
                      _unary_evaluator(_filled(True)), object_arg="object_handles"),
        PredicateSpec("is_empty", "state", ("object_handles",), ("object_handles",), ("number",),
                      _unary_evaluator(_filled(False)), object_arg="object_handles"),
    ]
    # HomieBot extensions: what EMMOE's goals need and PARTNR's predicates cannot say (docs/partnr.md).
    specs += [
        PredicateSpec("is_open", "extension", ("object_handles",), ("object_handles",), ("number",),
                      _unary_evaluator(_open(True)), extension=True, object_arg="object_handles"),
        PredicateSpec("is_closed", "extension", ("object_handles",), ("object_handles",), ("number",),
                      _unary_evaluator(_open(False)), extension=True, object_arg="object_handles"),
        PredicateSpec("is_held", "extension", ("object_handles",), ("object_handles",), ("number",),
                      _unary_evaluator(_held), extension=True, object_arg="object_handles"),
        PredicateSpec("is_robot_in_room", "extension", ("room_ids",), ("room_ids",), (), _robot_in_room,
                      extension=True, target_arg="room_ids"),
        PredicateSpec("is_on_or_in", "extension", ("object_handles", "receptacle_handles"),
                      ("object_handles", "receptacle_handles"), place,
                      _pair_evaluator(_relation_test("on_or_in"), ("object_handles", "receptacle_handles"),
                                      "is_same_receptacle"),
                      extension=True, object_arg="object_handles", target_arg="receptacle_handles"),
        PredicateSpec("count_equals", "extension", ("object_handles", "receptacle_handles"), ("object_handles",),
                      ("relation", "equals"), _count_equals, extension=True,
                      object_arg="object_handles", target_arg="receptacle_handles"),
        PredicateSpec("has_distinct_categories", "extension", ("object_handles", "receptacle_handles"),
                      ("object_handles",), ("relation", "number"), _distinct_categories, extension=True,
                      object_arg="object_handles", target_arg="receptacle_handles"),
    ]
    return {s.name: s for s in specs}


#: Every predicate the loader knows, PARTNR's twelve first, then HomieBot's extensions.
PREDICATES: Mapping[str, PredicateSpec] = _registry()
#: PARTNR's placement predicates (S003 code ``attach_auto_dependencies``: what next-to depends on).
PLACEMENT_PREDICATES = frozenset({"is_on_top", "is_inside", "is_in_room", "is_on_floor", "is_on_or_in"})
#: Predicates whose object argument names an object whose state (not place) changes.
STATE_PREDICATES = frozenset(n for n, s in PREDICATES.items() if s.category == "state")
#: Placement relations the extensions accept.
RELATIONS = ("on", "in", "on_or_in")
