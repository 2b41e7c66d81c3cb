"""PARTNR's metrics for one episode and for a set of episodes (paper section 4.2 and appendix A.12).

Per episode: percent complete (PC) and success (PC = 1) from the recorded states, planning cycles (rounds,
unparseable ones included), path length and simulated time (the embedded simulator's analog of PARTNR's
"simulation steps", which are not comparable), extraneous effort, exploration rounds, and the failure
explanation. Task offloading needs two agents and is reported n/a. docs/partnr.md, "Metrics", has the exact
definitions and what differs from PARTNR.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from homiebot.tasks.partnr.explain import explanation_kind
from homiebot.tasks.partnr.language import CATEGORIES, EvaluationFunction, task_category
from homiebot.tasks.partnr.tracker import EvaluationResult, evaluate_states
from homiebot.types import RoundRecord, WorldState

#: PARTNR's extraneous effort is computed on successful episodes only ("PC >= 0.99" in its analysis code).
SUCCESS_PC = 0.99


@dataclass(frozen=True)
class PartnrEpisode:
    """PARTNR's view of one episode. ``None``: not defined for this episode (never 0 in its place)."""

    task_id: str
    category: str
    pc: float
    success: bool
    # The loop's final-state goal check (End not required, as the goal-check SR of EMMOE's report), for the
    # agreement table; None when the task has no goal.
    goal_check: bool | None
    ended: bool
    planning_cycles: int
    path_length_m: float
    sim_time_s: float | None
    extraneous_effort: float | None
    exploration_rounds: int | None
    explanation: str
    explanation_kind: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def extraneous_effort(result: EvaluationResult, rounds: Sequence[RoundRecord]) -> float | None:
    """Share of effective actions that did not raise PC (successful episodes only).

    Progress rounds raise the running maximum of PC (``result.progress[k]`` is PC after round k); events
    are the progress rounds plus every successful Put (PARTNR counts place events that did not help).
    """
    if result.percent_complete < SUCCESS_PC:
        return None
    best = result.progress[0] if result.progress else 0.0
    progress_rounds: set[int] = set()
    for k in range(1, len(result.progress)):
        if result.progress[k] > best:
            progress_rounds.add(k)
            best = result.progress[k]
    puts = {r.index for r in rounds if r.feedback.success and r.output.subtask is not None
            and r.output.subtask.action.strip().lower() == "put"}
    events = progress_rounds | puts
    if not events:
        return 0.0
    return (len(events) - len(progress_rounds)) / len(events)


def exploration_rounds(rounds: Sequence[RoundRecord]) -> int | None:
    """Rounds before the first successful Pick (PARTNR's "steps before the first object is picked")."""
    for r in rounds:
        if r.feedback.success and r.output.subtask is not None and r.output.subtask.action.strip().lower() == "pick":
            return r.index - 1
    return None


def score_episode(task_id: str, function: EvaluationFunction, states: Sequence[WorldState],
                  rounds: Sequence[RoundRecord], *, ended: bool, goal_check: bool | None,
                  path_length_m: float, sim_time_s: float | None = None) -> PartnrEpisode:
    """PARTNR's metrics of one episode from its states (state 0 = after the reset, one per round after)."""
    result = evaluate_states(function, states)
    return PartnrEpisode(
        task_id=task_id,
        category=task_category(function),
        pc=result.percent_complete,
        success=result.success,
        goal_check=goal_check,
        ended=ended,
        planning_cycles=len(rounds),
        path_length_m=path_length_m,
        sim_time_s=sim_time_s,
        extraneous_effort=extraneous_effort(result, rounds),
        exploration_rounds=exploration_rounds(rounds),
        explanation=result.explanation,
        explanation_kind=explanation_kind(result.explanation),
    )


def _mean(values: Sequence[float | int | None]) -> float | None:
    present = [float(v) for v in values if v is not None]
    return statistics.fmean(present) if present else None


def _sem(values: Sequence[float]) -> float | None:
    return statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else None


