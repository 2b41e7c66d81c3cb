"""EMMOE's metrics of single episode records: what ``homie metrics`` prints for a ``homie run --out`` record or a
``homie up sim --out`` run directory (its ``record/``), with the same tables as for an evaluation directory.

Both wirings write the same record (:mod:`homiebot.data.record`), so a task run in-process and through the ROS 2
graph with the same seed gives the same table. The record names its task; the task's goal and keypaths come
from the built-in suites and its scene's names from the scene library, as when an evaluation is scored
(:mod:`homiebot.eval.scoring`). Without an expert reference run PLWSR is n/a (EMMOE section 5.1 needs the
expert's path on the same task and seed; ``homie eval`` runs it). SR is the episode's verdict, the same one its
``summary.json``, its page and ``homie run`` / ``homie play`` show (:mod:`homiebot.eval.verdict`); PARTNR's
figures come from the record's states, as for an evaluation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from homiebot.data.record import SUMMARY_FILE
from homiebot.eval.manifest import EvalError
from homiebot.eval.metrics import EpisodeScore
from homiebot.eval.verdict import Verdict

#: Where a ``homie up sim --out DIR`` run keeps its episode record.
UP_RECORD_DIR = "record"


def find_record(directory: Path) -> Path | None:
    """The episode record ``directory`` is (or, for a ``homie up`` run directory, holds); None if neither."""
    for candidate in (directory, directory / UP_RECORD_DIR):
        if (candidate / SUMMARY_FILE).is_file():
            return candidate
    return None


@dataclass(frozen=True)
class ScoredRecords:
    """Episode records scored as an evaluation's are: their scores (SR is each episode's verdict,
    :mod:`homiebot.eval.verdict`), the setting to report them under, and PARTNR's figures of them."""

    scores: list[EpisodeScore]
    setting: dict[str, Any]
    partnr: dict[str, Any]
    verdicts: list[Verdict]  # one per record, in order


def score_records(records: Sequence[Path]) -> ScoredRecords:
    """The scores of the given episode records (:func:`homiebot.eval.report.build_report` /
    :func:`~homiebot.eval.report.write_report` lay them out)."""
    from homiebot.data.record import RecordError, read_episode
    from homiebot.eval.manifest import resolver_for, scene_name_rows
    from homiebot.eval.partnr.report import partnr_data
    from homiebot.eval.partnr.states import StatesError
    from homiebot.eval.verdict import score_record, verdict_of
    from homiebot.tasks.partnr.language import EvaluationError
    from homiebot.tasks.suite import TaskError, get_task

    scores = []
    verdicts = []
    pairs = []
    unscored = []
    planners: set[str] = set()
    for record in records:
        try:
            trajectory = read_episode(record)
        except (RecordError, OSError, ValueError, KeyError, TypeError) as err:
            raise EvalError(f"the episode record {record} is damaged ({err})") from None
        if not trajectory.task_id:
            raise EvalError(f"{record} holds a free-text episode: EMMOE's metrics need a task with a goal (--task)")
        try:
            task = get_task(trajectory.task_id)
        except TaskError as err:
            raise EvalError(f"{record}: {err}") from None
        resolver = resolver_for(scene_name_rows(task.scene))
        try:
            score, partnr = score_record(record, trajectory, task, resolver, run=trajectory.seed)
        except (StatesError, EvaluationError, OSError, ValueError, KeyError, TypeError) as err:
            raise EvalError(f"the PARTNR files of the episode record {record} are damaged ({err})") from None
        scores.append(score)
        verdicts.append(verdict_of(score, partnr))
        if partnr is None:
            unscored.append(f"{task.id}/run{trajectory.seed}")
        else:
            pairs.append((score, partnr))
        planners.add(trajectory.planner)
    setting: dict[str, Any] = {
        "suite": "episode record" if len(records) == 1 else "episode records",
        "planner": ", ".join(sorted(planners)),
        "noise": "as run",
        "expert_reference": "none (PLWSR needs homie eval)",
        "episodes": len(scores),
        "missing_episodes": [],
    }
    return ScoredRecords(scores, setting, partnr_data(pairs, unscored), verdicts)


def records_report(records: Sequence[Path], report_dir: Path | None = None, *,
                   plots: bool = True) -> tuple[dict[str, Any], list[Verdict]]:
    """The report of episode records (``homie metrics RECORD``), written under ``report_dir`` when given, and
    each record's verdict."""
    from homiebot.eval.report import build_report, write_report

    scored = score_records(records)
    if report_dir is not None:
        written = write_report(scored.scores, scored.setting, report_dir, plots=plots, partnr=scored.partnr)
    else:
        written = build_report(scored.scores, scored.setting, scored.partnr)
    return written, scored.verdicts
