"""The fast greedy loop of the hf planner (``homiebot.planner.fast_decode``) against transformers' ``generate``.

A tiny random Qwen2-VL (``homiebot.planner.tiny_vlm``; loaded with the image-only processor where torchvision
is missing) decodes in float32 on the CPU, where the fast loop must give exactly the token ids ``generate``
gives: at batch 1, on left-padded batches, with rows that stop at different steps, with the answer grammar,
with the shared system-turn prefix, and with the two GPU switches (batched vision attention, grouped-query
SDPA) forced on; and a tiny Qwen2.5-VL, the other supported family. The tiny models' attention is made
sharp (:data:`ATTENTION_SHARPNESS`) so that a position, mask or cache mistake changes the tokens within a
few steps (checked by breaking each of them by hand while writing these tests).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from homiebot.planner.base import PlanRequest
from homiebot.planner.constrained import f1_violation
from homiebot.planner.prompt import parse_output

pytestmark = pytest.mark.models

from homiebot.testing.plan_requests import GROUNDED, make_request


def _request(seed: int = 0, history: int = 0, targets: tuple[str, ...] = GROUNDED, system: str | None = None) -> PlanRequest:
    """A request whose instruction differs per seed (so rows of a batch have different prompts)."""
    return make_request(seed, history, targets, system=system, task=f"put the apple in the fridge ({seed})")


#: Query and key projections of the tiny model are scaled by this. At transformers' initialisation
#: (std 0.02) its attention is nearly uniform, so it hardly depends on positions or on which keys are
#: masked, and a wrong position or mask would go unnoticed; scaled, attention is sharp.
ATTENTION_SHARPNESS = 8.0


def _save_sharp_tiny_model(path: Path, arch: str) -> Path:
    import torch

    from homiebot.planner.tiny_vlm import build_tiny_vlm

    model, processor = build_tiny_vlm(arch, seed=0)
    with torch.no_grad():
        for layer in model.model.language_model.layers:
            for projection in (layer.self_attn.q_proj, layer.self_attn.k_proj):
                projection.weight.mul_(ATTENTION_SHARPNESS)
                projection.bias.mul_(ATTENTION_SHARPNESS)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is fastest on a loaded 2-core machine
    yield _save_sharp_tiny_model(tmp_path_factory.mktemp("models") / "tiny-qwen2-vl", "qwen2_vl")
    torch.set_num_threads(threads)


def _engine(path: Path, **options):
    from homiebot.planner.hf_backend import LocalModelConfig, VisionLanguageModel

    return VisionLanguageModel(LocalModelConfig(model=str(path), **options))


@pytest.fixture(scope="module")
def generate_engine(tiny_qwen: Path):
    return _engine(tiny_qwen, decode="generate")


@pytest.fixture(scope="module")
def fast_engine(tiny_qwen: Path):
    return _engine(tiny_qwen, decode="fast")


@pytest.fixture(scope="module")
def shared_engine(tiny_qwen: Path):
    return _engine(tiny_qwen, decode="fast", share_prefix=True)


def _planner(engine, tiny_qwen: Path, **options):
    from homiebot.planner.hf_backend import HFPlanner

    return HFPlanner(model=str(tiny_qwen), engine=engine, **options)


def _ids(generations) -> list[tuple[int, ...]]:
    return [g.token_ids for g in generations]


def _same(reference, other) -> None:
    assert _ids(other) == _ids(reference)
    assert [g.text for g in other] == [g.text for g in reference]
    assert [(g.prompt_tokens, g.completion_tokens, g.finish_reason) for g in other] == [
        (g.prompt_tokens, g.completion_tokens, g.finish_reason) for g in reference
    ]


# ------------------------------------------------------------------------------ which loop runs


def test_decode_modes_resolve_per_family_and_device(tiny_qwen: Path, generate_engine, fast_engine) -> None:
    assert fast_engine.decode_mode == "fast" and fast_engine.fast_decoder is not None
    assert generate_engine.decode_mode == "generate" and generate_engine.fast_decoder is None
    auto = _engine(tiny_qwen)  # auto: fast only on CUDA
    assert auto.decode_mode == ("fast" if auto.device.type == "cuda" else "generate")
    # The image-only processor stands in for Qwen2-VL's only where torchvision is missing; it saves as the real one.
    assert type(fast_engine.processor).__name__ == "Qwen2VLProcessor"
    assert json.loads((tiny_qwen / "processor_config.json").read_text())["processor_class"] == "Qwen2VLProcessor"


def test_unsupported_family_with_fast_is_a_clear_load_error(tmp_path: Path, tiny_qwen: Path) -> None:
    from homiebot.planner.hf_backend import PlannerLoadError
    from homiebot.planner.registry import PlannerError, make_planner
    from homiebot.planner.tiny_vlm import save_tiny_vlm

    llava = save_tiny_vlm(tmp_path / "tiny-llava", "llava", seed=0)
    with pytest.raises(PlannerLoadError, match=r"decode='fast'.*Qwen2-VL and Qwen2.5-VL.*'llava'"):
        _engine(llava, decode="fast")
    with pytest.raises(PlannerError, match="share_prefix=True needs the fast decoding loop"):
        make_planner("hf", model=str(llava), share_prefix=True)
    assert _engine(llava).decode_mode == "generate"  # auto never picks fast for an unsupported family
    with pytest.raises(PlannerError, match="option decode=fastest must be one of auto, fast, generate"):
        make_planner("hf", model=str(tiny_qwen), decode="fastest")


# ------------------------------------------------------------------------------ the cache keyword


def test_the_loop_hands_its_cache_under_the_current_keyword(fast_engine, tiny_qwen: Path, monkeypatch) -> None:
    """transformers 5.24 renamed ``past_key_values`` to ``cache`` (the old name goes in 5.40): the loop uses
    whichever name the installed transformers takes, and never the deprecated one where ``cache`` exists."""
    import inspect

    from transformers.generation.utils import GenerationMixin

    from homiebot.planner.fast_decode import cache_keyword

    current = "cache" in inspect.signature(GenerationMixin.prepare_inputs_for_generation).parameters
    assert cache_keyword() == ("cache" if current else "past_key_values")
    base = fast_engine.fast_decoder.base
    seen: list[set[str]] = []
    forward = base.forward

    def spy(*args, **kwargs):
        seen.append({k for k in ("cache", "past_key_values") if kwargs.get(k) is not None})
        return forward(*args, **kwargs)

    monkeypatch.setattr(base, "forward", spy)
    conversation = [_planner(fast_engine, tiny_qwen).messages_for(_request(0))]
    fast_engine.generate(conversation, max_new_tokens=4)
    assert len(seen) >= 4 and all(names == {cache_keyword()} for names in seen), seen


# ------------------------------------------------------------------------------ same tokens as generate


def test_batch_1_matches_generate(generate_engine, fast_engine, tiny_qwen: Path) -> None:
    planner = _planner(generate_engine, tiny_qwen)
    conversation = [planner.messages_for(_request(0))]
    reference = generate_engine.generate(conversation, max_new_tokens=48)
    fast = fast_engine.generate(conversation, max_new_tokens=48)
    assert fast_engine.last_decode == "fast" and generate_engine.last_decode == "generate"
    _same(reference, fast)
    assert len(fast[0].token_ids) == 48 and fast[0].prompt_tokens > 500


def test_left_padded_batch_matches_generate_and_single_rows(generate_engine, fast_engine, tiny_qwen: Path) -> None:
    planner = _planner(generate_engine, tiny_qwen)
    conversations = [planner.messages_for(r) for r in (_request(0), _request(1, history=2), _request(2, history=1))]
    reference = generate_engine.generate(conversations, max_new_tokens=40)
    assert len({g.prompt_tokens for g in reference}) == 3  # three prompt lengths: two rows are padded
    fast = fast_engine.generate(conversations, max_new_tokens=40)
    _same(reference, fast)
    reused = fast_engine.fast_decoder.stats["static_cache_reused"]
    # Longest prompt first: the shorter ones then reuse its static cache, stale keys and all (masked).
    order = sorted(range(3), key=lambda i: -reference[i].prompt_tokens)
    singles = {i: fast_engine.generate([conversations[i]], max_new_tokens=40)[0] for i in order}
    _same(reference, [singles[i] for i in range(3)])
    assert fast_engine.fast_decoder.stats["static_cache_reused"] >= reused + 2


def test_rows_stop_independently_and_the_loop_ends_when_all_have(generate_engine, fast_engine, tiny_qwen: Path) -> None:
    """Stop tokens chosen from the rows' own greedy answers: each row stops at a different step."""
    import torch

    from homiebot.planner.fast_decode import FastDecoder, fast_generate

    planner = _planner(generate_engine, tiny_qwen)
    conversations = [planner.messages_for(r) for r in (_request(3), _request(4, history=2), _request(5, history=1))]
    free = generate_engine.generate(conversations, max_new_tokens=24)
    # Row r stops at the latest at step 3 + 5r; the model's own end token stays a stop token too.
    stops = sorted({free[r].token_ids[3 + 5 * r] for r in range(3)} | set(generate_engine.stop_token_ids))
    prompts = [generate_engine.render(c) for c in conversations]
    inputs = generate_engine.processor(
        text=[p for p, _ in prompts], images=[i for _, i in prompts], padding=True, return_tensors="pt"
    )
    pad = generate_engine.pad_token_id
    with torch.inference_mode():
        expected = generate_engine.model.generate(
            **inputs, max_new_tokens=24, do_sample=False, eos_token_id=stops, pad_token_id=pad,
            temperature=None, top_p=None, top_k=None,
        )
    got = fast_generate(fast_engine.model, dict(inputs), 24, stop_token_ids=stops, pad_token_id=pad)
    assert got.shape == expected.shape and torch.equal(got, expected)
    # As on CUDA, where the "all stopped" flag is read a few steps late: extra steps are cut off again.
    decoder = FastDecoder(fast_engine.model, stop_check_lag=3)
    lagged = decoder.generate(dict(inputs), 24, stop_token_ids=stops, pad_token_id=pad)
    assert torch.equal(lagged, expected)
    decoded = expected.shape[1] - inputs["input_ids"].shape[1]
    assert decoder.last_steps == min(decoded + 3, 24)
    new = got[:, inputs["input_ids"].shape[1]:]
    assert new.shape[1] < 24  # every row stopped, so the loop ended early
    stopped_at = [next(i for i, t in enumerate(row) if t in stops) for row in new.tolist()]
    assert len(set(stopped_at)) > 1  # at different steps
    for row, step in zip(new.tolist(), stopped_at):
        assert all(t == pad for t in row[step + 1 :])  # then padding


