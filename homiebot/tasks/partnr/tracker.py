"""Running an evaluation function over a sequence of world states: percent complete, success, explanation.

PARTNR (appendix A.5.5) defines percent complete (PC) as the share of propositions satisfied with respect to
the constraints, and success as PC = 1. Its tracker evaluates every proposition at every simulator step,
skipping a proposition while one of its dependencies does not hold on the states recorded *before* the
current one.

Time base (docs/partnr.md, "Time base"): HomieBot records one state per round, not per physics step, so
PARTNR's one-step lag would be a whole round and could lose a placement made in the last round. By default a
round's propositions are evaluated in dependency order and a dependency reads the gated results up to and
including the current round; ``lag=True`` reproduces PARTNR's rule exactly.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx

from homiebot.tasks.partnr.explain import failure_explanation
from homiebot.tasks.partnr.language import (
    EvaluationFunction,
    EvaluationPropositionDependency,
    dependency_graph,
    unroll_number,
)
from homiebot.tasks.partnr.predicates import PREDICATES, PropositionResult
from homiebot.types import WorldState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvaluationResult:
    """What an evaluation function says about a whole state sequence."""

    percent_complete: float
    success: bool
    satisfied_at: tuple[int, ...]  # per unrolled proposition: first state index where it held, -1 never
    valid: tuple[bool, ...]  # per unrolled proposition: no constraint invalidated it
    explanation: str
    progress: tuple[float, ...]  # PC after each state (running), for extraneous effort and progress curves


class _History:
    """Per-proposition summary of the gated results so far: enough to answer the four relations in O(1)."""

    __slots__ = ("last", "ever", "fell")

    def __init__(self, n: int) -> None:
        self.last: list[bool | None] = [None] * n  # None: no state recorded yet
        self.ever = [False] * n
        self.fell = [False] * n  # was satisfied at some step and unsatisfied at the next

    def push(self, index: int, satisfied: bool) -> None:
        if self.last[index] is True and not satisfied:
            self.fell[index] = True
        self.last[index] = satisfied
        self.ever[index] = self.ever[index] or satisfied


def dependency_holds(dep: EvaluationPropositionDependency, history: _History) -> bool:
    """PARTNR's four relations in all/any mode (appendix A.5.3; ``before_satisfied`` from its code)."""
    combine = all if dep.dependency_mode == "all" else any
    if dep.relation_type == "while_satisfied":
        return combine(history.last[p] is True for p in dep.depends_on)
    if dep.relation_type == "after_satisfied":
        return combine(history.ever[p] for p in dep.depends_on)
    if dep.relation_type == "after_unsatisfied":
        return combine(history.fell[p] for p in dep.depends_on)
    if dep.relation_type == "before_satisfied":
        return combine(not history.ever[p] for p in dep.depends_on)
    raise ValueError(f"unknown relation {dep.relation_type!r}")


class PropositionTracker:
    """Feeds one state at a time (``update``) and answers PC, success and the explanation at any point.

    The function is unrolled (``number`` -> one proposition per object) at construction, as PARTNR does.
    """

    def __init__(self, function: EvaluationFunction, lag: bool = False, upstream_dependency_bug: bool = False) -> None:
        self.original = function
        self.function = unroll_number(function, upstream_dependency_bug)
        self.lag = lag
        n = len(self.function.propositions)
        self._order = list(nx.topological_sort(dependency_graph(self.function)))
        self._gates: list[list[EvaluationPropositionDependency]] = [[] for _ in range(n)]
        for dep in self.function.dependencies:
            for i in dep.proposition_indices:
                self._gates[i].append(dep)
        self._evaluators = [PREDICATES[p.function_name].evaluate for p in self.function.propositions]
        self._unevaluated = [
            PropositionResult(False, {k: "" for k in PREDICATES[p.function_name].info_keys})
            for p in self.function.propositions
        ]
        self.states: list[list[PropositionResult]] = []
        self.satisfied_at = [-1] * n
        self._history = _History(n)
        self._progress: list[float] = []
        # Semantic class of every entity, read from the first state: explanations name classes, not handles.
        self.categories: dict[str, str] = {}

    def update(self, state: WorldState) -> list[PropositionResult]:
        """Evaluate every proposition whose dependencies hold on ``state``; returns the round's results."""
        n = len(self.function.propositions)
        results = list(self._unevaluated)
        time = len(self.states)
        if not self.categories:
            self.categories = {name: e.category for name, e in state.entities.items()}
        open_gate: list[bool] = []
        if self.lag:
            # PARTNR: the gates read only the states recorded before this one.
            open_gate = [all(dependency_holds(d, self._history) for d in self._gates[i]) for i in range(n)]
        for i in self._order:
            gated_open = open_gate[i] if self.lag else all(dependency_holds(d, self._history) for d in self._gates[i])
            if gated_open:
                evaluate = self._evaluators[i]
                assert evaluate is not None  # validation refuses predicates the simulator cannot evaluate
                results[i] = evaluate(state, self.function.propositions[i].args)
            if not self.lag:
                self._history.push(i, results[i].is_satisfied)
            if results[i].is_satisfied and self.satisfied_at[i] == -1:
                self.satisfied_at[i] = time
        if self.lag:
            for i in range(n):
                self._history.push(i, results[i].is_satisfied)
        self.states.append(results)
        self._progress.append(self.percent_complete())
        return results

    def validity(self) -> list[bool]:
        """Per proposition: no constraint invalidates it (PARTNR's constraint matrix, reduced over rows)."""
        valid = [True] * len(self.satisfied_at)
        for con in self.function.constraints:
            for i, ok in enumerate(con.check(self.states, self.satisfied_at)):
                valid[i] = valid[i] and ok
        return valid

    def percent_complete(self) -> float:
        n = len(self.satisfied_at)
        if n == 0:
            return 0.0
        valid = self.validity()
        return sum(1 for i in range(n) if self.satisfied_at[i] != -1 and valid[i]) / n

    def result(self) -> EvaluationResult:
        pc = self.percent_complete()
        return EvaluationResult(
            percent_complete=pc,
            success=pc == 1.0,
            satisfied_at=tuple(self.satisfied_at),
            valid=tuple(self.validity()),
            explanation=failure_explanation(self.function, self.states, self.satisfied_at, self.categories),
            progress=tuple(self._progress),
        )


def evaluate_states(function: EvaluationFunction, states: Sequence[WorldState], lag: bool = False) -> EvaluationResult:
    """Run a function over a whole recorded sequence (state 0 = after the reset)."""
    tracker = PropositionTracker(function, lag=lag)
    for state in states:
        tracker.update(state)
    return tracker.result()


def percent_complete(satisfied_at: Sequence[int], valid: Sequence[bool]) -> float:
    """PC from first-satisfaction times and constraint validity (PARTNR's ``compute_percent_complete``)."""
    if not satisfied_at:
        return 0.0
    return sum(1 for t, ok in zip(satisfied_at, valid, strict=False) if t != -1 and ok) / len(satisfied_at)

