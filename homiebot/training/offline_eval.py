"""``homie train eval``: how well a model fits held-out samples, without the simulator (forward passes only).

Two figures on data sets from ``homie data build`` (build them with ``--split test`` for EMMOE's 10 test
tasks, which training never reads):

* **answer NLL**: the mean negative log-likelihood per answer token of the SFT samples' answers given their
  prompts (what SFT minimises; lower is better);
* **pair accuracy**: the share of DPO pairs whose chosen side the model finds more likely than the rejected
  one given the prompt (sum of token log-probabilities, DPO's implicit ranking; 0.5 is a coin), per kind.

These are the teacher-forced counterparts of PARTNR's offline check of a finetuned planner; the simulator's
SR and TP (``homie eval``) are the figures that count and need far more CPU time than this session had.
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from homiebot.training.trainer import TrainingError, load_rows


@dataclass
class OfflineScores:
    samples: int = 0
    answer_nll: float = math.nan
    pairs: int = 0
    pair_accuracy: float = math.nan
    pair_accuracy_by_kind: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0

    def lines(self) -> list[str]:
        kinds = ", ".join(f"{k} {v:.3f}" for k, v in sorted(self.pair_accuracy_by_kind.items()))
        return [
            f"answer NLL per token: {self.answer_nll:.4f} on {self.samples} SFT samples",
            f"pair accuracy: {self.pair_accuracy:.3f} on {self.pairs} DPO pairs ({kinds})",
            f"{self.seconds:.0f} s",
        ]


def _completion_logp(model: Any, tokenizer: Any, prompt: Any, completion: Any) -> tuple[float, int]:
    """(sum of log-probabilities of the completion's tokens, their count) after the prompt, chat template applied
    for conversations (as trl tokenises them)."""
    import torch

    if isinstance(prompt, str):
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        full_ids = tokenizer(prompt + completion + (tokenizer.eos_token or ""), add_special_tokens=False)["input_ids"]
    else:
        prompt_ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=True)[
            "input_ids"
        ]
        full_ids = tokenizer.apply_chat_template(list(prompt) + list(completion), tokenize=True, return_dict=True)[
            "input_ids"
        ]
    start = 0
    while start < min(len(prompt_ids), len(full_ids)) and prompt_ids[start] == full_ids[start]:
        start += 1
    if start >= len(full_ids):
        return 0.0, 0
    with torch.inference_mode():
        logits = model(torch.tensor([full_ids])).logits[0].float()
    logp = torch.log_softmax(logits[start - 1 : -1], dim=-1)
    targets = torch.tensor(full_ids[start:])
    picked = logp.gather(1, targets[:, None])[:, 0]
    return float(picked.sum()), len(full_ids) - start


def evaluate_offline(
    model: str | Path,
    *,
    adapter: str | Path | None = None,
    sft_data: str | Path | None = None,
    dpo_data: str | Path | None = None,
    limit: int | None = None,
    threads: int | None = 2,
) -> OfflineScores:
    """Score ``model`` (+ ``adapter``) on the SFT and DPO data sets given (see the module docstring)."""
    from homiebot.planner.text_engine import CausalTextModel

    if sft_data is None and dpo_data is None:
        raise TrainingError("give an SFT data set, a DPO data set or both")
    started = time.perf_counter()
    engine = CausalTextModel(model, adapter=adapter, threads=threads)
    network, tokenizer = engine.model, engine.tokenizer
    scores = OfflineScores()
    if sft_data is not None:
        rows = load_rows(Path(sft_data), "sft")
        # A fixed shuffle: the files are ordered by episode and, for DPO, by kind; a prefix would not be a sample.
        rows = rows.shuffle(seed=0).select(range(min(limit, len(rows)))) if limit else rows
        total, tokens = 0.0, 0
        for row in rows:
            logp, count = _completion_logp(network, tokenizer, row["prompt"], row["completion"])
            total, tokens = total - logp, tokens + count
        scores.samples, scores.answer_nll = len(rows), total / max(tokens, 1)
    if dpo_data is not None:
        from datasets import load_dataset

        from homiebot.training.trainer import _data_file

        data = load_dataset("parquet", data_files=str(_data_file(Path(dpo_data))), split="train")
        data = data.shuffle(seed=0).select(range(min(limit, len(data)))) if limit else data
        wins: dict[str, list[int]] = defaultdict(list)
        for row in data:
            chosen, _ = _completion_logp(network, tokenizer, row["prompt"], row["chosen"])
            rejected, _ = _completion_logp(network, tokenizer, row["prompt"], row["rejected"])
            wins[str(row.get("kind", "pair"))].append(int(chosen > rejected))
        every = [w for values in wins.values() for w in values]
        scores.pairs = len(every)
        scores.pair_accuracy = sum(every) / max(len(every), 1)
        scores.pair_accuracy_by_kind = {k: sum(v) / len(v) for k, v in wins.items()}
    scores.seconds = time.perf_counter() - started
    engine.close()
    return scores


def write_scores(scores: OfflineScores, path: Path) -> None:
    path.write_text(json.dumps(scores.__dict__, indent=2) + "\n", encoding="utf-8")