def test_constrained_greedy_matches_generate_with_no_f1(generate_engine, fast_engine, shared_engine, tiny_qwen: Path) -> None:
    kitchen, bedroom = ("fridge", "apple"), ("bed", "pillow", "wardrobe")
    requests = [_request(i, history=i % 3, targets=kitchen if i % 2 else bedroom) for i in range(5)]
    answers = {}
    for name, engine in (("generate", generate_engine), ("fast", fast_engine), ("shared", shared_engine)):
        planner = _planner(engine, tiny_qwen, constrained=True, max_new_tokens=96)
        answers[name] = (planner.plan_batch(requests), planner.last_generations)
        assert engine.last_decode == ("generate" if name == "generate" else "fast")
    reference_texts, reference = answers["generate"]
    for name in ("fast", "shared"):
        _same(reference, answers[name][1])
    for request, text, generation in zip(requests, reference_texts, reference):
        assert f1_violation(text) is None, text
        subtask = parse_output(text).subtask
        assert subtask is not None
        assert all(n is None or n in request.grounded_targets for n in (subtask.target, subtask.place))
        assert generation.finish_reason == "stop" and generation.token_ids[-1] in fast_engine.stop_token_ids
    assert len({g.completion_tokens for g in reference}) > 1  # rows of the batch finished at different steps


