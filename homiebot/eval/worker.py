"""An evaluation worker process: one simulator and planner, built once, running the jobs its parent sends.

Workers are ``spawn``-ed (:mod:`homiebot.eval.pool`); each talks to the parent over its own pipe, sending one
message per job: ``("done", job, index line)`` for an episode that is a result, ``("not_run", job, reason)``
for one that ended by an infrastructure failure (see :class:`InfrastructureGuard`), ``("job_failed", job,
reason)`` for a failure outside the episode loop's own guard.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing import connection
from pathlib import Path
from typing import Any

from numpy.typing import NDArray

from homiebot.data.record import EpisodeRecorder
from homiebot.eval.manifest import EvalSettings, Job, resolver_for
from homiebot.eval.partnr.recording import simulator_clock
from homiebot.logs import configure_logging
from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.hf_backend import PlannerBackendError
from homiebot.process import die_with_parent
from homiebot.tasks.suite import TaskSpec
from homiebot.types import Trajectory

log = logging.getLogger(__name__)


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
    parent_pid: int | None = None
    #: A shared model actor's engine for the planner (homiebot.eval.ray_models.RemoteEngine); not configuration,
    #: so eval.json keeps the user's options without it.
    engine: Any = None


class EpisodeNotRun(RuntimeError):
    """The episode ended by an infrastructure failure (the planner's server or model): not a result."""


class InfrastructureGuard(Planner):
    """Runs a planner and remembers the first infrastructure failure of the current episode.

    The episode loop turns every planner exception into an ended episode with an error (right for a planner
    that misbehaves: that is the planner's score). A planner *backend* that cannot answer at all (server
    unreachable, model not loadable: :class:`~homiebot.planner.hf_backend.PlannerBackendError`) says nothing
    about the planner, so such an episode must not be stored as a result; the guard lets the worker tell the
    two apart without parsing error text.

    Everything the :class:`Planner` interface declares (attributes and methods) is taken from the wrapped
    planner, so the loop sees the same capabilities; anything else is forwarded by ``__getattr__``.
    """

    def __init__(self, inner: Planner) -> None:
        self.inner = inner
        self.failure: PlannerBackendError | None = None
        own = set(vars(InfrastructureGuard))
        for attr in dir(Planner):
            if not attr.startswith("_") and attr not in own:
                setattr(self, attr, getattr(inner, attr))

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)

    def reset(self, task: str, seed: int = 0) -> None:
        self.failure = None
        self.inner.reset(task, seed)

    def plan(self, request: PlanRequest) -> str:
        try:
            return self.inner.plan(request)
        except PlannerBackendError as err:
            self.failure = self.failure or err
            raise

    def plan_batch(self, requests: Sequence[PlanRequest]) -> list[str]:
        try:
            return self.inner.plan_batch(requests)
        except PlannerBackendError as err:
            self.failure = self.failure or err
            raise

    def close(self) -> None:
        self.inner.close()


class GuardedRecorder(EpisodeRecorder):
    """An episode recorder that keeps the record only when the episode is a result.

    When the guard saw an infrastructure failure, ``finish`` drops the temp directory (nothing reaches the
    evaluation directory, so the index never lists it and a later run runs it again) and raises
    :class:`EpisodeNotRun` with the first failure's message.
    """

    def __init__(self, out_dir: str | Path, guard: InfrastructureGuard, *, images: bool, video: bool) -> None:
        super().__init__(out_dir, images=images, video=video)
        self.guard = guard

    def finish(self, trajectory: Trajectory, topdown: NDArray[Any] | None = None) -> Path:
        if self.guard.failure is not None:
            self.abort()
            raise EpisodeNotRun(str(self.guard.failure))
        return super().finish(trajectory, topdown=topdown)


