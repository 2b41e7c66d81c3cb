"""EMMOE metrics (EMMOE paper, section 2.3, 4.3, 4.5 and appendices C, H) computed from trajectories.

One :class:`EpisodeScore` per trajectory (everything a table needs, JSON-serialisable), then aggregate
functions for each table of the paper:

* table 2 / 3: :func:`summarize` (SR, PLWSR, TP, SRR, SER; per split with :func:`split_summaries`);
* tables H3-H6: :func:`error_table` (error types in successful / failed trajectories, shares and counts);
* table 4 / H7: :func:`action_table` (execution errors and success rate per action);
* table H8: :func:`attribute_table` (SR per task attribute).

Definitions and the decisions taken where the paper is ambiguous (tested in ``tests/eval/test_metrics.py``):

* **Success (SR).** A trajectory succeeds when its TP is 100% (section 2.3: "Only if TP reaches 100%, the
  trajectory will be considered successful"); TP itself is :func:`homiebot.eval.keypaths.task_progress`.
  A task with its own PARTNR evaluation function (the PARTNR-style suite) is judged by that function instead
  (PARTNR paper, section 3.2: success is percent complete = 1, temporal and argument constraints included), on
  the states the record keeps; this is the one verdict of the episode that every surface shows
  (:mod:`homiebot.eval.verdict`). Its keypath completion is still reported (``keypaths_complete``). A record of
  such a task without its states is judged by its keypaths. An infrastructure failure is never a success.
  The simulator's final-state goal check (``Trajectory.goal_satisfied``) is *not* folded in: it is reported
  beside SR as ``goal_sr`` with the agreement counts (both / SR only / goal only / neither / unchecked), so
  a keypath that is too lenient or too strict for its goal shows up instead of being hidden.
* **PLWSR** (section 4.3, borrowed from ALFRED [27]): mean over trajectories of
  ``success * L_expert / max(L_expert, L_agent)``. The paper's sentence puts the agent's length in the
  numerator, which would reward long trajectories; ALFRED's definition, which the paper cites, has the
  expert's, and that is used. **Length is the number of rounds** (subtasks the planner emitted, failed ones
  and the final End included): EMMOE's expert trajectories are subtask sequences (966 subtasks over 100
  tasks) and its planner acts in subtasks, so path length in subtasks is ALFRED's action count at EMMOE's
  granularity. The metres-weighted variant (base path length) is reported as ``plwsr_path`` for reference.
  ``L_expert`` is the expert planner's noiseless trajectory on the same task and seed. Failed trajectories
  contribute 0 whether or not a reference exists; a successful one without a reference makes PLWSR n/a.
* **TP**: mean of the per-trajectory TP.
* **SER** (eq. 2): ``|S| / #trajectories whose final action is End``; the final action is the last round's
  parsed subtask (a round limit reached without End does not count). Only successes that ended count in
  ``|S|`` here (PARTNR's success needs no End; EMMOE's always ends), so SER stays a share of the ended ones.
* **SRR** (eq. 3, appendix C.3): a re-plan is the round that follows a failed round (the next action after a
  failure, whatever its own outcome); ``SRR = re-plans in successful trajectories / re-plans in all``.
* A division by zero gives ``None``, shown as "n/a" in reports (SER with no End anywhere, SRR with no
  failure anywhere, shares with no error).
* **Error statistics** (tables H3-H6): every non-OK round counts once under its code. A type's share is its
  count over all errors of that group of trajectories; "All" is errors over rounds in the group (GPT-4o's
  126/416 in table H5 reads that way: 126 errors, 416 rounds).
* **Table 4.** ``P`` of an action is its share of execution errors (E1 + E2, table H7's "938/2437").
  ``SR`` of an action is **per attempt**: successful executions / tries, counting only rounds that reached
  the low-level skill (feedback OK, E1 or E2; L, D and F errors are caught before any try). The caption says
  "SR here represents an average value as each skill is attempted up to three times per execution", so a
  skill that succeeds at its second try scores 1 of 2. The per-execution rate (success within the three
  tries) is reported beside it as ``sr_execution``. ``Feedback.attempts`` gives the tries; a record without
  it (0) counts one try per execution.
* **Infrastructure failures** (``Trajectory.error``: the simulator crashed) are failed trajectories for every
  metric and are counted separately as ``n_infra_errors``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Any

from homiebot.eval.keypaths import NameResolver, task_progress
from homiebot.eval.partnr.metrics import PartnrEpisode
from homiebot.tasks.suite import ATTRIBUTES, TaskSpec
from homiebot.types import Action, ErrorCode, Trajectory

#: Error codes in the column order of tables H3-H6, and their families.
ERROR_CODES: tuple[str, ...] = ("L1", "L2", "L3", "L4", "D1", "D2", "F1", "F2", "E1", "E2")
ERROR_FAMILIES: dict[str, tuple[str, ...]] = {
    "L": ("L1", "L2", "L3", "L4"),
    "D": ("D1", "D2"),
    "F": ("F1", "F2"),
    "E": ("E1", "E2"),
}
#: Table 4's columns: the five executable actions (the paper writes "Place" for Put).
TABLE4_ACTIONS: tuple[str, ...] = ("Go to", "Pick", "Put", "Open", "Close")
#: Feedback codes of rounds that reached a low-level skill.
_EXECUTED = {ErrorCode.OK, ErrorCode.E1, ErrorCode.E2}


#: What judged an episode's success (:attr:`EpisodeScore.judged_by`).
JUDGED_BY_KEYPATHS = "keypaths"
JUDGED_BY_PARTNR = "partnr"


def ratio(numerator: float, denominator: float) -> float | None:
    """``numerator / denominator``, or None (n/a) when the denominator is 0."""
    return None if denominator == 0 else numerator / denominator


# ------------------------------------------------------------------------------------------ per episode


@dataclass(frozen=True)
class ExpertReference:
    """The expert planner's noiseless trajectory on the same task and seed (PLWSR's ``L_expert``)."""

    rounds: int
    path_length: float
    success: bool = True


@dataclass
class ActionCounts:
    executions: int = 0  # rounds that reached the skill (OK, E1, E2)
    attempts: int = 0  # tries over those rounds
    successes: int = 0  # rounds with OK
    exec_errors: int = 0  # rounds with E1 or E2

    def add(self, other: ActionCounts) -> None:
        self.executions += other.executions
        self.attempts += other.attempts
        self.successes += other.successes
        self.exec_errors += other.exec_errors


@dataclass
class EpisodeScore:
    """Everything the tables need from one trajectory."""

    task_id: str
    run: int
    seed: int
    split: str
    attributes: tuple[str, ...]
    planner: str
    rounds: int
    path_length: float
    tp: float
    tp_exact: str  # the TP fraction, e.g. "1/2"
    tp_per_keypath: tuple[str, ...]
    success: bool  # the episode's verdict: the task's PARTNR evaluation function where it has one, else TP = 100%
    goal_satisfied: bool | None
    ended: bool
    replans: int
    expert_rounds: int | None
    expert_path_length: float | None
    plw: float | None  # success * L*/max(L*, L) in rounds; None without a reference
    plw_path: float | None  # the same in metres
    errors: dict[str, int] = field(default_factory=dict)
    actions: dict[str, ActionCounts] = field(default_factory=dict)
    infra_error: str | None = None
    # What ``success`` was judged by: "partnr" (the task's evaluation function on the recorded states) or
    # "keypaths" (TP = 100%); and the PARTNR percent complete when it was.
    judged_by: str = JUDGED_BY_KEYPATHS
    pc: float | None = None

    @property
    def keypaths_complete(self) -> bool:
        """EMMOE's own success rule (TP = 100%, no infrastructure failure), whatever judged ``success``."""
        return self.tp >= 1.0 and self.infra_error is None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EpisodeScore:
        data = dict(data)
        data["attributes"] = tuple(data["attributes"])
        data["tp_per_keypath"] = tuple(data["tp_per_keypath"])
        data["actions"] = {k: ActionCounts(**v) for k, v in data["actions"].items()}
        return cls(**data)


