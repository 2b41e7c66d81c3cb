"""The names the expert speaks: perception's names for the simulator instances it decides over.

With a perception world model the expert's request carries ``perceived_names`` (simulator instance -> the
name the world graph knows it by: an image-built graph numbers its own ``apple_1``, ``apple_2`` in the order
it found them; :meth:`homiebot.perception.world_model.WorldModel.perceived_names`). The expert decides over
simulator instances and translates what it says, the Subtask and the Analysis, with :class:`SpokenNames`.
Without perception every name is spoken as it is. docs/loop.md, "The expert planner".
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from homiebot.types import Subtask, WorldState


class SpokenNames:
    """One round's translation from simulator instances to perception's names (None: no perception)."""

    def __init__(self, perceived: Mapping[str, str] | None = None) -> None:
        self.perceived: dict[str, str] | None = dict(perceived) if perceived is not None else None

    @property
    def with_perception(self) -> bool:
        return self.perceived is not None

    def seen(self) -> set[str]:
        """The instances perception has seen (empty without perception)."""
        return set(self.perceived or ())

    def unseen(self, name: str) -> bool:
        """Whether a perception world model is in use and has not seen ``name``."""
        return self.perceived is not None and name not in self.perceived

    def say(self, state: WorldState, name: str) -> str:
        """The name to speak for an instance: perception's name for it, its category while perception has not
        seen it (only in text: an unseen instance is never a target), itself without perception."""
        if self.perceived is None:
            return name
        said = self.perceived.get(name)
        if said is not None:
            return said
        entity = state.entities.get(name)
        return entity.category if entity is not None else name

    def subtask(self, state: WorldState, subtask: Subtask) -> Subtask:
        """The subtask with its target and place spoken."""
        if self.perceived is None:
            return subtask
        return Subtask(
            subtask.action,
            self.say(state, subtask.target) if subtask.target else subtask.target,
            self.say(state, subtask.place) if subtask.place else subtask.place,
        )

    def text(self, state: WorldState, text: str) -> str:
        """Replace every instance name in ``text`` by its spoken name, in one pass (so that perception's
        ``apple_1`` for the simulator's ``apple_2`` and the reverse cannot chain). The expert writes its reasons
        in instance names throughout; translating the finished text keeps that in one place."""
        if self.perceived is None:
            return text
        renames = {n: self.say(state, n) for n in state.entities}
        renames = {n: said for n, said in renames.items() if said != n}
        if not renames:
            return text
        pattern = re.compile(
            r"(?<![\w])(" + "|".join(re.escape(n) for n in sorted(renames, key=len, reverse=True)) + r")(?![\w])"
        )
        return pattern.sub(lambda m: renames[m.group(1)], text)
