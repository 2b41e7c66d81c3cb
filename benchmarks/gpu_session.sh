#!/usr/bin/env bash
# The planner's GPU checks and figures in one command, for a machine with an NVIDIA GPU whose Python already
# has torch with CUDA and transformers (the device machine's image does; nothing is downloaded there).
#
#   bash benchmarks/gpu_session.sh [OUT_DIR]        # about 20 minutes on an H100
#
# 1. pytest -m gpu tests/planner: the fast loop's CUDA-only parts (compiled step on a reused static cache,
#    the late stop check, batched vision, grouped-query SDPA) and quantization="fp8".
# 2. benchmarks/bench_planner_gpu.py with --gqa-sdpa --batched-vision, then the same with --fp8: the
#    figures of BENCHMARKS.md ("One planning step of a 7B VLM on an H100"), as JSON in OUT_DIR.
#
# Packages the GPU machine lacks travel as wheels in .whl/ (git-ignored), installed to /tmp/site here.
# Fetch them on a machine with pip access (Python 3.12 there):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 -d .whl torchao==0.18.0 xgrammar==0.2.8
set -uo pipefail
out="${1:-${OUT:-benchmarks/results}}"
mkdir -p "$out"
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee -a "$out/gpu.txt"

status=0
python3 -m pytest -m gpu tests/planner -q -p no:cacheprovider 2>&1 | tee "$out/pytest_gpu.log" || status=1
python3 benchmarks/bench_planner_gpu.py --gqa-sdpa --batched-vision --json "$out/planner_gpu_h100_library_gqa_bv.json" \
    2>&1 | tee "$out/bench_bf16.log" || status=1
python3 benchmarks/bench_planner_gpu.py --gqa-sdpa --batched-vision --fp8 \
    --variants b1-fast,bN-fast,bN-fast-shared --json "$out/planner_gpu_h100_library_fp8.json" \
    2>&1 | tee "$out/bench_fp8.log" || status=1
exit $status
