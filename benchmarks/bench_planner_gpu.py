"""One planning step of a 7B VLM planner on a GPU: latency at batch 1, throughput batched.

What is measured: the model work of one EMMOE planning step with the Qwen2-VL-7B-Instruct architecture
(written out below from the published configuration, no download) and RANDOM weights (latency does not
depend on weight values): four 256x256 views through the vision tower, about 1,400 prompt tokens of
prefill, and exactly 80 new tokens of greedy decoding (end-of-sequence is disabled so every run decodes
80 tokens). Weights are bfloat16 on CUDA, initialised on the GPU.

The prompt is built as token ids, not text (there is no Qwen tokenizer offline): a 560-token system
turn (the EMMOE system prompt is about that long in Qwen's tokenizer), the four images (81 merged patch
tokens each for a 256x256 view resized to 252x252, plus vision start/end tokens), then 508 tokens of
instruction and history: 1,400 tokens in all. ``pixel_values`` come from transformers'
Qwen2-VL image processor on four random 256x256 views when it can be built (its time is reported as
``preprocess``), else random patches of the same shape.

Variants (each the median of ``--repeats`` timed runs after ``--warmup`` untimed ones):

* ``b1 dynamic``: ``model.generate`` at batch 1 with the default dynamic KV cache;
* ``b1 static+compile``: ``cache_implementation="static"``, which on CUDA compiles the decoding step
  (``torch.compile``, mode ``reduce-overhead``: CUDA graphs); the first call's time (compilation) is
  reported as ``warm-up``;
* ``bN dynamic`` / ``bN static+compile``: the same for a batch of ``--batch`` planning steps (the
  ``homie eval --workers`` case), reported as steps per second;
* ``bN shared prefix``: the system turn's KV cache is computed once and copied into every row of the
  batch, so prefill covers only the per-episode part (the copy is inside the timing);
* ``b1 fast`` / ``bN fast`` / ``bN fast shared prefix`` (``..., eager decode``): the greedy loop the ``hf``
  planner runs with ``decode="fast"`` (:class:`homiebot.planner.fast_decode.FastDecoder`, kept across
  calls as the planner keeps it; the shared prefix is computed inside each timed call), with the decoding
  step compiled on CUDA or, for the ``eager`` variants, not.

Greedy tokens of the variants are compared with ``b1 dynamic`` for the first prompt and reported as a
match fraction (bf16 kernels differ between variants, so small differences are expected on random
weights; in ``--quick`` mode on the CPU in float32 they must match exactly, and the script fails if not).

Floors printed for reference: batch-1 decode cannot beat reading the weights once per token
(bytes of weights / memory bandwidth); batched throughput cannot beat the prefill FLOPs at the chip's
dense bf16 rate.

Usage::

    python benchmarks/bench_planner_gpu.py --quick          # tiny config on CPU, < 1 min: proves the script
    python benchmarks/bench_planner_gpu.py                  # full: Qwen2-VL-7B config on cuda (H100: ~5 min)
    python benchmarks/bench_planner_gpu.py --batch 32 --variants b1-static,bN-shared
    python benchmarks/bench_planner_gpu.py --gqa-sdpa --batched-vision --fp8   # FP8 GEMMs (needs torchao)

Needs torch with CUDA, transformers >= 5.23 (``mm_token_type_ids`` API of Qwen2-VL), torchvision for the
real image processor (optional).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout: the package is next to benchmarks/
    sys.path.insert(0, str(ROOT))

from homiebot.planner import fast_decode  # after the path fix; imports no torch

log = logging.getLogger("bench_planner_gpu")

# Qwen2-VL-7B-Instruct special token ids (its tokenizer's added tokens).
BOS_ID, EOS_ID, PAD_ID = 151643, 151645, 151643
VISION_START_ID, VISION_END_ID, IMAGE_ID, VIDEO_ID = 151652, 151653, 151655, 151656


@dataclass(frozen=True)
class Shape:
    """The prompt and generation sizes of one planning step."""

    system_tokens: int
    tail_tokens: int
    image_side: int  # each view is image_side x image_side pixels
    patch: int
    merge: int
    new_tokens: int
    views: int = 4

    @property
    def resized_side(self) -> int:
        unit = self.patch * self.merge
        return max(unit, round(self.image_side / unit) * unit)

    @property
    def grid(self) -> int:
        return self.resized_side // self.patch

    @property
    def tokens_per_image(self) -> int:
        return (self.grid // self.merge) ** 2

    @property
    def prompt_tokens(self) -> int:
        return self.system_tokens + self.views * (self.tokens_per_image + 2) + self.tail_tokens


FULL_SHAPE = Shape(system_tokens=560, tail_tokens=508, image_side=256, patch=14, merge=2, new_tokens=80)
QUICK_SHAPE = Shape(system_tokens=40, tail_tokens=30, image_side=56, patch=14, merge=2, new_tokens=8)


def qwen2_vl_7b_config(quick: bool) -> Any:
    """Qwen2-VL-7B-Instruct's architecture (or a tiny one of the same family for ``--quick``)."""
    from transformers import Qwen2VLConfig

    if quick:
        text = {"vocab_size": 152064, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                    "num_attention_heads": 4, "num_key_value_heads": 2,
                    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [2, 3, 3]}}
        vision = {"depth": 2, "embed_dim": 32, "hidden_size": 64, "num_heads": 2, "mlp_ratio": 2}
    else:
        text = {"vocab_size": 152064, "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
                    "num_attention_heads": 28, "num_key_value_heads": 4,
                    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]}}
        vision = {"depth": 32, "embed_dim": 1280, "hidden_size": 3584, "num_heads": 16, "mlp_ratio": 4}
    text.update(max_position_embeddings=32768, rms_norm_eps=1e-6, hidden_act="silu", tie_word_embeddings=False,
                bos_token_id=BOS_ID, eos_token_id=EOS_ID, pad_token_id=PAD_ID, use_sliding_window=False)
    vision.update(in_channels=3, patch_size=14, spatial_merge_size=2, temporal_patch_size=2, hidden_act="quick_gelu")
    return Qwen2VLConfig(
        text_config=text, vision_config=vision, image_token_id=IMAGE_ID, video_token_id=VIDEO_ID,
        vision_start_token_id=VISION_START_ID, vision_end_token_id=VISION_END_ID, tie_word_embeddings=False,
    )


