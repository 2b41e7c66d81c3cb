"""PARTNR's evaluation language: how long one round's evaluation takes, how long the suite's expert
evaluation takes, and the expert's tables (docs/partnr.md).

Targets: evaluating a task's function over one round's state <= 1 ms median; the PARTNR-style suite's
expert evaluation (one run of every task) <= 5 minutes on 2 cores.

Prints:

* per-round evaluation time: for every task of the suite, a tracker is fed the state after the reset and
  then timed on ``--updates`` further updates (a real simulator state each); median, 90th percentile and
  maximum over all updates, and the median proposition count (after unrolling);
* wall time of the expert over the whole suite, one process, no rendering, split into episodes and scoring;
* with ``--tables``: PARTNR's tables for EMMOE-100 (goal expert) and the PARTNR-style suite (PARTNR expert),
  noiseless and with ``--noise emmoe``.

Usage::

    MUJOCO_GL=egl python -m benchmarks.bench_partnr                 # speed figures
    MUJOCO_GL=egl python -m benchmarks.bench_partnr --tables        # plus the four expert tables
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from homiebot.eval.partnr.episodes import run_suite, task_function
from homiebot.eval.partnr.metrics import format_tables, summarize
from homiebot.eval.partnr.tracker import PropositionTracker
from homiebot.eval.tasks import load_suite
from homiebot.planner.registry import make_planner


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="partnr")
    parser.add_argument("--updates", type=int, default=20, help="timed updates per task")
    parser.add_argument("--tables", action="store_true", help="also print the expert tables (about 2 minutes)")
    args = parser.parse_args()
    os.environ.setdefault("MUJOCO_GL", "egl")

    times, sizes = round_evaluation_times(args.suite, args.updates)
    ms = sorted(t * 1000 for t in times)
    print(f"per-round evaluation over {len(sizes)} tasks x {args.updates} updates: median {statistics.median(ms):.3f} ms, "
          f"p90 {ms[int(0.9 * len(ms))]:.3f} ms, max {ms[-1]:.3f} ms; median {statistics.median(sizes)} propositions "
          f"(max {max(sizes)})")

    tasks = load_suite(args.suite).tasks
    t0 = time.perf_counter()
    episodes = run_suite(tasks, lambda: make_planner("partnr_expert"))
    wall = time.perf_counter() - t0
    summary = summarize(episodes)
    print(f"expert evaluation of {len(tasks)} tasks (one run, one process, no rendering): {wall:.1f} s wall, "
          f"SR {summary.sr:.3f}, PC {summary.pc:.3f}")

    if args.tables:
        for suite, planner in (("emmoe100", "expert"), (args.suite, "partnr_expert")):
            for noise in ("off", "emmoe"):
                chosen = load_suite(suite).tasks
                episodes = run_suite(chosen, lambda p=planner: make_planner(p), noise=noise)  # type: ignore[misc]
                print()
                print(format_tables(summarize(episodes), f"{suite}, {planner} planner, noise {noise}"))


if __name__ == "__main__":
    main()
