"""The pool of evaluation worker processes (:mod:`homiebot.eval.worker`) and the parent's side of their pipes.

The parent watches every worker's pipe and process sentinel, so a worker that dies (segfault, OOM kill) is
noticed, its episode is retried once on a fresh worker, and the evaluation goes on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing import connection
from typing import Any

from homiebot.eval.manifest import EvalError, Job
from homiebot.eval.worker import WorkerOptions, worker_main

log = logging.getLogger(__name__)


class WorkerSetupError(EvalError):
    """A worker could not build its simulator or planner (a model that does not load, a bad option)."""


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
        options = dataclasses.replace(self.options, parent_pid=os.getpid())
        process = self._ctx.Process(target=worker_main, args=(child_conn, options), daemon=True)
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
                            raise WorkerSetupError(f"a worker could not start: {payload}")
                        if kind == "done":
                            worker.job = None
                            on_done(job, payload)
                        elif kind in ("job_failed", "not_run"):
                            worker.job = None
                            on_failed(job, payload)
                        worker.ready = True
                        self._feed(worker, pending)
                    else:
                        self._bury(worker, pending, deaths, on_failed)
                if pending and len(self.workers) < min(self.size, len(pending) + self._busy()):
                    self._spawn()
        except BaseException:
            # Ctrl-C or a setup failure: stop the workers now. Killing one mid-episode is safe, its record is
            # still a temp directory that the next run deletes.
            self.close(kill=True)
            raise
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
                raise WorkerSetupError(f"a worker died while starting (exit code {code})")
            return
        deaths[job.key] = deaths.get(job.key, 0) + 1
        log.warning("worker %s died (exit code %s) running %s", worker.process.pid, code, job.key)
        if deaths[job.key] < 2:
            pending.appendleft(job)
        else:
            on_failed(job, f"the worker died twice running it (exit code {code})")

    def close(self, *, kill: bool = False) -> None:
        """Stop every worker: ask each to finish (``None`` on its pipe), or with ``kill`` end them at once."""
        for w in list(self.workers):
            if kill:
                w.process.kill()
                continue
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
