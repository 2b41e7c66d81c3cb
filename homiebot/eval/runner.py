"""The evaluation runner behind ``homie eval``: parallel, resumable, crash-safe EMMOE-100 evaluations.

Layout of an evaluation directory ``DIR``::

    DIR/eval.json                      setting, task snapshot (instructions, keypaths, goals) and scene name tables
    DIR/episodes/<task>/run<r>/        one agent-loop episode record per (task, run) (homiebot.data.record)
    DIR/reference/<task>/run<r>/       the expert's noiseless episode on the same task and seed (PLWSR's L*)
    DIR/results.jsonl                  append-only index: one line per finished episode, in finishing order
    DIR/report.md, report.json, plots/ the tables (homiebot.eval.report), rewritten at the end of each run
    DIR/.lock                          held (flock) while an evaluation writes DIR

How it stays correct when killed (``kill -9`` of the whole process group at any instant):

* **An episode counts only once its record directory exists.** Workers write each record into a hidden
  temp directory and ``os.replace`` it into place (:class:`~homiebot.data.record.EpisodeRecorder`), so a
  record directory is either complete or absent. On start, leftover temp directories are deleted and every
  (task, run) whose record exists is skipped: nothing is lost (a half-run episode is simply run again) and
  nothing is duplicated (a finished one is never run twice).
* **Episodes are deterministic**: run ``r`` of a task resets the scene with ``task.seed + r``; the noise
  wrapper and the random planner are seeded from that seed, never from worker history. A resumed
  evaluation therefore produces the same records, hence the same metrics, as an uninterrupted one.
* **The index is derived, not trusted.** Only the parent process appends to ``results.jsonl``, one line
  per ``write`` + ``fsync``. A kill can leave a torn last line (dropped on the next start, the only time
  the file is rewritten) or a record without its line (re-added with ``"recovered": true``). Readers
  de-duplicate by (kind, task, run). Metrics never read the index: :func:`compute_scores` reads the records.
* ``eval.json`` pins the setting: resuming with another planner, noise preset or round limit is refused.

* **A run that never happened is not a result.** An episode that ends because the planner's backend cannot
  answer (server unreachable, model not loadable), because its worker died twice, or because recording
  failed, leaves no record and no index line: the command says how many could not run and why, exits
  non-zero, and the same command later runs them. The report never averages them in.

Workers are ``spawn``-ed processes, one simulator each, built once and reused for every episode (the
reference implementation's per-episode restarts are what made it slow and leaky). The parent talks to each
worker over its own pipe and watches the process sentinels, so a worker that dies (segfault, OOM kill)
is noticed, its episode is retried once on a fresh worker, and the evaluation goes on.

Modules, one job each: :mod:`~homiebot.eval.manifest` (setting, task snapshot, lock),
:mod:`~homiebot.eval.index` (``results.jsonl``), :mod:`~homiebot.eval.worker` (one worker process),
:mod:`~homiebot.eval.pool` (the worker processes), :mod:`~homiebot.eval.scoring` (scores and report from the
records); this module plans the jobs and runs them.

Rendering: the expert planner reads privileged state and needs no images; the random planner needs the
views' segmentation. ``images=True`` additionally stores the four PNGs per round in every record (the
full agent-loop format, needed for SFT/DPO data); it costs rendering and PNG encoding (see BENCHMARKS.md).
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from homiebot.eval.index import IndexWriter, read_index, recover_index
from homiebot.eval.manifest import (
    EPISODES_DIR,
    EVAL_FILE,
    EXPERT_PLANNER,
    INDEX_FILE,
    LOCK_FILE,
    NOISE_PRESETS,
    REFERENCE_DIR,
    EvalError,
    EvalSettings,
    Job,
    eval_lock,
    is_finished,
    load_manifest,
    prepare_manifest,
    remove_stale_temp_dirs,
    resolver_for,
    scene_name_rows,
    select_tasks,
)
from homiebot.eval.pool import WorkerPool, WorkerSetupError
from homiebot.eval.scoring import ScoredEvaluation, compute_scores, write_eval_report
from homiebot.eval.worker import WorkerOptions
from homiebot.tasks.suite import SUITE_ALIASES, TaskSpec, resolve_suite

# The names other modules import from here (the runner was one module before it was split by job).
__all__ = [
    "EPISODES_DIR",
    "EVAL_FILE",
    "EXPERT_PLANNER",
    "INDEX_FILE",
    "LOCK_FILE",
    "NOISE_PRESETS",
    "REFERENCE_DIR",
    "SUITE_ALIASES",
    "EvalError",
    "EvalOutcome",
    "EvalSettings",
    "Job",
    "ScoredEvaluation",
    "WorkerSetupError",
    "compute_scores",
    "eval_lock",
    "is_finished",
    "load_manifest",
    "plan_jobs",
    "read_index",
    "resolve_suite",
    "resolver_for",
    "run_evaluation",
    "scene_name_rows",
    "select_tasks",
    "write_eval_report",
]

log = logging.getLogger(__name__)


@dataclass
class EvalOutcome:
    out_dir: Path
    total: int
    skipped: int  # already finished before this run
    finished: int  # finished by this run
    # Jobs that could not run ("key: reason"): an infrastructure failure (planner backend, recording) or a
    # worker that died twice. None of them is stored; rerunning the same command runs them.
    failed_jobs: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    worker_rss_mb: list[float] = field(default_factory=list)  # (max RSS of a worker after each episode)

    @property
    def first_failure(self) -> str | None:
        """The first failure's reason (without its job), the one line the command line shows."""
        return self.failed_jobs[0].split(": ", 1)[1] if self.failed_jobs else None


