"""The episode chat form of a text game played by a model (the MuEP-style suite's ``--planner hf``,
:mod:`homiebot.eval.muep_chat`, and its training rows, :mod:`homiebot.training.muep_data`): one definition here,
below both, so that the chat a model plans in is, turn for turn, the chat it is trained on.

The form (our own, in the spirit of the growing chat the text planner holds on EMMOE-100, docs/training.md
"Episode samples"): no system turn; the first user turn is ALFWorld's intro as the text world writes it (banner,
room sentence, ``Your task is to: ...``); every assistant turn is one command of the game's grammar, as MuEP's text
agents answer (MuEP section 4.2: the next action after ``[action]``); every later user turn is the observation that
command returned.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

#: Commands left out of the constrained choice: ``help`` lists the grammar and changes nothing.
NOT_CHOSEN = frozenset({"help"})


def first_turn(intro: str) -> str:
    """The first user turn: ALFWorld's intro as the text world writes it, surrounding blank space removed."""
    return intro.strip()


def episode_messages(intro: str, transcript: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """An episode's chat as role/content messages: the intro, then every command (assistant) and the observation it
    returned (user); the observation after the last command is left out (nothing answers it)."""
    messages = [{"role": "user", "content": first_turn(intro)}]
    for index, (command, observation) in enumerate(transcript):
        messages.append({"role": "assistant", "content": command})
        if index < len(transcript) - 1:
            messages.append({"role": "user", "content": observation.strip()})
    return messages


def _literal(text: str) -> str:
    return json.dumps(text, ensure_ascii=True)  # a double-quoted string with \" and \\ escaped, as GBNF reads


def command_grammar(admissible: Sequence[str]) -> str:
    """The EBNF of an answer that is one of ``admissible`` (less :data:`NOT_CHOSEN`), in their order."""
    commands = [c for c in dict.fromkeys(admissible) if c and c not in NOT_CHOSEN]
    if not commands:
        raise ValueError("no admissible command to choose from")
    return "root ::= " + " | ".join(_literal(c) for c in commands)


def first_line(answer: str) -> str:
    """The command an unconstrained answer plays: its first non-empty line, quotes and a final period removed."""
    lines = [line.strip() for line in answer.strip().splitlines() if line.strip()]
    return (lines[0] if lines else "").strip(" .'\"`").lower()
