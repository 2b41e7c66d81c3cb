"""``homie eval --backend ray`` against the local backend: the same expert evaluation, wall time and ratio.

Both runs evaluate the same tasks with the expert planner (noiseless: its own reference, so one job per
episode) on the same number of workers, into fresh directories, and include everything a user waits for:
start-up (worker processes, or a private Ray instance and its actors) and the episodes with their records
(not the report, the same code for both). Prints, per backend: wall time, episodes per second, mean time of an episode inside a
worker (``job_s`` of the index lines: what one core spends per episode, the figure the projection in
docs/ray.md scales), the peak total RSS of the driver and everything it started (Ray's processes included);
then the ratio Ray / local, and Ray's own costs measured apart: ``ray.init`` and 200 calls to an idle actor.

Usage (2 cores shared with other work: nice it)::

    MUJOCO_GL=egl nice -n 10 python -m benchmarks.bench_ray                  # 100 tasks x 3 runs, 2 workers
    MUJOCO_GL=egl nice -n 10 python -m benchmarks.bench_ray --tasks 20 --runs 1   # a quick check
    MUJOCO_GL=egl nice -n 10 python -m benchmarks.bench_ray --order ray,local     # the other order
    MUJOCO_GL=egl nice -n 10 python -m benchmarks.bench_ray --smollm2 --tasks 4 --runs 1 --max-rounds 3

``--smollm2`` runs SmolLM2-135M-Instruct episodes (the expert's noiseless references beside them) twice on
Ray: with one shared model actor (the workers' calls batched into it) and with one copy of the model in every
worker (``--model-actors 0``); it prints episodes per minute and the peak total RSS of each.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_eval import RssSampler
from homiebot.eval.runner import INDEX_FILE, EvalSettings, run_evaluation

EXPERT = EvalSettings(suite="emmoe100", planner="expert")


def _one(backend: str, tasks: list[str] | None, runs: int, workers: int, root: Path) -> dict[str, Any]:
    out = root / backend
    with RssSampler() as rss:
        started = time.perf_counter()
        # report=False: the figure is the episodes' wall time (the report is the same code for both backends).
        outcome = run_evaluation(EXPERT, out, runs=runs, workers=workers, task_ids=tasks, progress=False, backend=backend,
                                 report=False)
        wall = time.perf_counter() - started
    lines = [json.loads(line) for line in (out / INDEX_FILE).read_text().splitlines()]
    return {
        "backend": backend,
        "episodes": outcome.finished,
        "failed": len(outcome.failed_jobs),
        "wall_s": round(wall, 2),
        "episodes_per_s": round(outcome.finished / wall, 2),
        "mean_job_s": round(statistics.fmean(line["job_s"] for line in lines), 4),
        "peak_rss_mib": round(max(s[1] for s in rss.samples), 1),
        "success_rate": round(statistics.fmean(bool(line["success"]) for line in lines), 4),
    }


def _model_runs(tasks: list[str], runs: int, workers: int, max_rounds: int, root: Path) -> None:
    """SmolLM2 (``--planner hf -p model=smollm2``, llama.cpp) on Ray: one shared model actor against one copy of
    the model per worker, the same episodes; episodes per minute and the peak total RSS of each."""
    settings = EvalSettings(suite="emmoe100", planner="hf", planner_options={"model": "smollm2", "runtime": "llama_cpp"},
                            max_rounds=max_rounds)
    for model_actors in (1, 0):
        out = root / f"model-actors-{model_actors}"
        with RssSampler() as rss:
            started = time.perf_counter()
            outcome = run_evaluation(settings, out, runs=runs, workers=workers, task_ids=tasks, progress=False,
                                     backend="ray", model_actors=model_actors, report=False)
            wall = time.perf_counter() - started
        lines = [json.loads(line) for line in (out / INDEX_FILE).read_text().splitlines()]
        episodes = [line for line in lines if line["kind"] == "episode"]
        print(json.dumps({
            "model": "smollm2", "model_actors": model_actors, "workers": workers, "episodes": len(episodes),
            "references": len(lines) - len(episodes), "failed": len(outcome.failed_jobs), "wall_s": round(wall, 1),
            "episodes_per_min": round(len(episodes) / wall * 60, 2),
            "rounds": sum(line["rounds"] for line in episodes),
            "mean_model_episode_s": round(statistics.fmean(line["job_s"] for line in episodes), 2),
            "peak_rss_mib": round(max(s[1] for s in rss.samples), 1),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        }))


def _ray_costs() -> dict[str, float]:
    """``ray.init`` of a private instance and the round trip of 200 calls to an idle actor."""
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    started = time.perf_counter()
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False,
             object_store_memory=256 * 2**20)
    init_s = time.perf_counter() - started

    @ray.remote(num_cpus=1)
    class Idle:
        def ping(self, x: int) -> int:
            return x

    actor = Idle.remote()  # type: ignore[attr-defined]
    ray.get(actor.ping.remote(0))
    started = time.perf_counter()
    for i in range(200):
        ray.get(actor.ping.remote(i))
    call_ms = (time.perf_counter() - started) / 200 * 1000
    ray.shutdown()
    return {"ray_init_s": round(init_s, 2), "actor_call_ms": round(call_ms, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=100, help="the first N EMMOE-100 tasks (default all 100)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--order", default="local,ray", help="which backend runs first (the machine's load drifts)")
    parser.add_argument("--smollm2", action="store_true",
                        help="instead: SmolLM2 episodes with one shared model actor vs one model per worker")
    parser.add_argument("--max-rounds", type=int, default=3, help="--smollm2: round limit per episode")
    args = parser.parse_args()
    tasks = None if args.tasks >= 100 else [f"emmoe-{i:03d}" for i in range(1, args.tasks + 1)]
    if args.smollm2:
        with tempfile.TemporaryDirectory(prefix="bench-ray-") as root:
            _model_runs(tasks or [f"emmoe-{i:03d}" for i in range(1, 101)], args.runs, args.workers, args.max_rounds,
                        Path(root))
        return
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-ray-") as root:
        for backend in args.order.split(","):
            results[backend] = _one(backend, tasks, args.runs, args.workers, Path(root))
            print(json.dumps(results[backend]))
    results["ratio_ray_over_local"] = round(results["ray"]["wall_s"] / results["local"]["wall_s"], 3)
    results["ray_overhead_per_episode_ms"] = round(
        (results["ray"]["wall_s"] - results["local"]["wall_s"]) / results["ray"]["episodes"] * 1000, 1
    )
    results.update(_ray_costs())
    results["load_average"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps({k: v for k, v in results.items() if k not in ("local", "ray")}))


if __name__ == "__main__":
    main()