def plan_jobs(settings: EvalSettings, tasks: Sequence[TaskSpec], runs: int) -> list[Job]:
    """Episodes, run-major (every task's run 0, then run 1, ...), each followed by its expert reference
    unless the planner is its own reference. Run-major order gives a full pass over the suite early (a
    useful partial result) and lets each worker meet every scene in the first pass."""
    jobs = []
    for run in range(runs):
        for task in tasks:
            jobs.append(Job("episode", task.id, run))
            if not settings.self_reference:
                jobs.append(Job("reference", task.id, run))
    return jobs


def run_evaluation(
    settings: EvalSettings,
    out_dir: str | Path,
    *,
    runs: int = 3,
    workers: int = 2,
    split: str = "all",
    task_ids: Sequence[str] | None = None,
    images: bool = False,
    video: bool = False,
    progress: bool = True,
    report: bool = True,
    backend: str = "local",
    address: str | None = None,
    model_actors: int = 1,
    model_gpus: float = 0.0,
    articulation_given: bool = False,
) -> EvalOutcome:
    """Run (or resume) an evaluation into ``out_dir`` and write its report. See the module docstring.

    ``backend``: ``local`` (worker processes, :mod:`homiebot.eval.pool`) or ``ray`` (Ray actors on this
    machine or on the cluster at ``address``: :mod:`homiebot.eval.ray_backend`); both read and write the same
    directory layout, so either resumes the other's run. On Ray a planner that holds a model shares
    ``model_actors`` copies of it (0: one per worker), each declaring ``model_gpus`` GPUs
    (:mod:`homiebot.eval.ray_models`). ``articulation_given``: the command named the physical skills' Open/Close
    setting (``--articulation``), so a directory that does not record it resumes with it
    (:func:`~homiebot.eval.manifest.prepare_manifest`).

    Every argument is checked before anything touches ``out_dir``: a refused command leaves no trace.
    """
    out = Path(out_dir).expanduser().absolute()
    tasks = check_arguments(settings, out, runs=runs, workers=workers, split=split, task_ids=task_ids)
    if backend not in ("local", "ray"):
        raise EvalError(f"unknown --backend {backend!r}; use local or ray")
    if backend == "ray":
        from homiebot.eval.ray_backend import check_ray

        check_ray(address)
        if model_actors < 0 or model_gpus < 0:
            raise EvalError("--model-actors and --model-gpus must not be negative")
    elif address is not None:
        raise EvalError("--address needs --backend ray")
    jobs = plan_jobs(settings, tasks, runs)
    started = time.perf_counter()
    created = not out.exists()
    existing = set() if created else {p.name for p in out.iterdir()}
    failed_start: WorkerSetupError | None = None
    with eval_lock(out):
        try:
            manifest = prepare_manifest(out, settings, tasks, images=images, video=video,
                                        articulation_given=articulation_given)
        except BaseException:
            _remove_created(out, created, existing)  # nothing of this run may stay behind (a full disk, Ctrl-C)
            raise
        removed = remove_stale_temp_dirs(out)
        if removed:
            log.info("removed %d half-written record(s) of an interrupted run", removed)
        todo = [j for j in jobs if not is_finished(out / j.relpath())]
        index = IndexWriter(out / INDEX_FILE)
        try:
            recover_index(out, jobs, index)
            outcome = EvalOutcome(out, total=len(jobs), skipped=len(jobs) - len(todo), finished=0)
            if todo:
                options = WorkerOptions(
                    settings=settings,
                    tasks={t: manifest["tasks"][t] for t in {j.task_id for j in todo}},
                    names={s: manifest["names"][s] for s in {manifest["tasks"][j.task_id]["scene"] for j in todo}},
                    out_dir=str(out),
                    images=images,
                    video=video,
                    # Workers log warnings only (their INFO lines would tear the progress bar) unless debugging.
                    log_level=logging.DEBUG if log.isEnabledFor(logging.DEBUG) else logging.WARNING,
                )
                try:
                    pool = _make_pool(options, min(workers, len(todo)), backend, address, model_actors, model_gpus)
                    _run_jobs(pool, todo, index, outcome, progress, settings.label())
                except WorkerSetupError as err:
                    # No worker could start (a model that does not load, a cluster that went away): nothing ran.
                    done = {f"{job.kind}:{job.task_id}:{job.run}" for job in todo if is_finished(out / job.relpath())}
                    if done or outcome.finished:
                        outcome.failed_jobs.extend(f"{job.key}: {err}" for job in todo if job.key not in done)
                    else:
                        failed_start = err
        finally:
            index.close()
        if failed_start is None:
            outcome.wall_s = time.perf_counter() - started
            if report:
                write_eval_report(out)
    if failed_start is not None:
        # A start that failed is not a run: what it created goes, so that the corrected command starts afresh in
        # the same folder (eval.json would pin this run's setting and refuse the next one's).
        _remove_created(out, created, existing)
        raise failed_start
    return outcome


