"""The loop observer that writes the state of every round into the episode record (``states.jsonl``), with
the evaluation function it is scored by (``evaluation.json``), so that ``homie metrics`` can recompute PARTNR's
percent complete from the record alone (docs/partnr.md, "Recorded states"); for a task it also gives the record
its verdict (:mod:`homiebot.eval.verdict`), judged from those very lines."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homiebot.agent.observers import StateRecorder
from homiebot.data.record import EpisodeRecorder, read_episode, read_summary
from homiebot.eval.keypaths import NameResolver
from homiebot.eval.partnr.metrics import PartnrEpisode, score_episode
from homiebot.eval.partnr.states import EVALUATION_FILE, STATES_FILE, read_states, snapshot_line, states_from_lines
from homiebot.tasks.partnr.language import EvaluationFunction
from homiebot.tasks.suite import TaskSpec
from homiebot.types import Observation, RoundRecord, Trajectory, WorldState

if TYPE_CHECKING:
    from homiebot.eval.verdict import Verdict


class StatesFileRecorder(StateRecorder):
    """Keeps every round's state (the loop's :class:`StateRecorder`) and writes it into the record being
    written as it comes: ``evaluation.json`` and line 0 of ``states.jsonl`` at the start, one line per round
    after, so the files are complete whatever the order in which the observers end. The file is rewritten
    whole each round (a few kB: line 0 plus small diffs), which needs nothing of the recorder but
    :meth:`~homiebot.data.record.EpisodeRecorder.add_file`.

    With a ``task`` it is also the record's judge (:meth:`~homiebot.data.record.EpisodeRecorder.judge_with`):
    when the summary is written, :meth:`verdict` scores the episode from the lines written and the function as
    ``evaluation.json`` holds it, read back as ``homie metrics`` reads them, so the summary and every later
    reading of the record give the same verdict. ``resolver``: the scene's names for the keypaths (default: the
    scene file's, as ``homie metrics`` reads a lone record; an evaluation passes its snapshot's)."""

    def __init__(self, recorder: EpisodeRecorder, function: EvaluationFunction | None = None,
                 task: TaskSpec | None = None, clock: Callable[[], float] | None = None,
                 resolver: NameResolver | None = None) -> None:
        super().__init__()
        self.recorder = recorder
        self.function = function
        self.task = task  # without a function: the task's own, or its goal converted on the state after reset
        self.resolver = resolver
        if task is not None:  # from the start: an episode whose reset failed is judged too (a failure)
            recorder.judge_with(lambda trajectory: self.verdict(trajectory).to_json())
        # The simulator's nominal clock (seconds since the reset): each line carries it as "sim_time", so the
        # record alone gives PARTNR's simulated-time analog (docs/partnr.md, "Metrics").
        self.clock = clock
        self._previous: dict[str, dict[str, Any]] = {}
        self._lines: list[str] = []

    def on_start(self, trajectory: Trajectory, state: WorldState, observation: Observation | None) -> None:
        super().on_start(trajectory, state, observation)
        if self.function is None and self.task is not None:
            from homiebot.tasks.partnr.convert import task_function

            self.function = task_function(self.task, state)
        if self.function is not None:
            self.recorder.add_file(EVALUATION_FILE, json.dumps(self.function.to_json(), indent=1) + "\n")
        self._previous = {}
        self._lines = []
        self._write(0, state)

    def verdict(self, trajectory: Trajectory) -> Verdict:
        """The episode's :class:`~homiebot.eval.verdict.Verdict` from the states written so far (class docstring)."""
        from homiebot.eval.manifest import resolver_for, scene_name_rows
        from homiebot.eval.verdict import judge_states, no_task_verdict, verdict_of

        if self.task is None:
            return no_task_verdict(trajectory)
        if self.resolver is None:
            self.resolver = resolver_for(scene_name_rows(self.task.scene))
        states = states_from_lines(json.loads(line) for line in self._lines) if self._lines else None
        function = None
        if self.function is not None and states is not None:  # as evaluation.json holds it, read back
            function = EvaluationFunction.from_json(json.loads(json.dumps(self.function.to_json())), self.task.id)
        sim_time = json.loads(self._lines[-1]).get("sim_time") if self._lines else None
        score, partnr = judge_states(trajectory, self.task, self.resolver, states, function,
                                     run=trajectory.seed, sim_time_s=sim_time)
        return verdict_of(score, partnr)

    def on_round(self, record: RoundRecord, seen: Observation | None, state: WorldState) -> None:
        super().on_round(record, seen, state)
        self._write(len(self.states) - 1, state)

    def _write(self, index: int, state: WorldState) -> None:
        line = snapshot_line(index, state, self._previous)
        if self.clock is not None:
            line["sim_time"] = round(self.clock(), 3)
        self._lines.append(json.dumps(line, separators=(",", ":")) + "\n")
        self.recorder.add_file(STATES_FILE, "".join(self._lines))


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
                         goal_check=summary.get("goal_satisfied"), path_length_m=trajectory.path_length,
                         sim_time_s=recorded_sim_time(directory))


def recorded_sim_time(episode_dir: str | Path) -> float | None:
    """The simulated time at the end of a recorded episode (the last ``states.jsonl`` line's ``sim_time``);
    None when the states were written without a clock."""
    path = Path(episode_dir) / STATES_FILE
    lines = [text for text in path.read_text(encoding="utf-8").splitlines() if text.strip()] if path.is_file() else []
    if not lines:
        return None
    value = json.loads(lines[-1]).get("sim_time")
    return float(value) if isinstance(value, (int, float)) else None



def simulator_clock(sim: object) -> Callable[[], float] | None:
    """The simulator's nominal clock (seconds since the reset) for :class:`StatesFileRecorder`, where the
    backend keeps one (MuJoCo's ``sim_time``); None otherwise (simulated time is then n/a)."""
    if not hasattr(sim, "sim_time"):
        return None
    return lambda: float(sim.sim_time)
