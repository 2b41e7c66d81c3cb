"""EMMOE's conversation bookkeeping ("EMMOE", appendix D ``Conversations`` and ``update_inventory``).

Two pure pieces that both sides of the loop share:

* :class:`Conversation`: every round's ``(instruction, answer)`` pair, the window of the last
  ``window`` rounds that a planner sees (appendix D keeps 3), and the paper's ``conversation.json`` form
  (``"USER:\\n{instruction}ASSISTANT:\\n{output}\\n"`` per round).
* :func:`model_chat`: the ``conversation.json`` of an episode whose planner asked a model (the rounds' recorded
  :class:`~homiebot.types.ModelCall` s): the turns the model was given and its answers, in the paper's entry form.
* :func:`update_inventory` (defined in :mod:`homiebot.types`, where the executor takes it from): the HLP's
  inventory rules. The executor uses the same function to report the inventory after a subtask, so both
  ends agree by construction.

Decisions where the paper's code is loose (tested in ``tests/planner/test_conversation.py``):

* The paper decides with substrings of the lower-cased subtask text (``"pick" in subtask``), which
  misfires on targets such as ``pickle_jar`` or ``output_tray``. Here the decision is made on the *parsed*
  action (:meth:`homiebot.types.Action.parse`), so only a real Pick/Put changes the inventory.
* Success is the feedback code ``OK`` (the paper tests ``"None" in feedback``, the success message).
* A successful Pick appends the target as the planner wrote it, lower-cased like the paper
  (``subtask.lower()`` before splitting): ``[Pick, Green_Can]`` adds ``green_can``.
* A successful Put, or a failed Put whose object left the hand (E2, "the object is missing"), pops the
  last item; popping an empty inventory is a no-op (the paper would raise).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from homiebot.planner.base import ChatTurn
from homiebot.types import ModelCall, update_inventory

__all__ = ["Conversation", "model_chat", "update_inventory"]


@dataclass
class Conversation:
    """All rounds of one episode, and the sliding window the planner is shown (appendix D ``Conversations``)."""

    window: int = 3
    turns: list[ChatTurn] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.window < 0:
            raise ValueError(f"history window must be >= 0, got {self.window}")

    def append(self, instruction: str, answer: str) -> None:
        self.turns.append(ChatTurn(instruction=instruction, answer=answer))

    def recent(self) -> tuple[ChatTurn, ...]:
        """The last ``window`` rounds, oldest first (``history[-3:]`` in the paper)."""
        if self.window == 0:
            return ()
        return tuple(self.turns[-self.window :])

    def reset(self) -> None:
        self.turns.clear()

    def __len__(self) -> int:
        return len(self.turns)

    @staticmethod
    def paper_entry(turn: ChatTurn) -> str:
        """One item of the paper's ``conversation.json``: ``USER:\\n{instruction}ASSISTANT:\\n{output}\\n``."""
        return f"USER:\n{turn.instruction}ASSISTANT:\n{turn.answer}\n"

    def to_paper_json(self) -> list[str]:
        """What appendix D's ``Conversations.save`` writes: the list of every round's entry."""
        return [self.paper_entry(t) for t in self.turns]

    def history_prompt(self) -> str:
        """Appendix D ``get_history_prompt``: the window's entries concatenated (for text-only backends)."""
        return "".join(self.paper_entry(t) for t in self.recent())


def model_chat(calls: Iterable[ModelCall]) -> list[str]:
    """The chat a model was given over an episode, in the paper's ``conversation.json`` entry form.

    Decision (the paper's entries hold the appendix-D instruction only; a model planner's own prompt differs from
    it: a text model's system turn, world description and shortened later turns, a ReAct chat): the first call's
    system turn is one entry ``SYSTEM:\\n{text}\\n`` (again whenever a later call's system turn differs), then each
    call adds ``USER:\\n{user turns}ASSISTANT:\\n{answer}\\n`` with the user turns it sent after the last assistant
    turn, i.e. what is new in it (several joined by a newline). The first call's earlier user/assistant pairs (the
    in-context example) come before it as entries of their own. Earlier rounds repeated in a windowed chat are
    the earlier entries already; every call's full message list is in ``rounds.jsonl`` (``model_calls``)."""
    entries: list[str] = []
    system: str | None = None
    first = True
    for call in calls:
        messages = list(call.messages)
        if messages and messages[0].role == "system":
            if messages[0].text != system:
                system = messages[0].text
                entries.append(f"SYSTEM:\n{system}\n")
            messages = messages[1:]
        if not first:
            last_answer = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
            messages = messages[last_answer + 1 :]
        first = False
        users: list[str] = []
        for message in messages:
            if message.role == "assistant":
                entries.append(_entry(users, message.text))
                users = []
            elif message.role == "user":
                users.append(message.text)
        entries.append(_entry(users, call.answer))
    return entries


def _entry(users: list[str], answer: str) -> str:
    return Conversation.paper_entry(ChatTurn("\n".join(users), answer))
