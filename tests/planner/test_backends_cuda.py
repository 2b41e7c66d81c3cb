"""The hf backend on a CUDA GPU with a tiny Qwen2-VL (the real Qwen2-VL processor): plain, static cache, constrained.

Skipped without a GPU (CI); run on the GPU machine. Qwen2-VL's processor needs torchvision built for the
installed torch, which the CPU-only CI torch lacks (the CPU tests load Qwen2-VL with an image-only processor
instead). On CUDA ``decode="auto"`` runs greedy calls through the fast loop (``plain`` and ``static`` below)
and sampling through ``generate`` (``constrained*``); :func:`test_fast_loop_on_cuda` checks the fast loop's
CUDA-only parts (compiled step, stop flag read late, batched vision, grouped-query SDPA).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from homiebot.planner.base import ChatTurn, PlanRequest
from homiebot.planner.constrained import f1_violation
from homiebot.planner.prompt import build_instruction, parse_output, system_prompt

GROUNDED = ("fridge", "apple", "kitchen table")


def _requests(count: int) -> list[PlanRequest]:
    rng = np.random.default_rng(0)
    return [
        PlanRequest(
            system_prompt=system_prompt(),
            instruction=build_instruction("put the apple in the fridge", [], "", "None"),
            images=[rng.integers(0, 256, (256, 256, 3), dtype=np.uint8) for _ in range(4)],
            history=[ChatTurn("Task: x", "Analysis: a\nSubtask: [Go to, fridge]\nModel: NoMaD")] * (i % 3),
            grounded_targets=GROUNDED,
        )
        for i in range(count)
    ]


@pytest.mark.models
@pytest.mark.gpu
@pytest.mark.parametrize(
    "options",
    [{}, {"cache_implementation": "static"}, {"constrained": True, "do_sample": True},
     {"constrained": True, "do_sample": True, "cache_implementation": "static"}],
    ids=["plain", "static", "constrained", "constrained-static"],
)
def test_qwen2_vl_on_cuda(options: dict, tmp_path_factory: pytest.TempPathFactory) -> None:
    pytest.importorskip("torchvision", reason="Qwen2-VL's processor needs torchvision")
    from homiebot.planner.hf_backend import HFPlanner
    from homiebot.planner.tiny_vlm import save_tiny_vlm

    path: Path = save_tiny_vlm(tmp_path_factory.mktemp("qwen") / "tiny-qwen2-vl", "qwen2_vl")
    planner = HFPlanner(model=str(path), max_new_tokens=96, **options)
    planner.reset("t", seed=1)
    answers = planner.plan_batch(_requests(6))
    assert planner.engine.device.type == "cuda" and str(planner.engine.dtype) == "torch.bfloat16"
    assert len(answers) == 6 and planner.last_generations[0].prompt_tokens > 500
    if options.get("constrained"):
        for answer in answers:
            assert f1_violation(answer) is None, answer
            assert parse_output(answer).subtask.target in (None, *GROUNDED)


@pytest.mark.models
@pytest.mark.gpu
def test_fast_loop_on_cuda(tmp_path_factory: pytest.TempPathFactory) -> None:
    """decode="auto" picks the fast loop on CUDA (compiled step, batched vision, grouped-query SDPA).

    bf16 kernels differ between the two loops, so tokens are not compared here (the CPU tests in
    ``test_fast_decode.py`` compare them in float32); answers must be complete and grammatical.
    """
    from homiebot.planner.hf_backend import HFPlanner
    from homiebot.planner.tiny_vlm import save_tiny_vlm

    path: Path = save_tiny_vlm(tmp_path_factory.mktemp("qwen") / "tiny-qwen2-vl", "qwen2_vl")
    planner = HFPlanner(model=str(path), max_new_tokens=96, constrained=True, share_prefix=True)
    engine = planner.engine
    assert engine.decode_mode == "fast" and engine.fast_decoder.vision is not None and engine.fast_decoder.sdpa_gqa
    requests = _requests(6)
    for _ in range(2):  # the second call replays the compiled step on the kept static cache
        answers = planner.plan_batch(requests)
        assert engine.last_decode == "fast"
        for answer, generation in zip(answers, planner.last_generations):
            assert f1_violation(answer) is None, answer
            assert generation.finish_reason == "stop"
    assert engine.fast_decoder.stats["prefix_reused"] >= 1 and engine.fast_decoder.stats["static_cache_reused"] >= 1
    free = HFPlanner(model=str(path), max_new_tokens=32, engine=engine)  # unconstrained, padded rows
    assert len(free.plan_batch(requests[:3])) == 3 and engine.last_decode == "fast"
    assert all(1 <= g.completion_tokens <= 32 for g in free.last_generations)


@pytest.mark.models
@pytest.mark.gpu
def test_fp8_quantization_on_cuda(tmp_path_factory: pytest.TempPathFactory) -> None:
    """quantization="fp8": the language model's linear layers hold FP8 weights (torchao), the vision tower and
    the output head stay bf16, and the fast loop plans grammatical answers with them."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchao", reason="quantization='fp8' needs torchao (pip install -e '.[fp8]')")
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("FP8 GEMMs need compute capability >= 8.9")
    from homiebot.planner.hf_backend import HFPlanner
    from homiebot.planner.tiny_vlm import save_tiny_vlm

    path: Path = save_tiny_vlm(tmp_path_factory.mktemp("qwen") / "tiny-qwen2-vl", "qwen2_vl")
    planner = HFPlanner(model=str(path), max_new_tokens=96, constrained=True, quantization="fp8")
    model = planner.engine.model
    layer = model.model.language_model.layers[0]
    weight = layer.mlp.gate_proj.weight
    assert "Float8" in type(weight).__name__ or "Float8" in type(weight.data).__name__, type(weight)
    assert model.lm_head.weight.dtype == torch.bfloat16
    assert next(model.model.visual.parameters()).dtype == torch.bfloat16
    answers = planner.plan_batch(_requests(4))
    assert planner.engine.last_decode == "fast"
    for answer in answers:
        assert f1_violation(answer) is None, answer