def build_model(quick: bool, device: Any, dtype: Any, attn: str | None) -> Any:
    import torch
    from transformers import Qwen2VLForConditionalGeneration

    config = qwen2_vl_7b_config(quick)
    if attn:
        config._attn_implementation = attn
    torch.manual_seed(0)
    with torch.device(device):
        # Initialising on the device: 8 B normal draws take about a second on a GPU, minutes on a CPU.
        model = Qwen2VLForConditionalGeneration._from_config(config, dtype=dtype)
    model.eval()
    model.generation_config.eos_token_id = None  # decode exactly the requested number of tokens
    model.generation_config.pad_token_id = PAD_ID
    model.generation_config.do_sample = False
    return model


def make_pixels(shape: Shape, count: int, device: Any, dtype: Any) -> tuple[Any, Any, float | None]:
    """``pixel_values`` and ``image_grid_thw`` for ``count`` views, and the image processor's time per step."""
    import numpy as np
    import torch

    rng = np.random.default_rng(0)
    try:
        from transformers import Qwen2VLImageProcessor

        processor = Qwen2VLImageProcessor(min_pixels=shape.resized_side**2, max_pixels=shape.resized_side**2)
        from PIL import Image

        views = [Image.fromarray(rng.integers(0, 256, (shape.image_side, shape.image_side, 3), dtype=np.uint8))
                 for _ in range(shape.views)]
        started = time.perf_counter()
        one_step = processor(images=views, return_tensors="pt")
        preprocess_s = time.perf_counter() - started
        grid = one_step["image_grid_thw"]
        assert int(grid[0, 1]) == shape.grid, f"processor grid {grid[0].tolist()} != expected {shape.grid}"
        pixel_values = one_step["pixel_values"].repeat(count // shape.views, 1)
        grid = grid.repeat(count // shape.views, 1)
    except Exception as exc:  # noqa: BLE001 - no torchvision / a processor API change: same shapes, random values
        log.warning("image processor unavailable (%s); using random patches of the same shape", exc)
        preprocess_s = None
        patches = shape.grid * shape.grid
        pixel_values = torch.randn(count * patches, 3 * 2 * 14 * 14)
        grid = torch.tensor([[1, shape.grid, shape.grid]] * count)
    return pixel_values.to(device, dtype), grid.to(device), preprocess_s


def make_inputs(shape: Shape, batch: int, device: Any, dtype: Any, seed: int = 0) -> tuple[dict[str, Any], float | None]:
    """Model inputs for ``batch`` planning steps (same system turn, different episodes' tails)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    text_vocab = BOS_ID  # ordinary text tokens are below the special tokens
    system = torch.randint(0, text_vocab, (shape.system_tokens,), generator=generator)
    rows = []
    for _ in range(batch):
        parts = [system]
        for _ in range(shape.views):
            parts += [torch.tensor([VISION_START_ID]), torch.full((shape.tokens_per_image,), IMAGE_ID),
                      torch.tensor([VISION_END_ID])]
        parts.append(torch.randint(0, text_vocab, (shape.tail_tokens,), generator=generator))
        rows.append(torch.cat(parts))
    input_ids = torch.stack(rows)
    assert input_ids.shape[1] == shape.prompt_tokens
    pixel_values, grid, preprocess_s = make_pixels(shape, batch * shape.views, device, dtype)
    inputs = {
        "input_ids": input_ids.to(device),
        "attention_mask": torch.ones_like(input_ids).to(device),
        "mm_token_type_ids": (input_ids == IMAGE_ID).int().to(device),
        "pixel_values": pixel_values,
        "image_grid_thw": grid,
    }
    return inputs, preprocess_s


# The fast loop and its switches live in the library (homiebot.planner.fast_decode), where the hf planner uses
# them; these names are the benchmark's handles on them.
prefix_cache = fast_decode.prefix_cache  # the system turn's KV, repeated per row (for generate's shared prefix)
_DECODERS: dict[tuple[int, bool], Any] = {}


def fast_generate(model: Any, inputs: dict[str, Any], new_tokens: int, *, prefix_len: int = 0, compiled: bool = True,
                  timings: dict[str, float] | None = None) -> Any:
    """The ``fast`` variants: the hf planner's loop, one :class:`~homiebot.planner.fast_decode.FastDecoder` per
    model and mode kept across calls as the planner keeps its own (its static cache is reused), except that
    the shared prefix is computed inside every timed call (``prefix_cache_size=0``). No stop tokens: exactly
    ``new_tokens`` are decoded."""
    decoder = _DECODERS.get((id(model), compiled))
    if decoder is None:
        decoder = _DECODERS[(id(model), compiled)] = fast_decode.FastDecoder(model, compile=compiled, prefix_cache_size=0)
    prefix_ids = inputs["input_ids"][0, :prefix_len].tolist() if prefix_len else None
    return decoder.generate(inputs, new_tokens, prefix_ids=prefix_ids, timings=timings)


def batched_vision_attention(model: Any, patches_per_image: int) -> Any:
    """One batched SDPA call per vision layer for views of ``patches_per_image`` patches; returns a restore.

    :class:`homiebot.planner.fast_decode.BatchedVisionAttention` installed on the model's vision attention
    modules with a fixed image size (every view of a planning step has the same size); ``--batched-vision``
    turns it on after :func:`check_batched_vision` has compared both on the same input.
    """
    handle = fast_decode.BatchedVisionAttention(model)
    handle.patches_per_image = patches_per_image
    return handle.remove


def check_batched_vision(model: Any, shape: Shape, device: Any, dtype: Any) -> float:
    """Relative difference of the vision tower's output with and without :func:`batched_vision_attention`."""
    import torch

    inputs, _ = make_inputs(shape, 2, device, dtype)
    with torch.inference_mode():
        reference = torch.cat(model.model.get_image_features(inputs["pixel_values"], inputs["image_grid_thw"],
                                                             return_dict=True).pooler_output).float()
        restore = batched_vision_attention(model, shape.grid * shape.grid)
        batched = torch.cat(model.model.get_image_features(inputs["pixel_values"], inputs["image_grid_thw"],
                                                           return_dict=True).pooler_output).float()
        restore()
    return float((batched - reference).norm() / reference.norm())



@dataclass
class Result:
    variant: str
    batch: int
    median_s: float
    runs_s: list[float]
    warmup_s: list[float]
    new_tokens: int
    token_match: float | None = None
    peak_gib: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def steps_per_s(self) -> float:
        return self.batch / self.median_s


def sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def run_variant(name: str, model: Any, shape: Shape, batch: int, device: Any, dtype: Any, warmup: int, repeats: int,
                cache: str | None, shared_prefix: bool, fast: bool = False, eager: bool = False) -> tuple[Result, Any]:
    import torch

    inputs, _ = make_inputs(shape, batch, device, dtype)
    kwargs = {"max_new_tokens": shape.new_tokens, "min_new_tokens": shape.new_tokens, "do_sample": False}
    if cache:
        kwargs["cache_implementation"] = cache

    def once() -> tuple[float, Any]:
        sync(device)
        started = time.perf_counter()
        extra: dict[str, Any] = {}
        if fast:
            out = fast_generate(model, inputs, shape.new_tokens, prefix_len=shape.system_tokens if shared_prefix else 0,
                                compiled=device.type == "cuda" and not eager)
            sync(device)
            return time.perf_counter() - started, out
        if shared_prefix:
            extra["past_key_values"] = prefix_cache(model, inputs, shape.system_tokens, batch)
        with torch.inference_mode():
            out = model.generate(**inputs, **kwargs, **extra)
        sync(device)
        return time.perf_counter() - started, out

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    warm = []
    for _ in range(warmup):
        seconds, _ = once()
        warm.append(seconds)
        log.info("%s warm-up run: %.3f s", name, seconds)
    runs = []
    out = None
    for _ in range(repeats):
        seconds, out = once()
        runs.append(seconds)
    generated = out[:, shape.prompt_tokens:]
    assert generated.shape[1] == shape.new_tokens, f"{name}: decoded {generated.shape[1]} tokens"
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None
    result = Result(name, batch, statistics.median(runs), runs, warm, shape.new_tokens, peak_gib=peak)
    if fast:  # one more run with synchronised split timings (not part of the median)
        split: dict[str, float] = {}
        fast_generate(model, inputs, shape.new_tokens, prefix_len=shape.system_tokens if shared_prefix else 0,
                      compiled=device.type == "cuda" and not eager, timings=split)
        result.extra["split_s"] = split
    log.info("%s: median %.3f s (%s)", name, result.median_s, ", ".join(f"{r:.3f}" for r in runs))
    return result, generated[0].tolist()


def floors(model: Any, shape: Shape, bandwidth_tb_s: float, dense_tflops: float) -> dict[str, float]:
    """Memory-bandwidth floor of batch-1 decoding and compute floor of batched prefill (see module doc)."""
    params = sum(p.numel() for p in model.parameters())
    vision = sum(p.numel() for p in model.model.visual.parameters())
    language = params - vision
    bytes_per_token = language * 2  # bf16 weights read once per decoded token
    decode_floor = shape.new_tokens * bytes_per_token / (bandwidth_tb_s * 1e12)
    prompt_flops = 2 * language * shape.prompt_tokens + 2 * vision * shape.views * shape.grid**2
    decode_flops = 2 * language * shape.new_tokens
    step_flops = prompt_flops + decode_flops
    return {
        "params_b": params / 1e9,
        "batch1_bandwidth_floor_s": decode_floor,
        "batched_compute_floor_steps_per_s": dense_tflops * 1e12 / step_flops,
        "step_tflop": step_flops / 1e12,
    }


VARIANTS = ("b1-dynamic", "b1-static", "b1-fast", "bN-dynamic", "bN-static", "bN-shared", "bN-fast", "bN-fast-shared",
            "bN-fast-eager", "bN-fast-shared-eager")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny config on the CPU: checks the script in < 1 min")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated subset of {VARIANTS}")
    parser.add_argument("--attn", default="sdpa", help="attention implementation (sdpa, flash_attention_2, eager)")
    parser.add_argument("--bandwidth-tb-s", type=float, default=3.35, help="HBM bandwidth for the floor (H100 SXM)")
    parser.add_argument("--dense-tflops", type=float, default=790.0, help="measured bf16 matmul rate for the floor")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--batched-vision", action="store_true",
                        help="one SDPA call per layer for all views (see batched_vision_attention)")
    parser.add_argument("--fp8", action="store_true",
                        help="FP8 weights and activations for the language model's linear layers (torchao, per-row "
                             "scales: hf_backend.quantize_fp8, the planner's quantization='fp8'); needs compute "
                             "capability >= 8.9")
    parser.add_argument("--gqa-sdpa", action="store_true",
                        help="SDPA reads grouped KV heads instead of repeated ones (fast_decode.GroupedQuerySDPA on the "
                             "model, for every variant)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import torch
    import transformers

    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {VARIANTS}")
    if args.quick:
        device, dtype, shape = torch.device("cpu"), torch.float32, QUICK_SHAPE
        batch = min(args.batch, 4)
        warmup, repeats = args.warmup if args.warmup is not None else 0, args.repeats or 1
        torch.set_num_threads(1)
    else:
        if not torch.cuda.is_available():
            parser.error("the full benchmark needs a CUDA GPU; use --quick to check the script on a CPU")
        device, dtype, shape, batch = torch.device("cuda"), torch.bfloat16, FULL_SHAPE, args.batch
        warmup, repeats = args.warmup if args.warmup is not None else 1, args.repeats or 5
    started = time.perf_counter()
    model = build_model(args.quick, device, dtype, args.attn)
    build_s = time.perf_counter() - started
    log.info("built %s parameters in %.1f s on %s (%s)", f"{sum(p.numel() for p in model.parameters()) / 1e9:.2f} B",
             build_s, device, dtype)
    _, preprocess_s = make_inputs(shape, 1, device, dtype)
    vision_check = None
    if args.fp8:
        from homiebot.planner.hf_backend import PlannerLoadError, check_fp8_support, quantize_fp8

        try:
            check_fp8_support(device)
        except PlannerLoadError as exc:
            parser.error(str(exc))
        quantize_fp8(model)
    if args.gqa_sdpa:
        fast_decode.GroupedQuerySDPA(model)  # per model, for every variant (generate and the fast loop)
    if args.batched_vision:
        vision_check = check_batched_vision(model, shape, device, dtype)
        log.info("batched vision attention: relative difference %.2e", vision_check)
        if vision_check > (1e-5 if dtype == torch.float32 else 2e-2):
            parser.error(f"batched vision attention differs from transformers' by {vision_check:.2e}")
        batched_vision_attention(model, shape.grid * shape.grid)

    plan = {
        "b1-dynamic": ("b1 dynamic", 1, None, False),
        "b1-static": ("b1 static+compile", 1, "static", False),
        "bN-dynamic": (f"b{batch} dynamic", batch, None, False),
        "bN-static": (f"b{batch} static+compile", batch, "static", False),
        "bN-shared": (f"b{batch} shared prefix", batch, None, True),
        "b1-fast": ("b1 fast", 1, None, False),
        "bN-fast": (f"b{batch} fast", batch, None, False),
        "bN-fast-shared": (f"b{batch} fast shared prefix", batch, None, True),
        "bN-fast-eager": (f"b{batch} fast, eager decode", batch, None, False),
        "bN-fast-shared-eager": (f"b{batch} fast shared, eager decode", batch, None, True),
    }
    results: list[Result] = []
    reference: list[int] | None = None
    failures: list[str] = []
    for key in variants:
        name, size, cache, shared = plan[key]
        # A static cache compiles on first use: one more warm-up run so the timed runs are steady.
        fast = "fast" in key
        eager = key.endswith("eager")
        variant_warmup = warmup + (1 if (cache == "static" or (fast and not eager)) and device.type == "cuda" else 0)
        try:
            result, tokens = run_variant(name, model, shape, size, device, dtype, variant_warmup, repeats, cache, shared,
                                         fast=fast, eager=eager)
        except Exception as exc:  # report and go on: one broken variant must not cost the others' figures
            log.exception("%s failed", name)
            failures.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        if reference is None:
            reference = tokens
        result.token_match = sum(a == b for a, b in zip(tokens, reference, strict=False)) / len(reference)
        results.append(result)

    bounds = floors(model, shape, args.bandwidth_tb_s, args.dense_tflops)
    print_table(results, shape, bounds, preprocess_s, device, build_s, torch, transformers)
    if args.json:
        payload = {"shape": asdict(shape), "prompt_tokens": shape.prompt_tokens, "floors": bounds,
                   "preprocess_s": preprocess_s, "results": [asdict(r) | {"steps_per_s": r.steps_per_s} for r in results],
                   "options": {"batched_vision": args.batched_vision, "vision_check": vision_check,
                               "gqa_sdpa": args.gqa_sdpa, "attn": args.attn, "fp8": args.fp8},
                   "failures": failures, "torch": torch.__version__, "transformers": transformers.__version__,
                   "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu"}
        Path(args.json).write_text(json.dumps(payload, indent=2))
    if failures:
        print("FAILED variants:\n  " + "\n  ".join(failures))
        return 1
    if args.quick and any(r.token_match != 1.0 for r in results):
        print("FAILED: in float32 on the CPU every variant must decode the same greedy tokens")
        return 1
    return 0


def print_table(results: list[Result], shape: Shape, bounds: dict[str, float], preprocess_s: float | None,
                device: Any, build_s: float, torch: Any, transformers: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    table = Table(title=(f"planning step: {shape.prompt_tokens} prompt tokens (4 views {shape.image_side}px), "
                         f"{shape.new_tokens} new tokens; {name}, torch {torch.__version__}, "
                         f"transformers {transformers.__version__}"))
    for column in ("variant", "batch", "median s / step batch", "steps/s", "ms/token", "warm-up s", "peak GiB",
                   "vision / prefill / decode s", "tokens = first"):
        table.add_column(column, justify="right")
    for r in results:
        table.add_row(
            r.variant, str(r.batch), f"{r.median_s:.3f}", f"{r.steps_per_s:.2f}",
            f"{1000 * r.median_s / r.new_tokens:.1f}", ", ".join(f"{w:.1f}" for w in r.warmup_s) or "-",
            f"{r.peak_gib:.1f}" if r.peak_gib is not None else "-",
            " / ".join(f"{v:.3f}" for v in r.extra["split_s"].values()) if "split_s" in r.extra else "-",
            f"{100 * r.token_match:.0f}%" if r.token_match is not None else "-",
        )
    console = Console(width=160)
    console.print(table)
    console.print(
        f"model {bounds['params_b']:.2f} B parameters (built in {build_s:.1f} s); one step {bounds['step_tflop']:.1f} TFLOP; "
        f"floors: batch-1 weight reads {bounds['batch1_bandwidth_floor_s']:.3f} s, "
        f"batched compute {bounds['batched_compute_floor_steps_per_s']:.1f} steps/s; "
        f"image preprocessing (CPU, 4 views) {preprocess_s * 1000:.1f} ms" if preprocess_s is not None else
        "image preprocessing: not measured (no processor)"
    )


if __name__ == "__main__":
    sys.exit(main())
