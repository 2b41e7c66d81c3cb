"""The rewriting augmentation of EMMOE appendix F.1: each task text and each analysis said three more ways.

EMMOE asked GPT-4o three times per text "with the same meaning but in a different description while do not
change object's name" (appendix F.1), so that every trajectory exists in four versions (930 x 4 = 3,720 SFT
samples, section 4.1). Two rewriters here, one interface (:class:`Rewriter`):

* :class:`TemplateRewriter` (offline, the default): deterministic phrase substitutions chosen by the variant
  number ``k``. It only touches common English words, never a token with an underscore or a digit (the
  scene's names are ``kitchen_counter``, ``apple_2``) nor any name it is told to keep.
* :class:`ServerRewriter`: any OpenAI-compatible chat server (``homie serve``, vLLM, OpenAI) with the
  appendix's system instruction; every answer is cached in a JSON file keyed by the model, the kind, ``k``
  and the text, so a rebuild is offline and gives the same data.

Both pass through :func:`guarded`: a rewrite that loses a protected name, is empty, or is more than three
times longer than the original is refused and the original text kept (the appendix's "do not change
object's name", enforced rather than asked).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, cast

from homiebot.files import atomic_write_text

log = logging.getLogger(__name__)

Kind = Literal["task", "analysis"]

#: Appendix F.1's instruction to the rewriting model (EMMOE's method, cited; the user turn is the text).
REWRITE_INSTRUCTION = "Rewrite the following text with the same meaning but in a different description while do not change object's name: "

_NAME_TOKEN = re.compile(r"[A-Za-z0-9]*(?:_[A-Za-z0-9]+)+|[A-Za-z]+\d+")


class Rewriter(Protocol):
    name: str

    def rewrite(self, text: str, kind: Kind, k: int) -> str: ...


def protected_names(text: str, names: Iterable[str] = ()) -> set[str]:
    """The names a rewrite must keep: every snake_case or numbered token of ``text`` and the given names it
    contains."""
    found = set(_NAME_TOKEN.findall(text))
    found |= {n for n in names if n and re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", text)}
    return found


def guarded(original: str, rewritten: str | None, names: Iterable[str] = ()) -> tuple[str, bool]:
    """(the text to use, whether the rewrite was accepted)."""
    if rewritten is None:
        return original, False
    candidate = " ".join(rewritten.split())
    if not candidate or len(candidate) > 3 * max(len(original), 1):
        return original, False
    for name in protected_names(original, names):
        if not re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", candidate):
            return original, False
    return candidate, True


def _sub_words(text: str, table: Iterable[tuple[str, str]]) -> str:
    """Replace whole-word phrases (case-insensitive at the first letter), never inside a name token."""
    for old, new in table:
        pattern = re.compile(rf"(?<![\w]){re.escape(old)}(?![\w])", re.IGNORECASE)

        def keep_case(match: re.Match[str], new: str = new) -> str:
            return new[0].upper() + new[1:] if match.group(0)[0].isupper() else new

        text = pattern.sub(keep_case, text)
    return text


# One table per variant: the phrases EMMOE's tasks and the expert's analyses use, said another way.
_TASK_TABLES: tuple[tuple[tuple[str, str], ...], ...] = (
    (("put", "place"), ("fetch", "get"), ("find", "locate"), ("bring", "carry"), ("clean up", "tidy up")),
    (("put", "move"), ("fetch", "bring"), ("find", "look for"), ("take", "grab"), ("clean up", "clear")),
    (("put", "set"), ("fetch", "go and get"), ("find", "search for"), ("bring", "deliver"), ("check", "see")),
)
_TASK_FRAMES = ("Please {t}.", "Could you {t}?", "I need you to {t}.")
_ANALYSIS_TABLES: tuple[tuple[tuple[str, str], ...], ...] = (
    (
        ("so I should", "therefore my next step is to"),
        ("According to my final task", "Given my final task"),
        ("I successfully arrived", "I have reached"),
        ("I successfully", "I have just"),
    ),
    (
        ("so I should", "so the next thing to do is"),
        ("According to my final task", "Looking at the final task"),
        ("I successfully arrived", "I made it to"),
        ("I successfully", "I managed to"),
    ),
    (
        ("so I should", "which means I need to"),
        ("According to my final task", "Based on my task"),
        ("I successfully arrived", "I got to"),
        ("I successfully", "I have"),
    ),
)


@dataclass
class TemplateRewriter:
    """Offline, deterministic rewriter (variant ``k`` in 1..3 picks the phrase table and, for tasks, the
    sentence frame)."""

    name: str = "template"

    def rewrite(self, text: str, kind: Kind, k: int) -> str:
        if k < 1:
            return text
        index = (k - 1) % 3
        if kind == "task":
            body = _sub_words(text.strip().rstrip(".?!"), _TASK_TABLES[index])
            body = (
                body[0].lower() + body[1:]
                if body[:1].isupper() and not _NAME_TOKEN.fullmatch(body.split()[0])
                else body
            )
            return _TASK_FRAMES[index].format(t=body)
        return _sub_words(text, _ANALYSIS_TABLES[index])


class ChatClient(Protocol):
    """What :class:`ServerRewriter` needs of an OpenAI client (``client.chat.completions.create``)."""

    chat: Any


@dataclass
class ServerRewriter:
    """Rewrites through an OpenAI-compatible chat server, with a JSON cache (see the module docstring).

    ``client``: an ``openai.OpenAI`` (made from ``base_url`` / ``api_key`` when None). Without a server
    (``offline=True``) only cached answers are used and anything else keeps its original text.
    """

    model: str
    cache_path: Path
    base_url: str | None = None
    api_key: str | None = None
    client: ChatClient | None = None
    offline: bool = False
    name: str = "server"
    hits: int = 0
    calls: int = 0
    _cache: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.cache_path = Path(self.cache_path)
        if self.cache_path.is_file():
            try:
                self._cache = dict(json.loads(self.cache_path.read_text(encoding="utf-8")))
            except (json.JSONDecodeError, OSError, TypeError, ValueError) as err:
                raise ValueError(f"{self.cache_path}: not a rewrite cache: {err}") from None

    def key(self, text: str, kind: Kind, k: int) -> str:
        return hashlib.sha256(json.dumps([self.model, kind, k, text]).encode("utf-8")).hexdigest()

    def rewrite(self, text: str, kind: Kind, k: int) -> str:
        if k < 1:
            return text
        key = self.key(text, kind, k)
        if key in self._cache:
            self.hits += 1
            return self._cache[key]
        if self.offline:
            return text
        if self.client is None:
            from openai import OpenAI

            self.client = cast(
                ChatClient,
                OpenAI(base_url=self.base_url, api_key=self.api_key or os.environ.get("OPENAI_API_KEY", "none")),
            )
        self.calls += 1
        assert self.client is not None
        completion = self.client.chat.completions.create(
            model=self.model,
            messages=[{"role": "system", "content": REWRITE_INSTRUCTION}, {"role": "user", "content": text}],
            # Three different rewrites of one text: sample, seeded by the variant so a rebuild asks the same.
            temperature=1.0,
            seed=k,
        )
        answer = str(completion.choices[0].message.content or "")
        self._cache[key] = answer
        return answer

    def save(self) -> None:
        """Write the cache atomically (a temp file renamed over it)."""
        atomic_write_text(self.cache_path, json.dumps(self._cache, indent=0, ensure_ascii=False, sort_keys=True))