def test_shared_prefix_gives_the_same_tokens_and_is_computed_once(generate_engine, tiny_qwen: Path) -> None:
    engine = _engine(tiny_qwen, decode="fast", share_prefix=True)
    planner = _planner(generate_engine, tiny_qwen)
    rounds = [
        [planner.messages_for(_request(6))],
        [planner.messages_for(r) for r in (_request(7, history=1), _request(8), _request(9, history=3))],
        [planner.messages_for(_request(10, history=2))],
    ]
    for conversations in rounds:
        _same(generate_engine.generate(conversations, max_new_tokens=32), engine.generate(conversations, max_new_tokens=32))
    stats = engine.fast_decoder.stats
    assert stats["prefix_computed"] == 1 and stats["prefix_reused"] == 2 and stats["prefix_not_shared"] == 0
    prefix = engine._shared_prefix_ids(rounds[0][0:1])
    assert prefix is not None and len(prefix) > 400  # the EMMOE system prompt, not a stub

    # Different system turns in one batch: no common prefix, the whole prompt is prefilled; still the same tokens.
    mixed = [planner.messages_for(_request(11)), planner.messages_for(_request(12, system="You are a robot."))]
    assert engine._shared_prefix_ids(mixed) is None
    _same(generate_engine.generate(mixed, max_new_tokens=24), engine.generate(mixed, max_new_tokens=24))
    # A new system turn is a new prefix (kept beside the first in the LRU).
    other = [planner.messages_for(_request(13, system="You are a careful household robot."))]
    _same(generate_engine.generate(other, max_new_tokens=24), engine.generate(other, max_new_tokens=24))
    assert engine.fast_decoder.stats["prefix_computed"] == 2