def count_replans(trajectory: Trajectory) -> int:
    """Appendix C.3: rounds that directly follow a failed round."""
    return sum(1 for prev in trajectory.rounds[:-1] if not prev.feedback.success)


def final_action_is_end(trajectory: Trajectory) -> bool:
    if not trajectory.rounds:
        return False
    subtask = trajectory.rounds[-1].output.subtask
    return subtask is not None and subtask.is_end


def _path_weight(success: bool, expert: float, agent: float) -> float:
    if not success:
        return 0.0
    longest = max(expert, agent)
    return 1.0 if longest == 0 else expert / longest


def score_episode(
    trajectory: Trajectory,
    task: TaskSpec,
    resolver: NameResolver,
    *,
    run: int = 0,
    expert: ExpertReference | None = None,
    partnr: PartnrEpisode | None = None,
) -> EpisodeScore:
    """One trajectory's score. ``partnr``: the task's PARTNR evaluation function's judgement of the episode's
    states (:func:`homiebot.eval.partnr.metrics.score_episode`); it decides ``success`` for a task that has its
    own function (module docstring, "Success")."""
    progress = task_progress(task.keypaths, trajectory.rounds, resolver)
    success = progress.complete and trajectory.error is None
    judged_by = JUDGED_BY_KEYPATHS
    if task.evaluation is not None and partnr is not None:
        success = partnr.success and trajectory.error is None
        judged_by = JUDGED_BY_PARTNR
    n_rounds = len(trajectory.rounds)
    errors: Counter[str] = Counter()
    actions: dict[str, ActionCounts] = {}
    for record in trajectory.rounds:
        code = record.feedback.code
        if code is not ErrorCode.OK:
            errors[code.value] += 1
        subtask = record.output.subtask
        action = Action.parse(subtask.action) if subtask is not None else None
        if action is None or action is Action.END or code not in _EXECUTED:
            continue
        counts = actions.setdefault(action.value, ActionCounts())
        counts.executions += 1
        counts.attempts += max(record.feedback.attempts, 1)
        counts.successes += code is ErrorCode.OK
        counts.exec_errors += code is not ErrorCode.OK
    plw = plw_path = None
    if expert is not None:
        plw = _path_weight(success, expert.rounds, n_rounds)
        plw_path = _path_weight(success, expert.path_length, trajectory.path_length)
    elif not success:
        plw = plw_path = 0.0
    return EpisodeScore(
        task_id=task.id,
        run=run,
        seed=trajectory.seed,
        split=task.split,
        attributes=tuple(task.attributes),
        planner=trajectory.planner,
        rounds=n_rounds,
        path_length=trajectory.path_length,
        tp=float(progress.value),
        tp_exact=str(progress.value),
        tp_per_keypath=tuple(str(f) for f in progress.per_keypath),
        success=success,
        goal_satisfied=trajectory.goal_satisfied,
        ended=final_action_is_end(trajectory),
        replans=count_replans(trajectory),
        expert_rounds=expert.rounds if expert is not None else None,
        expert_path_length=expert.path_length if expert is not None else None,
        plw=plw,
        plw_path=plw_path,
        errors=dict(errors),
        actions=actions,
        infra_error=trajectory.error,
        judged_by=judged_by,
        pc=partnr.pc if partnr is not None else None,
    )


