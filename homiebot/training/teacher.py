"""EMMA's retrospective LLM expert as the DAgger teacher (EMMA paper, section 2.3, Algorithm 1 and appendix 6).

The teacher reads the parallel text world (:mod:`homiebot.textworld`: ALFWorld's observations rendered from
the same simulator) instead of the images, and has two parts:

* the **actor** answers, for a state the student visited, what it would do there: any planner backend
  (``hf`` with SmolLM2 or a trained folder, ``openai`` against a server, a scripted planner in tests) given
  the round's appendix-D request with its instruction extended by the teacher's memory and the text world's
  log of the episode so far (the student's executed subtasks and what the text world answered);
* the **critic** writes, after an episode the student failed, a short plan for the next attempt from the
  episode's text log marked ``STATUS: FAIL`` and the plans of earlier attempts (any chat engine with the
  ``generate`` interface of :class:`homiebot.planner.text_lm.TextLanguageModel`). Its plans go into a FIFO
  memory per task of the last three (EMMA, Table 2: memory size 3), which the actor reads.

Decisions (docs/training.md):

* **Relabel after the critic** (Algorithm 1, lines 7-10; the paper's order): the student's episode is rolled
  out first, its failure (if any) is reflected on, then every visited state is labelled with the memory that
  now includes this trial's plan. The actor needs only text, so the states are kept as their requests and
  text logs (the oracle teacher, which reads the simulator's state, labels online instead).
* **The actor's answer is an EMMOE answer** (``Analysis / Subtask / Model``), so a pair compares like with
  like; an answer that does not parse gives no pair (EMMA's code fell back to the student's own action, a
  no-op pair).
* **Prompts are this project's own words**, following the structure appendix 6 describes (memory, then the
  target episode; for the critic: the failed trial, earlier plans, then "New plan:").
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.messages import ChatMessage
from homiebot.planner.prompt import parse_output

log = logging.getLogger(__name__)

#: EMMA, Table 2: the critic's memory keeps the last three reflections.
MEMORY_SIZE = 3

CRITIC_SYSTEM = (
    "You review a household robot's failed attempt at a task, given as a text log of its actions and what it "
    "observed. Do not retell the log. Name the step that went wrong and write a short new plan, as a list of "
    "the concrete actions on the named objects and places that the next attempt should take. Start it with "
    "'Plan:'."
)


class ChatEngine(Protocol):
    """What the critic needs of a model: the hf planner's engines have it (text_lm, CausalTextModel)."""

    def generate(
        self, conversations: Sequence[Sequence[ChatMessage]], *, max_new_tokens: int = ...
    ) -> Sequence[Any]: ...


@dataclass(frozen=True)
class VisitedState:
    """A state the student visited: the request it planned from and the text world's log up to that state."""

    request: PlanRequest
    text_log: str


@dataclass
class TextEpisodeLog:
    """One episode in the parallel text world: its intro, then each executed subtask with its observation."""

    intro: str = ""
    steps: list[tuple[str, str]] = field(default_factory=list)

    def text(self) -> str:
        lines = [self.intro.strip()]
        for action, observation in self.steps:
            lines.append(f"> {action}")
            lines.append(observation)
        return "\n".join(line for line in lines if line)


def actor_instruction(request: PlanRequest, memory: Sequence[str], text_log: str) -> str:
    """The actor's instruction: its memory of earlier attempts, the text world's log so far, then the round's
    appendix-D instruction (the answer format is the planner's own)."""
    parts = []
    if memory:
        trials = "\n".join(f"Trial {i}: {m}" for i, m in enumerate(memory))
        parts.append(f"Your memory of earlier attempts at the task below:\n{trials}")
    if text_log:
        parts.append(f"What happened so far, as text:\n{text_log}")
    parts.append(request.instruction)
    return "\n\n".join(parts)


def critic_conversation(text_log: str, memory: Sequence[str]) -> list[ChatMessage]:
    user = f"Failed attempt:\n{text_log}\nSTATUS: FAIL\n"
    if memory:
        user += "\nPlans from earlier attempts:\n" + "\n".join(f"Trial {i}: {m}" for i, m in enumerate(memory)) + "\n"
    user += "\nNew plan:"
    return [ChatMessage("system", CRITIC_SYSTEM), ChatMessage("user", user)]


def _one_paragraph(text: str) -> str:
    """The critic's answer up to its first blank line, on one line (a memory entry)."""
    head = text.strip().split("\n\n", 1)[0]
    return " ".join(head.split())


class LLMTeacher:
    """The actor, the critic and the memory per task (module docstring)."""

    def __init__(
        self,
        actor: Planner,
        critic: ChatEngine | None = None,
        memory_size: int = MEMORY_SIZE,
        critic_max_new_tokens: int = 96,
    ) -> None:
        if memory_size < 0:
            raise ValueError(f"memory_size must be >= 0, got {memory_size}")
        self.actor = actor
        self.critic = critic
        self.memory_size = memory_size
        self.critic_max_new_tokens = critic_max_new_tokens
        self.memory: dict[str, deque[str]] = {}

    def memory_of(self, task: str) -> list[str]:
        return list(self.memory.get(task, ()))

    def reflect(self, task: str, text_log: str) -> str | None:
        """After a failed episode: the critic's plan, kept in the task's memory (the oldest dropped past
        ``memory_size``). None without a critic or with an empty answer."""
        if self.critic is None or self.memory_size == 0:
            return None
        conversation = critic_conversation(text_log, self.memory_of(task))
        answer = self.critic.generate([conversation], max_new_tokens=self.critic_max_new_tokens)[0]
        plan = _one_paragraph(str(getattr(answer, "text", answer)))
        if not plan:
            log.info("the critic gave no plan for %s", task)
            return None
        self.memory.setdefault(task, deque(maxlen=self.memory_size)).append(plan)
        return plan

    def label(self, task: str, state: VisitedState, seed: int = 0) -> str | None:
        """The actor's answer for one visited state, or None when it does not parse (no pair)."""
        request = replace(
            state.request, instruction=actor_instruction(state.request, self.memory_of(task), state.text_log)
        )
        self.actor.reset(task, seed)  # every state is its own question: no chat carried between them
        answer = str(self.actor.plan(request))
        if parse_output(answer).subtask is None:
            log.info("the teacher's answer did not parse; no pair: %r", answer[:120])
            return None
        return answer

    def close(self) -> None:
        self.actor.close()
