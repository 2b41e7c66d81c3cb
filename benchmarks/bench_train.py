"""SFT speed levers on a CPU, side by side on the same answers: CPU and wall seconds per learned answer and per answer
token, and the CPU hours of one epoch of 7,000 samples that follow.

Run (a model folder from ``homie train base --model smollm2 --out DIR``; the two data sets built from the same
records, ``homie data build sft --text-observation ...`` and the same command with ``--episodes``)::

    nice -n 15 .venv/bin/python -m benchmarks.bench_train --model BASE --rounds SFT_DIR --episodes EP_DIR \\
        [--episodes-used 4] [--configs all] [--json OUT]

Each configuration trains once over the same ``--episodes-used`` episodes (a fixed sample; the round form uses the
single-turn samples of the very same rounds), with the real trainer (``homiebot.training.trainer.train``), and
reports the steps' seconds as the trainer's step timer measured them (its process's CPU; for several processes,
rank 0's CPU times the number of processes), the first step left out (one-time costs):

* ``rounds-trl``: one round per sample, trl's loss, fp32, LoRA, one thread (the ``cpu-small`` preset's way);
* ``rounds-answer``: the same with the LM head on the answer tokens only;
* ``rounds-answer-bf16``, ``rounds-answer-bf16-ddp``: that under bf16 autocast, in one process and in two (DDP);
* ``episodes-answer``: one episode per sample (the text planner's growing chat), answer-only head, fp32;
* ``episodes-bf16``: the same under bf16 autocast;
* ``episodes-bf16-full``: the same without LoRA (every weight trained);
* ``episodes-bf16-2threads``: LoRA, one process with two threads;
* ``episodes-bf16-ddp``: LoRA, two processes of one thread (DDP over gloo): the ``cpu`` preset.

The ratios are to ``rounds-trl`` per answer. The load average before and after each configuration is printed
beside it: on a shared machine the two-core configurations measure the other jobs as much as themselves.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from homiebot.training.build import DATA_FILE, write_dataset
from homiebot.training.sequences import tokenize_rows
from homiebot.training.trainer import Preset, preset_for, train

EPOCH_SAMPLES = 7000


@dataclass(frozen=True)
class Config:
    name: str
    form: str  # rounds | episodes
    preset: Preset


def configs(episodes_per_step: int) -> list[Config]:
    # One pass over the samples in every configuration (the cpu preset's 2 epochs would double its work).
    rounds = preset_for("sft", "cpu-small", batch_size=2, save_steps=100_000, epochs=1.0)
    episodes = preset_for(
        "sft",
        "cpu",
        epochs=1.0,
        processes=1,
        batch_size=1,
        gradient_accumulation=episodes_per_step,
        cpu_bf16=False,
        save_steps=100_000,
        warmup_steps=0,
    )
    return [
        Config("rounds-trl", "rounds", rounds),
        Config("rounds-answer", "rounds", replace(rounds, answer_only_logits=True)),
        Config("rounds-answer-bf16", "rounds", replace(rounds, answer_only_logits=True, cpu_bf16=True)),
        Config(
            "rounds-answer-bf16-ddp", "rounds", replace(rounds, answer_only_logits=True, cpu_bf16=True, processes=2)
        ),
        Config("episodes-answer", "episodes", episodes),
        Config("episodes-bf16", "episodes", replace(episodes, cpu_bf16=True)),
        Config("episodes-bf16-full", "episodes", replace(episodes, cpu_bf16=True, lora=False, learning_rate=1e-5)),
        Config("episodes-bf16-2threads", "episodes", replace(episodes, cpu_bf16=True, threads=2)),
        Config("episodes-bf16-ddp", "episodes", replace(episodes, cpu_bf16=True, processes=2)),
    ]


def subsets(rounds: Path, episodes: Path, used: int, work: Path) -> tuple[Path, Path, list[str]]:
    """The first ``used`` episodes of a seeded shuffle and the single-turn samples of their rounds."""
    episode_rows = pq.read_table(episodes / DATA_FILE).to_pylist()
    random.Random(0).shuffle(episode_rows)
    picked = episode_rows[:used]
    ids = {row["id"] for row in picked}
    round_rows = [r for r in pq.read_table(rounds / DATA_FILE).to_pylist() if r["id"].rsplit("_subtask", 1)[0] in ids]
    write_dataset(picked, work / "episodes" / DATA_FILE)
    write_dataset(round_rows, work / "rounds" / DATA_FILE)
    return work / "rounds", work / "episodes", sorted(ids)


def measure(config: Config, data: Path, model: Path, work: Path, answers: int, answer_tokens: int) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    result = train("sft", data, model, work / config.name, config.preset, progress=False)
    wall_total = time.perf_counter() - started
    processes = config.preset.processes
    # The first step carries one-time costs (the optimizer's state, the kernels' first shapes) that a run of
    # hundreds of steps pays once: left out, and the answers scaled to the steps kept (each step holds as many
    # samples; their answers vary by a few, which a dozen steps averages out).
    kept = max(1, result.steps - 1)
    cpu_steps, wall_steps = result.step_cpu_seconds[1:] or result.step_cpu_seconds, result.step_seconds[1:] or result.step_seconds
    cpu = sum(cpu_steps) * processes  # rank 0's CPU, times the processes (each does the same work)
    wall = sum(wall_steps)
    answers_kept = answers * kept / max(result.steps, 1)
    tokens_kept = answer_tokens * kept / max(result.steps, 1)
    checkpoint = work / config.name / "checkpoints"
    return {
        "config": config.name,
        "form": config.form,
        "lora": config.preset.lora,
        "bf16": config.preset.cpu_bf16,
        "answer_only_logits": config.preset.answer_only_logits,
        "threads": config.preset.threads,
        "processes": processes,
        "steps": result.steps,
        "answers": answers,
        "answer_tokens": answer_tokens,
        "first_step_cpu_s": round(result.step_cpu_seconds[0] * processes, 2) if result.step_cpu_seconds else None,
        "step_cpu_s": round(cpu, 2),
        "step_wall_s": round(wall, 2),
        "cpu_s_per_answer": round(cpu / answers_kept, 4),
        "wall_s_per_answer": round(wall / answers_kept, 4),
        "cpu_ms_per_answer_token": round(1000 * cpu / tokens_kept, 3),
        "wall_incl_load_s": round(wall_total, 1),
        "losses": [round(x, 4) for x in result.losses],
        "trainable_parameters": result.trainable_parameters,
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "checkpoint_bytes": sum(p.stat().st_size for p in checkpoint.rglob("*") if p.is_file()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--rounds", type=Path, required=True, help="Single-turn SFT data set (homie data build sft).")
    parser.add_argument("--episodes", type=Path, required=True, help="The same records built with --episodes.")
    parser.add_argument("--episodes-used", type=int, default=4)
    parser.add_argument("--episodes-per-step", type=int, default=2)
    parser.add_argument("--configs", default="all", help="Comma-separated configuration names, or all.")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    from transformers import AutoTokenizer

    chosen = configs(args.episodes_per_step)
    if args.configs != "all":
        wanted = set(args.configs.split(","))
        chosen = [c for c in chosen if c.name in wanted]
    report: dict[str, Any] = {"model": str(args.model), "cpu": _cpu_name(), "results": []}
    with tempfile.TemporaryDirectory(prefix="bench_train-") as tmp:
        work = Path(tmp)
        rounds, episodes, ids = subsets(args.rounds, args.episodes, args.episodes_used, work / "data")
        tokenizer = AutoTokenizer.from_pretrained(str(args.model), local_files_only=True)
        from datasets import load_dataset

        sizes = {}
        for form, folder in (("rounds", rounds), ("episodes", episodes)):
            rows = load_dataset("parquet", data_files=str(folder / DATA_FILE), split="train")
            chats = tokenize_rows(rows, tokenizer)
            sizes[form] = {
                "samples": len(chats),
                "tokens": sum(len(c.input_ids) for c in chats),
                "answers": sum(len(c.answers) for c in chats),
                "answer_tokens": sum(c.answer_tokens for c in chats),
            }
        report["episodes"] = ids
        report["sizes"] = sizes
        print(json.dumps(sizes))
        if sizes["rounds"]["answers"] != sizes["episodes"]["answers"]:
            raise SystemExit(f"the two forms hold different answers: {sizes}")
        answers, answer_tokens = sizes["episodes"]["answers"], sizes["episodes"]["answer_tokens"]
        for config in chosen:
            data = rounds if config.form == "rounds" else episodes
            row = measure(config, data, args.model, work / "runs", answers, answer_tokens)
            report["results"].append(row)
            print(json.dumps(row), flush=True)
    base = next((r for r in report["results"] if r["config"] == "rounds-trl"), None)
    print(f"\n{'config':<24} {'CPU s/answer':>12} {'wall s/answer':>13} {'CPU ms/ans.tok':>14} {'x CPU':>6} {'x wall':>6}"
          f" {'load':>10} {'epoch CPU h':>11} {'epoch wall h':>12}")
    for row in report["results"]:
        ratio_cpu = base["cpu_s_per_answer"] / row["cpu_s_per_answer"] if base else float("nan")
        ratio_wall = base["wall_s_per_answer"] / row["wall_s_per_answer"] if base else float("nan")
        row["x_cpu_vs_rounds_trl"], row["x_wall_vs_rounds_trl"] = round(ratio_cpu, 2), round(ratio_wall, 2)
        row["epoch_cpu_h"] = round(row["cpu_s_per_answer"] * EPOCH_SAMPLES / 3600, 2)
        row["epoch_wall_h"] = round(row["wall_s_per_answer"] * EPOCH_SAMPLES / 3600, 2)
        print(
            f"{row['config']:<24} {row['cpu_s_per_answer']:>12.3f} {row['wall_s_per_answer']:>13.3f} "
            f"{row['cpu_ms_per_answer_token']:>14.2f} {ratio_cpu:>6.2f} {ratio_wall:>6.2f} "
            f"{row['load_before']:>4.1f}-{row['load_after']:<5.1f} {row['epoch_cpu_h']:>11.2f} {row['epoch_wall_h']:>12.2f}"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


if __name__ == "__main__":
    main()
