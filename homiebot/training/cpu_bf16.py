"""Whether this CPU computes bf16 natively, which decides whether the cpu presets' bf16 autocast pays.

Why: the ``cpu`` presets train under ``torch.autocast("cpu", bfloat16)``, measured 1.65x cheaper per answer on a
CPU with native bf16 dot products (BENCHMARKS.md, "SFT speed levers"). On an x86 CPU without them (no AVX-512 BF16,
no AMX: an AMD EPYC of this workplace, 2026-12-01) bf16 is emulated and a step cost 12.8x the CPU of fp32 on the
same answers (BENCHMARKS.md, run 4; docs/results/trained-planner-dagger2-2026-11-30.md, "training stopped by
emulated bf16"). The machine a piece runs on is not chosen, so a preset taken by name decides from the CPU it runs
on, and logs it (:func:`homiebot.training.trainer.preset_for`, :func:`~homiebot.training.trainer.resolve_cpu_bf16`).

The CPU's features come from PyTorch's own detection (``torch.cpu._is_avx512_bf16_supported`` and
``_is_amx_tile_supported``, the checks its inductor uses; private names, so their absence reads as "unknown").
Only x86 is decided: on other architectures (ARM's BF16 extension) the preset is kept as it is.
"""

from __future__ import annotations

import platform

X86_MACHINES = frozenset({"x86_64", "amd64", "i686", "i386"})


def native_cpu_bf16() -> bool | None:
    """True where the CPU computes bf16 natively (AVX-512 BF16 or AMX), False on an x86 CPU without, None when
    unknown (another architecture, or a PyTorch without the checks)."""
    if platform.machine().lower() not in X86_MACHINES:
        return None
    try:
        import torch.cpu
    except ImportError:
        return None
    avx512_bf16 = getattr(torch.cpu, "_is_avx512_bf16_supported", None)
    amx = getattr(torch.cpu, "_is_amx_tile_supported", None)
    if avx512_bf16 is None or amx is None:
        return None
    return bool(avx512_bf16()) or bool(amx())
