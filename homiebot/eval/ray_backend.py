"""The Ray backend of ``homie eval --backend ray``: the same evaluation, its episodes run by Ray actors.

Ray (https://docs.ray.io/en/latest/ray-core/actors.html) schedules the workers on one machine or a
cluster; everything else is the local backend's (:mod:`homiebot.eval.runner`): the same manifest, lock,
index and records in the same output directory, so a run started with one backend resumes with the other.

* **One actor per worker**, built once like a local worker process (the local worker's state:
  its own simulator and planner) and reused for every episode it is given. Actors declare ``num_cpus``
  (and ``num_gpus``), so Ray places them where the resources are.
* **Records travel back to the driver.** An actor writes each record into a scratch directory of its own
  node, packs it (an uncompressed tar: the PNGs and the video are compressed already) and returns it with
  the episode's index line; the driver, the only writer of the output directory, unpacks it into a hidden
  temp directory beside its place and renames it into place, exactly as the local recorder does. So a
  cluster needs no shared file system, and a record is placed once whatever happens to the actors.
* **A lost worker** (its process or its node died: :class:`ray.exceptions.RayActorError`) loses only its
  scratch copy; the driver runs the episode again on another actor (once, as the local pool does) and
  replaces the actor. Nothing of the lost attempt reaches the output directory, so no row is duplicated.
* **Jobs go only to actors that are up**: an actor that Ray cannot place (its node is gone, the cluster is
  full) is simply never given work, and the evaluation finishes on the others.

``address``: None starts a private Ray instance on this machine (``ray.init(num_cpus=workers)``); ``auto``
joins the cluster that ``ray start`` runs here; ``HOST:PORT`` joins the cluster whose head listens there
(docs/ray.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import os
import shutil
import socket
import tarfile
import tempfile
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from homiebot.eval.manifest import EvalError, Job, is_finished
from homiebot.eval.worker import WorkerOptions

log = logging.getLogger(__name__)

#: Ray's version this backend is tested with (the ``ray`` extra of pyproject.toml).
RAY_VERSION = "2.60.0"
#: Object store of a private instance: records are small (an imageless one is about 40 KiB), and Ray's
#: default (30% of memory) would reserve gigabytes of /dev/shm for nothing.
LOCAL_OBJECT_STORE_BYTES = 256 * 2**20
#: How long the start-up check waits for a cluster's head to accept a connection (seconds).
CLUSTER_PROBE_TIMEOUT_S = 5.0
#: How often the driver looks at the cluster while it waits (seconds).
POLL_S = 2.0
#: After this long without a placed worker the driver logs the cluster's free resources (and again each time).
WAIT_WARNING_S = 60.0


def ray_missing() -> str | None:
    """Why the Ray backend cannot run here (None when it can)."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return "--backend ray needs Ray, which is not installed (the 'ray' extra: pip install -e '.[ray]')"
    return None


@dataclass(frozen=True)
class RayOptions:
    """Where and how the actors run."""

    address: str | None = None  # None: a private instance on this machine; "auto" or "HOST:PORT": a cluster
    num_cpus: float = 1.0  # per actor (one simulator is one busy core)
    num_gpus: float = 0.0  # per episode actor
    # Planners holding a model (homiebot.eval.ray_models): that many shared model actors (0: each worker loads
    # its own copy), each declaring these resources (model_num_gpus=1: one model per GPU).
    model_actors: int = 1
    model_num_cpus: float = 1.0
    model_num_gpus: float = 0.0


# --------------------------------------------------------------------------------------------- records


