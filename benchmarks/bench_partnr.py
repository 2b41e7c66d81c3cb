"""PARTNR's evaluation language: how long one round's evaluation takes, how long the suite's expert
evaluation takes, and the expert's tables (docs/partnr.md).

Targets: evaluating a task's function over one round's state <= 1 ms median; the PARTNR-style suite's
expert evaluation (one run of every task) <= 5 minutes on 2 cores.

Prints:

* per-round evaluation time: for every task of the suite, a tracker is fed the state after the reset and
  then timed on ``--updates`` further updates (a real simulator state each); median, 90th percentile and
  maximum over all updates, and the median proposition count (after unrolling);
* wall time of the expert's evaluation of the whole suite (one run of every task) the way ``homie eval
  --suite partnr --planner partnr_expert --workers 2`` runs it: worker processes, episode records with
  their states, the report with PARTNR's tables (``--in-process``: one process, no records, instead);
* with ``--tables``: PARTNR's tables for EMMOE-100 (goal expert) and the PARTNR-style suite (PARTNR expert),
  noiseless and with ``--noise emmoe``.

Usage::

    MUJOCO_GL=egl python -m benchmarks.bench_partnr                 # speed figures
    MUJOCO_GL=egl python -m benchmarks.bench_partnr --eval-out runs/partnr-expert-noiseless   # keep the records
    MUJOCO_GL=egl python -m benchmarks.bench_partnr --tables        # plus the four expert tables
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from homiebot.eval.partnr.episodes import run_suite
from homiebot.eval.partnr.metrics import format_tables, summarize
from homiebot.planner.registry import make_planner
from homiebot.tasks.partnr.convert import task_function
from homiebot.tasks.partnr.tracker import PropositionTracker
from homiebot.tasks.suite import load_suite


def round_evaluation_times(suite: str, updates: int) -> tuple[list[float], list[int]]:
    from homiebot.sim.mujoco.backend import MujocoSimulator

    sim = MujocoSimulator(render=False)
    times: list[float] = []
    sizes: list[int] = []
    try:
        for task in load_suite(suite).tasks:
            sim.reset(task.scene, seed=task.seed)
            state = sim.state()
            tracker = PropositionTracker(task_function(task, state))
            sizes.append(len(tracker.function.propositions))
            tracker.update(state)
            # A state after an action: move to the first object of the task so that something changed.
            sim.go_to(next(n for n, e in state.entities.items() if e.kind.value == "object"))
            moved = sim.state()
            for _ in range(updates):
                t0 = time.perf_counter()
                tracker.update(moved)
                times.append(time.perf_counter() - t0)
    finally:
        sim.shutdown()
    return times, sizes


def eval_wall_time(suite: str, workers: int, keep: Path | None = None) -> tuple[float, float, float]:
    """Wall time of ``homie eval --suite SUITE --planner partnr_expert --runs 1`` into a scratch directory
    (or into ``keep``, which must not exist yet, to keep the records), and the report's PARTNR SR and PC."""
    from homiebot.eval.runner import EvalSettings, run_evaluation

    if keep is not None and keep.exists():
        raise SystemExit(f"--eval-out {keep} exists; a resumed evaluation would not time the whole suite")
    with tempfile.TemporaryDirectory(prefix="bench_partnr_") as scratch:
        out = keep if keep is not None else Path(scratch) / "eval"
        t0 = time.perf_counter()
        run_evaluation(EvalSettings(suite=suite, planner="partnr_expert"), out, runs=1, workers=workers,
                       progress=False)
        wall = time.perf_counter() - t0
        summary = json.loads((out / "report.json").read_text())["partnr"]["summary"]
    return wall, summary["sr"], summary["pc"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="partnr")
    parser.add_argument("--updates", type=int, default=20, help="timed updates per task")
    parser.add_argument("--workers", type=int, default=2, help="worker processes of the suite's evaluation")
    parser.add_argument("--eval-out", type=Path, default=None,
                        help="keep the suite evaluation's records here (a new directory; default: a scratch one)")
    parser.add_argument("--in-process", action="store_true",
                        help="time the suite's evaluation in this process without records instead")
    parser.add_argument("--tables", action="store_true", help="also print the expert tables (about 2 minutes)")
    args = parser.parse_args()
    os.environ.setdefault("MUJOCO_GL", "egl")

    times, sizes = round_evaluation_times(args.suite, args.updates)
    ms = sorted(t * 1000 for t in times)
    print(f"per-round evaluation over {len(sizes)} tasks x {args.updates} updates: median {statistics.median(ms):.3f} ms, "
          f"p90 {ms[int(0.9 * len(ms))]:.3f} ms, max {ms[-1]:.3f} ms; median {statistics.median(sizes)} propositions "
          f"(max {max(sizes)})")

    tasks = load_suite(args.suite).tasks
    if args.in_process:
        t0 = time.perf_counter()
        episodes = run_suite(tasks, lambda: make_planner("partnr_expert"))
        wall = time.perf_counter() - t0
        summary = summarize(episodes)
        print(f"expert evaluation of {len(tasks)} tasks (one run, one process, no rendering, no records): "
              f"{wall:.1f} s wall, SR {summary.sr:.3f}, PC {summary.pc:.3f}")
    else:
        load_before = os.getloadavg()[0]
        wall, sr, pc = eval_wall_time(args.suite, args.workers, args.eval_out)
        # The machine is shared: the 1-minute load average before and after says how busy it was.
        print(f"expert evaluation of {len(tasks)} tasks through homie eval (one run, {args.workers} workers, records "
              f"with states, report): {wall:.1f} s wall, SR {sr:.3f}, PC {pc:.3f}; load average "
              f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after")

    if args.tables:
        for suite, planner in (("emmoe100", "expert"), (args.suite, "partnr_expert")):
            for noise in ("off", "emmoe"):
                chosen = load_suite(suite).tasks
                episodes = run_suite(chosen, lambda p=planner: make_planner(p), noise=noise)  # type: ignore[misc]
                print()
                print(format_tables(summarize(episodes), f"{suite}, {planner} planner, noise {noise}"))


if __name__ == "__main__":
    main()
