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

Workers are ``spawn``-ed processes, one simulator each, built once and reused for every episode (the
reference implementation's per-episode restarts are what made it slow and leaky). The parent talks to each
worker over its own pipe and watches the process sentinels, so a worker that dies (segfault, OOM kill)
is noticed, its episode is retried once on a fresh worker, and the evaluation goes on.

Rendering: the expert planner reads privileged state and needs no images; the random planner needs the
views' segmentation. ``images=True`` additionally stores the four PNGs per round in every record (the
full agent-loop format, needed for SFT/DPO data); it costs rendering and PNG encoding (see BENCHMARKS.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import os
import shutil
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing import connection
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from homiebot.eval.keypaths import SceneNameResolver
from homiebot.eval.metrics import EpisodeScore, ExpertReference, score_episode
from homiebot.eval.tasks import TaskSpec, load_suite

log = logging.getLogger(__name__)

EVAL_FILE = "eval.json"
INDEX_FILE = "results.jsonl"
LOCK_FILE = ".lock"
EPISODES_DIR = "episodes"
REFERENCE_DIR = "reference"
#: Suite names accepted on the command line beside the file names (``--suite emmoe``).
SUITE_ALIASES = {"emmoe": "emmoe100"}
#: The planner and noise preset whose episodes are their own PLWSR reference.
EXPERT_PLANNER = "expert"
NOISE_PRESETS: tuple[str, ...] = ("off", "emmoe")

JobKind = Literal["episode", "reference"]


class EvalError(RuntimeError):
    """The evaluation cannot start or resume; the message says why and what to do."""


class EvalSettings(BaseModel):
    """What decides an episode's outcome; pinned in ``eval.json`` so a resume cannot mix settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    suite: str = "emmoe100"
    planner: str = EXPERT_PLANNER
    planner_options: dict[str, Any] = Field(default_factory=dict)
    noise: Literal["off", "emmoe"] = "off"
    max_rounds: int = Field(20, ge=1)
    backend: str = "mujoco"
    # The episodes' world graph (homiebot.perception): "off" grounds through the scene's names (EMMOE); with a
    # graph the executor grounds through it (F2 for what no view has shown) and the episodes render. The PLWSR
    # reference episodes never use one: L* is the expert's path with full knowledge.
    perception: Literal["off", "privileged", "conceptgraph"] = "off"

    @property
    def self_reference(self) -> bool:
        """The expert without noise or perception is its own PLWSR reference (no separate reference episodes)."""
        return (
            self.planner == EXPERT_PLANNER and self.noise == "off" and not self.planner_options
            and self.perception == "off"
        )

    def label(self) -> str:
        label = f"{self.planner} planner, noise {self.noise}"
        return label if self.perception == "off" else f"{label}, perception {self.perception}"


@dataclass(frozen=True)
class Job:
    kind: JobKind
    task_id: str
    run: int

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.task_id}:{self.run}"

    def relpath(self) -> str:
        root = EPISODES_DIR if self.kind == "episode" else REFERENCE_DIR
        return f"{root}/{self.task_id}/run{self.run}"


@dataclass
class WorkerOptions:
    """Everything a worker process needs to build its simulator and planners (picklable)."""

    settings: EvalSettings
    tasks: dict[str, dict[str, Any]]  # task id -> TaskSpec JSON
    names: dict[str, list[list[Any]]]  # scene -> [name, category, aliases] rows
    out_dir: str
    images: bool = False
    video: bool = False
    log_level: int = logging.WARNING


@dataclass
class EvalOutcome:
    out_dir: Path
    total: int
    skipped: int  # already finished before this run
    finished: int  # finished by this run
    failed_jobs: list[str] = field(default_factory=list)  # jobs that killed two workers
    wall_s: float = 0.0
    worker_rss_mb: list[float] = field(default_factory=list)  # (max RSS of a worker after each episode)


# ------------------------------------------------------------------------------------------------ layout


def resolve_suite(name: str) -> str:
    return SUITE_ALIASES.get(name, name)


def select_tasks(suite: str, split: str = "all", task_ids: Sequence[str] | None = None) -> list[TaskSpec]:
    tasks = list(load_suite(resolve_suite(suite)).tasks)
    if split not in ("all", "train", "test"):
        raise EvalError(f"unknown split {split!r}; use all, train or test")
    if split != "all":
        tasks = [t for t in tasks if t.split == split]
    if task_ids:
        known = {t.id: t for t in tasks}
        unknown = [t for t in task_ids if t not in known]
        if unknown:
            raise EvalError(f"unknown task id(s) {', '.join(unknown)} in suite {suite!r} (split {split})")
        tasks = [known[t] for t in dict.fromkeys(task_ids)]
    if not tasks:
        raise EvalError(f"no task selected (suite {suite!r}, split {split})")
    return tasks


def scene_name_rows(scene: str) -> list[list[Any]]:
    """``[name, category, aliases]`` for every room, furniture and object of a library scene."""
    from homiebot.sim.scene import load_scene

    spec = load_scene(scene)
    return [[e.name, e.category, list(e.aliases)] for e in (*spec.rooms, *spec.furniture, *spec.objects)]


def resolver_for(rows: Sequence[Sequence[Any]]) -> SceneNameResolver:
    from homiebot.eval.goals import CATEGORY_GROUPS

    return SceneNameResolver.from_entities(((r[0], r[1], tuple(r[2])) for r in rows), groups=CATEGORY_GROUPS)


def is_finished(record_dir: Path) -> bool:
    from homiebot.data.record import SUMMARY_FILE

    return (record_dir / SUMMARY_FILE).is_file()


def _atomic_write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


@contextlib.contextmanager
def eval_lock(out_dir: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``DIR/.lock``: two evaluations never write one directory. The kernel drops
    the lock when the holder dies, so a killed evaluation never leaves a stale lock behind."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(out_dir / LOCK_FILE, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise EvalError(f"another evaluation is writing {out_dir} (its {LOCK_FILE} is locked)") from None
        yield
    finally:
        os.close(fd)


def load_manifest(out_dir: Path) -> dict[str, Any]:
    path = out_dir / EVAL_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EvalError(f"{out_dir} holds no evaluation ({EVAL_FILE} missing)") from None
    except json.JSONDecodeError as err:
        raise EvalError(f"{path}: invalid JSON: {err}") from None


def _prepare_manifest(out_dir: Path, settings: EvalSettings, tasks: Sequence[TaskSpec]) -> dict[str, Any]:
    """Create ``eval.json`` or check it against this run's setting; add newly selected tasks to it."""
    task_json = {t.id: t.model_dump(mode="json", by_alias=True) for t in tasks}
    path = out_dir / EVAL_FILE
    if path.exists():
        manifest = load_manifest(out_dir)
        pinned = manifest.get("settings", {})
        with contextlib.suppress(ValueError):
            # Settings added since the directory was started take their defaults (what those episodes ran with).
            pinned = EvalSettings.model_validate(pinned).model_dump(mode="json")
        wanted = settings.model_dump(mode="json")
        if pinned != wanted:
            diff = ", ".join(
                f"{k}: {pinned.get(k)!r} there, {wanted.get(k)!r} now"
                for k in sorted(set(pinned) | set(wanted))
                if pinned.get(k) != wanted.get(k)
            )
            raise EvalError(f"{out_dir} holds an evaluation with another setting ({diff}); use another --out")
        for task_id, spec in task_json.items():
            old = manifest["tasks"].get(task_id)
            if old is not None and old != spec:
                raise EvalError(
                    f"task {task_id} changed since {out_dir} was started (instruction, keypaths or goal); "
                    "use another --out to evaluate the new version"
                )
        changed = any(t not in manifest["tasks"] for t in task_json)
    else:
        manifest = {"format_version": 1, "settings": settings.model_dump(mode="json"), "tasks": {}, "names": {}}
        changed = True
    manifest["tasks"].update({k: v for k, v in task_json.items() if k not in manifest["tasks"]})
    for task in tasks:
        if task.scene not in manifest["names"]:
            manifest["names"][task.scene] = scene_name_rows(task.scene)
            changed = True
    if changed:
        _atomic_write_json(path, manifest)
    return manifest


def _remove_stale_temp_dirs(out_dir: Path) -> int:
    """Temp directories of records that were being written when a previous run died."""
    removed = 0
    for root in (out_dir / EPISODES_DIR, out_dir / REFERENCE_DIR):
        if not root.is_dir():
            continue
        for task_dir in root.iterdir():
            if not task_dir.is_dir():
                continue
            for child in task_dir.iterdir():
                if child.name.startswith(".") and (".tmp-" in child.name or ".old-" in child.name):
                    shutil.rmtree(child, ignore_errors=True)
                    removed += 1
    return removed


# ------------------------------------------------------------------------------------------------- index


def read_index(out_dir: Path) -> dict[str, dict[str, Any]]:
    """The index lines by job key (later lines win; torn or foreign lines are skipped)."""
    path = out_dir / INDEX_FILE
    entries: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return entries
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
            entries[f"{entry['kind']}:{entry['task_id']}:{entry['run']}"] = entry
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
    return entries


def _repair_index_tail(path: Path) -> None:
    """Drop a torn last line (a kill during its write): keep everything up to the last newline."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as fh:
        data = fh.read()
        if data.endswith(b"\n"):
            return
        keep = data.rfind(b"\n") + 1
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
    log.warning("dropped a torn last line of %s", path)


class IndexWriter:
    """Append-only writer of ``results.jsonl``: one ``write`` per line, then ``fsync``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        _repair_index_tail(path)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, entry: dict[str, Any]) -> None:
        data = (json.dumps(entry, sort_keys=True) + "\n").encode()
        os.write(self._fd, data)
        os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)


