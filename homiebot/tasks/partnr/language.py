"""PARTNR's evaluation function: propositions, dependencies and constraints, read and written as PARTNR's JSON.

Sources: PARTNR (ICLR 2025) appendix A.5.2-A.5.4 for the semantics, and the project's recovery of the lost
formulas and JSON layout (docs/partnr.md, "The evaluation language"). A task's function is a list of
propositions (a predicate with its arguments), dependencies that gate when a proposition is evaluated, and
constraints that invalidate satisfied propositions (order, same/different argument, still true at the end).

Everything here is plain data; :mod:`homiebot.tasks.partnr.tracker` runs it over a state sequence.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

import networkx as nx

from homiebot.tasks.partnr.predicates import CLUSTER_GROUPS_ARG, PREDICATES, RELATIONS, PropositionResult

RelationType = Literal["while_satisfied", "after_satisfied", "after_unsatisfied", "before_satisfied"]
RELATION_TYPES: tuple[str, ...] = ("while_satisfied", "after_satisfied", "after_unsatisfied", "before_satisfied")
DEPENDENCY_MODES: tuple[str, ...] = ("all", "any")


class EvaluationError(ValueError):
    """An evaluation function that cannot be evaluated; the message names the task and the proposition."""


@dataclass(frozen=True)
class EvaluationProposition:
    """A predicate instantiated with arguments: ``is_on_top(["cup_1"], ["table"])``."""

    function_name: str
    args: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"function_name": self.function_name, "args": _plain(self.args)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EvaluationProposition:
        return cls(function_name=str(data["function_name"]), args=dict(data["args"]))

    def text(self) -> str:
        """PARTNR's annotation form (appendix A.6.3): ``is_on_top(['cup_1'], ['table'], number=2)``."""
        spec = PREDICATES.get(self.function_name)
        positional = spec.entity_args if spec else ()
        parts = []
        for name in positional:
            value = self.args.get(name)
            if name == CLUSTER_GROUPS_ARG and value is not None:
                parts += [repr(list(g)) for g in value]
            elif value is not None:
                parts.append(repr(list(value)))
        parts += [f"{k}={v!r}" for k, v in self.args.items() if k not in positional]
        return f"{self.function_name}({', '.join(parts)})"


