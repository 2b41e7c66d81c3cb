"""What an SFT data set teaches, checked: prompts whose expert answers differ, prompt lengths, and the mix.

* **Ambiguity** (:func:`find_ambiguities`): samples whose prompt (every message, exactly) is the same but whose
  answers differ. A model can be right on at most one of them, so each such prompt is a ceiling on offline
  accuracy and a sign that the prompt lacks what the expert decided by (its distance to the target, the state
  after earlier rounds). Reported twice: the whole answer (analysis included) and the decision alone
  (``Subtask`` and ``Model``, what the offline accuracy scores).
* **Length** (:func:`token_lengths`): tokens of each sample's prompt as the model's chat template renders it
  (with the generation prompt, and the template's default system line when the sample has no system turn):
  what a training step and a planning round process. Median and 95th percentile.
* **Mix** (:func:`sample_mix`): samples per action (``Go to``, ``Pick``, ``Put``, ``Open``, ``Close``,
  ``End``) and the re-plans: samples whose previous round failed, per error code.

``homie data build sft`` writes these into ``stats.json`` (tokens with ``--tokenizer``); ``homie data check
--from DIR`` computes them for a built data set (its ``data/train.parquet``).

**Episode data sets** (``--episodes``: one growing chat per episode): a learned answer's prompt is the chat up to
its user turn, every earlier turn included (:func:`samples_from_episode_rows`), which is what the model reads
there. Checking the round's own single-turn prompt instead would check a prompt the model never sees (EMMOE
appendix D's, without the world description): its "ambiguous" prompts are ones the chat decides (what is within
reach, what the robot did), and the chat's own ambiguities would go unseen.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from homiebot.training.episodes import TrainingDataError

log = logging.getLogger(__name__)

#: Examples of ambiguous prompts kept in a report.
MAX_EXAMPLES = 5

_DECISION = re.compile(r"Subtask:.*\Z", re.DOTALL)


@dataclass(frozen=True)
class Sample:
    """One SFT sample as the check reads it."""

    id: str
    messages: tuple[tuple[str, str], ...]  # the prompt: (role, text) per message
    answer: str

    @property
    def decision(self) -> str:
        """The answer from its ``Subtask:`` line on (the Analysis left out)."""
        match = _DECISION.search(self.answer)
        return match.group(0).strip() if match else self.answer.strip()


@dataclass
class AmbiguityReport:
    samples: int = 0
    distinct_prompts: int = 0
    #: Prompts with more than one distinct answer, and the samples they hold.
    ambiguous_prompts: int = 0
    ambiguous_samples: int = 0
    #: The same for the decision alone (Subtask and Model).
    ambiguous_decision_prompts: int = 0
    ambiguous_decision_samples: int = 0
    #: A few of them: the prompt's last user turn and, per distinct decision, how many samples and two ids.
    examples: list[dict[str, Any]] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [
            f"  distinct prompts: {self.distinct_prompts} of {self.samples} samples",
            f"  ambiguous prompts (same prompt, different answers): {self.ambiguous_prompts} "
            f"({self.ambiguous_samples} samples); different decisions: {self.ambiguous_decision_prompts} "
            f"({self.ambiguous_decision_samples} samples)",
        ]
        for example in self.examples:
            answers = "; ".join(f"{d!r} x{v['count']}" for d, v in example["decisions"].items())
            out.append(f"    e.g. {example['ids'][0]}: {answers}")
        return out


def find_ambiguities(samples: Iterable[Sample], max_examples: int = MAX_EXAMPLES) -> AmbiguityReport:
    """Group the samples by prompt and count the prompts whose answers (and decisions) differ."""
    by_prompt: dict[tuple[tuple[str, str], ...], list[Sample]] = defaultdict(list)
    report = AmbiguityReport()
    for sample in samples:
        by_prompt[sample.messages].append(sample)
        report.samples += 1
    report.distinct_prompts = len(by_prompt)
    for messages, group in by_prompt.items():
        if len({s.answer for s in group}) > 1:
            report.ambiguous_prompts += 1
            report.ambiguous_samples += len(group)
        decisions: dict[str, list[str]] = defaultdict(list)
        for sample in group:
            decisions[sample.decision].append(sample.id)
        if len(decisions) > 1:
            report.ambiguous_decision_prompts += 1
            report.ambiguous_decision_samples += len(group)
            if len(report.examples) < max_examples:
                report.examples.append(
                    {
                        "ids": [s.id for s in group[:4]],
                        "prompt": messages[-1][1] if messages else "",
                        "decisions": {d: {"count": len(ids), "ids": ids[:2]} for d, ids in decisions.items()},
                    }
                )
    return report


_ACTION = re.compile(r"Subtask:\s*\[([^,\]]*)")
#: An ALFWorld command's verb: the answers of the MuEP-style suite's sets (homiebot.training.muep_data) have no
#: Subtask line.
_COMMAND = re.compile(r"\A(go to|take|move|put|open|close|heat|cool|clean|use|examine|look|inventory)\b")


def sample_mix(samples: Iterable[Sample], replans_after: Mapping[str, str] | None = None) -> dict[str, dict[str, int]]:
    """Samples per action of the answer and, with ``replans_after`` (sample id -> error code of the round before
    it, for the samples that follow a failed round), re-plans per error code."""
    actions: Counter[str] = Counter()
    for sample in samples:
        match = _ACTION.search(sample.answer)
        command = None if match else _COMMAND.match(sample.answer.strip())
        actions[match.group(1).strip() if match else command.group(1) if command else "unparsed"] += 1
    codes = Counter((replans_after or {}).values())
    return {"actions": dict(actions.most_common()), "replans_after": dict(sorted(codes.items()))}


@dataclass(frozen=True)
class Overlap:
    """How many samples' prompts another data set (a training set) also holds, and how many of those it answers
    with another decision (:func:`overlap`)."""

    samples: int
    seen: int
    seen_with_other_decision: int


def overlap(samples: Sequence[Sample], reference: Iterable[Sample]) -> Overlap:
    """Compare a held-out set with the set a model trained on: a held-out sample whose prompt the training set
    holds verbatim scores what was memorised, not what generalises (the first rounds of two seeds of one task are
    often the same prompt)."""
    decisions: dict[tuple[tuple[str, str], ...], set[str]] = defaultdict(set)
    for sample in reference:
        decisions[sample.messages].add(sample.decision)
    seen = [s for s in samples if s.messages in decisions]
    other = sum(1 for s in seen if decisions[s.messages] != {s.decision})
    return Overlap(len(samples), len(seen), other)


class ChatTokenizer(Protocol):
    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any: ...

    def __call__(self, text: str, **kwargs: Any) -> Any: ...


def load_tokenizer(name: str) -> ChatTokenizer:
    """The tokenizer of a bundled model (``smollm2``: read from its GGUF, about 10 s) or of a model folder."""
    from homiebot.planner.models import bundled_model

    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise TrainingDataError("counting tokens needs transformers: pip install -e '.[train]'") from None
    bundled = bundled_model(name)
    if bundled is not None:
        path = bundled.path()
        return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name, local_files_only=True)
    folder = Path(name).expanduser()
    if not (folder / "tokenizer_config.json").is_file() and not (folder / "tokenizer.json").is_file():
        raise TrainingDataError(f"--tokenizer {name}: neither a bundled model's name nor a folder with a tokenizer")
    return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)


@dataclass(frozen=True)
class TokenStats:
    tokenizer: str
    samples: int
    median: float
    p95: float
    max: int
    mean: float


def percentile(values: Sequence[int], q: float) -> float:
    """The ``q`` percentile (0-100) with linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def token_lengths(samples: Iterable[Sample], tokenizer: ChatTokenizer, name: str) -> TokenStats:
    """Tokens of each sample's prompt as the chat template renders it (module docstring); each distinct prompt
    is tokenised once."""
    cache: dict[tuple[tuple[str, str], ...], int] = {}
    counts: list[int] = []
    for sample in samples:
        if sample.messages not in cache:
            text = tokenizer.apply_chat_template(
                [{"role": r, "content": t} for r, t in sample.messages], tokenize=False, add_generation_prompt=True
            )
            cache[sample.messages] = len(tokenizer(text, add_special_tokens=False)["input_ids"])
        counts.append(cache[sample.messages])
    return TokenStats(
        tokenizer=name,
        samples=len(counts),
        median=percentile(counts, 50),
        p95=percentile(counts, 95),
        max=max(counts, default=0),
        mean=round(sum(counts) / len(counts), 1) if counts else math.nan,
    )