def pack_record(record_dir: Path) -> bytes:
    """The files of a record directory as an uncompressed tar (names relative to the record)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(record_dir.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(record_dir)), recursive=False)
    return buffer.getvalue()


def place_record(data: bytes, target: Path) -> bool:
    """Unpack a record beside ``target`` and rename it into place; False (and nothing written) when a record
    is there already. The hidden ``.<name>.tmp-`` directory is what the runner deletes after a crash."""
    if is_finished(target):
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
            tar.extractall(tmp, filter="data")  # "data": no absolute paths, links out or devices (PEP 706)
        if target.exists():  # a half-finished directory without its summary: never a result
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return True


# ---------------------------------------------------------------------------------------------- actor


class EpisodeActor:
    """A Ray actor running evaluation jobs: one simulator and planner, as a local worker process."""

    def __init__(self, options: WorkerOptions, model_actor: Any = None) -> None:
        from homiebot.logs import configure_logging

        configure_logging(options.log_level, "%(asctime)s %(levelname)s ray worker %(process)d %(name)s: %(message)s")
        os.environ.setdefault("MUJOCO_GL", "egl")
        self.scratch = Path(tempfile.mkdtemp(prefix="homie-ray-"))
        self.options = dataclasses.replace(options, out_dir=str(self.scratch), parent_pid=None)
        if model_actor is not None:
            # The planner's model lives in a shared model actor: the planner gets an engine that calls it. Only
            # this actor's copy of the worker options carries it; eval.json keeps the user's options.
            from homiebot.eval.ray_models import RemoteEngine

            self.options.engine = RemoteEngine(model_actor)
        self.setup_error: str | None = None
        self.state: Any = None
        try:
            # The local worker's state class: the same simulator, planners and episode code as a process worker.
            from homiebot.eval.worker import _WorkerState

            self.state = _WorkerState(self.options)
        except Exception as err:  # reported by ready(): the driver stops with it, as with a local worker
            self.setup_error = f"{type(err).__name__}: {err}"

    def ready(self) -> str | None:
        """None when the simulator and planner are built, else why they could not be."""
        return self.setup_error

    def run(self, job: Job) -> tuple[str, Job, Any, bytes | None]:
        """Run one job: ``("done", job, index line, packed record)``, ``("not_run", job, reason, None)`` or
        ``("job_failed", job, reason, None)``, the messages of a local worker."""
        import ray

        from homiebot.eval.worker import EpisodeNotRun, _release_memory, _rss_mb

        started = time.perf_counter()
        record = self.scratch / job.relpath()
        try:
            result = self.state.run(job)
            data = pack_record(record)
        except EpisodeNotRun as err:
            return "not_run", job, str(err), None
        except Exception as err:  # an infrastructure failure outside the loop's own guard
            log.exception("job %s failed", job.key)
            return "job_failed", job, f"{type(err).__name__}: {err}", None
        finally:
            shutil.rmtree(self.scratch / job.relpath(), ignore_errors=True)
        _release_memory()
        result["worker_pid"] = os.getpid()
        result["worker_node"] = ray.get_runtime_context().get_node_id()
        result["worker_rss_mb"] = round(_rss_mb(), 1)
        result["job_s"] = round(time.perf_counter() - started, 4)
        return "done", job, result, data

    def close(self) -> None:
        if self.state is not None:
            self.state.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


# --------------------------------------------------------------------------------------------- driver


@dataclass
class _Actor:
    handle: Any
    pending: Any  # the object ref the driver waits on: ready() first, then run(job)
    job: Job | None = None
    ready: bool = False


@dataclass
class RayPool:
    """Runs jobs on Ray actors with the local pool's interface (:class:`homiebot.eval.pool.WorkerPool`)."""

    options: WorkerOptions
    size: int
    ray_options: RayOptions = field(default_factory=RayOptions)
    actors: list[_Actor] = field(default_factory=list)
    started_ray: bool = False
    nodes_used: set[str] = field(default_factory=set)
    model_actors: list[Any] = field(default_factory=list)
    description: str = "Ray workers"  # the progress bar's word for them
    _spawned: int = 0

    def _init(self) -> Any:
        import ray

        from homiebot.eval.pool import WorkerSetupError

        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
        if self.ray_options.address is None:
            # A private instance: no token file (the instance listens on this machine only) and a small store.
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")
            # "local" starts a new instance even where RAY_ADDRESS or a `ray start` here names a cluster
            # (https://docs.ray.io/en/latest/ray-core/api/doc/ray.init.html).
            cpus = self.size * self.ray_options.num_cpus + self._model_actor_count() * self.ray_options.model_num_cpus
            kwargs.update(address="local", num_cpus=max(1, round(cpus)),
                          object_store_memory=LOCAL_OBJECT_STORE_BYTES)
        else:
            kwargs["address"] = self.ray_options.address
        if ray.is_initialized():
            return ray
        try:
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise WorkerSetupError(f"cannot start or join Ray (address {self.ray_options.address or 'local'}): {err}") from None
        self.started_ray = True
        return ray

    def _model_actor_count(self) -> int:
        from homiebot.eval.ray_models import SHARED_MODEL_PLANNERS

        return self.ray_options.model_actors if self.options.settings.planner.name in SHARED_MODEL_PLANNERS else 0

    def _start_model_actors(self, ray: Any) -> None:
        """The shared model actors, each loaded before any episode starts (a model that does not load stops
        the evaluation with its reason, as a worker that cannot load it does)."""
        from homiebot.eval.pool import WorkerSetupError
        from homiebot.eval.ray_models import ModelActor

        count = self._model_actor_count()
        if not count:
            return
        remote = ray.remote(
            num_cpus=self.ray_options.model_num_cpus,
            num_gpus=self.ray_options.model_num_gpus,
            max_concurrency=self.size + 2,  # every worker's call waits in the batcher at once
        )(ModelActor)
        self.model_actors = [remote.remote(self.options.settings.planner) for _ in range(count)]
        for error in ray.get([actor.ready.remote() for actor in self.model_actors]):
            if error is not None:
                raise WorkerSetupError(f"the shared model could not be loaded: {error}")
        log.info("%d shared model actor(s) up", count)

    def model_stats(self) -> list[dict[str, Any]]:
        """Calls and batches of each shared model actor (empty without them)."""
        import ray

        return [ray.get(actor.stats.remote()) for actor in self.model_actors]

    def _spawn(self, ray: Any) -> _Actor:
        remote = ray.remote(num_cpus=self.ray_options.num_cpus, num_gpus=self.ray_options.num_gpus)(EpisodeActor)
        model = self.model_actors[self._spawned % len(self.model_actors)] if self.model_actors else None
        self._spawned += 1
        handle = remote.remote(self.options, model)
        actor = _Actor(handle, handle.ready.remote())
        self.actors.append(actor)
        return actor

    def run(
        self,
        jobs: Sequence[Job],
        on_done: Callable[[Job, dict[str, Any]], None],
        on_failed: Callable[[Job, str], None],
    ) -> None:
        from homiebot.eval.pool import WorkerSetupError

        ray = self._init()
        out = Path(self.options.out_dir)
        pending: deque[Job] = deque(jobs)
        deaths: dict[str, int] = {}
        startup_deaths = 0
        last_news = time.monotonic()
        try:
            self._start_model_actors(ray)
            for _ in range(min(self.size, len(pending))):
                self._spawn(ray)
            while pending or any(a.job is not None for a in self.actors):
                waiting = {a.pending: a for a in self.actors if a.pending is not None}
                if not waiting:  # every actor died and none could be replaced yet
                    self._spawn(ray)
                    continue
                done, _ = ray.wait(list(waiting), num_returns=1, timeout=POLL_S)
                if done:
                    last_news = time.monotonic()
                elif time.monotonic() - last_news > WAIT_WARNING_S and not any(a.ready for a in self.actors):
                    # Say why nothing happens: Ray has not placed a worker (a cluster without a free CPU).
                    log.warning("no Ray worker is placed yet after %.0f s; free resources of the cluster: %s",
                                time.monotonic() - last_news, ray.available_resources())
                    last_news = time.monotonic()
                for ref in done:
                    actor = waiting[ref]
                    actor.pending = None
                    try:
                        message = ray.get(ref)
                    except ray.exceptions.RayActorError as err:
                        if not actor.ready:
                            startup_deaths += 1
                            if startup_deaths > 2 * self.size:
                                raise WorkerSetupError(f"Ray workers keep dying while starting: {err}") from None
                        self._bury(ray, actor, pending, deaths, on_failed, err)
                        continue
                    if not actor.ready:
                        if message is not None:
                            raise WorkerSetupError(f"a worker could not start: {message}")
                        actor.ready = True
                    else:
                        kind, job, payload, data = message
                        actor.job = None
                        if kind == "done":
                            assert data is not None
                            if place_record(data, out / job.relpath()):
                                self.nodes_used.add(str(payload.get("worker_node")))
                                on_done(job, payload)
                            else:  # cannot happen with one driver; never a second row
                                log.warning("%s has a record already; the new one is dropped", job.key)
                        else:
                            on_failed(job, payload)
                    self._feed(ray, actor, pending)
        except BaseException:
            self.close(kill=True)
            raise
        self.close()

    def _feed(self, ray: Any, actor: _Actor, pending: deque[Job]) -> None:
        if pending:
            actor.job = pending.popleft()
            actor.pending = actor.handle.run.remote(actor.job)
        else:
            self._retire(ray, actor)

    def _retire(self, ray: Any, actor: _Actor) -> None:
        with contextlib.suppress(Exception):
            ray.get(actor.handle.close.remote(), timeout=30)
        with contextlib.suppress(Exception):
            ray.kill(actor.handle)
        self.actors.remove(actor)

    def _bury(
        self,
        ray: Any,
        actor: _Actor,
        pending: deque[Job],
        deaths: dict[str, int],
        on_failed: Callable[[Job, str], None],
        err: Exception,
    ) -> None:
        """An actor died (its process or its node): retry its job once elsewhere and replace the actor."""
        self.actors.remove(actor)
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        job = actor.job
        if job is not None:
            deaths[job.key] = deaths.get(job.key, 0) + 1
            log.warning("Ray worker lost running %s: %s", job.key, reason)
            if deaths[job.key] < 2:
                pending.appendleft(job)
            else:
                on_failed(job, f"its worker was lost twice ({reason})")
        else:
            log.warning("Ray worker lost while starting: %s", reason)
        if pending and len(self.actors) < self.size:
            # Ray places the new actor wherever there is room; while there is none it waits and gets no job.
            self._spawn(ray)

    def close(self, *, kill: bool = False) -> None:
        import ray

        if self.model_actors and not kill:
            with contextlib.suppress(Exception):
                for stats in self.model_stats():
                    log.info("shared model actor %(pid)s: %(calls)d calls, %(requests)d requests in %(batches)d batches "
                             "(largest %(max_batch)d)", stats)
        for actor in list(self.actors):
            if kill:
                with contextlib.suppress(Exception):
                    ray.kill(actor.handle)
                self.actors.remove(actor)
            else:
                self._retire(ray, actor)
        self.actors.clear()
        for model in self.model_actors:
            with contextlib.suppress(Exception):
                ray.kill(model)
        self.model_actors = []
        if self.started_ray and ray.is_initialized():
            ray.shutdown()
            self.started_ray = False


