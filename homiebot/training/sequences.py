"""Chat samples as token sequences with the answers marked: what the SFT trainer and the offline check read.

Two data forms (``homie data build sft``; docs/training.md):

* **one round per sample** (``prompt``, ``completion``): a prompt chat and one answer, the text planner with
  ``include_history=False`` (a fresh chat per round);
* **one episode per sample** (``messages``, ``answer_loss``, ``--episodes``): the text planner's growing chat
  (its default), an answer after every user turn, and a flag per answer saying whether it is learned.

Both become one token sequence, rendered once by the model's chat template and tokenised once (as the runtime
renders and tokenises a prompt), with the token span of every learned answer: its text and the end-of-turn
token the model must produce to stop (not the newline the template writes after it, which the model never
generates). The spans are found from character offsets: the answer's text must appear verbatim where the
template's prefix with the generation prompt ends, else the template rewrites answers and training on it
would not match what the runtime sends, which is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Message = Mapping[str, str]


class ChatTemplateError(ValueError):
    """The chat template does not render an answer verbatim after its generation prompt."""


@dataclass(frozen=True)
class TokenizedChat:
    """One sample as tokens: ``answers`` are the [start, end) token spans of the learned answers, in order."""

    input_ids: list[int]
    answers: list[tuple[int, int]]

    @property
    def answer_tokens(self) -> int:
        return sum(end - start for start, end in self.answers)

    def completion_mask(self) -> list[int]:
        mask = [0] * len(self.input_ids)
        for start, end in self.answers:
            mask[start:end] = [1] * (end - start)
        return mask


def sample_messages(row: Mapping[str, Any]) -> tuple[list[dict[str, str]], list[bool]]:
    """A data set row as (chat, one learned-or-not flag per assistant turn), for either data form."""
    if "messages" in row:
        messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in row["messages"]]
        flags = [bool(f) for f in row["answer_loss"]]
    else:
        prompt = [{"role": str(m["role"]), "content": str(m["content"])} for m in row["prompt"]]
        completion = [{"role": str(m["role"]), "content": str(m["content"])} for m in row["completion"]]
        messages = prompt + completion
        # Earlier assistant turns in a prompt (a recorded growing chat) are context; the completion is learned.
        flags = [False] * sum(1 for m in prompt if m["role"] == "assistant") + [True] * len(completion)
    if sum(1 for m in messages if m["role"] == "assistant") != len(flags):
        raise ValueError(f"row {row.get('id', '?')}: {len(flags)} answer flags for a different number of answers")
    return messages, flags


def tokenize_chat(tokenizer: Any, messages: Sequence[Message], learned: Sequence[bool]) -> TokenizedChat:
    """The chat rendered by ``tokenizer``'s chat template and tokenised once, with the learned answers' spans."""
    chat = [dict(m) for m in messages]
    text = tokenizer.apply_chat_template(chat, tokenize=False)
    eos = tokenizer.eos_token or ""
    char_spans: list[tuple[int, int]] = []
    answer_index = 0
    for index, message in enumerate(chat):
        if message["role"] != "assistant":
            continue
        if learned[answer_index]:
            prefix = tokenizer.apply_chat_template(chat[:index], tokenize=False, add_generation_prompt=True)
            start, content = len(prefix), message["content"]
            if not text.startswith(prefix) or not text.startswith(content, start):
                raise ChatTemplateError(
                    "the chat template does not render an answer verbatim after its generation prompt; "
                    "training on it would not match the runtime's prompt"
                )
            end = start + len(content)
            if eos and text.startswith(eos, end):
                end += len(eos)  # the model learns to stop
            char_spans.append((start, end))
        answer_index += 1
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = list(encoded["input_ids"]), encoded["offset_mapping"]
    spans: list[tuple[int, int]] = []
    for char_start, char_end in char_spans:
        inside = [t for t, (a, b) in enumerate(offsets) if b > a and char_start <= a < char_end]
        if inside:
            spans.append((inside[0], inside[-1] + 1))
    return TokenizedChat(ids, spans)


def tokenize_rows(rows: Any, tokenizer: Any) -> list[TokenizedChat]:
    """Every row of a data set (either form) as a :class:`TokenizedChat`."""
    out = []
    for row in rows:
        messages, flags = sample_messages(row)
        out.append(tokenize_chat(tokenizer, messages, flags))
    return out


def is_episode_data(column_names: Sequence[str]) -> bool:
    return "messages" in column_names and "answer_loss" in column_names
