"""The language model the recovery stages ask: one small interface, served by the planners' own backends.

Recovery makes several short zero-shot calls per failure (CMFR, Farag et al. 2025, section 4.5: "zero-shot
chain prompting"). They go through :class:`RecoveryLLM`, which three implementations serve:

* :class:`EngineLLM`: the engine of a local planner (``HFPlanner.engine``: the CPU text model of
  :mod:`homiebot.planner.text_lm`, e.g. SmolLM2, or a transformers vision-language model), so the base
  planner and its recovery share one loaded model in one process;
* :class:`OpenAILLM`: any OpenAI-compatible chat-completions server (vLLM, the project's own server);
  a grammar is sent the way :class:`~homiebot.planner.openai_backend.OpenAIPlanner` sends it;
* :class:`ScriptedLLM`: replays fixed answers (tests, the overhead benchmark). It is not a model.

A call may carry a grammar (the EBNF dialect xgrammar, vLLM and llama.cpp share, see
:mod:`homiebot.planner.constrained`): backends that constrain decoding use it, so that a small model's stage
answer is well-formed; the answer is still parsed leniently (:mod:`homiebot.recovery.parsing`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from homiebot.planner.messages import ChatMessage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LLMReply:
    """One answer and what it cost in tokens (0 when the backend does not say)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: Prompt tokens the backend took from its key/value cache instead of evaluating them (0: none or unknown).
    reused_tokens: int = 0
    #: Answered from the wrapper's memory of this episode's earlier identical question (no model call).
    remembered: bool = False


@runtime_checkable
class RecoveryLLM(Protocol):
    """What the recovery stages need from a model: one chat completion at a time.

    An implementation may declare ``deterministic = True`` when the same messages, grammar and token limit
    always get the same answer (greedy decoding); the wrapper then answers a repeated question from memory
    (:class:`AnswerMemory`) instead of asking again."""

    def complete(self, messages: Sequence[ChatMessage], *, grammar: str | None, max_tokens: int) -> LLMReply:
        """Answer the conversation; ``grammar`` (may be ignored by backends that cannot constrain)."""
        ...


class EngineLLM:
    """A planner engine with ``generate(conversations, grammars=..., max_new_tokens=...)`` (the interface of
    :class:`~homiebot.planner.text_lm.TextLanguageModel` and :class:`~homiebot.planner.hf_backend.VisionLanguageModel`)."""

    #: ``generate`` decodes greedily unless asked to sample, and these calls never ask.
    deterministic = True

    def __init__(self, engine: Any, *, constrained: bool = True, owned: bool = False) -> None:
        if not callable(getattr(engine, "generate", None)):
            raise TypeError(f"{type(engine).__name__} has no generate(): not a planner engine")
        self.engine = engine
        self.constrained = constrained
        self.owned = owned  # loaded for recovery alone: close() releases it (never the base planner's engine)

    def close(self) -> None:
        if self.owned:
            self.engine.close()

    def complete(self, messages: Sequence[ChatMessage], *, grammar: str | None, max_tokens: int) -> LLMReply:
        grammars = [grammar] if grammar is not None and self.constrained else None
        generation = self.engine.generate([list(messages)], grammars=grammars, max_new_tokens=max_tokens)[0]
        # The CPU text engine says how much of the prompt came from its key/value cache (CallStats).
        stats = getattr(self.engine, "last_stats", None)
        reused = int(getattr(stats, "reused_tokens", 0) or 0)
        return LLMReply(generation.text, int(generation.prompt_tokens), int(generation.completion_tokens), reused)