# ------------------------------------------------------------------------------------------------ worker


class ObservationTap:
    """Wraps a simulator and keeps the last observation it returned (``reset``/``observe``).

    The agent loop hands planners only the RGB images; the random planner needs the segmentation of the
    same views. The tap gives it exactly the views the loop rendered for this round, with no extra render.
    """

    def __init__(self, sim: Any) -> None:
        self._sim = sim
        self.latest: Any = None

    def reset(self, scene: Any, seed: int = 0) -> Any:
        self.latest = self._sim.reset(scene, seed=seed)
        return self.latest

    def observe(self) -> Any:
        self.latest = self._sim.observe()
        return self.latest

    def latest_observation(self) -> Any:
        return self.latest

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sim, name)


def _noise_factory(noise: str) -> Callable[[Any, int], Any] | None:
    """A ``(sim, scene_seed) -> SkillRunner`` factory for the noise preset, None without noise.

    The noise generator is seeded with the episode's scene seed, so an episode draws the same failures
    whichever worker runs it and whatever ran before (what makes resumed evaluations identical).
    """
    if noise == "off":
        return None
    from homiebot.skills import preset_name
    from homiebot.skills.skillset import SkillSet

    preset = preset_name(noise)  # ``emmoe``: per-try SR of the paper's table 4

    def factory(sim: Any, scene_seed: int) -> Any:
        return SkillSet(sim, noise=preset, seed=scene_seed)

    return factory