@dataclass(frozen=True)
class PartnrSummary:
    episodes: int
    sr: float
    sr_sem: float | None
    pc: float
    pc_sem: float | None
    planning_cycles: float
    path_length_m: float
    sim_time_s: float | None
    extraneous_effort: float | None
    exploration_rounds: float | None
    sr_by_category: dict[str, tuple[float, int] | None]  # category -> (SR, episodes); None: no episode
    explanations: dict[str, int]
    agreement: dict[str, int]  # PARTNR success vs the goal check: both, partnr_only, goal_only, neither


def summarize(episodes: Sequence[PartnrEpisode]) -> PartnrSummary:
    if not episodes:
        raise ValueError("no episodes to summarize")
    success = [float(e.success) for e in episodes]
    pcs = [e.pc for e in episodes]
    by_category: dict[str, tuple[float, int] | None] = {}
    for category in CATEGORIES:
        chosen = [float(e.success) for e in episodes if e.category == category]
        by_category[category] = (statistics.fmean(chosen), len(chosen)) if chosen else None
    agreement: Counter[str] = Counter()
    for e in episodes:
        if e.goal_check is None:
            continue
        key = {(True, True): "both", (True, False): "partnr_only", (False, True): "goal_only",
               (False, False): "neither"}[(e.success, e.goal_check)]
        agreement[key] += 1
    return PartnrSummary(
        episodes=len(episodes),
        sr=statistics.fmean(success),
        sr_sem=_sem(success),
        pc=statistics.fmean(pcs),
        pc_sem=_sem(pcs),
        planning_cycles=statistics.fmean(e.planning_cycles for e in episodes),
        path_length_m=statistics.fmean(e.path_length_m for e in episodes),
        sim_time_s=_mean([e.sim_time_s for e in episodes]),
        extraneous_effort=_mean([e.extraneous_effort for e in episodes]),
        exploration_rounds=_mean([e.exploration_rounds for e in episodes]),
        sr_by_category=by_category,
        explanations=dict(Counter(e.explanation_kind for e in episodes)),
        agreement={k: agreement.get(k, 0) for k in ("both", "partnr_only", "goal_only", "neither")},
    )


def _fmt(value: float | None, digits: int = 2, sem: float | None = None) -> str:
    if value is None:
        return "n/a"
    text = f"{value:.{digits}f}"
    return text + (f" ± {sem:.{digits}f}" if sem is not None else "")


def format_tables(summary: PartnrSummary, label: str, *, agreement: bool = True) -> str:
    """PARTNR's table 2 layout (steps analog | SR | PC | planning cycles), its table 12 columns, table 13's
    per-category SR, explanation kinds and the agreement with the goal check, as Markdown."""
    s = summary
    lines = [
        f"**{label}** ({s.episodes} episodes)",
        "",
        "| Path length (m) | Sim time (s) | Success rate | Percent complete | Planning cycles |",
        "|---|---|---|---|---|",
        f"| {_fmt(s.path_length_m, 1)} | {_fmt(s.sim_time_s, 1)} | {_fmt(s.sr, 2, s.sr_sem)} | "
        f"{_fmt(s.pc, 2, s.pc_sem)} | {_fmt(s.planning_cycles, 2)} |",
        "",
        "| Task offloading | Extraneous effort | Exploration (rounds before the first pick) |",
        "|---|---|---|",
        f"| n/a (one agent) | {_fmt(s.extraneous_effort, 3)} | {_fmt(s.exploration_rounds, 2)} |",
        "",
        "| " + " | ".join(CATEGORIES) + " |",
        "|" + "---|" * len(CATEGORIES),
        "| " + " | ".join("n/a" if s.sr_by_category[c] is None
                          else f"{s.sr_by_category[c][0]:.2f} (n={s.sr_by_category[c][1]})"  # type: ignore[index]
                          for c in CATEGORIES) + " |",
        "",
        "Failure explanations: " + (", ".join(f"{k} {v}" for k, v in sorted(s.explanations.items())) or "none"),
    ]
    if agreement:
        lines += [
            "",
            "| PARTNR success vs goal check | goal check yes | goal check no |",
            "|---|---|---|",
            f"| PARTNR success | {s.agreement['both']} | {s.agreement['partnr_only']} |",
            f"| PARTNR failure | {s.agreement['goal_only']} | {s.agreement['neither']} |",
        ]
    return "\n".join(lines)