class OpenAILLM:
    """An OpenAI-compatible chat-completions server (the key is read from ``api_key_env``, never stored in logs)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        grammar_field: str | None = "structured_outputs",
        timeout_s: float = 120.0,
        temperature: float = 0.0,
    ) -> None:
        from homiebot.planner.hf_backend import PlannerLoadError

        try:
            import openai
        except ImportError as exc:
            raise PlannerLoadError("recovery over an OpenAI server needs the openai package: pip install -e '.[models]'") from exc
        self.base_url = base_url
        self.model = model
        self.grammar_field = grammar_field
        self.temperature = temperature
        #: Greedy requests (temperature 0) are answered the same way each time by the server's own decoding.
        self.deterministic = temperature == 0.0
        self._client = openai.OpenAI(base_url=base_url, api_key=os.environ.get(api_key_env) or "not-needed",
                                     timeout=timeout_s)

    def complete(self, messages: Sequence[ChatMessage], *, grammar: str | None, max_tokens: int) -> LLMReply:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.text} for m in messages],
            "max_tokens": max_tokens,
            "temperature": self.temperature,
        }
        if grammar is not None and self.grammar_field:
            body["extra_body"] = (
                {"structured_outputs": {"grammar": grammar}} if self.grammar_field == "structured_outputs"
                else {self.grammar_field: grammar}
            )
        response = self._client.chat.completions.create(**body)
        text = (response.choices[0].message.content or "") if response.choices else ""
        usage = response.usage
        return LLMReply(text, int(usage.prompt_tokens) if usage else 0, int(usage.completion_tokens) if usage else 0)


@dataclass
class ScriptedLLM:
    """Replays ``answers`` in order (then ``default``); or asks ``responder(messages)`` for each answer.

    Not a model: it stands in for one in tests and in the overhead benchmark. It keeps every prompt it was
    given (``prompts``) so tests can check what a stage was told.
    """

    answers: list[str] = field(default_factory=list)
    default: str = ""
    responder: Callable[[Sequence[ChatMessage]], str] | None = None
    prompts: list[str] = field(default_factory=list)
    grammars: list[str | None] = field(default_factory=list)
    keep_prompts: bool = True
    #: Replayed answers follow their order, not the question, so a repeated question is asked again unless a
    #: test declares the script a function of the question.
    deterministic: bool = False

    def complete(self, messages: Sequence[ChatMessage], *, grammar: str | None, max_tokens: int) -> LLMReply:
        user = messages[-1].text if messages else ""
        if self.keep_prompts:
            self.prompts.append(user)
            self.grammars.append(grammar)
        if self.responder is not None:
            text = self.responder(messages)
        elif self.answers:
            text = self.answers.pop(0)
        else:
            text = self.default
        return LLMReply(text, prompt_tokens=len(user.split()), completion_tokens=len(text.split()))


MemoryKey = tuple[tuple[tuple[str, str], ...], str | None, int]


class AnswerMemory:
    """One episode's stage answers by question, for a deterministic model (greedy decoding).

    A small base planner often repeats the same failing subtask round after round; once the steps-so-far window
    (the last ``history_steps`` steps) holds only such repeats, the stages are asked exactly the same question
    again: the same messages, grammar and token limit, so a greedy model's answer is the one it gave before.
    Answering it from memory skips the whole model call (prompt evaluation and decoding) and decides the same.
    Kept per episode (:meth:`clear` on reset), so an episode's answers never depend on which episodes a worker ran
    before it. At most ``max_entries`` questions (the oldest is forgotten first)."""

    def __init__(self, max_entries: int = 512) -> None:
        self.max_entries = max_entries
        self._answers: dict[MemoryKey, LLMReply] = {}

    @staticmethod
    def key(messages: Sequence[ChatMessage], grammar: str | None, max_tokens: int) -> MemoryKey:
        return tuple((m.role, m.text) for m in messages), grammar, max_tokens

    def recall(self, key: MemoryKey) -> LLMReply | None:
        reply = self._answers.get(key)
        return None if reply is None else LLMReply(reply.text, reply.prompt_tokens, reply.completion_tokens,
                                                   reused_tokens=0, remembered=True)

    def keep(self, key: MemoryKey, reply: LLMReply) -> None:
        if len(self._answers) >= self.max_entries:
            self._answers.pop(next(iter(self._answers)))
        self._answers[key] = reply

    def clear(self) -> None:
        self._answers.clear()

    def __len__(self) -> int:
        return len(self._answers)
