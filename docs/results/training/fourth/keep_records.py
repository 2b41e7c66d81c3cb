"""Copy the fourth curve's evaluation folders here, slimmed to what table.py and ``homie metrics`` read.

    python docs/results/training/fourth/keep_records.py SOURCE_ROOT

For each ``SOURCE_ROOT/ev_STAGE_SPLIT``: results.jsonl as written and eval.json without indentation; per episode, evaluation.json,
summary.json without its system prompt (the same text in every episode, in docs/evaluation.md), and rounds.jsonl
with each round's raw answer, subtask and code, without the appendix-D instruction (rebuilt from the history),
the parsed fields and the timings. States, conversations and pictures are not kept.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

#: The model's answer (its analysis is the answer's first line) and what the round did with it; the feedback and
#: the inventory are in summary.json.
ROUND_FIELDS = ("round", "raw_output", "subtask_text", "error_code")


def keep(source: Path, target: Path) -> int:
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source / "results.jsonl", target / "results.jsonl")
    if (source / "eval.json").is_file():  # the pinned settings and the task list, without the indentation
        (target / "eval.json").write_text(json.dumps(json.loads((source / "eval.json").read_text())) + "\n")
    kept = 0
    for episode in sorted(source.glob("episodes/*/run0")):
        if not (episode / "summary.json").is_file():
            continue  # an episode the clock cut: not in results.jsonl either
        out = target / episode.relative_to(source)
        out.mkdir(parents=True, exist_ok=True)
        summary = json.loads((episode / "summary.json").read_text())
        summary.pop("system_prompt", None)
        (out / "summary.json").write_text(json.dumps(summary) + "\n")
        if (episode / "evaluation.json").is_file():
            shutil.copy2(episode / "evaluation.json", out / "evaluation.json")
        rounds = [json.loads(line) for line in (episode / "rounds.jsonl").read_text().splitlines() if line.strip()]
        slim = [{k: r.get(k) for k in ROUND_FIELDS} for r in rounds]
        (out / "rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in slim))
        kept += 1
    return kept


if __name__ == "__main__":
    root = Path(sys.argv[1])
    here = Path(__file__).parent
    for folder in sorted(root.glob("ev_*_t*")):
        print(folder.name, keep(folder, here / folder.name))