def check_ray(address: str | None) -> None:
    """Refuse ``--backend ray`` without Ray, a malformed ``--address`` (bad input) and a cluster that is not there
    (the environment: :class:`~homiebot.eval.pool.WorkerSetupError`, exit 1), before anything is written."""
    missing = ray_missing()
    if missing:
        raise EvalError(missing)
    if address is None:
        return  # a private instance, started by the pool
    if address == "auto":
        _check_auto_cluster()
        return
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise EvalError(f"--address must be auto or HOST:PORT, got {address!r}")
    from homiebot.eval.pool import WorkerSetupError

    try:  # the head's GCS port: a TCP connection is all it takes to know that something listens there
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CLUSTER_PROBE_TIMEOUT_S):
            pass
    except OSError as err:
        reason = err.strerror or str(err) or type(err).__name__
        raise WorkerSetupError(
            f"cannot reach the Ray cluster at --address {address}: {reason}; is `ray start --head` running there?"
        ) from None


def _check_auto_cluster() -> None:
    """``--address auto``: join the cluster that runs on this machine once and leave it (Ray finds it from
    ``RAY_ADDRESS`` or the running head's process, and says at once when there is none)."""
    import ray

    from homiebot.eval.pool import WorkerSetupError

    if ray.is_initialized():
        return
    try:
        ray.init(address="auto", include_dashboard=False, log_to_driver=False, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as err:
        reason = " ".join(str(err).split()) or type(err).__name__
        raise WorkerSetupError(f"--address auto: no Ray cluster to join on this machine ({reason})") from None
    ray.shutdown()