def _perception_factory(perception: str) -> Callable[[Any, Any], Any] | None:
    """A ``(scene spec, initial state) -> WorldModel`` factory, None without perception."""
    if perception == "off":
        return None
    from homiebot.perception.world_model import PerceptionConfig, WorldModel

    return functools.partial(WorldModel, config=PerceptionConfig(builder=perception))  # type: ignore[arg-type]


class _WorkerState:
    """One worker's long-lived objects: the simulator, the planners and the scene resolvers."""

    def __init__(self, options: WorkerOptions) -> None:
        from homiebot.planner.registry import make_planner, planner_class
        from homiebot.sim.base import make_simulator

        self.options = options
        settings = options.settings
        cls = planner_class(settings.planner)
        self.needs_views = bool(getattr(cls, "needs_views", False))
        self.render = self.needs_views or options.images or options.video or settings.perception != "off"
        sim = make_simulator(settings.backend, render=self.render)
        self.tap = ObservationTap(sim) if self.needs_views else None
        self.sim = self.tap if self.tap is not None else sim
        planner_options = dict(settings.planner_options)
        if self.needs_views:
            planner_options["observation_source"] = self.tap.latest_observation  # type: ignore[union-attr]
            planner_options["scene_source"] = sim.scene_spec
        self.planner = make_planner(settings.planner, **planner_options)
        self.expert = self.planner if settings.self_reference else None
        self._make_planner = make_planner
        self.tasks = {k: TaskSpec.model_validate(v) for k, v in options.tasks.items()}
        self.resolvers = {scene: resolver_for(rows) for scene, rows in options.names.items()}
        self.noise = _noise_factory(settings.noise)
        self.perception = _perception_factory(settings.perception)

    def expert_planner(self) -> Any:
        if self.expert is None:
            self.expert = self._make_planner(EXPERT_PLANNER)
        return self.expert

    def run(self, job: Job) -> dict[str, Any]:
        from homiebot.agent.loop import EpisodeConfig, run_episode
        from homiebot.data.record import EpisodeRecorder

        task = self.tasks[job.task_id]
        out = Path(self.options.out_dir) / job.relpath()
        recorder = EpisodeRecorder(out, images=self.options.images, video=self.options.video)
        reference = job.kind == "reference"
        # The expert's reference episodes render only when the records keep images.
        with_perception = self.perception is not None and not reference
        render = self.options.images or self.options.video or ((self.needs_views or with_perception) and not reference)
        config = EpisodeConfig(max_rounds=self.options.settings.max_rounds, render=render)
        trajectory = run_episode(
            self.sim,
            self.expert_planner() if reference else self.planner,
            task=task,
            seed=job.run,
            config=config,
            recorder=recorder,
            skills=None if reference else self.noise,
            perception=self.perception if with_perception else None,
        )
        score = score_episode(trajectory, task, self.resolvers[task.scene], run=job.run)
        return {
            "kind": job.kind,
            "task_id": job.task_id,
            "run": job.run,
            "seed": task.seed + job.run,
            "rounds": len(trajectory.rounds),
            "tp": score.tp_exact,
            "success": score.success,
            "goal_satisfied": trajectory.goal_satisfied,
            "ended": trajectory.ended,
            "error": trajectory.error,
            "wall_s": round(trajectory.wall_time_s, 4),
        }

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.sim.shutdown()


