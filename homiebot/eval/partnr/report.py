"""PARTNR's metrics in an evaluation's report, beside EMMOE's (docs/partnr.md, "Metrics").

``homie eval`` / ``homie metrics`` score every episode record twice: EMMOE's way (SR, TP, the final-state goal
check; :mod:`homiebot.eval.metrics`) and PARTNR's way (PC and success from the record's ``states.jsonl`` and
``evaluation.json``; :mod:`homiebot.eval.partnr.metrics`). For a task with its own evaluation function SR *is*
PARTNR success (the episode's one verdict, :mod:`homiebot.eval.verdict`); for the others SR is TP = 100%. This
module writes the second beside the first: one table with SR, TP, goal-check SR, PARTNR success and PC over the
same episodes, how often PARTNR success agrees with the keypaths (TP = 100%, EMMOE's rule) and with the goal
check, then PARTNR's own tables. Records written before states were recorded have no PC: they are counted as
n/a, never as 0.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from homiebot.eval.metrics import EpisodeScore
from homiebot.eval.partnr.metrics import PartnrEpisode, PartnrSummary, format_tables, summarize

_AGREEMENT_KEYS = ("both", "partnr_only", "other_only", "neither")


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}"


def _agreement(pairs: Sequence[tuple[bool, bool | None]]) -> dict[str, int]:
    """Counts of (PARTNR success, other success) pairs; pairs whose other side is None are left out."""
    counts = dict.fromkeys(_AGREEMENT_KEYS, 0)
    for partnr, other in pairs:
        if other is None:
            continue
        key = {(True, True): "both", (True, False): "partnr_only", (False, True): "other_only",
               (False, False): "neither"}[(partnr, other)]
        counts[key] += 1
    return counts


def partnr_report(pairs: Sequence[tuple[EpisodeScore, PartnrEpisode]], unscored: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """The PARTNR section of ``report.md`` and its JSON (``report.json["partnr"]``, ``partnr.json``).

    ``pairs``: every episode with recorded states, its EMMOE score beside its PARTNR score; ``unscored``:
    the episodes ("task/runN") whose records have no states (PC n/a).
    """
    data = partnr_data(pairs, unscored)
    return partnr_markdown(data), data


def partnr_data(pairs: Sequence[tuple[EpisodeScore, PartnrEpisode]], unscored: Sequence[str]) -> dict[str, Any]:
    """The PARTNR section's figures as JSON (:func:`partnr_report`); :func:`partnr_markdown` renders them."""
    if not pairs:
        return {"episodes": 0, "unscored": list(unscored), "summary": None, "rows": []}
    emmoe = [score for score, _ in pairs]
    summary = summarize([episode for _, episode in pairs])
    # The goal check is the final-state check of EMMOE's table 2 (goal-check SR: End not required, nor for PC).
    checked = [s.goal_satisfied for s in emmoe if s.goal_satisfied is not None]
    beside = {
        "episodes": len(pairs),
        "sr": statistics.fmean(float(s.success) for s in emmoe),
        "tp": statistics.fmean(s.tp for s in emmoe),
        "goal_sr": statistics.fmean(float(c) for c in checked) if checked else None,
        "partnr_sr": summary.sr,
        "pc": summary.pc,
    }
    # SR is PARTNR success itself for a task with its own function (homiebot.eval.verdict); what PARTNR success
    # is compared with here is EMMOE's keypath rule (TP = 100%), which judges the other tasks.
    return {
        "episodes": len(pairs),
        "unscored": list(unscored),
        "beside": beside,
        "agreement_sr": _agreement([(p.success, s.keypaths_complete) for s, p in pairs]),
        "agreement_goal_check": _agreement([(p.success, s.goal_satisfied) for s, p in pairs]),
        "disagree": [f"{s.task_id}/run{s.run}" for s, p in pairs if p.success != s.keypaths_complete],
        "summary": asdict(summary),
        "rows": [{"run": s.run, **p.to_json()} for s, p in pairs],
    }


def partnr_markdown(data: dict[str, Any]) -> str:
    """The PARTNR section of ``report.md`` (and of the HTML report's tables) from :func:`partnr_data`'s JSON."""
    lines = ["## PARTNR metrics (percent complete from the recorded states)", ""]
    unscored = data["unscored"]
    if data.get("summary") is None:
        lines.append(f"PARTNR percent complete: n/a ({len(unscored)} episode record(s) without states.jsonl; "
                     "records written before the states were recorded cannot be re-scored).")
        return "\n".join(lines) + "\n"
    beside, vs_sr, vs_goal = data["beside"], data["agreement_sr"], data["agreement_goal_check"]
    summary = PartnrSummary(**{**data["summary"], "sr_by_category": {
        c: None if v is None else (v[0], v[1]) for c, v in data["summary"]["sr_by_category"].items()}})
    lines += [
        "Percentages over the episodes whose records keep their states "
        f"({data['episodes']}; {len(unscored)} without: n/a). SR: the episodes' verdicts (PARTNR success for a "
        "task with its own evaluation function, TP = 100% for the others); PARTNR success: PC = 1.",
        "",
        "| episodes | SR | TP | goal-check SR | PARTNR success | PC |",
        "|---|---|---|---|---|---|",
        f"| {data['episodes']} | {_pct(beside['sr'])} | {_pct(beside['tp'])} | {_pct(beside['goal_sr'])} | "
        f"{_pct(beside['partnr_sr'])} | {_pct(beside['pc'])} |",
        "",
        "### PARTNR success vs the keypaths and vs the goal check",
        "",
        "| compared with | both succeed | PARTNR only | other only | neither |",
        "|---|---|---|---|---|",
        "| keypaths (TP = 100%) | " + " | ".join(str(vs_sr[k]) for k in _AGREEMENT_KEYS) + " |",
        "| goal check | " + " | ".join(str(vs_goal[k]) for k in _AGREEMENT_KEYS) + " |",
        "",
        "### PARTNR's tables (table 2 and 12 columns, table 13 per category)",
        "",
        format_tables(summary, "PARTNR metrics", agreement=False),
    ]
    disagree = data.get("disagree") or []
    if disagree:
        lines += ["", f"PARTNR success and the keypaths disagree on: {', '.join(disagree[:20])}"
                      + (f" ... ({len(disagree)} in all)" if len(disagree) > 20 else "")]
    return "\n".join(lines) + "\n"


def summary_line(data: dict[str, Any] | None) -> str:
    """One line for ``homie eval`` / ``homie metrics``: PARTNR success, PC, SR per category, explanations."""
    if not data or data.get("summary") is None:
        unscored = len(data.get("unscored", [])) if data else 0
        return f"PARTNR: percent complete n/a ({unscored} episode record(s) without states.jsonl)"
    s = data["summary"]
    categories = ", ".join("{} {}".format(c, "n/a" if v is None else f"{v[0]:.2f} (n={v[1]})")
                           for c, v in s["sr_by_category"].items())
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(s["explanations"].items()))
    unscored = len(data["unscored"])
    return (f"PARTNR ({data['episodes']} episodes with states" + (f", {unscored} without: n/a" if unscored else "")
            + f"): success {_pct(s['sr'])}%, PC {_pct(s['pc'])}%; SR by category: {categories}; "
            f"failure explanations: {kinds}")