# ----------------------------------------------------------------------------------------- aggregation


@dataclass(frozen=True)
class GoalAgreement:
    both: int = 0  # success (TP = 100%, or the PARTNR function) and the goal check holds
    tp_only: int = 0  # success but the final state misses the goal
    goal_only: int = 0  # the goal holds but a keypath was not followed
    neither: int = 0
    unchecked: int = 0  # no goal check (free-text task)


@dataclass(frozen=True)
class MetricSummary:
    """Table 2's row (fractions in 0..1; None = n/a) plus the counts behind it."""

    n: int
    n_success: int
    n_ended: int
    replans_success: int
    replans_all: int
    sr: float | None
    plwsr: float | None
    tp: float | None
    srr: float | None
    ser: float | None
    goal_sr: float | None
    plwsr_path: float | None
    goal_agreement: GoalAgreement
    n_missing_expert: int
    n_infra_errors: int
    mean_rounds: float | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _mean(values: Sequence[float]) -> float | None:
    return ratio(sum(values), len(values))


def summarize(scores: Sequence[EpisodeScore]) -> MetricSummary:
    n = len(scores)
    successes = [s for s in scores if s.success]
    ended = sum(s.ended for s in scores)
    replans_success = sum(s.replans for s in successes)
    replans_all = sum(s.replans for s in scores)
    missing = sum(1 for s in successes if s.plw is None)
    plwsr = None if missing or n == 0 else _mean([s.plw or 0.0 for s in scores])
    plwsr_path = None if missing or n == 0 else _mean([s.plw_path or 0.0 for s in scores])
    checked = [s for s in scores if s.goal_satisfied is not None]
    agreement = GoalAgreement(
        both=sum(1 for s in checked if s.success and s.goal_satisfied),
        tp_only=sum(1 for s in checked if s.success and not s.goal_satisfied),
        goal_only=sum(1 for s in checked if not s.success and s.goal_satisfied),
        neither=sum(1 for s in checked if not s.success and not s.goal_satisfied),
        unchecked=n - len(checked),
    )
    return MetricSummary(
        n=n,
        n_success=len(successes),
        n_ended=ended,
        replans_success=replans_success,
        replans_all=replans_all,
        sr=ratio(len(successes), n),
        plwsr=plwsr,
        tp=_mean([s.tp for s in scores]),
        srr=ratio(replans_success, replans_all),
        ser=ratio(sum(1 for s in successes if s.ended), ended),
        goal_sr=ratio(sum(1 for s in checked if s.goal_satisfied), len(checked)),
        plwsr_path=plwsr_path,
        goal_agreement=agreement,
        n_missing_expert=missing,
        n_infra_errors=sum(1 for s in scores if s.infra_error),
        mean_rounds=_mean([s.rounds for s in scores]),
    )


