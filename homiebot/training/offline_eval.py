"""``homie train eval``: how well a model fits held-out samples, without the simulator (forward passes only).

Two figures on data sets from ``homie data build`` (build them with ``--split test`` for EMMOE's 10 test
tasks, which training never reads):

* **answer NLL**: the mean negative log-likelihood per answer token of the SFT samples' answers given their
  prompts (what SFT minimises; lower is better), and the **next-subtask accuracy** of the model's greedy answers
  (below);
* **pair accuracy**: the share of DPO pairs whose chosen side the model finds more likely than the rejected
  one given the prompt (sum of token log-probabilities, DPO's implicit ranking; 0.5 is a coin), per kind.

These are the teacher-forced counterparts of PARTNR's offline check of a finetuned planner; the simulator's
SR and TP (``homie eval``) are the figures that count and need far more CPU time than this session had.

**Next-subtask accuracy** (:func:`next_subtask_accuracy`; ``homie train sft --val DATA`` reports it during
training, ``homie train eval --sft DATA`` after): the model answers each held-out round greedily, free (no
grammar), and its ``Subtask: [..]`` must equal the expert's in action and names; action-only accuracy beside it.
An answer with no Subtask line is a text world's command (MuEP's episode chat, :mod:`homiebot.textworld.chat`: one
admissible command per turn): the model's first line must be the expert's command, letter for letter, and the
"action" is its verb (``go to``, ``take``, ...).

**Equally good** (a second figure, never instead of the exact one): where the expert chose among candidates it
holds equally good (which object of a move first, which opened furniture to close first; ties it breaks by name,
:meth:`homiebot.planner.expert.ExpertPlanner.equally_good`), any of their answers counts. The exact figure counts
a model that carries the other apple first as wrong, though the expert would have done the same had the names
sorted the other way. EMMOE scores its planner only online (SR, TP, SER...), and PARTNR's training check is the
exact match, so this definition is the project's: *the model's subtask is one of the expert's answers under
some tie-break of its own equals in that state*. The sets come from the collection replayed with
``collect_episodes(..., equally_good=True)`` (``equally_good.jsonl`` per episode; :func:`read_equally_good`).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from homiebot.planner.prompt import split_subtask
from homiebot.training.muep_data import command_verb
from homiebot.training.sequences import TokenizedChat, tokenize_rows
from homiebot.training.trainer import TrainingError, load_rows
from homiebot.types import Subtask


@dataclass
class OfflineScores:
    samples: int = 0
    answer_nll: float = math.nan
    pairs: int = 0
    pair_accuracy: float = math.nan
    pair_accuracy_by_kind: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    # The SFT set's learned answers (one per single-turn sample, several per episode sample) and how many of them
    # the model's greedy answer gets right (next_subtask_accuracy).
    answers: int = 0
    subtask_accuracy: float = math.nan
    action_accuracy: float = math.nan

    def lines(self) -> list[str]:
        kinds = ", ".join(f"{k} {v:.3f}" for k, v in sorted(self.pair_accuracy_by_kind.items()))
        return [
            f"answer NLL per token: {self.answer_nll:.4f} on {self.samples} SFT samples ({self.answers} answers)",
            f"next subtask (action and target exact): {self.subtask_accuracy:.3f}, action: {self.action_accuracy:.3f}",
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
        # Either form (single-turn or episode samples): the answers' NLL and the greedy answers, in one pass each.
        result = next_subtask_accuracy(network, tokenizer, tokenize_rows(rows, tokenizer))
        scores.samples, scores.answer_nll, scores.answers = len(rows), result.answer_nll, result.answers
        scores.subtask_accuracy, scores.action_accuracy = result.subtask_accuracy, result.action_accuracy
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


#: The answer's subtask line, complete: generation can stop there (the Model line after it is not scored).
_SUBTASK_LINE = re.compile(r"Subtask:\s*\[([^\]\n]*)\]")


@dataclass
class SubtaskAccuracy:
    """Offline next-subtask accuracy (:func:`next_subtask_accuracy`); counts, so that shares can be summed."""

    answers: int = 0
    subtask_right: int = 0  # action, target and place all equal to the expert's
    action_right: int = 0
    unparsed: int = 0  # no complete Subtask line within the token budget
    nll_sum: float = 0.0  # answer tokens' negative log-likelihood, teacher-forced
    nll_tokens: int = 0
    seconds: float = 0.0
    # With ``equally_good`` sets: answers equal to one of the expert's equally good subtasks (exact ones included).
    equally_good_right: int = 0

    @property
    def subtask_accuracy(self) -> float:
        return self.subtask_right / self.answers if self.answers else math.nan

    @property
    def action_accuracy(self) -> float:
        return self.action_right / self.answers if self.answers else math.nan

    @property
    def answer_nll(self) -> float:
        return self.nll_sum / self.nll_tokens if self.nll_tokens else math.nan

    @property
    def equally_good_accuracy(self) -> float:
        return self.equally_good_right / self.answers if self.answers else math.nan

    def lines(self) -> list[str]:
        return [
            f"next subtask (action and target exact) {100 * self.subtask_accuracy:.1f}% of {self.answers} answers, "
            f"action {100 * self.action_accuracy:.1f}%, no subtask {self.unparsed}",
            f"answer NLL per token {self.answer_nll:.4f}, {self.seconds:.0f} s",
        ]


@dataclass(frozen=True)
class ScoredAnswers:
    """A figure for ``metrics.jsonl``: :class:`SubtaskAccuracy`'s shares and counts (``dataclasses.asdict``)."""

    subtask_accuracy: float
    action_accuracy: float
    answer_nll: float
    answers: int
    unparsed: int
    seconds: float

    def lines(self) -> list[str]:
        return [
            f"next subtask {100 * self.subtask_accuracy:.1f}% of {self.answers} answers, action "
            f"{100 * self.action_accuracy:.1f}%, answer NLL {self.answer_nll:.4f} ({self.seconds:.0f} s)"
        ]