def _release_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS after an episode.

    Without it a worker's RSS wanders by +-20% with the size of the last scenes it compiled (glibc keeps
    freed arenas), which hides a real leak; with it RSS is flat across passes over the suite
    (``benchmarks/bench_eval.py``). ``malloc_trim`` is glibc's; elsewhere only the collection runs.
    """
    import ctypes
    import gc

    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this worker when its parent dies, so a ``kill -9`` of the evaluation leaves no
    orphan that could still move a record into place while the next run works on the same directory."""
    import ctypes
    import signal

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def worker_main(conn: connection.Connection, options: WorkerOptions) -> None:
    """Entry point of a worker process: build once, then run the jobs the parent sends until ``None``."""
    _die_with_parent()
    logging.basicConfig(level=options.log_level, format="%(asctime)s %(levelname)s worker %(process)d %(name)s: %(message)s")
    os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        state = _WorkerState(options)
    except Exception as err:  # report the setup failure instead of dying silently
        conn.send(("setup_failed", None, f"{type(err).__name__}: {err}"))
        return
    conn.send(("ready", None, None))
    try:
        while True:
            job = conn.recv()
            if job is None:
                break
            started = time.perf_counter()
            try:
                result = state.run(job)
            except Exception as err:  # an infrastructure failure outside the loop's own guard
                log.exception("job %s failed", job.key)
                conn.send(("job_failed", job, f"{type(err).__name__}: {err}"))
                continue
            _release_memory()
            result["worker_pid"] = os.getpid()
            result["worker_rss_mb"] = round(_rss_mb(), 1)
            result["job_s"] = round(time.perf_counter() - started, 4)
            conn.send(("done", job, result))
    finally:
        state.close()


