"""Benchmark of the episode and evaluation reports and of the Foxglove live view.

1. **Report writing time for a 300-episode evaluation** (target <= 10 s): ``write_report`` on an evaluation
   directory of 100 tasks x 3 runs (the expert with EMMOE noise, so that the failures section is full): the
   index page with the paper tables and embedded plots, plus the 300 episode pages. Also without the episode
   pages and without plots, to show where the time goes. Best and median of ``--repeats`` writes.
2. **Live view overhead per round** (target <= 5 ms): the time ``FoxgloveLiveView.on_round`` takes per round,
   replaying the rounds of real expert episodes (their records, the four 256x256 views the planner saw and the
   world state after each round): with no client connected, and with a WebSocket client on loopback
   subscribed to every topic and reading in a thread (every message built, encoded and sent).

Run: ``MUJOCO_GL=egl .venv/bin/python -m benchmarks.bench_report [--eval DIR] [--repeats N]``.
Without ``--eval`` it first runs the evaluation (``homie eval --noise emmoe --runs 3``, 2 workers) into a
temporary directory.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

from homiebot.report import write_report


def _evaluation(path: str | None) -> Path:
    if path:
        return Path(path)
    from homiebot.eval.runner import EvalSettings, run_evaluation

    out = Path(tempfile.mkdtemp(prefix="bench-report-")) / "eval"
    started = time.perf_counter()
    outcome = run_evaluation(EvalSettings(noise="emmoe"), out, runs=3, workers=2, progress=False)
    print(f"evaluation: {outcome.finished} episodes in {time.perf_counter() - started:.1f} s -> {out}")
    return out


def bench_report(eval_dir: Path, repeats: int) -> None:
    episodes = len(list(eval_dir.glob("episodes/*/run*/summary.json")))
    print(f"\n[report] {eval_dir}: {episodes} episode records")
    for label, kwargs in (
        ("index + plots + every episode page", {}),
        ("index + plots, no episode pages", {"episodes": False}),
        ("index only (no plots, no episode pages)", {"episodes": False, "plots": False}),
    ):
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            pages = write_report(eval_dir, **kwargs)
            times.append(time.perf_counter() - started)
        size = pages[0].stat().st_size / 1e6
        print(f"  {label:42s} best {min(times):6.2f} s  median {statistics.median(times):6.2f} s  "
              f"({len(pages)} pages, index {size:.2f} MB)")


def _episode_rounds(tasks: list[str]) -> list[tuple[Any, Any, Any]]:
    """(round record, views the planner saw, state after) of real expert episodes, as the loop's observers get them."""
    from homiebot.agent.loop import run_episode
    from homiebot.agent.observers import ObserverBase
    from homiebot.planner.expert import ExpertPlanner
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task

    class Capture(ObserverBase):
        def __init__(self) -> None:
            self.rounds: list[tuple[Any, Any, Any]] = []

        def on_round(self, record: Any, seen: Any, state: Any) -> None:
            self.rounds.append((record, seen, state))

    sim = make_simulator("mujoco", render=True)
    capture = Capture()
    for task_id in tasks:
        run_episode(sim, ExpertPlanner(), task=get_task(task_id), observers=[capture])
    return capture.rounds


def bench_live(repeats: int) -> None:
    from homiebot.live import FoxgloveLiveView, LiveViewConfig
    from homiebot.types import Trajectory

    rounds = _episode_rounds(["emmoe-084", "emmoe-001", "emmoe-050"])
    first = rounds[0]
    trajectory = Trajectory("bench", "bench", first[2].scene, 0, "expert")
    print(f"\n[live view] {len(rounds)} rounds of 3 expert episodes, replayed {repeats} times")

    def run(view: FoxgloveLiveView) -> list[float]:
        times = []
        for _ in range(repeats):
            view.on_start(trajectory, first[2], first[1])
            for record, seen, state in rounds:
                started = time.perf_counter()
                view.on_round(record, seen, state)
                times.append(time.perf_counter() - started)
        return times

    def report(label: str, times: list[float]) -> None:
        ms = sorted(1000 * t for t in times)
        print(f"  {label:46s} mean {statistics.mean(ms):6.3f} ms  median {statistics.median(ms):6.3f} ms  p95 {ms[int(0.95 * (len(ms) - 1))]:6.3f} ms  "
              f"max {ms[-1]:6.2f} ms")

    with FoxgloveLiveView(LiveViewConfig(port=0)) as view:
        report("no client connected", run(view))
    with FoxgloveLiveView(LiveViewConfig(port=0)) as view:
        # The client runs in its own process (as the Foxglove app would): decoding in a thread of this process
        # would take the interpreter lock from the observer and be counted as its overhead.
        context = multiprocessing.get_context("spawn")
        counts = context.Queue()
        ready = context.Event()
        stop = context.Event()
        reader = context.Process(target=_read_stream, args=(view.port, ready, stop, counts))
        reader.start()
        if not ready.wait(30):
            raise RuntimeError("the client process did not subscribe")
        time.sleep(1.0)  # the server applies a subscription asynchronously
        times = run(view)
        time.sleep(1.0)
        stop.set()
        messages = counts.get(timeout=30)
        reader.join()
        report("client subscribed to every topic (loopback)", times)
        print(f"  the client process decoded {messages} messages")


def _read_stream(port: int, ready: Any, stop: Any, counts: Any) -> None:
    from homiebot.testing.foxglove_client import FoxgloveClient

    topics = [f"/camera/{v}/image" for v in ("front", "left", "back", "right")] + [
        "/robot/pose", "/robot/path", "/world_graph", "/planner/log", "/tf"]
    messages = 0
    with FoxgloveClient(f"ws://127.0.0.1:{port}") as client:
        client.subscribe(topics)
        ready.set()
        while not stop.is_set():
            if client.receive(timeout_s=0.2) is not None:
                messages += 1
    counts.put(messages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--eval", help="an existing 300-episode evaluation directory")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--live-repeats", type=int, default=20)
    args = parser.parse_args()
    bench_report(_evaluation(args.eval), args.repeats)
    bench_live(args.live_repeats)


if __name__ == "__main__":
    main()