def scored(result: SubtaskAccuracy) -> ScoredAnswers:
    return ScoredAnswers(
        result.subtask_accuracy, result.action_accuracy, result.answer_nll, result.answers, result.unparsed,
        round(result.seconds, 2),
    )


@dataclass(frozen=True)
class AnswerRecord:
    """One scored answer of :func:`next_subtask_accuracy` (with ``records=``): where it is, the expert's answer
    and the model's greedy one, as text, so that a miss can be read back beside its prompt."""

    chat: int  # index of the chat in the ``chats`` given
    answer: int  # index of the learned answer within that chat
    expected: str  # the expert's answer (its tokens decoded)
    got: str  # the model's greedy answer, up to its complete Subtask line
    subtask_right: bool
    action_right: bool
    equally_good_right: bool = False  # one of the expert's equally good subtasks (with ``equally_good`` sets)


def _command_of(text: str) -> str | None:
    """A text world's command: the answer's first non-empty line, stripped (module docstring)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else None


def _subtask_of(text: str) -> Subtask | None:
    match = _SUBTASK_LINE.search(text)
    return None if match is None else split_subtask(match.group(1))


def equally_good_match(got: Subtask | None, expected: Subtask | None, equally_good: Sequence[Subtask]) -> bool:
    """Whether ``got`` is the expert's answer ``expected`` or one of the subtasks it holds equally good there
    (compared as :func:`_same` compares: the action case-blind, the names as written)."""
    if got is None:
        return False
    return any(_same(got, other)[0] for other in ([expected] if expected is not None else []) + list(equally_good))


def read_equally_good(record: Path) -> dict[int, list[Subtask]]:
    """An episode record's equally good subtasks per round (``equally_good.jsonl`` of a collection made with
    ``equally_good=True``; an empty mapping without the file)."""
    from homiebot.training.collect import EQUALLY_GOOD_FILE

    path = Path(record) / EQUALLY_GOOD_FILE
    if not path.is_file():
        return {}
    out: dict[int, list[Subtask]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            out[int(item["round"])] = [split_subtask(t.strip()[1:-1]) for t in item["subtasks"]]
    return out


def rescore_equally_good(
    records: Sequence[AnswerRecord], equally_good: Mapping[tuple[int, int], Sequence[Subtask]]
) -> list[AnswerRecord]:
    """``records`` (of :func:`next_subtask_accuracy`) scored again against the expert's equally good subtasks,
    keyed by (chat, answer); an answer without a set counts only when exact."""
    from dataclasses import replace

    out = []
    for record in records:
        accepted = equally_good.get((record.chat, record.answer), ())
        right = record.subtask_right or equally_good_match(_subtask_of(record.got), _subtask_of(record.expected), accepted)
        out.append(replace(record, equally_good_right=right))
    return out


def _same(a: Subtask, b: Subtask) -> tuple[bool, bool]:
    """(whole subtask equal, action equal); names compared as written, the action case-blind (the parser's rule)."""
    action = a.action.strip().lower() == b.action.strip().lower()
    return action and (a.target or None) == (b.target or None) and (a.place or None) == (b.place or None), action


def next_subtask_accuracy(
    model: Any,
    tokenizer: Any,
    chats: Sequence[TokenizedChat],
    *,
    max_new_tokens: int = 80,
    bf16: bool = False,
    records: list[AnswerRecord] | None = None,
    equally_good: Sequence[Sequence[Sequence[Subtask]]] | None = None,
) -> SubtaskAccuracy:
    """For every learned answer of ``chats``: the model's greedy answer after the chat so far (the expert's earlier
    answers in it, as the planner's own would be), its Subtask compared with the expert's, and the expert answer's
    teacher-forced NLL.

    One pass per chat with a key/value cache: each user turn is fed once, the answer is generated from the cache
    until its Subtask line is complete (or the end-of-turn token, or ``max_new_tokens``), the cache is cut back
    and the expert's answer fed instead. An episode therefore costs its tokens once plus the generated ones, not
    a full prefill per round (2,000 tokens of prompt per late round otherwise).

    ``records``: a list that receives an :class:`AnswerRecord` per answer, in order (the counts are unchanged).
    ``equally_good``: per chat, per learned answer, the subtasks the expert holds equally good there (module
    docstring); the answers among them are counted in ``equally_good_right``, beside the exact count."""
    import torch
    from transformers import DynamicCache

    from homiebot.planner.fast_decode import cache_keyword

    key = cache_keyword()  # transformers renamed past_key_values to cache
    started = time.perf_counter()
    result = SubtaskAccuracy()
    eos = tokenizer.eos_token_id
    was_training = model.training
    model.eval()
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16)
    try:
        with torch.inference_mode(), autocast:
            for chat_index, chat in enumerate(chats):
                ids = chat.input_ids
                cache = DynamicCache()
                fed = 0  # tokens in the cache
                previous: tuple[int, int] | None = None
                last_logits: Any = None
                for answer_index, (start, end) in enumerate(chat.answers):
                    chunk = torch.tensor([ids[fed:start]])
                    # Logits: the previous answer's tokens after its first (scored below) and this prompt's last.
                    keep = list(range(previous[1] - previous[0] - 1)) if previous else []
                    out = model(
                        input_ids=chunk,
                        **{key: cache},
                        use_cache=True,
                        logits_to_keep=torch.tensor([*keep, chunk.shape[1] - 1]),
                    )
                    logits = out.logits[0].float()
                    if previous is not None:
                        _add_nll(result, torch.cat([last_logits[None], logits[:-1]]), ids[previous[0] : previous[1]])
                    last_logits = logits[-1]
                    expected_text = tokenizer.decode(ids[start:end])
                    expected = _subtask_of(expected_text)
                    answer = _greedy(model, tokenizer, {key: cache}, last_logits, eos, max_new_tokens)
                    extra = cache.get_seq_length() - start
                    if extra > 0:  # back to the prompt (a negative count: tokens to remove, in every transformers 5)
                        cache.crop(-extra)
                    fed, previous = start, (start, end)
                    result.answers += 1
                    got = _subtask_of(answer)
                    whole = action = False
                    command = None if expected is not None else _command_of(
                        tokenizer.decode(ids[start:end], skip_special_tokens=True))
                    if command is not None:  # a text world's command (module docstring)
                        mine = _command_of(answer)
                        result.unparsed += mine is None
                        whole = mine == command
                        action = mine is not None and command_verb(mine) == command_verb(command)
                    elif got is None or expected is None:
                        result.unparsed += got is None
                    else:
                        whole, action = _same(got, expected)
                    result.subtask_right += whole
                    result.action_right += action
                    accepted = equally_good[chat_index][answer_index] if equally_good is not None else ()
                    good = whole or equally_good_match(got, expected, accepted)
                    result.equally_good_right += good
                    if records is not None:
                        records.append(
                            AnswerRecord(chat_index, answer_index, expected_text, answer, whole, action, good)
                        )
                if previous is not None:  # the last answer's NLL
                    chunk = torch.tensor([ids[previous[0] : previous[1] - 1]])
                    logits = model(input_ids=chunk, **{key: cache}, use_cache=True).logits[0].float()
                    _add_nll(result, torch.cat([last_logits[None], logits]), ids[previous[0] : previous[1]])
    finally:
        model.train(was_training)
    result.seconds = time.perf_counter() - started
    return result