# ------------------------------------------------------------------------------------------------ parent


@dataclass
class _Worker:
    process: Any
    conn: connection.Connection
    job: Job | None = None
    ready: bool = False


class WorkerPool:
    """Spawned worker processes, one pipe each; a dead worker is replaced and its job retried once."""

    def __init__(self, options: WorkerOptions, size: int) -> None:
        import multiprocessing

        self._ctx = multiprocessing.get_context("spawn")
        self.options = options
        self.size = size
        self.workers: list[_Worker] = []

    def _spawn(self) -> _Worker:
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        process = self._ctx.Process(target=worker_main, args=(child_conn, self.options), daemon=True)
        process.start()
        child_conn.close()
        worker = _Worker(process, parent_conn)
        self.workers.append(worker)
        return worker

    def run(
        self,
        jobs: Sequence[Job],
        on_done: Callable[[Job, dict[str, Any]], None],
        on_failed: Callable[[Job, str], None],
    ) -> None:
        pending: deque[Job] = deque(jobs)
        deaths: dict[str, int] = {}
        for _ in range(min(self.size, len(pending))):
            self._spawn()
        try:
            while pending or any(w.job is not None for w in self.workers):
                if not self.workers:
                    self._spawn()
                waitables: dict[Any, _Worker] = {}
                for w in self.workers:
                    waitables[w.conn] = w
                    waitables[w.process.sentinel] = w
                for ready in connection.wait(list(waitables), timeout=5.0):
                    worker = waitables[ready]
                    if worker not in self.workers:
                        continue
                    if ready is worker.conn:
                        try:
                            kind, job, payload = worker.conn.recv()
                        except (EOFError, OSError):
                            self._bury(worker, pending, deaths, on_failed)
                            continue
                        if kind == "setup_failed":
                            self.close()
                            raise EvalError(f"a worker could not start: {payload}")
                        if kind == "done":
                            worker.job = None
                            on_done(job, payload)
                        elif kind == "job_failed":
                            worker.job = None
                            on_failed(job, payload)
                        worker.ready = True
                        self._feed(worker, pending)
                    else:
                        self._bury(worker, pending, deaths, on_failed)
                if pending and len(self.workers) < min(self.size, len(pending) + self._busy()):
                    self._spawn()
        finally:
            self.close()

    def _busy(self) -> int:
        return sum(w.job is not None for w in self.workers)

    def _feed(self, worker: _Worker, pending: deque[Job]) -> None:
        if pending:
            worker.job = pending.popleft()
            worker.conn.send(worker.job)
        else:
            worker.conn.send(None)
            worker.job = None
            self.workers.remove(worker)
            worker.process.join(timeout=30)
            worker.conn.close()

    def _bury(self, worker: _Worker, pending: deque[Job], deaths: dict[str, int], on_failed: Callable[[Job, str], None]) -> None:
        """A worker died: retry its episode once on a fresh worker, then give up on that episode."""
        worker.process.join(timeout=5)
        code = worker.process.exitcode
        self.workers.remove(worker)
        worker.conn.close()
        job = worker.job
        if job is None:
            if not worker.ready:
                raise EvalError(f"a worker died while starting (exit code {code})")
            return
        deaths[job.key] = deaths.get(job.key, 0) + 1
        log.warning("worker %s died (exit code %s) running %s", worker.process.pid, code, job.key)
        if deaths[job.key] < 2:
            pending.appendleft(job)
        else:
            on_failed(job, f"the worker died twice running it (exit code {code})")

    def close(self) -> None:
        for w in list(self.workers):
            with contextlib.suppress(Exception):
                w.conn.send(None)
        for w in list(self.workers):
            w.process.join(timeout=10)
            if w.process.is_alive():
                w.process.kill()
                w.process.join(timeout=5)
            with contextlib.suppress(Exception):
                w.conn.close()
        self.workers.clear()


