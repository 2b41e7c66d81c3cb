"""Collect single requests from several evaluation workers into batches for one model.

``homie eval --workers N`` runs N episodes at once; each worker asks its planner for one answer per round.
On a GPU one padded batch of N requests costs little more than one request (decoding is bound by reading
the weights, once per step for the whole batch), so the workers' calls are gathered:

* :class:`RequestBatcher` is the generic part: any thread calls :meth:`RequestBatcher.submit` (or the
  blocking :meth:`RequestBatcher.call`); one background thread waits for the first request, keeps
  collecting until ``max_batch_size`` requests are in hand or ``max_wait_s`` has passed since the first
  one arrived, and hands the batch to ``process_batch``. Each caller gets its own result, or the batch's
  exception.
* :class:`BatchingPlanner` wraps a planner whose :meth:`~homiebot.planner.base.Planner.plan_batch` serves a
  padded batch (the hf backend), so that worker threads each call ``plan`` and the model sees batches.

Workers in separate *processes* share a model through the OpenAI-compatible server
(:mod:`homiebot.planner.openai_server`), which runs the same batcher over its handler threads: point each
process at it with ``--planner openai --base-url http://127.0.0.1:PORT/v1``.

Written here rather than taken from a library: the serving frameworks that batch (vLLM, TGI, Ray Serve) are
whole servers; what is needed is a queue and a timer, built on :mod:`concurrent.futures` and
:mod:`threading`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from homiebot.planner.base import Planner, PlanRequest

log = logging.getLogger(__name__)

RequestT = TypeVar("RequestT")
ResultT = TypeVar("ResultT")


class BatcherClosed(RuntimeError):
    """A request was submitted to (or was pending in) a batcher that has been closed."""


@dataclass
class BatchStats:
    """Counts for reports and tests: how many batches of which sizes ran."""

    batches: int = 0
    requests: int = 0
    sizes: list[int] = field(default_factory=list)

    @property
    def mean_batch_size(self) -> float:
        return self.requests / self.batches if self.batches else 0.0


class RequestBatcher(Generic[RequestT, ResultT]):
    """Gathers requests from many threads into batches for ``process_batch`` (see module docstring)."""

    def __init__(
        self,
        process_batch: Callable[[list[RequestT]], Sequence[ResultT]],
        *,
        max_batch_size: int = 16,
        max_wait_s: float = 0.02,
        name: str = "request-batcher",
    ) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        if max_wait_s < 0:
            raise ValueError(f"max_wait_s must be >= 0, got {max_wait_s}")
        self._process_batch = process_batch
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_s
        self.stats = BatchStats()
        self._queue: queue.Queue[tuple[RequestT, Future[ResultT]] | None] = queue.Queue()
        self._closed = threading.Event()
        self._submit_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, request: RequestT) -> Future[ResultT]:
        """Queue one request; the future resolves when its batch has run."""
        future: Future[ResultT] = Future()
        with self._submit_lock:
            if self._closed.is_set():
                raise BatcherClosed("the batcher is closed")
            self._queue.put((request, future))
        return future

    def call(self, request: RequestT, timeout: float | None = None) -> ResultT:
        """Submit and wait for the result (re-raises the batch's exception)."""
        return self.submit(request).result(timeout=timeout)

    def close(self, timeout: float | None = 10.0) -> None:
        """Finish the batches already queued, then stop the worker thread."""
        with self._submit_lock:
            if self._closed.is_set():
                return
            self._closed.set()
            self._queue.put(None)
        self._thread.join(timeout)

    def __enter__(self) -> RequestBatcher[RequestT, ResultT]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------ worker

    def _run(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is None:
                break
            batch = [first]
            deadline = time.monotonic() + self.max_wait_s
            while len(batch) < self.max_batch_size:
                remaining = deadline - time.monotonic()
                try:
                    item = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                    break
                batch.append(item)
            self._run_batch(batch)
        # Anything still queued after close() (cannot normally happen: submit refuses once closed).
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[1].set_exception(BatcherClosed("the batcher closed before this request ran"))

    def _run_batch(self, batch: list[tuple[RequestT, Future[ResultT]]]) -> None:
        live = [(req, fut) for req, fut in batch if fut.set_running_or_notify_cancel()]
        if not live:
            return
        self.stats.batches += 1
        self.stats.requests += len(live)
        self.stats.sizes.append(len(live))
        try:
            results = list(self._process_batch([req for req, _ in live]))
            if len(results) != len(live):
                raise RuntimeError(f"process_batch returned {len(results)} results for {len(live)} requests")
        except BaseException as exc:  # noqa: BLE001 - every waiting caller must hear about the failure
            log.debug("batch of %d failed: %s", len(live), exc)
            for _, fut in live:
                fut.set_exception(exc)
            return
        for (_, fut), result in zip(live, results, strict=False):
            fut.set_result(result)


class BatchingPlanner(Planner):
    """A planner that many threads share; their ``plan`` calls reach ``inner.plan_batch`` as batches.

    ``reset`` is per episode but this object serves many episodes at once, so it is not forwarded; the
    inner planner keeps its own configuration (seeds included).
    """

    def __init__(self, inner: Planner, *, max_batch_size: int = 16, max_wait_s: float = 0.02) -> None:
        self.inner = inner
        self.name = f"batched-{inner.name}"
        self.privileged = inner.privileged
        self.accepts_free_text = inner.accepts_free_text
        self.answer_format = inner.answer_format
        self.batcher: RequestBatcher[PlanRequest, str] = RequestBatcher(
            inner.plan_batch, max_batch_size=max_batch_size, max_wait_s=max_wait_s, name=f"batcher-{inner.name}"
        )

    def plan(self, request: PlanRequest) -> str:
        return self.batcher.call(request)

    def plan_batch(self, requests: Sequence[PlanRequest]) -> list[str]:
        futures = [self.batcher.submit(r) for r in requests]
        return [f.result() for f in futures]

    def close(self) -> None:
        self.batcher.close()
        self.inner.close()