@dataclass(frozen=True)
class EvaluationPropositionDependency:
    """Propositions ``proposition_indices`` are evaluated only while the relation on ``depends_on`` holds."""

    proposition_indices: tuple[int, ...]
    depends_on: tuple[int, ...]
    relation_type: str
    dependency_mode: str = "all"

    def to_json(self) -> dict[str, Any]:
        return {
            "proposition_indices": list(self.proposition_indices),
            "depends_on": list(self.depends_on),
            "relation_type": self.relation_type,
            "dependency_mode": self.dependency_mode,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EvaluationPropositionDependency:
        return cls(
            proposition_indices=tuple(int(i) for i in data["proposition_indices"]),
            depends_on=tuple(int(i) for i in data["depends_on"]),
            relation_type=str(data["relation_type"]),
            dependency_mode=str(data.get("dependency_mode", "all")),
        )


StateSequence = Sequence[Sequence[PropositionResult]]


class EvaluationConstraint:
    """A rule that invalidates satisfied propositions. ``check`` returns, per proposition, False when this
    constraint invalidates it (PARTNR's constraint matrix row)."""

    type_name: ClassVar[str]
    #: The proposition count the constraint was written for (PARTNR's optional ``n_propositions``).
    n_propositions: int | None = None

    def check(self, states: StateSequence, satisfied_at: Sequence[int]) -> list[bool]:
        raise NotImplementedError

    def indices(self) -> tuple[int, ...]:
        raise NotImplementedError

    def with_unrolled(self, original: int, new: int) -> list[EvaluationConstraint]:
        """This constraint after proposition ``new`` was unrolled from ``original``: itself updated, plus any
        constraint that must be added (the different-argument rule adds one)."""
        raise NotImplementedError

    def json_args(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type_name, "args": self.json_args()}


@dataclass(frozen=True)
class TemporalConstraint(EvaluationConstraint):
    """Edge (i, j): proposition i must be first satisfied strictly earlier than proposition j."""

    dag_edges: tuple[tuple[int, int], ...] = ()
    n_propositions: int | None = None
    type_name: ClassVar[str] = "TemporalConstraint"

    def graph(self) -> nx.DiGraph:
        g = nx.DiGraph()
        g.add_edges_from(self.dag_edges)
        return g

    def check(self, states: StateSequence, satisfied_at: Sequence[int]) -> list[bool]:
        valid = [True] * len(satisfied_at)
        g = self.graph()
        for j in g.nodes:
            ancestors = nx.ancestors(g, j)
            if not ancestors:
                continue
            times = [satisfied_at[a] for a in ancestors]
            if any(t == -1 for t in times):
                valid[j] = False
            else:
                # PARTNR's rule, kept at round granularity: the same round is too early (docs/partnr.md).
                valid[j] = satisfied_at[j] > max(times)
        return valid

    def indices(self) -> tuple[int, ...]:
        return tuple(sorted({i for e in self.dag_edges for i in e}))

    def with_unrolled(self, original: int, new: int) -> list[EvaluationConstraint]:
        added = [(a, new) for a, b in self.dag_edges if b == original]
        added += [(new, b) for a, b in self.dag_edges if a == original]
        n = None if self.n_propositions is None else self.n_propositions + 1
        return [replace(self, dag_edges=self.dag_edges + tuple(added), n_propositions=n)]

    def json_args(self) -> dict[str, Any]:
        return {"dag_edges": [list(e) for e in self.dag_edges], "n_propositions": self.n_propositions}

    @classmethod
    def from_groups(cls, groups: Sequence[Sequence[int]], n_propositions: int | None = None) -> TemporalConstraint:
        """PARTNR's generated form: every index of group k-1 before every index of group k."""
        edges = [(a, b) for prev, nxt in zip(groups, groups[1:], strict=False) for a in prev for b in nxt]
        return cls(dag_edges=tuple(edges), n_propositions=n_propositions)


def _values_match(a: Any, b: Any) -> bool:
    """PARTNR's argument match: equal values, or a shared element when either side is a list (clusters)."""
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        left = set(_flatten(a))
        right = set(_flatten(b))
        return bool(left & right)
    return bool(a == b)


def _flatten(value: Any) -> Iterable[Any]:
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from _flatten(v)
    else:
        yield value


def _arg_value(states: StateSequence, satisfied_at: Sequence[int], index: int, arg_name: str) -> Any:
    info = states[satisfied_at[index]][index].info
    if arg_name.startswith(CLUSTER_GROUPS_ARG + "_"):
        groups = info.get(CLUSTER_GROUPS_ARG, ())
        group = int(arg_name.rsplit("_", 1)[1])
        return groups[group] if group < len(groups) else ()
    return info.get(arg_name, "")


@dataclass(frozen=True)
class _ArgConstraint(EvaluationConstraint):
    proposition_indices: tuple[int, ...] = ()
    arg_names: tuple[str, ...] = ()
    n_propositions: int | None = None

    def _satisfied_in_order(self, satisfied_at: Sequence[int]) -> list[tuple[int, str]]:
        linked = [(i, a) for i, a in zip(self.proposition_indices, self.arg_names, strict=False) if satisfied_at[i] != -1]
        return sorted(linked, key=lambda pair: satisfied_at[pair[0]])

    def indices(self) -> tuple[int, ...]:
        return self.proposition_indices

    def json_args(self) -> dict[str, Any]:
        return {
            "proposition_indices": list(self.proposition_indices),
            "arg_names": list(self.arg_names),
            "n_propositions": self.n_propositions,
        }


@dataclass(frozen=True)
class SameArgConstraint(_ArgConstraint):
    """The propositions must be satisfied with the same value of the named argument ("on the same table")."""

    type_name: ClassVar[str] = "SameArgConstraint"

    def check(self, states: StateSequence, satisfied_at: Sequence[int]) -> list[bool]:
        valid = [True] * len(satisfied_at)
        linked = self._satisfied_in_order(satisfied_at)
        if len(linked) < 2:
            return valid
        pivot = _arg_value(states, satisfied_at, *linked[0])
        for index, arg in linked[1:]:
            if not _values_match(pivot, _arg_value(states, satisfied_at, index, arg)):
                valid[index] = False
        return valid

    def with_unrolled(self, original: int, new: int) -> list[EvaluationConstraint]:
        if original not in self.proposition_indices:
            return [self]
        arg = self.arg_names[self.proposition_indices.index(original)]
        n = None if self.n_propositions is None else self.n_propositions + 1
        return [replace(self, proposition_indices=self.proposition_indices + (new,),
                        arg_names=self.arg_names + (arg,), n_propositions=n)]


@dataclass(frozen=True)
class DifferentArgConstraint(_ArgConstraint):
    """The propositions must be satisfied with pairwise different values of the named argument."""

    type_name: ClassVar[str] = "DifferentArgConstraint"

    def check(self, states: StateSequence, satisfied_at: Sequence[int]) -> list[bool]:
        valid = [True] * len(satisfied_at)
        seen: list[Any] = []
        for index, arg in self._satisfied_in_order(satisfied_at):
            value = _arg_value(states, satisfied_at, index, arg)
            if any(_values_match(value, s) for s in seen):
                valid[index] = False
            seen.append(value)
        return valid

    def with_unrolled(self, original: int, new: int) -> list[EvaluationConstraint]:
        n = None if self.n_propositions is None else self.n_propositions + 1
        updated = replace(self, n_propositions=n)
        if original not in self.proposition_indices:
            return [updated]
        # The copy must differ from the others, not from the proposition it was unrolled from.
        indices = tuple(new if i == original else i for i in self.proposition_indices)
        return [updated, replace(updated, proposition_indices=indices)]


@dataclass(frozen=True)
class TerminalSatisfactionConstraint(EvaluationConstraint):
    """The listed propositions, once satisfied, must still be satisfied in the last state."""

    proposition_indices: tuple[int, ...] = ()
    n_propositions: int | None = None
    type_name: ClassVar[str] = "TerminalSatisfactionConstraint"

    def check(self, states: StateSequence, satisfied_at: Sequence[int]) -> list[bool]:
        valid = [True] * len(satisfied_at)
        if not states:
            return valid
        for index in self.proposition_indices:
            if satisfied_at[index] != -1:
                valid[index] = states[-1][index].is_satisfied
        return valid

    def indices(self) -> tuple[int, ...]:
        return self.proposition_indices

    def with_unrolled(self, original: int, new: int) -> list[EvaluationConstraint]:
        n = None if self.n_propositions is None else self.n_propositions + 1
        if original not in self.proposition_indices:
            return [replace(self, n_propositions=n)]
        return [replace(self, proposition_indices=self.proposition_indices + (new,), n_propositions=n)]

    def json_args(self) -> dict[str, Any]:
        return {"proposition_indices": list(self.proposition_indices), "n_propositions": self.n_propositions}


CONSTRAINT_TYPES: Mapping[str, type[EvaluationConstraint]] = {
    c.type_name: c for c in (TemporalConstraint, SameArgConstraint, DifferentArgConstraint, TerminalSatisfactionConstraint)
}


def constraint_from_json(data: Mapping[str, Any]) -> EvaluationConstraint:
    kind = data.get("type")
    args = dict(data.get("args", {}))
    n = args.get("n_propositions")
    n = None if n is None else int(n)
    if kind == "TemporalConstraint":
        return TemporalConstraint(tuple((int(a), int(b)) for a, b in args.get("dag_edges", [])), n)
    if kind in ("SameArgConstraint", "DifferentArgConstraint"):
        cls = SameArgConstraint if kind == "SameArgConstraint" else DifferentArgConstraint
        return cls(tuple(int(i) for i in args["proposition_indices"]), tuple(str(a) for a in args["arg_names"]), n)
    if kind == "TerminalSatisfactionConstraint":
        return TerminalSatisfactionConstraint(tuple(int(i) for i in args["proposition_indices"]), n)
    raise KeyError(f"unknown constraint type {kind!r}; known: {', '.join(CONSTRAINT_TYPES)}")


@dataclass(frozen=True)
class EvaluationFunction:
    """One task's evaluation function, in PARTNR's JSON field names."""

    propositions: tuple[EvaluationProposition, ...]
    dependencies: tuple[EvaluationPropositionDependency, ...] = ()
    constraints: tuple[EvaluationConstraint, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "evaluation_propositions": [p.to_json() for p in self.propositions],
            "evaluation_proposition_dependencies": [d.to_json() for d in self.dependencies],
            "evaluation_constraints": [c.to_json() for c in self.constraints],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], task_id: str = "?",
                  known_entities: Iterable[str] | None = None) -> EvaluationFunction:
        """Parse and validate; any problem is an :class:`EvaluationError` naming the task and the item."""
        try:
            props = tuple(EvaluationProposition.from_json(p) for p in data.get("evaluation_propositions", []))
        except (KeyError, TypeError, ValueError) as err:
            raise EvaluationError(f"task {task_id}: malformed proposition ({err})") from None
        try:
            deps = tuple(EvaluationPropositionDependency.from_json(d)
                         for d in data.get("evaluation_proposition_dependencies", []))
        except (KeyError, TypeError, ValueError) as err:
            raise EvaluationError(f"task {task_id}: malformed dependency ({err})") from None
        try:
            cons = tuple(constraint_from_json(c) for c in data.get("evaluation_constraints", []))
        except (KeyError, TypeError, ValueError) as err:
            raise EvaluationError(f"task {task_id}: malformed constraint ({err})") from None
        function = cls(props, deps, cons)
        validate(function, task_id, known_entities)
        return function

    def terminal_indices(self) -> set[int]:
        return {i for c in self.constraints if isinstance(c, TerminalSatisfactionConstraint)
                for i in c.proposition_indices}

    def temporal_edges(self) -> list[tuple[int, int]]:
        return [e for c in self.constraints if isinstance(c, TemporalConstraint) for e in c.dag_edges]


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------------- validation