def validation_sample(chats: Sequence[TokenizedChat], limit: int | None) -> list[int]:
    """The indices of the chats a validation scores: those with answers, shuffled with seed 0, whole chats until
    ``limit`` answers are reached (all with None), so that every validation of a run, and a later look at its
    answers, scores the same ones (``homie train sft --val``; ``--val-limit``)."""
    import random

    order = [i for i, chat in enumerate(chats) if chat.answers]
    random.Random(0).shuffle(order)
    if limit is None:
        return order
    picked, answers = [], 0
    for index in order:
        if answers >= limit:
            break
        picked.append(index)
        answers += len(chats[index].answers)
    return picked


def _add_nll(result: SubtaskAccuracy, logits: Any, targets: Sequence[int]) -> None:
    import torch

    logp = torch.log_softmax(logits[: len(targets)], dim=-1)
    picked = logp.gather(1, torch.tensor(list(targets))[:, None])[:, 0]
    result.nll_sum += float(-picked.sum())
    result.nll_tokens += len(targets)


def _greedy(model: Any, tokenizer: Any, cache: dict[str, Any], logits: Any, eos: int | None, limit: int) -> str:
    """Greedy tokens from ``logits`` on, fed through ``cache``, until the Subtask line is complete."""
    import torch

    generated: list[int] = []
    for _ in range(limit):
        token = int(logits.argmax())
        if token == eos:
            break
        generated.append(token)
        if _SUBTASK_LINE.search(tokenizer.decode(generated)):
            break
        logits = model(input_ids=torch.tensor([[token]]), **cache, use_cache=True).logits[0, -1].float()
    return tokenizer.decode(generated)
