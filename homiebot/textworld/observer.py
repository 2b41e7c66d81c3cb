"""The text view of an episode of the planner loop: an episode observer (homiebot/agent/observers.py) that
renders ALFWorld's text observation of every round from the same simulator, so an EMMOE episode can be read
as the four images and as text, in step (docs/textworld.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from homiebot.agent.observers import ObserverBase
from homiebot.perception.grounding import AliasGrounder, Grounder
from homiebot.sim.base import Simulator
from homiebot.textworld.world import Phrasing, TextWorld
from homiebot.types import Observation, RoundRecord, Subtask, Trajectory, WorldState


@dataclass
class TextWorldObserver(ObserverBase):
    """Keeps ``texts``: the intro, then one ALFWorld observation per round; written to ``path`` (JSON lines:
    round, subtask, text) at the end when given.

    A round's subtask is read in simulator instance names: the executor's grounding when the record has one
    (a world graph's names), else the planner's words grounded on the state *before* the round, as the
    executor grounded them (a Put's object is the held one)."""

    sim: Simulator
    phrasing: Phrasing | str = Phrasing.ALFWORLD
    path: Path | None = None
    grounder: Grounder = field(default_factory=AliasGrounder)
    texts: list[str] = field(default_factory=list)
    world: TextWorld | None = None
    _before: WorldState | None = None
    _rows: list[dict[str, object]] = field(default_factory=list)

    def on_start(self, trajectory: Trajectory, state: WorldState, observation: Observation | None) -> None:
        self.world = TextWorld(self.sim, self.phrasing)
        self.texts = [self.world.reset(trajectory.instruction)]
        self._rows = [{"round": 0, "subtask": None, "text": self.texts[0]}]
        self._before = state

    def on_round(self, record: RoundRecord, seen: Observation | None, state: WorldState) -> None:
        assert self.world is not None, "on_start first"
        subtask = record.grounded or self._ground(record.output.subtask)
        text = self.world.observation_after(subtask, record.feedback.success)
        self.texts.append(text)
        self._rows.append({"round": record.index, "subtask": record.subtask_text, "text": text})
        self._before = state

    def on_end(self, trajectory: Trajectory, state: WorldState | None) -> None:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text("".join(json.dumps(row) + "\n" for row in self._rows))

    def _ground(self, subtask: Subtask | None) -> Subtask | None:
        if subtask is None or subtask.target is None or self._before is None:
            return subtask
        before = self._before
        target = self.grounder.ground(subtask.target, before)
        place = self.grounder.ground(subtask.place, before) if subtask.place is not None else None
        target_name = target.instance
        if subtask.place is not None and before.held is not None and before.held in target.candidates:
            target_name = before.held
        if target_name is None:
            return None
        return Subtask(subtask.action, target_name, place.instance if place is not None else None)