def test_shared_prefix_covers_the_in_context_example(generate_engine, tiny_qwen: Path) -> None:
    """With appendix H.1's in-context example on, the preamble shared across rounds is the system turn and the
    example pair (not just the system turn); same tokens as generate."""
    from homiebot.planner.hf_backend import preamble_length

    engine = _engine(tiny_qwen, decode="fast", share_prefix=True)
    plain = _planner(generate_engine, tiny_qwen)
    icl = _planner(generate_engine, tiny_qwen, icl_example=True)
    rounds = [[icl.messages_for(_request(20))], [icl.messages_for(r) for r in (_request(21, history=2), _request(22))]]
    assert preamble_length(rounds[0][0]) == 3 and preamble_length(plain.messages_for(_request(20))) == 1
    for conversations in rounds:
        _same(generate_engine.generate(conversations, max_new_tokens=32), engine.generate(conversations, max_new_tokens=32))
    stats = engine.fast_decoder.stats
    assert stats["prefix_computed"] == 1 and stats["prefix_reused"] == 1 and stats["prefix_not_shared"] == 0
    with_example = engine._shared_prefix_ids(rounds[0])
    system_only = engine._shared_prefix_ids([plain.messages_for(_request(20))])
    assert with_example[: len(system_only)] == system_only and len(with_example) > len(system_only) + 60
    # An example pair that is not appendix H.1's is conversation, not preamble.
    edited = list(rounds[0][0])
    edited[2] = type(edited[2])("assistant", "Sure.")
    assert preamble_length(edited) == 1


def test_prefix_that_does_not_match_the_prompt_is_not_used(generate_engine, fast_engine, tiny_qwen: Path) -> None:
    """The loop checks the ids: a wrong prefix must cost sharing, never correctness."""
    import torch

    planner = _planner(generate_engine, tiny_qwen)
    prompts = [generate_engine.render(planner.messages_for(r)) for r in (_request(14), _request(15, history=1))]
    inputs = dict(generate_engine.processor(
        text=[p for p, _ in prompts], images=[i for _, i in prompts], padding=True, return_tensors="pt"
    ))
    decoder = fast_engine.fast_decoder
    before = dict(decoder.stats)
    plain = decoder.generate(inputs, 16)
    wrong = [int(t) + 1 for t in inputs["input_ids"][0, -40:-30]]  # ids that no row starts with
    assert torch.equal(decoder.generate(inputs, 16, prefix_ids=wrong), plain)
    assert decoder.stats["prefix_not_shared"] == before["prefix_not_shared"] + 1
    assert decoder.stats["prefix_computed"] == before["prefix_computed"]


