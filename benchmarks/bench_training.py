"""Planner training throughput: data building for 1,000 episodes (target <= 60 s) and training steps per second.

Run: ``nice -n 10 .venv/bin/python -m benchmarks.bench_training [--records DIR] [--copies 10] [--model DIR]
[--sft-steps 4] [--dpo-steps 3] [--emmoe-steps 0] [--json OUT]``

* **Data**: the expert's EMMOE-100 records under ``--records`` (an evaluation directory, e.g. ``homie eval
  --planner expert --out DIR``; default ``runs/emmoe-expert-noiseless``) are copied ``--copies`` times as runs
  0..N-1 of every task (real record files, 100 x 10 = 1,000 episodes), then ``homie data build sft`` and
  ``dpo`` are timed on all of them (split ``all``, runtime format, 3 template rewrites: 4 variants).
* **Training**: with ``--model`` (a trainable folder: ``homie train base --model smollm2 --out DIR``) the
  ``cpu-small`` preset's SFT and DPO are timed for a few steps each on data built from the records (the
  first step, which includes tokenising the data set and warming up, is reported apart); ``--emmoe-steps N``
  also times N steps of the ``emmoe`` preset's settings on the same model (on a CPU its bf16 and
  checkpointing are off; LoRA r 128 and 64 samples per step are what cost). Without ``--model`` only a tiny
  random model is timed (the CI-sized run). The training samples are built from ``--train-records`` (default
  ``--records``) in the text mode's format when those records have the world description (``homie data
  collect`` writes it): no system turn, the world description before each instruction (docs/training.md),
  else from the appendix-D instruction alone; the report says which.
Threads: the cpu-small preset sets one (two cost ~5x the CPU time per token on the loaded 2-core machine).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from homiebot.training.build import DATA_FILE, BuildOptions, build, write_dataset
from homiebot.training.episodes import TEXT_WORLD_FILE
from homiebot.training.trainer import preset_for, train

TARGET_S = 60.0


def copy_records(source: Path, target: Path, copies: int) -> int:
    """``copies`` runs of every episode record under ``source/episodes`` (run0 copied as run0..N-1)."""
    episodes = sorted((source / "episodes").glob("*/run0"))
    if not episodes:
        raise SystemExit(f"{source}: no episodes/<task>/run0 records (run homie eval --planner expert --out {source})")
    for record in episodes:
        for run in range(copies):
            shutil.copytree(record, target / "episodes" / record.parent.name / f"run{run}")
    if (source / "eval.json").is_file():
        shutil.copy(source / "eval.json", target / "eval.json")
    return len(episodes) * copies


def bench_data(records: Path, copies: int, work: Path) -> dict[str, Any]:
    runs = work / "records"
    count = copy_records(records, runs, copies)
    out: dict[str, Any] = {"episodes": count}
    for kind in ("sft", "dpo"):
        started = time.perf_counter()
        stats = build([runs], work / kind, kind, BuildOptions(split="all", rewrites=3))
        seconds = time.perf_counter() - started
        out[kind] = {
            "samples": stats.samples,
            "per_kind": stats.per_kind,
            "seconds": round(seconds, 2),
            "within_target": seconds <= TARGET_S,
        }
    return out


def bench_train(model: Path, data_root: Path, work: Path, stage: str, preset: str, steps: int) -> dict[str, Any]:
    settings = preset_for(stage, preset, save_steps=10_000)  # type: ignore[arg-type]
    out = work / f"{stage}-{preset}"
    started = time.perf_counter()
    result = train(stage, data_root / stage, model, out, settings, max_steps=steps, progress=False)  # type: ignore[arg-type]
    wall = time.perf_counter() - started
    per_step = [h for h in result.log_history if "loss" in h]
    later_wall = result.step_seconds[1:] or result.step_seconds
    later_cpu = result.step_cpu_seconds[1:] or result.step_cpu_seconds
    return {
        "preset": preset,
        "stage": stage,
        "steps": result.steps,
        "batch": settings.batch_size * settings.gradient_accumulation,
        "train_seconds": round(result.seconds, 2),
        "wall_seconds_incl_load": round(wall, 2),
        "seconds_per_step": round(result.seconds_per_step, 2),
        "steps_per_second": round(result.steps / max(result.seconds, 1e-9), 4),
        "losses": [round(float(h["loss"]), 4) for h in per_step],
        # Steps after the first (which warms up): median wall seconds and this process's CPU seconds per step.
        "step_wall_s_median": round(statistics.median(later_wall), 2) if later_wall else None,
        "step_cpu_s_median": round(statistics.median(later_cpu), 2) if later_cpu else None,
        "first_step_wall_s": round(result.step_seconds[0], 2) if result.step_seconds else None,
        "trainable_parameters": result.trainable_parameters,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=Path, default=Path("runs/emmoe-expert-noiseless"))
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--train-records", type=Path, default=None, help="Records for the training samples.")
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--sft-steps", type=int, default=4)
    parser.add_argument("--dpo-steps", type=int, default=3)
    parser.add_argument("--emmoe-steps", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--skip-data", action="store_true", help="Time the training only.")
    parser.add_argument(
        "--train-samples",
        type=int,
        default=200,
        help="Samples of each training set (enough for the steps; tokenising all costs minutes).",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench_training-") as tmp:
        work = Path(tmp)
        report["load_average_before"] = os.getloadavg()
        if not args.skip_data:
            report["data"] = bench_data(args.records, args.copies, work / "data")
            print(json.dumps(report["data"], indent=1))
        # Training data: the records once, 4 variants (the presets' data), built apart from the timed build.
        small = work / "small"
        copy_records(args.train_records or args.records, small / "records", 1)
        text_world = all((r / TEXT_WORLD_FILE).is_file() for r in (small / "records" / "episodes").glob("*/run0"))
        report["samples"] = "text mode, no system turn" if text_world else "appendix-D instruction, no system turn"
        for kind in ("sft", "dpo"):
            options = BuildOptions(split="train", rewrites=3, system_prompt=False, text_observation=text_world)
            build([small / "records"], small / "all" / kind, kind, options)
            shuffled = pq.read_table(small / "all" / kind / DATA_FILE).to_pylist()
            random.Random(0).shuffle(shuffled)
            write_dataset(shuffled[: args.train_samples], small / kind / DATA_FILE)
        model = args.model
        if model is None:
            from homiebot.training.tiny import write_tiny_chat_model

            rows = pq.read_table(small / "sft" / DATA_FILE).to_pylist()[:200]
            model = write_tiny_chat_model(
                work / "tiny", [m["content"] for r in rows for m in r["prompt"] + r["completion"]]
            )
            report["model"] = "tiny random Qwen2 (0.1 M parameters)"
        else:
            report["model"] = str(model)
        report["training"] = [
            bench_train(model, small, work, "sft", "cpu-small", args.sft_steps),
            bench_train(model, small, work, "dpo", "cpu-small", args.dpo_steps),
        ]
        if args.emmoe_steps > 0:
            report["training"].append(bench_train(model, small, work, "sft", "emmoe", args.emmoe_steps))
            report["training"].append(bench_train(model, small, work, "dpo", "emmoe", args.emmoe_steps))
        report["load_average_after"] = os.getloadavg()
        for row in report["training"]:
            print(json.dumps(row))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
