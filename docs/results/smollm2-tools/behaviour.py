"""What SmolLM2 does in an evaluation's records, and where its wall time goes (docs/results/smollm2.md).

Reads ``homie eval --out DIR`` records (results.jsonl and each episode's rounds.jsonl) and prints, as Markdown:

* behaviour: episodes, rounds, distinct subtasks per episode, the share of rounds that repeat the previous
  round's subtask, the actions' shares, episodes that ended with ``[End]`` and their median rounds;
* time: the planner's seconds per round (``timings_s.plan_s``) for the first round (the world description
  and appendix D's whole instruction, evaluated from an empty cache) and for the later rounds (the new turn
  and the answer), per episode sums, the expert reference episodes' time, and the span of the run.
* the episodes with at least one round without an error (candidates for example trajectories).

Usage: ``python docs/results/smollm2-tools/behaviour.py runs/smollm2_e100_c [--tasks emmoe-001,...]``
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from pathlib import Path


def _rounds(record: Path) -> list[dict]:
    with (record / "rounds.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("eval_dir", type=Path)
    parser.add_argument("--tasks", default="", help="only these task ids (comma-separated)")
    parser.add_argument("--label", default="SmolLM2-135M")
    args = parser.parse_args()
    wanted = {t for t in args.tasks.split(",") if t}
    results = [json.loads(line) for line in (args.eval_dir / "results.jsonl").open(encoding="utf-8") if line.strip()]
    results = [r for r in results if not wanted or r["task_id"] in wanted]
    episodes = sorted((r for r in results if r["kind"] == "episode"), key=lambda r: r["task_id"])
    references = [r for r in results if r["kind"] == "reference"]
    repeats = comparisons = 0
    distinct: list[int] = []
    actions: Counter[str] = Counter()
    ended_rounds: list[int] = []
    first_plan: list[float] = []
    later_plan: list[float] = []
    plan_per_episode: list[float] = []
    with_ok: list[str] = []
    for result in episodes:
        rounds = _rounds(args.eval_dir / "episodes" / result["task_id"] / f"run{result['run']}")
        subtasks = [r.get("subtask_text") for r in rounds]
        distinct.append(len(set(subtasks)))
        for previous, current in zip(subtasks, subtasks[1:], strict=False):
            comparisons += 1
            repeats += previous == current
        for r in rounds:
            actions[(r.get("subtask") or {}).get("action") or "none"] += 1
        if result["ended"]:
            ended_rounds.append(result["rounds"])
        plans = [r["timings_s"]["plan_s"] for r in rounds]
        first_plan.append(plans[0])
        later_plan.extend(plans[1:])
        plan_per_episode.append(sum(plans))
        ok = [r["round"] for r in rounds if r.get("success")]
        if ok:
            with_ok.append(f"{result['task_id']} (rounds {ok})")
    total_rounds = sum(len(_rounds(args.eval_dir / "episodes" / r["task_id"] / f"run{r['run']}")) for r in episodes)
    share = ", ".join(f"{a} {100 * n / total_rounds:.0f}%" for a, n in actions.most_common())
    print("| Setting | episodes | rounds | distinct subtasks per episode | rounds repeating the previous subtask (%) "
          "| actions | ended with End | median rounds to End |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {args.label} | {len(episodes)} | {total_rounds} | {statistics.mean(distinct):.2f} | "
          f"{100 * repeats / max(1, comparisons):.1f} | {share} | {len(ended_rounds)} | "
          f"{statistics.median(ended_rounds) if ended_rounds else 'n/a'} |")
    print()
    finished = [r["finished_at"] for r in results]
    print("| Time (s) | median | mean | min | max | sum |")
    print("|---|---|---|---|---|---|")
    for name, values in (
        ("planner, round 1 (world description and whole instruction, empty cache)", first_plan),
        ("planner, rounds 2-20 (new turn and answer, prefix reused)", later_plan),
        ("planner, per episode", plan_per_episode),
        ("episode (wall_s: planner, executor, simulator)", [r["wall_s"] for r in episodes]),
        ("episode job (job_s: with recording)", [r["job_s"] for r in episodes]),
        ("expert reference episode job", [r["job_s"] for r in references]),
    ):
        if values:
            print(f"| {name} | {statistics.median(values):.3f} | {statistics.mean(values):.3f} | {min(values):.3f} | "
                  f"{max(values):.3f} | {sum(values):.1f} |")
    if finished:
        print(f"\nrecords finished between {min(finished):.0f} and {max(finished):.0f} "
              f"({max(finished) - min(finished):.0f} s apart); {len(episodes)} episodes, {len(references)} references; "
              f"workers: {len({r.get('worker_pid') for r in results})} pids; "
              f"max worker RSS {max(r.get('worker_rss_mb', 0) for r in results):.0f} MB")
    print(f"\nepisodes with an error-free round: {', '.join(with_ok) or 'none'}")


if __name__ == "__main__":
    main()