def test_gpu_switches_forced_on_the_cpu_keep_the_tokens(generate_engine, tiny_qwen: Path) -> None:
    """Batched vision attention and grouped-query SDPA change kernels, not answers (float32)."""
    import torch

    from homiebot.planner.fast_decode import BatchedVisionAttention

    engine = _engine(tiny_qwen, decode="fast", share_prefix=True, batched_vision=True, sdpa_gqa=True)
    assert engine.fast_decoder.vision is not None and engine.fast_decoder.sdpa_gqa
    assert generate_engine.model.config.text_config._attn_implementation == "sdpa"  # per model, not per process
    planner = _planner(generate_engine, tiny_qwen)
    conversations = [planner.messages_for(r) for r in (_request(16), _request(17, history=2))]
    _same(generate_engine.generate(conversations, max_new_tokens=32), engine.generate(conversations, max_new_tokens=32))

    # The batched path is really taken: features match transformers' per-image path, and a wrong image size
    # (two views fused into one attention block) changes them.
    prompts = [generate_engine.render(c) for c in conversations]
    inputs = generate_engine.processor(
        text=[p for p, _ in prompts], images=[i for _, i in prompts], padding=True, return_tensors="pt"
    )
    model = generate_engine.model
    grid = inputs["image_grid_thw"]

    def features() -> torch.Tensor:
        with torch.inference_mode():
            return torch.cat(model.model.get_image_features(inputs["pixel_values"], grid, return_dict=True).pooler_output)

    reference = features()
    handle = BatchedVisionAttention(model)
    try:
        with handle.images(grid.tolist()):
            assert handle.patches_per_image == int(grid[0, 1] * grid[0, 2])
            batched = features()
        handle.patches_per_image = 2 * int(grid[0, 1] * grid[0, 2])
        fused = features()
    finally:
        handle.remove()
    assert torch.allclose(batched, reference, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(fused, reference, atol=1e-3)
    assert torch.equal(features(), reference)  # removed: transformers' forward again


def test_grouped_query_sdpa_matches_transformers_attention_and_stays_on_its_model(tiny_qwen: Path) -> None:
    """The per-model GQA switch: the same attention output as transformers' SDPA path on every shape the loop
    produces (unmasked prefill, masked decoding step; prefills after a cached prefix and left-padded ones, which
    keep transformers' repeated heads for the masked kernel), grouped
    heads really read where promised, and only the model it was installed on changes."""
    import torch
    import torch.nn.functional as F
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from homiebot.planner.fast_decode import GQA_SDPA_IMPLEMENTATION, GroupedQuerySDPA, grouped_query_sdpa
    from homiebot.planner.tiny_vlm import build_tiny_vlm

    model, _ = build_tiny_vlm("qwen2_vl", seed=0)
    other, _ = build_tiny_vlm("qwen2_vl", seed=1)
    module = model.model.language_model.layers[0].self_attn
    assert module.num_key_value_groups == 2
    generator = torch.Generator().manual_seed(0)

    def qkv(q_len: int, kv_len: int):
        q = torch.randn(2, 4, q_len, 8, generator=generator) * 3
        k, v = (torch.randn(2, 2, kv_len, 8, generator=generator) * 3 for _ in range(2))
        return q, k, v

    causal_past = torch.ones(2, 1, 3, 7, dtype=torch.bool).tril(diagonal=4)  # 3 new tokens after 4 cached
    decode_mask = torch.ones(2, 1, 1, 9, dtype=torch.bool)
    decode_mask[:, :, :, 6:] = False  # static cache: slots past the current token are masked
    padded = torch.ones(2, 1, 5, 5, dtype=torch.bool).tril()
    padded[1, :, :, :2] = False  # row 1 left-padded by two tokens
    padded[1, :, :2, :2] = torch.eye(2, dtype=torch.bool)
    gqa_calls = []
    original = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        gqa_calls.append(bool(kwargs.get("enable_gqa")))
        return original(*args, **kwargs)

    cases = [(qkv(5, 5), None, True), (qkv(3, 7), causal_past, False), (qkv(1, 9), decode_mask, True),
             (qkv(5, 5), padded, False)]
    for (q, k, v), mask, grouped in cases:
        reference, _ = sdpa_attention_forward(module, q, k, v, mask, scaling=module.scaling)
        gqa_calls.clear()
        F.scaled_dot_product_attention = spy
        try:
            out, _ = grouped_query_sdpa(module, q, k, v, mask, scaling=module.scaling)
        finally:
            F.scaled_dot_product_attention = original
        assert torch.allclose(out, reference, atol=1e-5), (q.shape, k.shape, mask is not None)
        assert gqa_calls == [grouped]

    switch = GroupedQuerySDPA(model)
    assert switch.active and model.config.text_config._attn_implementation == GQA_SDPA_IMPLEMENTATION
    assert model.config.vision_config._attn_implementation == "sdpa"  # the vision tower is left alone
    assert other.config.text_config._attn_implementation == "sdpa"  # another model in the process too
    ids = torch.tensor([[3, 5, 7, 9, 11, 13]])
    with torch.inference_mode():
        grouped_logits = model(input_ids=ids).logits
        switch.remove()
        assert model.config.text_config._attn_implementation == "sdpa"
        stock_logits = model(input_ids=ids).logits
    assert torch.allclose(grouped_logits, stock_logits, atol=1e-5)


def test_qwen2_5_vl_matches_generate(tiny_qwen: Path, tmp_path: Path) -> None:
    """The other supported family (windowed vision attention, its own get_rope_index), shared prefix on."""
    path = _save_sharp_tiny_model(tmp_path / "tiny-qwen2.5-vl", "qwen2_5_vl")
    reference_engine, engine = _engine(path, decode="generate"), _engine(path, decode="fast", share_prefix=True)
    assert engine.model_type == "qwen2_5_vl" and engine.decode_mode == "fast"
    planner = _planner(reference_engine, path, constrained=True, max_new_tokens=96)
    requests = [_request(20), _request(21, history=2), _request(22, history=1)]
    conversations = [planner.messages_for(r) for r in requests]
    _same(reference_engine.generate(conversations[:1], max_new_tokens=32), engine.generate(conversations[:1], max_new_tokens=32))
    _same(reference_engine.generate(conversations, max_new_tokens=32), engine.generate(conversations, max_new_tokens=32))
    grammars = [planner.grammar_for(r) for r in requests]
    reference = reference_engine.generate(conversations, grammars=grammars, max_new_tokens=96)
    _same(reference, engine.generate(conversations, grammars=grammars, max_new_tokens=96))
    assert engine.fast_decoder.stats["prefix_reused"] == 2


def test_sampling_falls_back_to_generate(generate_engine, fast_engine, tiny_qwen: Path) -> None:
    planner = _planner(generate_engine, tiny_qwen)
    conversations = [planner.messages_for(r) for r in (_request(18), _request(19, history=1))]
    options = {"max_new_tokens": 24, "do_sample": True, "temperature": 1.3, "seed": 5}
    reference = generate_engine.generate(conversations, **options)
    sampled = fast_engine.generate(conversations, **options)
    assert fast_engine.last_decode == "generate"
    _same(reference, sampled)


def test_homie_run_passes_decode_to_the_hf_planner(tiny_qwen: Path, tmp_path: Path) -> None:
    """``homie run --planner hf --decode fast`` plans with the fast loop (FakeWorld backend: no rendering)."""
    from typer.testing import CliRunner

    from homiebot.cli import build_app
    from homiebot.sim.base import _BACKENDS, register_backend

    register_backend("fake", "homiebot.testing.fake_world:FakeWorld")
    try:
        runner = CliRunner()
        out = tmp_path / "episode"
        result = runner.invoke(build_app(), [
            "run", "--task", "demo-drawer", "--simulator", "fake", "--planner", "hf", "--model", str(tiny_qwen),
            "--decode", "fast", "--constrained", "-p", "max_new_tokens=200", "-p", "share_prefix=true",
            "--max-rounds", "2", "--no-video", "--out", str(out),
        ])
        assert result.exit_code == 0, result.output
        summary = json.loads((out / "summary.json").read_text())
        assert 1 <= summary["num_rounds"] <= 2 and "F1" not in summary["error_codes"]  # constrained: no F1
        refused = runner.invoke(build_app(), [
            "run", "--task", "demo-drawer", "--simulator", "fake", "--planner", "expert", "--decode", "fast",
            "--out", str(tmp_path / "expert"),
        ])
        assert refused.exit_code == 2 and "does not take option(s) decode" in refused.stderr
    finally:
        _BACKENDS.pop("fake", None)
