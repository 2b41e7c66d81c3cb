"""The request batcher that gathers evaluation workers' planner calls into batches (no model needed)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.batching import BatcherClosed, BatchingPlanner, RequestBatcher


class EchoPlanner(Planner):
    """Answers each request with its instruction and records the batch sizes it was given."""

    name = "echo"

    def __init__(self, delay_s: float = 0.0) -> None:
        self.batches: list[int] = []
        self.delay_s = delay_s

    def plan(self, request: PlanRequest) -> str:
        return self.plan_batch([request])[0]

    def plan_batch(self, requests: Sequence[PlanRequest]) -> list[str]:
        self.batches.append(len(requests))
        time.sleep(self.delay_s)
        return [f"answer to {r.instruction}" for r in requests]


def _request(i: int) -> PlanRequest:
    return PlanRequest(system_prompt="s", instruction=f"task {i}", images=())


def _run_threads(target, count: int) -> list:
    results: list = [None] * count
    start = threading.Barrier(count)

    def worker(i: int) -> None:
        start.wait()
        results[i] = target(i)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return results


def test_concurrent_calls_are_batched_and_each_caller_gets_its_own_answer() -> None:
    inner = EchoPlanner(delay_s=0.01)
    planner = BatchingPlanner(inner, max_batch_size=4, max_wait_s=0.5)
    try:
        results = _run_threads(lambda i: planner.plan(_request(i)), 12)
    finally:
        planner.close()
    assert results == [f"answer to task {i}" for i in range(12)]
    assert sum(inner.batches) == 12
    assert max(inner.batches) <= 4
    assert len(inner.batches) <= 6  # a 0.5 s window gathers most of the 12 simultaneous calls
    assert planner.batcher.stats.requests == 12


def test_a_lone_request_waits_at_most_max_wait() -> None:
    batcher: RequestBatcher[int, int] = RequestBatcher(lambda xs: [x * 2 for x in xs], max_batch_size=8, max_wait_s=0.05)
    try:
        started = time.monotonic()
        assert batcher.call(21, timeout=5) == 42
        elapsed = time.monotonic() - started
    finally:
        batcher.close()
    assert 0.04 <= elapsed < 1.0
    assert batcher.stats.sizes == [1]


def test_full_batch_runs_without_waiting_for_the_window() -> None:
    batcher: RequestBatcher[int, int] = RequestBatcher(list, max_batch_size=3, max_wait_s=30.0)
    try:
        futures = [batcher.submit(i) for i in range(3)]
        assert [f.result(timeout=5) for f in futures] == [0, 1, 2]  # would take 30 s if the window ruled
    finally:
        batcher.close()


def test_a_failing_batch_fails_every_caller_in_it_and_the_batcher_goes_on() -> None:
    calls = []

    def process(xs: list[int]) -> list[int]:
        calls.append(list(xs))
        if any(x < 0 for x in xs):
            raise ValueError("negative input")
        return xs

    batcher: RequestBatcher[int, int] = RequestBatcher(process, max_batch_size=2, max_wait_s=0.2)
    try:
        bad = [batcher.submit(-1), batcher.submit(5)]
        for future in bad:
            with pytest.raises(ValueError, match="negative input"):
                future.result(timeout=5)
        assert batcher.call(7, timeout=10) == 7
    finally:
        batcher.close()


def test_wrong_result_count_is_an_error_for_the_callers() -> None:
    batcher: RequestBatcher[int, int] = RequestBatcher(lambda xs: [1], max_batch_size=2, max_wait_s=5.0)
    try:
        futures = [batcher.submit(1), batcher.submit(2)]
        with pytest.raises(RuntimeError, match="1 results for 2 requests"):
            futures[0].result(timeout=5)
    finally:
        batcher.close()


def test_closed_batcher_refuses_new_requests_but_finishes_queued_ones() -> None:
    gate = threading.Event()

    def process(xs: list[int]) -> list[int]:
        gate.wait(5)
        return xs

    batcher: RequestBatcher[int, int] = RequestBatcher(process, max_batch_size=1, max_wait_s=0.0)
    first, second = batcher.submit(1), batcher.submit(2)
    closer = threading.Thread(target=batcher.close)
    closer.start()
    time.sleep(0.05)
    gate.set()
    closer.join(5)
    assert first.result(timeout=1) == 1 and second.result(timeout=1) == 2
    with pytest.raises(BatcherClosed):
        batcher.submit(3)


@pytest.mark.parametrize("kwargs, match", [({"max_batch_size": 0}, "max_batch_size"), ({"max_wait_s": -1}, "max_wait_s")])
def test_bad_settings_are_refused(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RequestBatcher(lambda xs: xs, **kwargs)