def samples_from_rows(rows: Iterable[Mapping[str, Any]]) -> tuple[list[Sample], dict[str, str]]:
    """SFT rows as the data set stores them (``prompt``: chat messages, ``completion``: one assistant message,
    ``after_error``: the failed previous round's code or None) as samples, and the re-plan codes by sample id."""
    out = []
    replans: dict[str, str] = {}
    for row in rows:
        messages = tuple((str(m["role"]), str(m["content"])) for m in row["prompt"])
        answer = "".join(str(m["content"]) for m in row["completion"])
        out.append(Sample(str(row["id"]), messages, answer))
        if row.get("after_error"):
            replans[str(row["id"])] = str(row["after_error"])
    return out, replans


def samples_from_episode_rows(rows: Iterable[Mapping[str, Any]]) -> list[Sample]:
    """Episode rows (``messages``, ``answer_loss``: one flag per assistant turn) as one sample per learned answer:
    its prompt is the chat before it (module docstring), its id the episode's with ``_a<turn>`` (the assistant
    turn's index from 0, i.e. the round less one)."""
    out = []
    for row in rows:
        messages = [(str(m["role"]), str(m["content"])) for m in row["messages"]]
        flags = [bool(f) for f in row["answer_loss"]]
        turn = 0
        for index, (role, text) in enumerate(messages):
            if role != "assistant":
                continue
            if turn < len(flags) and flags[turn]:
                out.append(Sample(f"{row['id']}_a{turn}", tuple(messages[:index]), text))
            turn += 1
    return out


def read_sft_dataset(folder: Path) -> tuple[list[Sample], dict[str, str]]:
    """The samples of a built SFT data set (its ``data/train.parquet``) and the re-plan codes by sample id."""
    from homiebot.training.build import DATA_FILE

    data = folder / DATA_FILE
    if not data.is_file():
        raise TrainingDataError(f"{folder}: no {DATA_FILE} (build it with homie data build sft)")
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise TrainingDataError("reading the data set needs pyarrow: pip install -e '.[train]'") from None
    rows = pq.read_table(str(data)).to_pylist()
    if rows and "messages" in rows[0] and "answer_loss" in rows[0]:
        # Episode rows keep no per-round error codes: the re-plan mix is the build's (stats.json).
        return samples_from_episode_rows(rows), {}
    if rows and "completion" not in rows[0]:
        raise TrainingDataError(f"{data}: not an SFT data set (no completion column)")
    return samples_from_rows(rows)