class _WorkerState:
    """One worker's long-lived objects: the simulator, the planners and the scene resolvers; each job's episode is
    built by :func:`homiebot.agent.build.build_episode` from the evaluation's run configuration."""

    def __init__(self, options: WorkerOptions) -> None:
        from homiebot.agent.build import build_simulator
        from homiebot.planner.registry import build_planner

        self.options = options
        settings = options.settings
        # The episodes' settings, rendering and recording included, as eval.json keeps them: the simulator renders
        # when the records keep views or the episodes read them (a world graph; a planner that reads the views'
        # segmentation, which the loop fetches for it: homiebot.agent.loop.reads_observation).
        self.config = settings.run_config(images=options.images, video=options.video)
        self.reference = settings.reference_run_config(images=options.images, video=options.video)
        self.sim = sim = build_simulator(self.config.simulator)
        # The simulator's nominal clock for PARTNR's simulated time, where the backend keeps one (MuJoCo does).
        self.clock = simulator_clock(sim)
        # A shared model actor's engine (homie eval --backend ray --model-actors N) is handed to the planner.
        objects = {} if options.engine is None else {"engine": options.engine}
        self.planner = InfrastructureGuard(build_planner(self.config.planner, **objects))
        self.expert: InfrastructureGuard | None = self.planner if settings.self_reference else None
        self.tasks = {k: TaskSpec.model_validate(v) for k, v in options.tasks.items()}
        self.resolvers = {scene: resolver_for(rows) for scene, rows in options.names.items()}

    def expert_planner(self) -> InfrastructureGuard:
        if self.expert is None:
            from homiebot.planner.registry import build_planner

            self.expert = InfrastructureGuard(build_planner(self.reference.planner))
        return self.expert

    def run(self, job: Job) -> dict[str, Any]:
        """Run one episode into its record and return its index line; raises :class:`EpisodeNotRun` (and
        writes nothing) when the episode ended by an infrastructure failure."""
        from homiebot.agent.build import build_episode
        from homiebot.eval.partnr.recording import StatesFileRecorder

        task = self.tasks[job.task_id]
        reference = job.kind == "reference"
        planner = self.expert_planner() if reference else self.planner
        setting = self.reference if reference else self.config
        out = Path(self.options.out_dir) / job.relpath()
        recorder = GuardedRecorder(out, planner, images=self.options.images, video=self.options.video)
        config = setting.model_copy(update={"task": job.task_id, "seed": job.run})
        # PARTNR: every record keeps its states and evaluation function (docs/partnr.md); tasks with their own
        # function switch and clean (the household actions), and the PARTNR expert plans from that function.
        # It judges the episode too (homiebot.eval.verdict), by the evaluation's own snapshot of the scene's names:
        # the summary's success, this index line's and every table's are one verdict.
        states = StatesFileRecorder(recorder, task=task, clock=self.clock, resolver=self.resolvers[task.scene])
        episode = build_episode(config, task=task, simulator=self.sim, planner=planner, recorder=recorder,
                                judge=lambda *_: states)
        trajectory = episode.run()
        verdict = states.verdict(trajectory)
        return {
            "kind": job.kind,
            "task_id": job.task_id,
            "run": job.run,
            "seed": task.seed + job.run,
            "rounds": len(trajectory.rounds),
            "tp": verdict.tp,
            "success": verdict.success,
            "goal_satisfied": trajectory.goal_satisfied,
            "ended": trajectory.ended,
            "error": trajectory.error,
            "wall_s": round(trajectory.wall_time_s, 4),
        }

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.planner.close()
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

    return float(psutil.Process().memory_info().rss) / 2**20


def worker_main(conn: connection.Connection, options: WorkerOptions) -> None:
    """Entry point of a worker process: build once, then run the jobs the parent sends until ``None``."""
    die_with_parent(signal.SIGKILL, parent_pid=options.parent_pid)
    # Ctrl-C reaches the whole process group; the parent alone handles it (and ends the workers), so the
    # terminal shows one line instead of a traceback per worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    configure_logging(options.log_level, "%(asctime)s %(levelname)s worker %(process)d %(name)s: %(message)s")
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
            except EpisodeNotRun as err:
                conn.send(("not_run", job, str(err)))
                continue
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
