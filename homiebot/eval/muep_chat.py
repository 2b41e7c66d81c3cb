"""The text planner (``--planner hf``) on the MuEP-style suite, in the episode chat form it is trained on.

The chat (our own form, in the spirit of the growing chat the text planner holds on EMMOE-100,
docs/training.md "Episode samples"): no system turn; the first user turn is ALFWorld's intro as the text world
writes it (banner, room sentence, ``Your task is to: ...``); every assistant turn is one command of the game's
grammar, as MuEP's text agents answer (MuEP section 4.2: the next action after ``[action]``); every later user
turn is the observation that command returned. The expert's episodes make the training chats in exactly this
form (:func:`episode_messages`, :mod:`homiebot.training.muep_data`), so a model trained on them reads at planning
time, turn for turn, what it was trained on.

``constrained`` (``--constrained``; the shipped model's name sets it): the answer is forced to one of the commands the game admits now (ALFWorld's
``admissible_commands``, without ``help``), a grammar of alternatives in the EBNF the planner's engines take
(:mod:`homiebot.planner.constrained`): language compliance (MuEP's LC) is then 100 by construction, and what is
measured is the choice. Without it the first line of the answer is played as it is, as the bundled ``smollm2``
agent plays (:mod:`homiebot.eval.muep_lm`).

The model is loaded as ``homie run --planner hf`` loads it (:class:`homiebot.planner.hf_backend.HFPlanner`'s
options: ``--model`` a shipped or bundled model's name or a trained folder, ``--adapter``, ``-p runtime=...``,
``-p torch_threads=...``); only its engine is used here (EMMOE's prompt and answer format are not).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from homiebot.eval.muep_suite import AlfredTask, MuepObservation, Observe
from homiebot.planner.messages import ChatMessage
from homiebot.textworld.chat import command_grammar, first_line, first_turn
from homiebot.textworld.world import TextWorld

#: Tokens of an answer: the longest command of the suite ("move alarmclock 1 to sidetable 2") is about 12.
MAX_NEW_TOKENS = 24
#: The agent's own options (``-p key=value`` beside the model's); every other option is the model's (HFPlanner's).
AGENT_OPTIONS = ("max_new_tokens",)

class ChatTextAgent:
    """A text model's engine (``generate(conversations, grammars=..., max_new_tokens=...)``) playing the MuEP suite
    in the episode chat form (module docstring); one engine serves every episode of a run."""

    name = "hf"

    def __init__(self, engine: Any, constrained: bool = True, max_new_tokens: int = MAX_NEW_TOKENS) -> None:
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        self.engine = engine
        self.constrained = constrained
        self.max_new_tokens = max_new_tokens
        self.messages: list[ChatMessage] = []
        self._answered = False

    @staticmethod
    def preflight(options: Mapping[str, Any]) -> None:
        """Refuse options that cannot load a model (ValueError, one line), without loading it: before a run writes
        anything."""
        from homiebot.planner.hf_backend import HFPlanner

        model_options = {k: v for k, v in options.items() if k not in AGENT_OPTIONS}
        if "model" not in model_options:
            raise ValueError("--planner hf needs --model: a shipped or bundled model's name, or a trained folder")
        HFPlanner.preflight(model_options)

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> ChatTextAgent:
        """Load the model as ``homie run --planner hf`` does, from its options (``model``, ``adapter``,
        ``constrained``, ``runtime``, ``torch_threads``, ...; ValueError with one line for a wrong one) and this
        agent's own (:data:`AGENT_OPTIONS`)."""
        from homiebot.planner.hf_backend import HFPlanner

        own = {k: v for k, v in options.items() if k in AGENT_OPTIONS}
        model_options = {k: v for k, v in options.items() if k not in AGENT_OPTIONS}
        cls.preflight(options)
        planner = HFPlanner(**model_options)
        if not planner.engine.text_only:
            planner.close()
            raise ValueError(f"{model_options['model']!r} is an image-text model; the MuEP suite's hf agent plays text")
        return cls(planner.engine, constrained=planner.constrained, max_new_tokens=int(own.get("max_new_tokens",
                                                                                          MAX_NEW_TOKENS)))

    def reset(self, task: AlfredTask, world: TextWorld | None, observation: MuepObservation) -> None:
        if observation.mode is not Observe.TEXT or observation.text is None:
            raise ValueError("the hf agent reads the text observation only (--observe text)")
        self.messages = [ChatMessage("user", first_turn(observation.text))]
        self._answered = False

    def act(self, observation: MuepObservation, admissible: list[str]) -> str | None:
        if self._answered:
            self.messages.append(ChatMessage("user", (observation.text or "").strip()))
        grammar = command_grammar(admissible) if self.constrained else None
        generation = self.engine.generate(
            [list(self.messages)], grammars=[grammar] if grammar is not None else None,
            max_new_tokens=self.max_new_tokens,
        )[0]
        command = generation.text.strip() if self.constrained else first_line(generation.text)
        self.messages.append(ChatMessage("assistant", command))
        self._answered = True
        return command

    def close(self) -> None:
        self.engine.close()
