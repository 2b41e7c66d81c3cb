"""EMMOE's metrics of single episode records: what ``homie metrics`` prints for a ``homie run --out`` record or a
``homie up sim --out`` run directory (its ``record/``), with the same tables as for an evaluation directory.

Both wirings write the same record (:mod:`homiebot.data.record`), so a task run in-process and through the ROS 2
graph with the same seed gives the same table. The record names its task; the task's goal and keypaths come
from the built-in suites and its scene's names from the scene library, as when an evaluation is scored
(:mod:`homiebot.eval.scoring`). Without an expert reference run PLWSR is n/a (EMMOE section 5.1 needs the
expert's path on the same task and seed; ``homie eval`` runs it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from homiebot.data.record import SUMMARY_FILE
from homiebot.eval.manifest import EvalError

#: Where a ``homie up sim --out DIR`` run keeps its episode record.
UP_RECORD_DIR = "record"


def find_record(directory: Path) -> Path | None:
    """The episode record ``directory`` is (or, for a ``homie up`` run directory, holds); None if neither."""
    for candidate in (directory, directory / UP_RECORD_DIR):
        if (candidate / SUMMARY_FILE).is_file():
            return candidate
    return None


def score_records(records: Sequence[Path]) -> tuple[list[Any], dict[str, Any]]:
    """The scores of the given episode records and the setting to report them under
    (:func:`homiebot.eval.report.build_report` / :func:`~homiebot.eval.report.write_report`)."""
    from homiebot.data.record import RecordError, read_episode
    from homiebot.eval.manifest import resolver_for, scene_name_rows
    from homiebot.eval.metrics import score_episode
    from homiebot.eval.tasks import TaskError, get_task

    scores = []
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
        scores.append(score_episode(trajectory, task, resolver, run=trajectory.seed))
        planners.add(trajectory.planner)
    setting: dict[str, Any] = {
        "suite": "episode record" if len(records) == 1 else "episode records",
        "planner": ", ".join(sorted(planners)),
        "noise": "as run",
        "expert_reference": "none (PLWSR needs homie eval)",
        "episodes": len(scores),
        "missing_episodes": [],
    }
    return scores, setting
