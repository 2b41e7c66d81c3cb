"""The figures of a training run and of the evaluations of its model, from what they wrote (no rerun).

    python -m benchmarks.run_figures --metrics checkpoints/homiebot-smollm2-sft/metrics.jsonl \
        --answers 8437 --episodes 1015 --pieces 74 --eval runs/ship-test runs/ship-train20

Training: steps, epoch, CPU hours (rank 0's step CPU times the processes), per piece the median step (wall and
CPU) and the CPU seconds per learned answer, the pieces the trainer recorded whole (every process's CPU, loading
and validation included), and the validation rows. Evaluations: the planning round's median and
p90 wall time over every round of their records (``timings_s.plan_s``). BENCHMARKS.md, "The first long SFT run".
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def training_lines(metrics: Path, answers: int, episodes: int, pieces: list[int], processes: int) -> list[str]:
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    steps = [r for r in rows if r["kind"] == "train"]
    per_step = answers / (episodes / 4)  # 4 episodes an optimizer step (the cpu preset)
    lines = [f"steps {steps[-1]['step']}, epoch {steps[-1]['epoch']:.2f}, "
             f"{sum(r['step_cpu_s'] for r in steps) * processes / 3600:.2f} CPU h, "
             f"{sum(r['step_wall_s'] for r in steps) / 3600:.2f} h of step wall time"]
    bounds = [0, *pieces, steps[-1]["step"]]
    for first, last in zip(bounds, bounds[1:], strict=False):
        part = [r for r in steps if first < r["step"] <= last]
        if part:
            cpu = statistics.median(r["step_cpu_s"] for r in part)
            lines.append(f"steps {first + 1}-{last}: median step {statistics.median(r['step_wall_s'] for r in part):.1f} s"
                         f" wall, {cpu:.1f} CPU s of rank 0; {cpu * processes / per_step:.2f} CPU s per answer")
    pieces = [r for r in rows if r["kind"] == "piece"]
    if pieces:
        # A piece row is what a whole `homie train` invocation cost (every process, loading and validation
        # included); runs before the trainer wrote them have rows only for their later pieces.
        covered = sum(r["step"] - r["first_step"] for r in pieces)
        step_cpu = sum(r["step_cpu_s"] for r in steps if any(p["first_step"] < r["step"] <= p["step"] for p in pieces))
        whole = sum(r["cpu_s"] for r in pieces)
        lines.append(f"{len(pieces)} pieces recorded whole, {covered} steps: {whole / 3600:.2f} CPU h "
                     f"({whole / max(step_cpu * processes, 1e-9):.2f}x their steps' CPU), longest piece "
                     f"{max(r['wall_s'] for r in pieces) / 3600:.2f} h wall")
    for r in (r for r in rows if r["kind"] == "val"):
        lines.append(f"validation step {r['step']}: subtask {100 * r['subtask_accuracy']:.1f} %, action "
                     f"{100 * r['action_accuracy']:.1f} %, answer NLL {r['answer_nll']:.3f}")
    return lines


def planning_lines(folders: list[Path]) -> list[str]:
    times = sorted(json.loads(line)["timings_s"]["plan_s"] for folder in folders
                   for record in folder.glob("episodes/*/run*/rounds.jsonl")
                   for line in record.read_text().splitlines() if line.strip())
    if not times:
        return ["no rounds"]
    return [f"planning round over {len(times)} rounds: median {statistics.median(times):.2f} s, "
            f"p90 {times[int(0.9 * len(times))]:.2f} s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics", type=Path, help="a training run's metrics.jsonl")
    parser.add_argument("--answers", type=int, default=8437, help="learned answers in the data set")
    parser.add_argument("--episodes", type=int, default=1015, help="samples (episodes) in the data set")
    parser.add_argument("--pieces", type=int, nargs="*", default=[], help="the last step of each piece but the last")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--eval", type=Path, nargs="*", default=[], help="homie eval folders")
    args = parser.parse_args()
    lines = training_lines(args.metrics, args.answers, args.episodes, args.pieces, args.processes) if args.metrics else []
    if args.eval:
        lines += planning_lines(args.eval)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
