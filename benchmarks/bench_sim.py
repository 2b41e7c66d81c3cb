"""Embedded simulator figures: one full observation, oracle Go to, scene load, RSS.

Run: ``MUJOCO_GL=egl .venv/bin/python -m benchmarks.bench_sim [--scene apartment_1] [--repeats 100]``

* observation: one ``observe()`` = 4 views x (RGB + depth + segmentation) at 256x256; median of N;
* Go to: oracle ``go_to`` cycling over every furniture and object of the scene (planning + following +
  collision checks); median of N;
* scene load: ``reset(scene)`` on a new simulator (compile, GL context, placement, first observation),
  median of 5; and ``reset`` of another library scene on a warm simulator;
* RSS of this process (which rendered everything above) at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("MUJOCO_GL", "egl")

import psutil
from rich.console import Console
from rich.progress import track
from rich.table import Table

from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.sim.scene import list_scenes, load_scene

TARGETS = {"observation_ms": 40.0, "go_to_median_ms": 50.0, "scene_load_s": 1.0, "rss_mb": 400.0}


def _ms(seconds: list[float]) -> tuple[float, float]:
    ordered = sorted(seconds)
    return statistics.median(ordered) * 1e3, ordered[int(0.95 * (len(ordered) - 1))] * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scene", default="apartment_1")
    parser.add_argument("--repeats", type=int, default=100)
    args = parser.parse_args()
    console = Console(width=150)
    spec = load_scene(args.scene)

    loads = []
    for _ in track(range(5), description="scene load", console=console):
        start = time.perf_counter()
        fresh = MujocoSimulator()
        fresh.reset(spec, seed=0)
        loads.append(time.perf_counter() - start)
        fresh.shutdown()

    sim = MujocoSimulator()
    sim.reset(spec, seed=0)
    others = [s for s in list_scenes() if s != args.scene]
    switch = []
    for name in others:
        start = time.perf_counter()
        sim.reset(name, seed=0)
        switch.append(time.perf_counter() - start)
    sim.reset(spec, seed=0)

    observe = []
    for _ in track(range(args.repeats), description="observe", console=console):
        start = time.perf_counter()
        sim.observe()
        observe.append(time.perf_counter() - start)

    targets = [f.name for f in spec.furniture] + [o.name for o in spec.objects] + [r.name for r in spec.rooms]
    go_to, lengths, failures = [], [], 0
    for i in track(range(args.repeats), description="go to", console=console):
        target = targets[(i * 7) % len(targets)]  # a stride that hops across rooms
        start = time.perf_counter()
        result = sim.go_to(target)
        go_to.append(time.perf_counter() - start)
        lengths.append(result.path_length)
        failures += not result.success
    rss_mb = psutil.Process().memory_info().rss / 2**20

    obs_med, obs_p95 = _ms(observe)
    go_med, go_p95 = _ms(go_to)
    figures = {
        "observation_ms": obs_med,
        "go_to_median_ms": go_med,
        "scene_load_s": statistics.median(loads),
        "rss_mb": rss_mb,
    }
    table = Table(title=f"Embedded simulator, scene {args.scene}, {os.cpu_count()} CPU cores, MUJOCO_GL={os.environ['MUJOCO_GL']}")
    for column in ("figure", "target", "measured"):
        table.add_column(column)
    table.add_row("one full observation (4 views x RGB+depth+seg, 256x256)", "<= 40 ms", f"median {obs_med:.1f} ms, p95 {obs_p95:.1f} ms")
    table.add_row(
        "oracle Go to",
        "<= 50 ms median",
        f"median {go_med:.1f} ms, p95 {go_p95:.1f} ms (mean path {statistics.mean(lengths):.2f} m, {failures} failed)",
    )
    table.add_row("scene load (new simulator: compile, GL, place, first views)", "< 1 s", f"median {statistics.median(loads):.3f} s, max {max(loads):.3f} s")
    if switch:
        table.add_row("reset to another library scene (warm simulator)", "", f"median {statistics.median(switch):.3f} s over {len(switch)} scenes")
    table.add_row("process RSS after all of the above", "< 400 MB", f"{rss_mb:.0f} MB")
    console.print(table)
    verdict = {k: ("ok" if figures[k] <= TARGETS[k] else "MISSED") for k in TARGETS}
    console.print("targets: " + ", ".join(f"{k} {v}" for k, v in verdict.items()))
    sim.shutdown()


if __name__ == "__main__":
    main()
