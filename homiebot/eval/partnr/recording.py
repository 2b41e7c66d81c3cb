"""The loop observer that writes the state of every round into the episode record (``states.jsonl``), with
the evaluation function it is scored by (``evaluation.json``), so that ``homie metrics`` can recompute PARTNR's
percent complete from the record alone (docs/partnr.md, "Recorded states")."""

from __future__ import annotations

import json
from pathlib import Path

from homiebot.agent.observers import StateRecorder
from homiebot.data.record import EpisodeRecorder, read_episode, read_summary
from homiebot.eval.partnr.language import EvaluationFunction
from homiebot.eval.partnr.metrics import PartnrEpisode, score_episode
from homiebot.eval.partnr.states import EVALUATION_FILE, STATES_FILE, read_states, snapshot_lines
from homiebot.types import Trajectory, WorldState


class StatesFileRecorder(StateRecorder):
    """Keeps every round's state (the loop's :class:`StateRecorder`) and, at the end, adds ``states.jsonl``
    and ``evaluation.json`` to the record being written. A failed reset (no state) adds nothing."""

    def __init__(self, recorder: EpisodeRecorder, function: EvaluationFunction | None = None) -> None:
        super().__init__()
        self.recorder = recorder
        self.function = function

    def on_end(self, trajectory: Trajectory, state: WorldState | None) -> None:
        super().on_end(trajectory, state)
        if state is None or not self.states:
            return
        text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in snapshot_lines(self.states))
        self.recorder.add_file(STATES_FILE, text)
        if self.function is not None:
            self.recorder.add_file(EVALUATION_FILE, json.dumps(self.function.to_json(), indent=1) + "\n")


def score_record(episode_dir: str | Path) -> PartnrEpisode | None:
    """PARTNR's metrics of a recorded episode from its files alone; None for a record without recorded
    states or evaluation function (older records: PC is n/a, never 0)."""
    directory = Path(episode_dir)
    states = read_states(directory)
    evaluation_path = directory / EVALUATION_FILE
    if states is None or not evaluation_path.is_file():
        return None
    summary = read_summary(directory)
    task_id = str(summary.get("task") or directory.name)
    function = EvaluationFunction.from_json(json.loads(evaluation_path.read_text(encoding="utf-8")), task_id)
    trajectory = read_episode(directory)
    return score_episode(task_id, function, states, trajectory.rounds, ended=trajectory.ended,
                         goal_check=summary.get("success"), path_length_m=trajectory.path_length)
