"""One verdict per episode: the evaluation ``homie metrics`` applies is the one every surface shows.

An episode is judged once, by its suite's own evaluation, in :func:`homiebot.eval.metrics.score_episode`:

* a task with its own PARTNR evaluation function (the PARTNR-style suite) by that function over the state after
  every round (PARTNR paper, section 3.2: success is percent complete = 1, temporal and argument constraints
  included; no ``[End]`` needed), on the states as the record keeps them (``states.jsonl``);
* any other task (EMMOE-100, the demo tasks) by its keypaths (EMMOE paper, section 2.3: TP = 100%, which
  includes the final ``[End]``);
* an infrastructure failure is never a success; a free-text instruction has no task and no verdict.

MuEP's text episodes (``homie eval --suite muep``) are judged once by MuEP's own check
(:mod:`homiebot.eval.muep_suite`) into ``episodes.jsonl``, which their table and ``homie muep metrics`` read;
they never reach this module.

Where the verdict is shown, all from this one computation:

* the record's ``summary.json`` (``success`` and ``verdict``): the
  :class:`~homiebot.eval.partnr.recording.StatesFileRecorder` that every recorded episode carries (``homie run``,
  ``homie play``, ``homie eval``'s workers, the ROS planner node) judges the episode from the very lines it wrote,
  before the summary is written;
* the closing line of ``homie run`` and ``homie play`` (:func:`verdict_line` of that summary);
* the episode page's headline and outcome, ``homie metrics`` and every evaluation table
  (:func:`score_record` over the record's files).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from homiebot.eval.keypaths import NameResolver
from homiebot.eval.metrics import JUDGED_BY_PARTNR, EpisodeScore, ExpertReference, score_episode
from homiebot.eval.partnr.metrics import PartnrEpisode
from homiebot.eval.partnr.metrics import score_episode as score_partnr
from homiebot.eval.partnr.states import EVALUATION_FILE, read_states
from homiebot.tasks.partnr.language import EvaluationFunction
from homiebot.tasks.suite import TaskSpec
from homiebot.types import Trajectory, WorldState

#: The key of ``summary.json`` that holds the verdict (:meth:`Verdict.to_json`).
VERDICT_KEY = "verdict"


@dataclass(frozen=True)
class Verdict:
    """An episode's success and what judged it (module docstring).

    ``success``: None without a task (free text); ``judged_by``: "partnr" (the task's evaluation function) or
    "keypaths" (TP = 100%), None without a task; ``tp``: the exact TP ("5/7"); ``pc``: PARTNR's percent complete
    where the episode's states were scored; ``explanation``: PARTNR's reason for a failure ("" otherwise);
    ``error``: the infrastructure failure that stopped the episode.
    """

    success: bool | None
    judged_by: str | None
    tp: str | None = None
    pc: float | None = None
    explanation: str = ""
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(**{key: data.get(key) for key in ("success", "judged_by", "tp", "pc", "error")},
                   explanation=str(data.get("explanation") or ""))

    @property
    def word(self) -> str:
        """``success``, ``failure``, or ``no task`` (free text)."""
        return "no task" if self.success is None else ("success" if self.success else "failure")

    def reason(self) -> str:
        """What judged it, in a few words: ``PARTNR evaluation function: PC 0.50; <explanation>``."""
        if self.success is None:
            return "a free-text instruction has no task to check"
        if self.error:
            return f"infrastructure error: {self.error}"
        if self.judged_by == JUDGED_BY_PARTNR:
            text = f"the task's PARTNR evaluation function: PC {self.pc:.2f}" if self.pc is not None else \
                "the task's PARTNR evaluation function"
            return f"{text}; {self.explanation}" if self.explanation and not self.success else text
        return f"EMMOE keypaths: TP {_percent(self.tp)}" + ("" if self.success else ", SR needs 100%")


def _percent(tp: str | None) -> str:
    """``5/7`` as ``71% (5/7)``; ``1`` and ``0`` as ``100%`` and ``0%``."""
    if tp is None:
        return "n/a"
    value = Fraction(tp)
    return f"{100 * float(value):.0f}%" + (f" ({tp})" if 0 < value < 1 else "")


def verdict_of(score: EpisodeScore, partnr: PartnrEpisode | None = None) -> Verdict:
    """The verdict that ``score`` (and PARTNR's view of the same episode, where its states were scored) holds."""
    explanation = partnr.explanation if partnr is not None and score.judged_by == JUDGED_BY_PARTNR else ""
    return Verdict(score.success, score.judged_by, score.tp_exact, score.pc, explanation, score.infra_error)


def no_task_verdict(trajectory: Trajectory) -> Verdict:
    """The verdict of a free-text episode: none (nothing to check)."""
    return Verdict(None, None, error=trajectory.error)


def judge_states(trajectory: Trajectory, task: TaskSpec, resolver: NameResolver,
                 states: list[WorldState] | None, function: EvaluationFunction | None,
                 *, run: int = 0, expert: ExpertReference | None = None,
                 sim_time_s: float | None = None) -> tuple[EpisodeScore, PartnrEpisode | None]:
    """Score one episode of ``task``: PARTNR's view from ``states`` and ``function`` (None: not recorded), then
    the episode's score, whose ``success`` is the verdict (:func:`~homiebot.eval.metrics.score_episode`)."""
    partnr = None
    if states is not None and function is not None:
        partnr = score_partnr(task.id, function, states, trajectory.rounds, ended=trajectory.ended,
                              goal_check=trajectory.goal_satisfied, path_length_m=trajectory.path_length,
                              sim_time_s=sim_time_s)
    return score_episode(trajectory, task, resolver, run=run, expert=expert, partnr=partnr), partnr


def read_function(record_dir: str | Path, task_id: str) -> EvaluationFunction | None:
    """The evaluation function a record was scored by (``evaluation.json``); None when it has none."""
    path = Path(record_dir) / EVALUATION_FILE
    if not path.is_file():
        return None
    return EvaluationFunction.from_json(json.loads(path.read_text(encoding="utf-8")), task_id)


def score_record(record_dir: str | Path, trajectory: Trajectory, task: TaskSpec, resolver: NameResolver, *,
                 run: int = 0, expert: ExpertReference | None = None) -> tuple[EpisodeScore, PartnrEpisode | None]:
    """The score of a recorded episode from its files alone (``trajectory`` read from them): what ``homie
    metrics``, ``homie eval``'s tables and the episode page show. Raises the readers' errors for damaged
    ``states.jsonl`` / ``evaluation.json`` (:class:`~homiebot.eval.partnr.states.StatesError`,
    :class:`~homiebot.tasks.partnr.language.EvaluationError`, ``ValueError``)."""
    from homiebot.eval.partnr.recording import recorded_sim_time

    states = read_states(record_dir)
    function = read_function(record_dir, task.id) if states is not None else None
    return judge_states(trajectory, task, resolver, states, function, run=run, expert=expert,
                        sim_time_s=recorded_sim_time(record_dir) if states is not None else None)


def recorded_verdict(summary: Mapping[str, Any]) -> Verdict | None:
    """The verdict a record's ``summary.json`` holds; None for a record written before verdicts were kept."""
    data = summary.get(VERDICT_KEY)
    return Verdict.from_json(data) if isinstance(data, Mapping) else None


def verdict_line(verdict: Verdict, markup: bool = True) -> str:
    """``success (the task's PARTNR evaluation function: PC 1.00)``; coloured with rich markup when ``markup``."""
    word = verdict.word
    if markup and verdict.success is not None:
        colour = "green" if verdict.success else "red"
        word = f"[{colour}]{word}[/{colour}]"
    reason = verdict.reason()
    if markup:
        from rich.markup import escape

        reason = escape(reason)
    return f"{word} ({reason})"


def outcome_text(record_dir: str | Path) -> str:
    """How ``homie run`` and ``homie play`` announce a finished episode (rich markup): the verdict its
    ``summary.json`` holds (:func:`verdict_line`), or for a free-text episode whether it ended."""
    from homiebot.data.record import read_summary

    summary = read_summary(record_dir)
    verdict = recorded_verdict(summary)
    if verdict is None or verdict.success is None:
        return "ended" if summary.get("ended") else "did not end"
    return verdict_line(verdict)