def _prop_label(index: int, prop: EvaluationProposition) -> str:
    return f"proposition {index} ({prop.function_name})"


def _check_entity_list(value: Any, where: str, arg: str, known: set[str] | None) -> None:
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) for v in value):
        raise EvaluationError(f"{where}: argument {arg!r} must be a non-empty list of names, got {value!r}")
    if known is not None:
        missing = [v for v in value if v not in known]
        if missing:
            raise EvaluationError(f"{where}: {', '.join(map(repr, missing))} not in the scene")


def _validate_proposition(index: int, prop: EvaluationProposition, task_id: str, known: set[str] | None) -> None:
    where = f"task {task_id}: {_prop_label(index, prop)}"
    spec = PREDICATES.get(prop.function_name)
    if spec is None:
        raise EvaluationError(f"{where}: unknown predicate; known: {', '.join(PREDICATES)}")
    if spec.evaluate is None:
        raise EvaluationError(f"{where}: cannot be evaluated: {spec.unsupported_reason}")
    allowed = set(spec.entity_args) | set(spec.optional_args)
    unknown = sorted(set(prop.args) - allowed)
    if unknown:
        raise EvaluationError(f"{where}: unknown argument(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    for arg in spec.entity_args:
        if arg not in prop.args:
            raise EvaluationError(f"{where}: missing argument {arg!r}")
        if arg == CLUSTER_GROUPS_ARG:
            groups = prop.args[arg]
            if not isinstance(groups, (list, tuple)) or len(groups) < 1:
                raise EvaluationError(f"{where}: {arg!r} must be a list of entity lists")
            for group in groups:
                _check_entity_list(group, where, arg, known)
        else:
            _check_entity_list(prop.args[arg], where, arg, known)
    number = prop.args.get("number", 1)
    if prop.function_name == "is_clustered":
        groups = prop.args[CLUSTER_GROUPS_ARG]
        if number is not None and 1 != number:
            if not isinstance(number, (list, tuple)) or len(number) != len(groups):
                raise EvaluationError(f"{where}: 'number' must list one count per group ({len(groups)})")
            for n, group in zip(number, groups, strict=False):
                if not isinstance(n, int) or not 1 <= n <= len(group):
                    raise EvaluationError(f"{where}: count {n!r} outside 1..{len(group)} for its group")
    elif "number" in spec.optional_args:
        if not isinstance(number, int) or isinstance(number, bool) or number < 1:
            raise EvaluationError(f"{where}: 'number' must be a positive integer, got {number!r}")
        # Pairs are counted over the product of the lists (PARTNR's set evaluation), so that is the bound.
        candidates = len(prop.args.get(spec.object_arg or "", []))
        if spec.target_arg is not None and prop.function_name != "has_distinct_categories":
            candidates *= len(prop.args.get(spec.target_arg, []))
        if number > candidates:
            raise EvaluationError(f"{where}: 'number' {number} exceeds the {candidates} candidate pairs or entities")
    if "relation" in spec.optional_args and prop.args.get("relation") not in RELATIONS:
        raise EvaluationError(f"{where}: 'relation' must be one of {', '.join(RELATIONS)}")
    if prop.function_name == "count_equals":
        equals = prop.args.get("equals")
        if not isinstance(equals, int) or equals < 0:
            raise EvaluationError(f"{where}: 'equals' must be a non-negative integer, got {equals!r}")


def _check_index(value: int, n: int, where: str) -> None:
    if not 0 <= value < n:
        raise EvaluationError(f"{where}: proposition index {value} out of range (the task has {n} propositions)")


def dependency_graph(function: EvaluationFunction) -> nx.DiGraph:
    """Edges depends_on -> dependent: the order in which one round's propositions must be evaluated."""
    g = nx.DiGraph()
    g.add_nodes_from(range(len(function.propositions)))
    for dep in function.dependencies:
        g.add_edges_from((h, d) for h in dep.depends_on for d in dep.proposition_indices)
    return g


def validate(function: EvaluationFunction, task_id: str = "?", known_entities: Iterable[str] | None = None) -> None:
    """Raise :class:`EvaluationError` for anything the tracker could not evaluate faithfully."""
    n = len(function.propositions)
    if n == 0:
        raise EvaluationError(f"task {task_id}: the evaluation function has no propositions")
    known = None if known_entities is None else set(known_entities)
    for index, prop in enumerate(function.propositions):
        _validate_proposition(index, prop, task_id, known)
    for k, dep in enumerate(function.dependencies):
        where = f"task {task_id}: dependency {k}"
        if dep.relation_type not in RELATION_TYPES:
            raise EvaluationError(f"{where}: unknown relation {dep.relation_type!r}; known: {', '.join(RELATION_TYPES)}")
        if dep.dependency_mode not in DEPENDENCY_MODES:
            raise EvaluationError(f"{where}: unknown mode {dep.dependency_mode!r}; known: all, any")
        if not dep.proposition_indices or not dep.depends_on:
            raise EvaluationError(f"{where}: needs proposition_indices and depends_on")
        for i in dep.proposition_indices + dep.depends_on:
            _check_index(i, n, where)
    graph = dependency_graph(function)
    if not nx.is_directed_acyclic_graph(graph):
        cycle = nx.find_cycle(graph)
        first = cycle[0][0]
        raise EvaluationError(
            f"task {task_id}: {_prop_label(first, function.propositions[first])}: dependencies form a cycle "
            f"{' -> '.join(str(a) for a, _ in cycle)} -> {cycle[0][0]}"
        )
    for k, con in enumerate(function.constraints):
        where = f"task {task_id}: constraint {k} ({con.type_name})"
        for i in con.indices():
            _check_index(i, n, where)
        if con.n_propositions not in (None, n):
            raise EvaluationError(f"{where}: n_propositions {con.n_propositions} but the task has {n}")
        if isinstance(con, TemporalConstraint):
            g = con.graph()
            if not nx.is_directed_acyclic_graph(g):
                cycle = nx.find_cycle(g)
                first = cycle[0][0]
                raise EvaluationError(
                    f"task {task_id}: {_prop_label(first, function.propositions[first])}: the temporal "
                    f"constraint is not a DAG (cycle {' -> '.join(str(a) for a, _ in cycle)} -> {first})"
                )
        if isinstance(con, _ArgConstraint):
            if len(con.arg_names) != len(con.proposition_indices):
                raise EvaluationError(f"{where}: {len(con.arg_names)} arg_names for {len(con.proposition_indices)} propositions")
            for i, arg in zip(con.proposition_indices, con.arg_names, strict=False):
                prop = function.propositions[i]
                keys = PREDICATES[prop.function_name].info_keys
                ok = arg in keys or (arg.startswith(CLUSTER_GROUPS_ARG + "_") and CLUSTER_GROUPS_ARG in keys
                                     and arg.rsplit("_", 1)[1].isdigit()
                                     and int(arg.rsplit("_", 1)[1]) < len(prop.args[CLUSTER_GROUPS_ARG]))
                if not ok:
                    raise EvaluationError(
                        f"task {task_id}: {_prop_label(i, prop)}: constraint {k} names argument {arg!r}, "
                        f"which it does not report (it reports {', '.join(keys)})"
                    )


# ---------------------------------------------------------------------------------------------- unrolling


def unroll_number(function: EvaluationFunction, upstream_dependency_bug: bool = False) -> EvaluationFunction:
    """Unroll ``number = n`` into n propositions (numbers n, 1, ..., n-1) so that PC counts each object.

    PARTNR's README: placing 3 of 4 required objects is 75% complete. Dependencies gating the original gate
    the copies too. ``upstream_dependency_bug=True`` reproduces PARTNR's released code, which adds the copy
    counter (1..n-1) to the gated list instead of the copy's index, so copies go ungated and unrelated
    propositions get gated; it exists only so that a test can show the difference.
    """
    props = list(function.propositions)
    deps = [list(d.proposition_indices) for d in function.dependencies]
    cons = list(function.constraints)
    for original in range(len(function.propositions)):
        prop = props[original]
        number = prop.args.get("number")
        spec = PREDICATES[prop.function_name]
        if not isinstance(number, int) or isinstance(number, bool) or number < 2 or "number" not in spec.optional_args:
            continue
        for count in range(1, number):
            props.append(EvaluationProposition(prop.function_name, {**copy.deepcopy(dict(prop.args)), "number": count}))
            new = len(props) - 1
            cons = [c2 for c in cons for c2 in c.with_unrolled(original, new)]
            for gated in deps:
                if original in gated:
                    gated.append(count if upstream_dependency_bug else new)
    dependencies = tuple(replace(d, proposition_indices=tuple(g)) for d, g in zip(function.dependencies, deps, strict=False))
    return EvaluationFunction(tuple(props), dependencies, tuple(cons))


# ---------------------------------------------------------------------------------------------- categories

#: PARTNR's task labels, computed from the function as its analysis code does (paper section 3).
CATEGORIES: tuple[str, ...] = ("constraint-free", "spatial", "temporal", "heterogeneous")


def task_labels(function: EvaluationFunction) -> set[str]:
    """spatial: a next-to/cluster proposition; temporal: an ordering edge; heterogeneous: an object-state
    proposition; constraint-free: none of those (rearrangement only)."""
    names = {p.function_name for p in function.propositions}
    labels = set()
    if names & {"is_next_to", "is_clustered"}:
        labels.add("spatial")
    if function.temporal_edges():
        labels.add("temporal")
    if any(PREDICATES[n].category == "state" for n in names):
        labels.add("heterogeneous")
    return labels or {"constraint-free"}


def task_category(function: EvaluationFunction) -> str:
    """One label for per-category tables: the first of heterogeneous, temporal, spatial that applies (the
    rarer capabilities win, as the suite balances on them), else constraint-free."""
    labels = task_labels(function)
    for name in ("heterogeneous", "temporal", "spatial"):
        if name in labels:
            return name
    return "constraint-free"
