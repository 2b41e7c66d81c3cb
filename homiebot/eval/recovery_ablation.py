"""The recovery ablation table from several ``homie eval`` directories, on the episodes they all finished.

Run: ``python -m homiebot.eval.recovery_ablation NAME=DIR [NAME=DIR ...] [--out FILE.md]``

Each directory is scored from its records alone (:func:`homiebot.eval.scoring.compute_scores`); the table
keeps only the (task, run) pairs every directory has a record of, so the rows compare the same episodes
even when some evaluations were stopped early. Per row: EMMOE's SR, PLWSR, TP, SRR, SER and mean rounds
(:func:`homiebot.eval.metrics.summarize`), and from each directory's ``recovery/`` statistics of the same
episodes: LLM calls (and how many the model answered rather than the episode's memory), tokens (and how many
the model computed), seconds per episode, how often each stage fired and acted, how many recovery steps
succeeded, the failed rounds by error code.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from homiebot.recovery.stats import STATS_DIR, episode_file_name, load_stats, summarize, summary_markdown


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}"


def stage_counts(summary: dict[str, Any]) -> str:
    """How often each stage fired and acted, from :func:`~homiebot.recovery.stats.summarize`'s counts: stage 1
    (dropped the step), stage 2 (named preconditions; the retried step then succeeded), stage 3 and 4 (steps).
    CoT rows give their decisions instead."""
    counts = summary.get("counts")
    if not counts:
        return "n/a"
    cot = summary.get("cot", {})
    if sum(cot.values()):
        return ", ".join(f"{k} {v}" for k, v in cot.items())
    r = counts["reached"]
    if not any(r.values()):
        return "none"
    return (f"1: {r['1']} ({counts['unimportant']} dropped); 2: {r['2']} ({counts['stage2_with_steps']} steps, "
            f"{counts['stage2_success']}/{counts['stage2_retried']} retries ok); 3: {r['3']} "
            f"({counts['stage3_with_steps']} steps); 4: {r['4']} ({counts['stage4_with_steps']} steps)")


def steps_ok(summary: dict[str, Any]) -> str:
    counts = summary.get("counts")
    if not counts:
        return "n/a"
    run = counts["recovery_subtasks"]
    return f"{run - counts['recovery_failures']} / {run}"


def ablation(dirs: dict[str, Path]) -> str:
    """The Markdown table (and the recovery statistics of each row) over the common episodes."""
    from homiebot.eval.manifest import load_manifest
    from homiebot.eval.metrics import summarize as emmoe_summary
    from homiebot.eval.scoring import compute_scores
    from homiebot.tasks.suite import TaskSpec

    scored = {name: compute_scores(path) for name, path in dirs.items()}
    common = set.intersection(*({(s.task_id, s.run) for s in ev.scores} for ev in scored.values()))
    if not common:
        raise ValueError("the evaluations share no finished episode")
    lines = [
        f"{len(common)} episode(s) every configuration finished: "
        + ", ".join(f"{t}/run{r}" for t, r in sorted(common)),
        "",
        "| configuration | SR | PLWSR | TP | SRR | SER | rounds | LLM calls / ep. (by the model) "
        "| tokens / ep. (computed) | LLM s / ep. "
        "| stages fired (acted) | recovery steps ok / run | failed rounds by code |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    sections = []
    for name, ev in scored.items():
        scores = [s for s in ev.scores if (s.task_id, s.run) in common]
        m = emmoe_summary(scores)
        tasks = {k: TaskSpec.model_validate(v) for k, v in load_manifest(dirs[name])["tasks"].items()}
        wanted = {episode_file_name(tasks[t].instruction, tasks[t].seed + r) for t, r in common}
        folder = dirs[name] / STATS_DIR
        episodes = [e for e in load_stats(folder) if episode_file_name(e["instruction"], e["seed"]) in wanted] if folder.is_dir() else []
        rec: dict[str, Any] = summarize(episodes) if episodes else {}
        calls = rec.get("llm_calls_per_episode")
        seconds = rec.get("llm_seconds_per_episode")
        tokens = rec.get("tokens_per_episode")
        # Calls the model answered (not from the episode's memory) and tokens it computed (no cache, no memory).
        model_calls = rec.get("model_calls_per_episode")
        computed = rec.get("computed_tokens_per_episode")
        codes = ", ".join(f"{k} {v}" for k, v in rec.get("failures_by_code", {}).items()) or "n/a"
        lines.append(
            f"| {name} | {_pct(m.sr)} | {_pct(m.plwsr)} | {_pct(m.tp)} | {_pct(m.srr)} | {_pct(m.ser)} | "
            f"{m.mean_rounds:.1f} | {'n/a' if calls is None else f'{calls:.1f}'}"
            f"{'' if model_calls is None else f' ({model_calls:.1f})'} | "
            f"{'n/a' if tokens is None else f'{tokens:,.0f}'}{'' if computed is None else f' ({computed:,.0f})'} | "
            f"{'n/a' if seconds is None else f'{seconds:.0f}'} | {stage_counts(rec)} | {steps_ok(rec)} | {codes} |"
        )
        if episodes:
            sections.append(summary_markdown(rec).replace("## Failure recovery", f"### {name}"))
    return "\n".join(lines) + "\n\n" + "\n".join(sections)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", help="NAME=DIR, one per configuration (the table's row order)")
    parser.add_argument("--out", type=Path, help="write the Markdown here instead of printing it")
    args = parser.parse_args(argv)
    dirs: dict[str, Path] = {}
    for item in args.dirs:
        name, sep, path = item.partition("=")
        if not sep or not name or not Path(path).is_dir():
            print(f"error: {item!r} is not NAME=DIR with an existing directory", file=sys.stderr)
            return 2
        dirs[name] = Path(path)
    try:
        text = ablation(dirs)
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