def _remove_created(out: Path, created: bool, existing: set[str]) -> None:
    """Remove what this run added to ``out``: the folder itself when it made it, else the entries it made."""
    if created:
        shutil.rmtree(out, ignore_errors=True)
        return
    for entry in out.iterdir():
        if entry.name not in existing:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


def check_arguments(
    settings: EvalSettings,
    out: Path,
    *,
    runs: int,
    workers: int,
    split: str,
    task_ids: Sequence[str] | None,
) -> list[TaskSpec]:
    """Refuse a bad argument before anything is written; returns the selected tasks. Last, the planner's options
    are checked against its constructor and its server is asked whether it answers (an environment error when it
    does not): a setting that cannot run never pins ``eval.json``."""
    from homiebot.planner.registry import PlannerError, check_planner_config, planner_class

    if runs < 1:
        raise EvalError(f"--runs must be at least 1, got {runs}")
    if workers < 1:
        raise EvalError(f"--workers must be at least 1, got {workers}")
    if settings.noise not in NOISE_PRESETS:
        raise EvalError(f"unknown noise preset {settings.noise!r}; use one of {', '.join(NOISE_PRESETS)}")
    try:
        planner_class(settings.planner.name)
    except PlannerError as err:
        raise EvalError(str(err)) from None
    tasks = select_tasks(settings.suite, split, task_ids)
    if settings.skill_models:
        from homiebot.agent.build import EpisodeBuildError, check_learned_skills
        from homiebot.config.planners import ConfigError

        try:
            check_learned_skills(settings.run_config().skills)
        except (EpisodeBuildError, ConfigError, ValueError) as err:
            raise EvalError(str(err)) from None
    if out.exists() and not out.is_dir():
        raise EvalError(f"--out {out} exists and is not a directory")
    if out.is_dir() and not (out / EVAL_FILE).is_file() and any(not p.name.startswith(".") for p in out.iterdir()):
        raise EvalError(f"--out {out} is a non-empty directory that holds no evaluation; use an empty or new one")
    try:
        check_planner_config(settings.planner)
    except PlannerError as err:
        raise EvalError(str(err)) from None
    return tasks


def _make_pool(
    options: WorkerOptions, size: int, backend: str, address: str | None, model_actors: int, model_gpus: float
) -> Any:
    """The worker pool of ``backend``; both have ``size``, ``run(jobs, on_done, on_failed)`` and ``close()``."""
    if backend == "ray":
        from homiebot.eval.ray_backend import RayOptions, RayPool

        return RayPool(options, size, RayOptions(address=address, model_actors=model_actors, model_num_gpus=model_gpus))
    return WorkerPool(options, size)


def _run_jobs(
    pool: Any,
    todo: Sequence[Job],
    index: IndexWriter,
    outcome: EvalOutcome,
    show_progress: bool,
    label: str,
) -> None:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    # Everything on the row is short and fixed-width, so the count and the times survive an 80-column terminal
    # (rich shrinks a bar of width None first); the setting, which can be long, is printed once above it.
    columns = (
        TextColumn("[bold]eval"),
        BarColumn(bar_width=None),
        MofNCompleteColumn(),
        TextColumn("{task.fields[what]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    episodes = sum(job.kind == "episode" for job in todo)
    references = len(todo) - episodes
    # PLWSR needs the expert's noiseless path on the same task and seed (EMMOE section 5.1): those runs are
    # jobs too, and the bar says so instead of counting them as the planner's episodes.
    what = f"jobs ({episodes} episodes + {references} expert references)" if references else "episodes"
    wins = 0
    with Progress(*columns, disable=not show_progress, transient=False) as bar:
        if show_progress:
            bar.console.print(f"[bold]eval[/bold] {label}, {pool.size} workers: {what}", highlight=False, soft_wrap=True)
        bar_id = bar.add_task("eval", total=len(todo), what="done, 0 succeeded")

        def on_done(job: Job, result: dict[str, Any]) -> None:
            nonlocal wins
            result["finished_at"] = round(time.time(), 3)
            index.append(result)
            outcome.finished += 1
            outcome.worker_rss_mb.append(result.get("worker_rss_mb", 0.0))
            if job.kind == "episode" and result["success"]:
                wins += 1
            bar.update(bar_id, advance=1, what=f"done, {wins} succeeded")

        def on_failed(job: Job, reason: str) -> None:
            # Logged quietly: the command line prints how many could not run and the first reason, once.
            log.debug("episode %s could not be run: %s", job.key, reason)
            outcome.failed_jobs.append(f"{job.key}: {reason}")
            bar.update(bar_id, advance=1)

        pool.run(todo, on_done, on_failed)