def plan_jobs(settings: EvalSettings, tasks: Sequence[TaskSpec], runs: int) -> list[Job]:
    """Episodes, run-major (every task's run 0, then run 1, ...), each followed by its expert reference
    unless the planner is its own reference. Run-major order gives a full pass over the suite early (a
    useful partial result) and lets each worker meet every scene in the first pass."""
    if runs < 1:
        raise EvalError(f"--runs must be at least 1, got {runs}")
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
) -> EvalOutcome:
    """Run (or resume) an evaluation into ``out_dir`` and write its report. See the module docstring."""
    from homiebot.planner.registry import PlannerError, planner_class

    out = Path(out_dir).expanduser().absolute()
    if out.exists() and not out.is_dir():
        raise EvalError(f"--out {out} exists and is not a directory")
    if workers < 1:
        raise EvalError(f"--workers must be at least 1, got {workers}")
    if settings.noise not in NOISE_PRESETS:
        raise EvalError(f"unknown noise preset {settings.noise!r}; use one of {', '.join(NOISE_PRESETS)}")
    try:
        planner_class(settings.planner)
    except PlannerError as err:
        raise EvalError(str(err)) from None
    tasks = select_tasks(settings.suite, split, task_ids)
    started = time.perf_counter()
    with eval_lock(out):
        manifest = _prepare_manifest(out, settings, tasks)
        removed = _remove_stale_temp_dirs(out)
        if removed:
            log.info("removed %d half-written record(s) of an interrupted run", removed)
        jobs = plan_jobs(settings, tasks, runs)
        todo = [j for j in jobs if not is_finished(out / j.relpath())]
        index = IndexWriter(out / INDEX_FILE)
        try:
            _recover_index(out, jobs, index)
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
                _run_jobs(options, todo, min(workers, len(todo)), index, outcome, progress, settings.label())
        finally:
            index.close()
        outcome.wall_s = time.perf_counter() - started
        if report:
            write_eval_report(out)
    return outcome


def _recover_index(out: Path, jobs: Sequence[Job], index: IndexWriter) -> None:
    """Add index lines for records that a killed run finished but did not index."""
    indexed = read_index(out)
    for job in jobs:
        if job.key not in indexed and is_finished(out / job.relpath()):
            from homiebot.data.record import read_summary

            summary = read_summary(out / job.relpath())
            index.append(
                {
                    "kind": job.kind,
                    "task_id": job.task_id,
                    "run": job.run,
                    "rounds": summary.get("num_rounds"),
                    "ended": summary.get("ended"),
                    "goal_satisfied": summary.get("goal_satisfied"),
                    "error": summary.get("error"),
                    "recovered": True,
                }
            )