def split_summaries(scores: Sequence[EpisodeScore]) -> dict[str, MetricSummary]:
    """Table 3: the summary per split, in the order train, validation, test. EMMOE-100 has a training and a test
    split (both always shown, as in the paper); the validation split (the PARTNR-style suite's apartment 6) is
    shown when an episode is in it."""
    splits = ["train", "validation", "test"] if any(s.split == "validation" for s in scores) else ["train", "test"]
    return {split: summarize([s for s in scores if s.split == split]) for split in splits}


@dataclass(frozen=True)
class ErrorTable:
    """One row of tables H3/H5 (successful trajectories) or H4/H6 (failed ones)."""

    counts: dict[str, int]  # per code, ERROR_CODES order
    family_counts: dict[str, int]  # L, D, F, E
    n_errors: int
    n_rounds: int
    n_trajectories: int

    def share(self, key: str) -> float | None:
        """A code's or a family's share of the errors (H3/H4 cells), or "All" = errors per round."""
        if key == "All":
            return ratio(self.n_errors, self.n_rounds)
        count = self.family_counts[key] if key in ERROR_FAMILIES else self.counts[key]
        return ratio(count, self.n_errors)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        keys = [*ERROR_CODES, *ERROR_FAMILIES, "All"]
        data["shares"] = {k: self.share(k) for k in keys}
        return data


def error_table(scores: Iterable[EpisodeScore], *, successful: bool) -> ErrorTable:
    chosen = [s for s in scores if s.success is successful]
    counts = {code: sum(s.errors.get(code, 0) for s in chosen) for code in ERROR_CODES}
    families = {fam: sum(counts[c] for c in codes) for fam, codes in ERROR_FAMILIES.items()}
    return ErrorTable(
        counts=counts,
        family_counts=families,
        n_errors=sum(counts.values()),
        n_rounds=sum(s.rounds for s in chosen),
        n_trajectories=len(chosen),
    )


@dataclass(frozen=True)
class ActionRow:
    """One column of table 4 / H7."""

    action: str
    exec_errors: int
    total_exec_errors: int
    p: float | None  # share of all execution errors
    executions: int
    attempts: int
    successes: int
    sr: float | None  # per attempt (table 4's SR)
    sr_execution: float | None  # within the three tries


def action_table(scores: Iterable[EpisodeScore]) -> list[ActionRow]:
    totals = {a: ActionCounts() for a in TABLE4_ACTIONS}
    for score in scores:
        for action, counts in score.actions.items():
            if action in totals:
                totals[action].add(counts)
    all_exec_errors = sum(c.exec_errors for c in totals.values())
    return [
        ActionRow(
            action=a,
            exec_errors=c.exec_errors,
            total_exec_errors=all_exec_errors,
            p=ratio(c.exec_errors, all_exec_errors),
            executions=c.executions,
            attempts=c.attempts,
            successes=c.successes,
            sr=ratio(c.successes, c.attempts),
            sr_execution=ratio(c.successes, c.executions),
        )
        for a, c in totals.items()
    ]


@dataclass(frozen=True)
class AttributeRow:
    attribute: str
    n: int
    n_success: int
    sr: float | None
    tp: float | None  # mean TP beside the paper's SR (tells planners apart where SR is 0)


def attribute_table(scores: Sequence[EpisodeScore]) -> list[AttributeRow]:
    """Table H8: SR over the trajectories of the tasks that carry each attribute (a task may carry several)."""
    rows = []
    for attribute in ATTRIBUTES:
        chosen = [s for s in scores if attribute in s.attributes]
        wins = sum(s.success for s in chosen)
        rows.append(AttributeRow(attribute, len(chosen), wins, ratio(wins, len(chosen)), _mean([s.tp for s in chosen])))
    return rows


def exact_mean_tp(scores: Sequence[EpisodeScore]) -> Fraction | None:
    """Mean TP as an exact fraction (used by tests and the resume check, where floats must not drift)."""
    if not scores:
        return None
    return sum((Fraction(s.tp_exact) for s in scores), Fraction(0)) / len(scores)
