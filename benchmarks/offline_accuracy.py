"""Which validation answers a trained planner gets wrong: the training's validation sample, answer by answer.

``homie train sft --val DATA`` reports the next-subtask accuracy of a fixed sample of the validation set (200
answers' worth of whole chats, :func:`homiebot.training.offline_eval.validation_sample`). This script scores the
same sample with a model and an adapter, keeps every answer (the prompt's last user turn, the expert's answer,
the model's), and, given the validation collection replayed with the expert's equally good subtasks
(``collect_episodes(..., equally_good=True)``), reports the second figure beside the exact one
(:mod:`homiebot.training.offline_eval`, "Equally good"). docs/results/offline-accuracy-2026-11-30.md has a run.

    python -m benchmarks.offline_accuracy --model models/smollm2 --adapter homiebot/planner/shipped/homiebot-smollm2 \
        --val data/val-ep --ties runs/val-ties --original runs/val --out out/offline

``--answers FILE`` scores a saved ``answers.json`` again (no model run). ``--ties`` is a collection of the same
tasks, runs, seed offset, planner and injection rate as the one the validation set was built from; with
``--original`` each replayed round is checked against it (the same subtask in every round, else the sets would be
another episode's).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any


def _round_of(messages: list[dict[str, str]], index: int) -> int:
    """The round of the assistant turn at ``index`` (1 for the first answer)."""
    return sum(1 for m in messages[:index] if m["role"] == "assistant") + 1


def run_model(model: str, adapter: str | None, val: Path, limit: int | None, threads: int) -> dict[str, Any]:
    import pyarrow.parquet as pq
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from homiebot.training.build import DATA_FILE
    from homiebot.training.offline_eval import AnswerRecord, next_subtask_accuracy, validation_sample
    from homiebot.training.sequences import sample_messages, tokenize_rows
    from homiebot.training.trainer import load_rows

    torch.set_num_threads(threads)
    tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    rows = load_rows(val, "sft")
    ids = [str(r["id"]) for r in pq.read_table(str(val / DATA_FILE)).to_pylist()]
    chats = tokenize_rows(rows, tokenizer)
    picked = validation_sample(chats, limit)
    # As the training's validation holds it: fp32, the adapter not merged.
    network = AutoModelForCausalLM.from_pretrained(model, local_files_only=True, dtype=torch.float32)
    if adapter is not None:
        from peft import PeftModel

        network = PeftModel.from_pretrained(network, adapter)
    network.eval()
    records: list[AnswerRecord] = []
    result = next_subtask_accuracy(network, tokenizer, [chats[i] for i in picked], records=records)
    answers = []
    for record in records:
        row_index = picked[record.chat]
        messages, flags = sample_messages(rows[row_index])
        turns = [k for k, m in enumerate(messages) if m["role"] == "assistant"]
        index = [k for k, f in zip(turns, flags, strict=True) if f][record.answer]
        answers.append(
            {
                "id": ids[row_index],
                "chat": record.chat,
                "answer": record.answer,
                "round": _round_of(messages, index),
                "prompt": messages[:index],
                "expected": record.expected,
                "got": record.got,
                "subtask_right": record.subtask_right,
                "action_right": record.action_right,
            }
        )
    counts = {"answers": result.answers, "subtask_right": result.subtask_right, "action_right": result.action_right,
              "unparsed": result.unparsed, "answer_nll": result.answer_nll, "seconds": round(result.seconds, 1)}
    return {"model": model, "adapter": adapter, "val": str(val), "counts": counts, "answers": answers}


def _replayed_rounds(record: Path, original: Path) -> int:
    """How many of the first rounds the replay ``record`` shares with ``original``: the same prompt (the text
    mode's fresh chat, which shows the world and what is within reach) and the same subtask, round by round."""
    from homiebot.training.episodes import TEXT_PROMPTS_FILE

    def rounds(folder: Path) -> list[tuple[str, str]]:
        answers = [json.loads(x)["subtask_text"] for x in (folder / "rounds.jsonl").read_text().splitlines() if x]
        prompts = [json.dumps(json.loads(x)["messages"]) for x in (folder / TEXT_PROMPTS_FILE).read_text().splitlines() if x]
        return list(zip(prompts, answers, strict=True))

    same = 0
    for a, b in zip(rounds(record), rounds(original), strict=False):
        if a != b:
            break
        same += 1
    return same


def add_ties(data: dict[str, Any], ties: Path, original: Path | None) -> list[str]:
    """Each answer's equally good subtasks from the replayed collection ``ties``; the problems found. With
    ``original`` (the collection the validation set was built from) a round's set is used only while the replay
    is still the original episode (:func:`_replayed_rounds`): from the first round whose prompt or subtask
    differs on, the set is another state's, and the answer counts only when exact."""
    from homiebot.training.offline_eval import (
        AnswerRecord,
        read_equally_good,
        rescore_equally_good,
    )

    problems: list[str] = []
    accepted: dict[tuple[int, int], list[Any]] = {}
    cache: dict[str, tuple[dict[int, list[Any]], int | None]] = {}
    for answer in data["answers"]:
        task, run = answer["id"].rsplit("_v", 1)[0].split("_run")
        record = ties / "episodes" / task / f"run{run}"
        if str(record) not in cache:
            same = _replayed_rounds(record, original / "episodes" / task / f"run{run}") if original else None
            cache[str(record)] = (read_equally_good(record), same)
        sets, same = cache[str(record)]
        if same is not None and answer["round"] > same:
            problems.append(f"{answer['id']} round {answer['round']}: the replay differs from round {same + 1} on")
            continue
        subtasks = sets.get(answer["round"])
        if subtasks is None:
            problems.append(f"{answer['id']} round {answer['round']}: no equally good subtasks recorded")
            continue
        accepted[(answer["chat"], answer["answer"])] = subtasks
        answer["equally_good"] = [s.text() for s in subtasks]
    records = [
        AnswerRecord(a["chat"], a["answer"], a["expected"], a["got"], a["subtask_right"], a["action_right"])
        for a in data["answers"]
    ]
    for answer, scored in zip(data["answers"], rescore_equally_good(records, accepted), strict=True):
        answer["equally_good_right"] = scored.equally_good_right
    data["counts"]["equally_good_right"] = sum(a["equally_good_right"] for a in data["answers"])
    data["counts"]["with_equally_good_sets"] = len(accepted)
    return problems


def misses_table(data: dict[str, Any]) -> str:
    """The misses as a Markdown table: episode and round, the prompt's last user turn, the expert's and the
    model's subtask, the expert's equally good subtasks."""

    def subtask(text: str) -> str:
        return text.split("Subtask:", 1)[1].split("\n", 1)[0].strip() if "Subtask:" in text else repr(text)

    lines = ["| episode, round | last user turn | expert | model | equally good |", "|---|---|---|---|---|"]
    for a in data["answers"]:
        if a["subtask_right"]:
            continue
        lines_of_turn = [x for x in a["prompt"][-1]["content"].strip().split("\n") if not x.startswith("Now based on")]
        turn = "<br>".join(lines_of_turn)
        if len(turn) > 400:
            turn = "(first turn: the task and the world) " + turn.split("<br>", 1)[0]
        lines.append(f"| {a['id']} r{a['round']} | {turn} | {subtask(a['expected'])} | {subtask(a['got'])} | "
                     f"{', '.join(a.get('equally_good', [])) or 'n/a'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="the base model folder (homie train base)")
    parser.add_argument("--adapter", help="a LoRA adapter (a shipped one, a checkpoint)")
    parser.add_argument("--val", type=Path, help="the validation set (homie data build sft --episodes)")
    parser.add_argument("--val-limit", type=int, default=200, help="answers of the sample (the trainer's default)")
    parser.add_argument("--answers", type=Path, help="score a saved answers.json again instead of running a model")
    parser.add_argument("--ties", type=Path, help="the validation collection replayed with equally_good=True")
    parser.add_argument("--original", type=Path, help="the collection the validation set was built from")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.answers is not None:
        data = json.loads(args.answers.read_text(encoding="utf-8"))
    else:
        if args.model is None or args.val is None:
            parser.error("--model and --val, or --answers")
        started = time.process_time()
        data = run_model(args.model, args.adapter, args.val, args.val_limit, args.threads)
        data["counts"]["cpu_s"] = round(time.process_time() - started, 1)
    problems = add_ties(data, args.ties, args.original) if args.ties is not None else []
    (args.out / "answers.json").write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (args.out / "misses.md").write_text(misses_table(data) + "\n", encoding="utf-8")
    counts = data["counts"]
    n = counts["answers"]
    print(f"{n} answers: next subtask exact {counts['subtask_right']} ({100 * counts['subtask_right'] / n:.1f} %), "
          f"action {counts['action_right']} ({100 * counts['action_right'] / n:.1f} %)")
    if "equally_good_right" in counts:
        right = counts["equally_good_right"]
        print(f"one of the expert's equally good subtasks: {right} ({100 * right / n:.1f} %); "
              f"{counts['with_equally_good_sets']} answers with a set (the others count when exact)")
    for problem in problems:
        print("problem:", problem)
    print(f"written: {args.out / 'answers.json'}, {args.out / 'misses.md'}")


if __name__ == "__main__":
    main()