def _run_jobs(
    options: WorkerOptions,
    todo: Sequence[Job],
    n_workers: int,
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

    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("success {task.fields[wins]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    wins = 0
    with Progress(*columns, disable=not show_progress, transient=False) as bar:
        bar_id = bar.add_task(f"eval ({label}, {n_workers} workers)", total=len(todo), wins=0)

        def on_done(job: Job, result: dict[str, Any]) -> None:
            nonlocal wins
            result["finished_at"] = round(time.time(), 3)
            index.append(result)
            outcome.finished += 1
            outcome.worker_rss_mb.append(result.get("worker_rss_mb", 0.0))
            if job.kind == "episode" and result["success"]:
                wins += 1
            bar.update(bar_id, advance=1, wins=wins)

        def on_failed(job: Job, reason: str) -> None:
            log.error("episode %s could not be run: %s", job.key, reason)
            outcome.failed_jobs.append(f"{job.key}: {reason}")
            bar.update(bar_id, advance=1)

        WorkerPool(options, n_workers).run(todo, on_done, on_failed)


# ----------------------------------------------------------------------------------------------- metrics


@dataclass
class ScoredEvaluation:
    settings: EvalSettings
    scores: list[EpisodeScore]
    missing: list[str]  # (task, run) of the manifest's tasks with no episode record, "task/runN"
    runs: int
    reference_failures: list[str] = field(default_factory=list)  # expert references that did not succeed


def compute_scores(out_dir: str | Path) -> ScoredEvaluation:
    """Every episode's score from the records in ``out_dir`` alone (plus the snapshot in ``eval.json``)."""
    from homiebot.data.record import RecordError, read_episode

    out = Path(out_dir).expanduser().absolute()
    manifest = load_manifest(out)
    settings = EvalSettings.model_validate(manifest["settings"])
    tasks = {k: TaskSpec.model_validate(v) for k, v in manifest["tasks"].items()}
    resolvers = {scene: resolver_for(rows) for scene, rows in manifest["names"].items()}
    scores: list[EpisodeScore] = []
    reference_failures: list[str] = []
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
            try:
                trajectory = read_episode(run_dir)
            except RecordError as err:
                raise EvalError(f"unreadable record: {err}") from None
            reference_dir = run_dir if settings.self_reference else out / REFERENCE_DIR / task_id / run_dir.name
            expert = None
            if is_finished(reference_dir):
                ref = trajectory if reference_dir == run_dir else read_episode(reference_dir)
                ref_score = score_episode(ref, task, resolvers[task.scene], run=run)
                expert = ExpertReference(len(ref.rounds), ref.path_length, ref_score.success)
                if not ref_score.success:
                    # Its length still serves as L_expert (the expert's best effort); the report lists it.
                    reference_failures.append(f"{task_id}/{run_dir.name}")
            scores.append(score_episode(trajectory, task, resolvers[task.scene], run=run, expert=expert))
    runs = max(runs_seen) + 1 if runs_seen else 0
    have = {(s.task_id, s.run) for s in scores}
    missing = [f"{t}/run{r}" for t in sorted(tasks) for r in range(runs) if (t, r) not in have]
    return ScoredEvaluation(settings, scores, missing, runs, reference_failures)


def write_eval_report(out_dir: str | Path, report_dir: str | Path | None = None, *, plots: bool = True) -> dict[str, Any]:
    """Recompute the scores from the records and write ``report.md``/``report.json``/plots."""
    from homiebot.eval.report import write_report

    out = Path(out_dir).expanduser().absolute()
    scored = compute_scores(out)
    setting = {
        "suite": scored.settings.suite,
        "planner": scored.settings.planner,
        "planner_options": scored.settings.planner_options,
        "noise": scored.settings.noise,
        "max_rounds": scored.settings.max_rounds,
        "backend": scored.settings.backend,
        "perception": scored.settings.perception,
        "runs": scored.runs,
        "tasks": len({s.task_id for s in scored.scores}),
        "episodes": len(scored.scores),
        "missing_episodes": scored.missing,
        "expert_reference": "self" if scored.settings.self_reference else "expert planner, noise off, no perception, same seed",
        "expert_reference_failures": scored.reference_failures,
    }
    return write_report(scored.scores, setting, Path(report_dir) if report_dir else out, plots=plots)
