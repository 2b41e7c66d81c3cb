"""Throughput and memory of ``homie eval``: 100 tasks x 3 runs with the expert planner on 2 workers.

Targets: wall time <= 10 min for the 300 episodes on 2 cores; RSS growth over the run < 10%.

Prints:

* wall time of the whole evaluation (worker start-up, episodes, report) and episodes per second;
* RSS of each worker after its first episode and after its last one, and the growth between them (the
  leak measure: a worker's simulator and planner are built once and reused, so growth is what the
  episodes leave behind); plus the total RSS (parent + workers) sampled every 0.5 s: first sample with
  every worker past its first episode, last sample, peak.

``--images`` stores the four PNG views per round in every record (the full agent-loop format) to measure
what that costs. Usage::

    MUJOCO_GL=egl python -m benchmarks.bench_eval                 # 100 x 3, expert, 2 workers, no images
    MUJOCO_GL=egl python -m benchmarks.bench_eval --images
    MUJOCO_GL=egl python -m benchmarks.bench_eval --suite demo --runs 5   # a quick smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path

import psutil

from homiebot.eval.runner import INDEX_FILE, EvalSettings, run_evaluation


class RssSampler:
    """Total RSS of this process and its children, sampled in a thread."""

    def __init__(self, period_s: float = 0.5) -> None:
        self.period_s = period_s
        self.samples: list[tuple[float, float, int]] = []  # (unix time, MiB, number of processes)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            total, count = 0, 0
            for proc in [me, *me.children(recursive=True)]:
                try:
                    total += proc.memory_info().rss
                    count += 1
                except psutil.Error:
                    continue
            self.samples.append((time.time(), total / 2**20, count))
            self._stop.wait(self.period_s)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="emmoe100")
    parser.add_argument("--planner", default="expert")
    parser.add_argument("--noise", default="off", choices=["off", "emmoe"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--images", action="store_true", help="store the four views per round in each record")
    parser.add_argument("--out", type=Path, default=None, help="keep the evaluation here (default: a temp dir)")
    args = parser.parse_args()
    os.environ.setdefault("MUJOCO_GL", "egl")

    with tempfile.TemporaryDirectory(prefix="bench_eval_") as tmp:
        out = args.out or Path(tmp) / "eval"
        settings = EvalSettings(suite=args.suite, planner=args.planner, noise=args.noise)
        started = time.perf_counter()
        started_unix = time.time()
        with RssSampler() as sampler:
            outcome = run_evaluation(
                settings, out, runs=args.runs, workers=args.workers, images=args.images, progress=True
            )
        wall = time.perf_counter() - started
        entries = [json.loads(line) for line in (out / INDEX_FILE).read_text().splitlines()]
        report = json.loads((out / "report.json").read_text())
        disk_mb = sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 2**20

    episodes = [e for e in entries if not e.get("recovered")]
    by_worker: dict[int, list[float]] = {}
    for entry in episodes:
        by_worker.setdefault(entry["worker_pid"], []).append(entry["worker_rss_mb"])
    print(f"setting: suite {args.suite}, planner {args.planner}, noise {args.noise}, runs {args.runs}, "
          f"workers {args.workers}, images {'on' if args.images else 'off'} "
          f"(cpu cores: {os.cpu_count()})")
    print(f"episodes run: {outcome.finished} (+{outcome.skipped} already done), failed: {len(outcome.failed_jobs)}")
    print(f"wall time: {wall:.1f} s ({wall / 60:.2f} min) -> {outcome.finished / wall:.2f} episodes/s; "
          f"target <= 600 s: {'PASS' if wall <= 600 else 'FAIL'}")
    mean_episode = sum(e["job_s"] for e in episodes) / max(len(episodes), 1)
    print(f"mean time per episode inside a worker: {mean_episode * 1000:.0f} ms; records on disk: {disk_mb:.1f} MiB")
    growths = []
    for pid, rss in sorted(by_worker.items()):
        growth = (rss[-1] - rss[0]) / rss[0]
        growths.append(growth)
        print(f"worker {pid}: {len(rss)} episodes, RSS after first {rss[0]:.1f} MiB, after last {rss[-1]:.1f} MiB, "
              f"max {max(rss):.1f} MiB, growth {100 * growth:+.1f}%")
    worst = max(growths) if growths else float("nan")
    print(f"worst worker RSS growth: {100 * worst:+.1f}%; target < 10%: {'PASS' if worst < 0.10 else 'FAIL'}")
    # Total RSS from the moment every worker has finished its first episode to the last episode.
    first_done: dict[int, float] = {}
    for entry in episodes:
        first_done.setdefault(entry["worker_pid"], entry["finished_at"])
    warm_from = max(first_done.values(), default=started_unix)
    last_done = max((e["finished_at"] for e in episodes), default=started_unix)
    warm = [s for s in sampler.samples if warm_from <= s[0] <= last_done]
    if len(warm) >= 2:
        first, last = warm[0], warm[-1]
        print(f"total RSS (parent + workers) while episodes ran: {first[1]:.1f} MiB when all workers were warm, "
              f"{last[1]:.1f} MiB at the last episode ({100 * (last[1] - first[1]) / first[1]:+.1f}%), "
              f"peak {max(s[1] for s in warm):.1f} MiB")
    t2 = report["table2"]
    print(f"SR {100 * (t2['sr'] or 0):.2f}%  TP {100 * (t2['tp'] or 0):.2f}%  episodes {t2['n']}")


if __name__ == "__main__":
    main()
