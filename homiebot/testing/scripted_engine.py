"""A language model stand-in for tests of what surrounds a model (the hf planner's loop, the record, DAgger's
teacher): it answers from a script and keeps every conversation it was given. No trained weights are needed to test
those parts; the real bundled model is tested in its own tier (marker ``models``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from homiebot.planner.hf_backend import Generation
from homiebot.planner.messages import ChatMessage

#: What the engine answers once its script is used up.
END_ANSWER = "Analysis: nothing is left to do\nSubtask: [End]\nModel: None"


@dataclass
class FakeScriptedEngine:
    """Answers ``answers`` in order (then :data:`END_ANSWER`); ``seen`` holds each conversation, images included.
    ``text_only``: whether the planner sends it text only (the text mode) or images too."""

    answers: list[str]
    text_only: bool = True
    seen: list[list[ChatMessage]] = field(default_factory=list)

    def generate(self, conversations: Sequence[Sequence[ChatMessage]], **options: Any) -> list[Generation]:
        out = []
        for conversation in conversations:
            self.seen.append(list(conversation))
            text = self.answers.pop(0) if self.answers else END_ANSWER
            out.append(Generation(text=text, prompt_tokens=0, completion_tokens=len(text.split()), finish_reason="stop"))
        return out

    def render(self, conversation: Sequence[ChatMessage]) -> tuple[str, list[Any]]:
        return "\n".join(m.text for m in conversation), []

    def compile_grammar(self, grammar: str) -> None:
        return None

    def close(self) -> None:
        return None
