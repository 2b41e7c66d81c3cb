"""A trained text folder's evaluation on its two runtimes, in one run: transformers (the default for a folder)
against llama.cpp (``-p runtime=llama_cpp``: the folder exported once to GGUF, then Q8_0).

Prints, per runtime, the CPU seconds (user + system of the ``homie eval`` process and its worker) and the wall
seconds of the same episodes (same tasks, seeds, planner options and rounds), their ratio, and the one-off cost
of the export (float32 GGUF, then the Q8_0 re-encoding), timed apart in a fresh cache so the llama.cpp
evaluation finds it made. Whether the two runtimes' answers are the same is printed too: they are not in
general (float32 against Q8_0 weights), so the ratio is per episode of equal length, which a 20-round EMMOE
episode that never ends is.

Usage::

    python -m benchmarks.bench_trained_runtime --model /tmp/train_run2/sft_merged [--adapter DIR] \\
        [--tasks emmoe-024] [--rounds 10] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

OPTIONS = ["-p", "constrained=true", "-p", "include_history=false", "-p", "system_turn=false", "-p", "torch_threads=1"]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _evaluate(args: argparse.Namespace, runtime: str, out: Path, env: dict[str, str]) -> dict[str, Any]:
    command = [
        str(Path(sys.executable).parent / "homie"), "eval", "--suite", "emmoe", "--tasks", args.tasks,
        "--planner", "hf", "--model", str(args.model), *(["--adapter", str(args.adapter)] if args.adapter else []),
        *OPTIONS, "-p", f"runtime={runtime}", "--runs", "1", "--workers", "1", "--max-rounds", str(args.rounds),
        "--no-images", "--no-video", "--no-progress", "--no-report", "--out", str(out),
    ]  # fmt: skip
    cpu, wall = _children_cpu(), time.perf_counter()
    subprocess.run(command, check=True, env=env, capture_output=True, text=True)
    cpu, wall = _children_cpu() - cpu, time.perf_counter() - wall
    answers = []
    for rounds in sorted(out.glob("episodes/*/run0/rounds.jsonl")):
        answers += [json.loads(line)["raw_output"] for line in rounds.read_text().splitlines() if line.strip()]
    return {"runtime": runtime, "cpu_s": round(cpu, 1), "wall_s": round(wall, 1), "rounds": len(answers),
            "cpu_s_per_round": round(cpu / max(len(answers), 1), 3), "answers": answers}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="A trained text folder (homie train base|merge).")
    parser.add_argument("--adapter", type=Path, default=None)
    parser.add_argument("--tasks", default="emmoe-024", help="Comma-separated EMMOE-100 task ids.")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    from homiebot.planner.gguf_export import cached_gguf
    from homiebot.planner.models import q8_0_copy

    report: dict[str, Any] = {"model": str(args.model), "adapter": str(args.adapter) if args.adapter else None,
                              "tasks": args.tasks, "rounds": args.rounds, "load_average_before": os.getloadavg()}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench_trained_runtime-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "HOMIEBOT_CACHE_DIR": str(work / "cache"), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
        os.environ["HOMIEBOT_CACHE_DIR"] = env["HOMIEBOT_CACHE_DIR"]
        started, cpu = time.perf_counter(), time.process_time()
        exported = cached_gguf(args.model, args.adapter)
        report["export_s"] = {"wall": round(time.perf_counter() - started, 1), "cpu": round(time.process_time() - cpu, 1)}
        started, cpu = time.perf_counter(), _children_cpu()
        q8_0_copy(exported)  # the runtime's own re-encoding (a child process), made here so it is timed apart
        report["q8_0_s"] = {"wall": round(time.perf_counter() - started, 1), "cpu": round(_children_cpu() - cpu, 1)}
        runs = [_evaluate(args, runtime, work / runtime, env) for runtime in ("transformers", "llama_cpp")]
    slow, fast = runs
    report["runs"] = [{k: v for k, v in run.items() if k != "answers"} for run in runs]
    report["cpu_ratio"] = round(slow["cpu_s"] / fast["cpu_s"], 2)
    report["same_answers"] = sum(a == b for a, b in zip(slow["answers"], fast["answers"], strict=False))
    report["load_average_after"] = os.getloadavg()
    print(json.dumps(report, indent=1))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
