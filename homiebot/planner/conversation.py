"""EMMOE's conversation bookkeeping ("EMMOE", appendix D ``Conversations`` and ``update_inventory``).

Two pure pieces that both sides of the loop share:

* :class:`Conversation`: every round's ``(instruction, answer)`` pair, the window of the last
  ``window`` rounds that a planner sees (appendix D keeps 3), and the paper's ``conversation.json`` form
  (``"USER:\\n{instruction}ASSISTANT:\\n{output}\\n"`` per round).
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

from dataclasses import dataclass, field

from homiebot.planner.base import ChatTurn
from homiebot.types import update_inventory

__all__ = ["Conversation", "update_inventory"]


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
