"""An evaluation's scores and report, recomputed from its episode records alone (never from the index).

The layout of an evaluation directory is in :mod:`homiebot.eval.runner`; the metrics in
:mod:`homiebot.eval.metrics`; the tables in :mod:`homiebot.eval.report`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from homiebot.eval.manifest import (
    EPISODES_DIR,
    REFERENCE_DIR,
    EvalError,
    EvalSettings,
    is_finished,
    load_manifest,
    resolver_for,
)
from homiebot.eval.metrics import EpisodeScore, ExpertReference
from homiebot.eval.partnr.metrics import PartnrEpisode
from homiebot.tasks.suite import TaskSpec


@dataclass
class ScoredEvaluation:
    settings: EvalSettings
    scores: list[EpisodeScore]
    missing: list[str]  # (task, run) of the manifest's tasks with no episode record, "task/runN"
    runs: int
    reference_failures: list[str] = field(default_factory=list)  # expert references that did not succeed
    # PARTNR's view of the episodes whose records keep their states (docs/partnr.md), each with its EMMOE score;
    # the others ("task/runN") have no PC: n/a, never 0.
    partnr: list[tuple[EpisodeScore, PartnrEpisode]] = field(default_factory=list)
    partnr_unscored: list[str] = field(default_factory=list)


def compute_scores(out_dir: str | Path) -> ScoredEvaluation:
    """Every episode's score from the records in ``out_dir`` alone (plus the snapshot in ``eval.json``)."""
    out = Path(out_dir).expanduser().absolute()
    manifest = load_manifest(out)
    try:
        settings = EvalSettings.model_validate(manifest["settings"])
        tasks = {k: TaskSpec.model_validate(v) for k, v in manifest["tasks"].items()}
        resolvers = {scene: resolver_for(rows) for scene, rows in manifest["names"].items()}
    except (KeyError, TypeError, AttributeError, IndexError, ValidationError) as err:
        raise EvalError(
            f"{out / 'eval.json'} is damaged ({type(err).__name__}: {err}); it cannot be repaired from the records: "
            "evaluate into a new --out"
        ) from None
    scores: list[EpisodeScore] = []
    reference_failures: list[str] = []
    partnr: list[tuple[EpisodeScore, PartnrEpisode]] = []
    partnr_unscored: list[str] = []
    runs_seen: set[int] = set()
    for task_id in sorted(tasks):
        task = tasks[task_id]
        task_dir = out / EPISODES_DIR / task_id
        if not task_dir.is_dir():
            continue
        for run_dir in sorted(task_dir.iterdir()):
            if run_dir.name.startswith(".") or not run_dir.name.startswith("run") or not is_finished(run_dir):
                continue
            run = int(run_dir.name[3:])
            runs_seen.add(run)
            trajectory = _read_record(run_dir)
            reference_dir = run_dir if settings.self_reference else out / REFERENCE_DIR / task_id / run_dir.name
            expert = None
            if is_finished(reference_dir):
                ref = trajectory if reference_dir == run_dir else _read_record(reference_dir)
                ref_score, _ = _score(reference_dir, ref, task, resolvers[task.scene], run=run)
                expert = ExpertReference(len(ref.rounds), ref.path_length, ref_score.success)
                if not ref_score.success:
                    # Its length still serves as L_expert (the expert's best effort); the report lists it.
                    reference_failures.append(f"{task_id}/{run_dir.name}")
            score, pc = _score(run_dir, trajectory, task, resolvers[task.scene], run=run, expert=expert)
            scores.append(score)
            if pc is None:
                partnr_unscored.append(f"{task_id}/{run_dir.name}")
            else:
                partnr.append((score, pc))
    runs = max(runs_seen) + 1 if runs_seen else 0
    have = {(s.task_id, s.run) for s in scores}
    missing = [f"{t}/run{r}" for t in sorted(tasks) for r in range(runs) if (t, r) not in have]
    return ScoredEvaluation(settings, scores, missing, runs, reference_failures, partnr, partnr_unscored)


def _score(record_dir: Path, trajectory: Any, task: TaskSpec, resolver: Any, *, run: int,
           expert: ExpertReference | None = None) -> tuple[EpisodeScore, PartnrEpisode | None]:
    """One record's score and PARTNR's view of it (None without ``states.jsonl``), from its files alone: the
    episode's one verdict (:mod:`homiebot.eval.verdict`)."""
    from homiebot.eval.partnr.states import StatesError
    from homiebot.eval.verdict import score_record
    from homiebot.tasks.partnr.language import EvaluationError

    try:
        return score_record(record_dir, trajectory, task, resolver, run=run, expert=expert)
    except (StatesError, EvaluationError, OSError, ValueError, KeyError, TypeError) as err:
        raise EvalError(
            f"the PARTNR files of the episode record {record_dir} are damaged ({err}); delete that folder and "
            "rerun the same homie eval command to run the episode again"
        ) from None


def _read_record(record_dir: Path) -> Any:
    """One episode record; a damaged one names the folder to delete (the next ``homie eval`` reruns it)."""
    from homiebot.data.record import RecordError, read_episode

    try:
        return read_episode(record_dir)
    except (RecordError, OSError, ValueError, KeyError, TypeError) as err:
        raise EvalError(
            f"the episode record {record_dir} is damaged ({err}); delete that folder and rerun the same "
            "homie eval command to run the episode again"
        ) from None


def report_setting(scored: Any) -> dict[str, Any]:
    """The setting table of a report (``report.md``'s first section; the HTML report's too)."""
    settings = scored.settings
    return {
        "suite": settings.suite,
        "planner": settings.planner.name,
        "planner_options": settings.planner_options,
        "noise": settings.noise,
        "skills": settings.skills,
        # Learned policies in model slots (homie eval --skill-model), only when there are any.
        **({"skill_models": settings.skill_models} if settings.skill_models else {}),
        "max_rounds": settings.max_rounds,
        "backend": settings.backend,
        "perception": settings.perception,
        # How a bundled text model ran where its options did not say (weights, attention kernel); None for other
        # planners and for directories started before it was pinned (docs/models.md).
        "model_runtime": settings.model_runtime,
        "runs": scored.runs,
        "tasks": len({s.task_id for s in scored.scores}),
        "episodes": len(scored.scores),
        "missing_episodes": scored.missing,
        "expert_reference": "self"
        if settings.self_reference
        else f"{settings.reference_planner} planner, noise off, no perception, same seed",
        "expert_reference_failures": scored.reference_failures,
    }


def write_eval_report(
    out_dir: str | Path, report_dir: str | Path | None = None, *, plots: bool = True
) -> dict[str, Any]:
    """Recompute the scores from the records and write ``report.md``/``report.json``/plots, with PARTNR's
    metrics beside EMMOE's (docs/partnr.md, "Metrics": a section of report.md, a key of report.json, and
    partnr.md / partnr.json with the per-episode rows)."""
    from homiebot.eval.report import write_report

    out = Path(out_dir).expanduser().absolute()
    scored = compute_scores(out)
    target = Path(report_dir) if report_dir else out
    return write_report(scored.scores, report_setting(scored), target, plots=plots, partnr=partnr_figures(scored))


def partnr_figures(scored: ScoredEvaluation) -> dict[str, Any]:
    """PARTNR's figures of an evaluation's episodes (``report.json["partnr"]``)."""
    from homiebot.eval.partnr.report import partnr_data

    return partnr_data(scored.partnr, scored.partnr_unscored)
