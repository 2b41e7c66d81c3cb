"""The GPU benchmark script's CPU mode: the fast loop and prefix sharing must decode what generate does.

``benchmarks/bench_planner_gpu.py --quick`` builds a tiny model of the Qwen2-VL architecture and runs every
variant in float32 on the CPU, where all of them must produce the same greedy tokens (the script exits 1
otherwise). This keeps the script that the integrator runs on an H100 working, and checks the library's
fast loop (``homiebot.planner.fast_decode``, which the script imports) and the batched vision attention
against transformers' own code as the script drives them. The planner-side checks are in
``test_fast_decode.py``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_planner_gpu.py"


@pytest.mark.models
@pytest.mark.slow
def test_quick_mode_variants_decode_identical_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import sys

    spec = importlib.util.spec_from_file_location("bench_planner_gpu", SCRIPT)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, bench)  # dataclasses look their module up while defined
    spec.loader.exec_module(bench)
    out = tmp_path / "quick.json"
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()  # --quick runs on one thread; the rest of the suite keeps its own
    try:
        code = bench.main(["--quick", "--batched-vision", "--json", str(out),
                           "--variants", "b1-dynamic,b1-static,b1-fast,bN-shared,bN-fast,bN-fast-shared"])
    finally:
        torch.set_num_threads(threads)
    assert code == 0
    report = json.loads(out.read_text())
    assert [r["token_match"] for r in report["results"]] == [1.0] * 6
    assert report["options"]["vision_check"] == pytest.approx(0.0, abs=1e-5)
    assert report["prompt_tokens"] == 94 and report["failures"] == []
