"""F1 errors of a random model's planner answers, with and without constrained decoding.

A tiny randomly initialised LLaVA (:mod:`homiebot.planner.tiny_vlm`; or ``--model PATH``) answers EMMOE
planning requests through the real hf backend (chat template, processor, ``generate`` with sampling at
temperature 1), in padded batches. Each answer is judged by the executor's F1 rules
(:func:`homiebot.planner.constrained.f1_violation`: parseable by appendix D/H.1's patterns, action in the
list, model in the list, target present, Put with a place); constrained answers are also checked for
naming only grounded targets (no hallucinated object: what would become F2).

Requests vary like episodes do: task text, 0-3 rounds of history, four random 256x256 views, and 3-8
grounded targets drawn from a pool of 30 household names per request (one episode's round = one call;
EMMOE's round limit is 20, so 1,000 episodes are up to 20,000 calls).

Usage::

    python benchmarks/bench_constrained.py                         # 20,000 constrained + 2,000 free calls
    python benchmarks/bench_constrained.py --constrained-calls 2000 --free-calls 500 --batch 32

Prints the F1 rate of each mode with the counts of each F1 reason, the calls per second, and the N run.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from homiebot.planner.base import ChatTurn, PlanRequest
from homiebot.planner.constrained import f1_violation
from homiebot.planner.prompt import (
    build_instruction,
    format_output,
    history_entry,
    parse_output,
    system_prompt,
)
from homiebot.types import EMMOE_ACTIONS, EMMOE_MODELS, Subtask

log = logging.getLogger("bench_constrained")

NAMES = ["fridge", "apple", "kitchen", "table", "counter", "sofa", "cabinet", "drawer", "microwave", "sink", "bed", "shelf", "box", "bowl", "cup", "living", "room", "bedroom", "bathroom", "green", "can", "yellow", "box", "cereal", "banana", "plate", "door", "chair", "desk", "oven", "lamp", "towel"]
POOL = tuple(dict.fromkeys(NAMES + ["kitchen table", "living room", "green can", "yellow box"]))
TASKS = ("put the apple in the fridge", "bring the cup to the sofa", "store the cereal in the cabinet",
         "take a yellow box and put it into the fridge", "clean up the kitchen table")


def make_request(rng: random.Random, nprng: np.random.Generator) -> PlanRequest:
    task = rng.choice(TASKS)
    rounds = rng.randint(0, 3)
    history, turns = "", []
    for index in range(1, rounds + 1):
        subtask = Subtask("Go to", rng.choice(POOL))
        answer = format_output("I should move first.", subtask, "NoMaD")
        instruction = build_instruction(task, [], history, "None")
        turns.append(ChatTurn(instruction, answer))
        history += history_entry(index, subtask.text()[1:-1], rng.choice(("success", "fail")))
    targets = tuple(rng.sample(POOL, rng.randint(3, 8)))
    return PlanRequest(
        system_prompt=system_prompt(),
        instruction=build_instruction(task, [], history, "None"),
        images=[nprng.integers(0, 256, (256, 256, 3), dtype=np.uint8) for _ in range(4)],
        history=turns,
        actions=EMMOE_ACTIONS,
        models=EMMOE_MODELS,
        grounded_targets=targets,
    )


def run_mode(planner, calls: int, batch: int, seed: int, label: str) -> dict:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    rng, nprng = random.Random(seed), np.random.default_rng(seed)
    reasons: collections.Counter[str] = collections.Counter()
    ungrounded = 0
    actions: collections.Counter[str] = collections.Counter()
    done = 0
    started = time.perf_counter()
    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("F1 {task.fields[f1]}")) as progress:
        task = progress.add_task(label, total=calls, f1=0)
        while done < calls:
            size = min(batch, calls - done)
            requests = [make_request(rng, nprng) for _ in range(size)]
            planner.reset("bench", seed=seed * 100_003 + done)
            for request, answer in zip(requests, planner.plan_batch(requests), strict=False):
                why = f1_violation(answer, request.actions, request.models)
                if why is not None:
                    reasons[why.split(":")[0]] += 1
                else:
                    subtask = parse_output(answer).subtask
                    actions[subtask.action] += 1
                    names = [n for n in (subtask.target, subtask.place) if n]
                    ungrounded += any(n not in request.grounded_targets for n in names)
            done += size
            progress.update(task, completed=done, f1=sum(reasons.values()))
    seconds = time.perf_counter() - started
    f1 = sum(reasons.values())
    return {"mode": label, "calls": calls, "f1": f1, "f1_rate": f1 / calls, "reasons": dict(reasons),
            "ungrounded_targets": ungrounded, "actions": dict(actions), "seconds": seconds, "calls_per_s": calls / seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="local model folder (default: a tiny random LLaVA built now)")
    parser.add_argument("--constrained-calls", type=int, default=20_000)
    parser.add_argument("--free-calls", type=int, default=2_000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 is fastest for the tiny model)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from rich.console import Console
    from rich.table import Table

    from homiebot.planner.hf_backend import HFPlanner, LocalModelConfig, VisionLanguageModel
    from homiebot.planner.tiny_vlm import save_tiny_vlm

    with tempfile.TemporaryDirectory() as scratch:
        model_path = args.model or str(save_tiny_vlm(Path(scratch) / "tiny-llava", "llava", seed=args.seed))
        engine = VisionLanguageModel(LocalModelConfig(model=model_path, torch_threads=args.threads))
        results = []
        for constrained, calls in ((True, args.constrained_calls), (False, args.free_calls)):
            if calls <= 0:
                continue
            planner = HFPlanner(model=model_path, engine=engine, constrained=constrained, do_sample=True,
                                temperature=args.temperature, max_new_tokens=args.max_new_tokens)
            label = "constrained" if constrained else "unconstrained"
            results.append(run_mode(planner, calls, args.batch, args.seed + int(constrained), label))

    table = Table(title=f"F1 errors of a random tiny model's answers (max_new_tokens={args.max_new_tokens}, "
                        f"temperature={args.temperature}, batch={args.batch})")
    for column in ("mode", "calls (N)", "episodes' worth (N/20)", "F1 errors", "F1 rate", "reasons",
                   "ungrounded targets", "actions of valid answers", "calls/s"):
        table.add_column(column, justify="right")
    for r in results:
        reasons = ", ".join(f"{k}: {v}" for k, v in sorted(r["reasons"].items(), key=lambda kv: -kv[1])) or "-"
        table.add_row(r["mode"], f"{r['calls']:,}", f"{r['calls'] / 20:,.0f}", f"{r['f1']:,}", f"{100 * r['f1_rate']:.2f}%",
                      reasons, f"{r['ungrounded_targets']:,}" if r["mode"] == "constrained" else "-",
                      ", ".join(f"{k}: {v}" for k, v in sorted(r["actions"].items(), key=lambda kv: -kv[1])) or "-",
                      f"{r['calls_per_s']:.1f}")
    Console(width=200).print(table)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=2))
    constrained_f1 = sum(r["f1"] + r["ungrounded_targets"] for r in results if r["mode"] == "constrained")
    if constrained_f1:
        print(f"FAILED: {constrained_f1} constrained answers broke the format or named an ungrounded target")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
