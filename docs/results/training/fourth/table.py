"""The fourth curve's tables (docs/results/training.md) from its evaluation folders.

    python docs/results/training/fourth/table.py [ROOT]

ROOT holds ``ev_STAGE_SPLIT/`` folders as ``homie eval`` wrote them (default: this script's folder, where their
records are kept). Only finished episodes count. Where a stage has fewer training tasks than another (a run cut by
the clock), the rows are also given on the tasks every stage finished, so the stages are compared on the same
tasks. Figures per episode from results.jsonl (SR, TP as EMMOE defines them: ``homie metrics``), per round from
each episode's summary.json (error codes, subtasks).
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

STAGES = {
    "base": "SmolLM2-135M, before training",
    "sft": "after SFT (40 steps)",
    "dpo": "after SFT + DPO (10 steps)",
    "dagger1": "+ DAgger iteration 1 (10 steps)",
    "dagger2": "+ DAgger iteration 2 (10 steps on both iterations' 36 pairs)",
}
CODES = ["OK", "L1", "L2", "L3", "L4", "D1", "D2", "F1", "F2", "E1", "E2"]


def _tp(value: object) -> float:
    if isinstance(value, str) and "/" in value:
        done, total = value.split("/")
        return float(done) / float(total)
    return float(value or 0)  # type: ignore[arg-type]


def episodes(root: Path, stage: str, split: str) -> dict[str, dict]:
    folder = root / f"ev_{stage}_{split}"
    found: dict[str, dict] = {}
    if not (folder / "results.jsonl").is_file():
        return found
    for line in (folder / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("kind") != "episode":
            continue
        summary = folder / "episodes" / record["task_id"] / "run0" / "summary.json"
        if summary.is_file():
            found[record["task_id"]] = {**record, "summary": json.loads(summary.read_text())}
    return found


def row(label: str, runs: dict[str, dict]) -> str:
    if not runs:
        return f"| {label} | 0 | not run | | | | | | | |"
    codes: collections.Counter[str] = collections.Counter()
    actions: collections.Counter[str] = collections.Counter()
    rounds = repeats = ends = 0
    for record in runs.values():
        previous = None
        for subtask, code in zip(record["summary"]["subtasks"], record["summary"]["error_codes"], strict=True):
            rounds += 1
            codes[code or "OK"] += 1
            repeats += subtask == previous
            previous = subtask
            action = subtask.strip("[]").split(",")[0].strip() or "(none)"
            actions[action] += 1
            ends += action == "End"
    n = len(runs)
    sr = 100 * sum(bool(r["success"]) for r in runs.values()) / n
    tp = 100 * sum(_tp(r.get("tp")) for r in runs.values()) / n
    goal = 100 * sum(bool(r.get("goal_satisfied")) for r in runs.values()) / n
    progressed = sum(_tp(r.get("tp")) > 0 for r in runs.values())
    shares = ", ".join(f"{c} {100 * codes[c] / rounds:.0f}%" for c in CODES if codes.get(c))
    top = ", ".join(f"{a} {100 * k / rounds:.0f}%" for a, k in actions.most_common(3))
    return (
        f"| {label} | {n} | {sr:.1f} | {tp:.1f} | {progressed} | {goal:.0f} | {ends} | {shares} | {100 * repeats / rounds:.0f}% | {top} |"
    )


def after_failures(root: Path, stage: str, split: str, tasks: set[str]) -> str:
    """After a failed round: how often the next subtask differs, and how often the next analysis begins "I failed"
    (what the expert's answers in the DPO and DAgger pairs do). From rounds.jsonl (raw answers)."""
    failed = differs = acknowledged = 0
    for task in sorted(tasks):
        path = root / f"ev_{stage}_{split}" / "episodes" / task / "run0" / "rounds.jsonl"
        rounds = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for before, after in zip(rounds, rounds[1:], strict=False):
            if before.get("error_code") in (None, "", "OK"):
                continue
            failed += 1
            differs += after.get("subtask_text") != before.get("subtask_text")
            analysis = (after.get("raw_output") or "").strip().removeprefix("Analysis:").strip()
            acknowledged += analysis.lower().startswith("i failed")
    return f"{differs} / {failed} | {acknowledged} / {failed}"


HEADER = (
    "| Stage | episodes | SR | TP | tasks with TP > 0 | goal-check SR | End answered | error codes, share of all rounds "
    "| rounds repeating the previous subtask | actions |\n|---|---|---|---|---|---|---|---|---|---|"
)


def main(root: Path) -> None:
    found = {(s, split): episodes(root, s, split) for s in STAGES for split in ("test", "train")}
    for split, title in (("test", "10 test tasks"), ("train", "90 training tasks, suite seeds")):
        print(f"\n{title}\n\n{HEADER}")
        for stage, label in STAGES.items():
            print(row(label, found[(stage, split)]))
        present = [found[(s, split)] for s in STAGES if found[(s, split)]]
        common = set.intersection(*(set(runs) for runs in present)) if present else set()
        print("\n| Stage | after a failed round, the next subtask differs | ... the next analysis begins \"I failed\" |")
        print("|---|---|---|")
        for stage, label in STAGES.items():
            if found[(stage, split)]:
                print(f"| {label} | {after_failures(root, stage, split, set(found[(stage, split)]))} |")
        if any(len(runs) != len(common) for runs in present):
            print(f"\n{title}, the {len(common)} every stage finished\n\n{HEADER}")
            for stage, label in STAGES.items():
                runs = found[(stage, split)]
                print(row(label, {t: r for t, r in runs.items() if t in common}) if runs else row(label, {}))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent)
