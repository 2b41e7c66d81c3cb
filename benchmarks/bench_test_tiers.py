"""What the README's commands and the test tiers cost: wall and CPU seconds of each, in one run.

    python -m benchmarks.bench_test_tiers                 # the fast tier and the whole suite
    python -m benchmarks.bench_test_tiers --demo          # ... and `make demo` in a fresh core venv first
    python -m benchmarks.bench_test_tiers --only fast     # one of: demo, fast, full

Targets (docs/setup.md): `make test-fast` at most 5 minutes, `make test` at most 25 minutes on an idle 2-core
machine. The machine's load average before and after each command is printed beside it: a figure taken beside
another job says little, so run it on an idle machine. Each command runs as its Makefile target runs it
(scripts/run_tests.sh, with the lint gate), after setup, so setup time is not counted; `--demo` times the whole
`make demo` (setup included) into a temporary venv, with pip's cache as it is.
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
log = logging.getLogger("bench_test_tiers")

FAST_MARKERS = "not slow and not ros and not models and not gpu"


@dataclass(frozen=True)
class Timing:
    name: str
    wall_s: float
    cpu_s: float
    exit_code: int
    load_before: float
    load_after: float
    summary: str


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(name: str, command: list[str], env: dict[str, str]) -> Timing:
    log.info("running %s: %s", name, " ".join(command))
    load_before = os.getloadavg()[0]
    cpu_before = _children_cpu()
    start = time.perf_counter()
    result = subprocess.run(command, check=False, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    cpu = _children_cpu() - cpu_before
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    # pytest's closing line ("N passed, M skipped ... in Xs"), or the command's last line.
    closing = next((line for line in reversed(lines) if " passed" in line or " failed" in line), lines[-1] if lines else "")
    return Timing(name, wall, cpu, result.returncode, load_before, os.getloadavg()[0], closing.strip("= "))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--demo", action="store_true", help="also time `make demo` into a fresh core venv")
    parser.add_argument("--only", choices=("demo", "fast", "full"), help="time one command only")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    venv = os.environ.get("VENV", ".venv")
    runs: list[tuple[str, list[str]]] = []
    wanted = {args.only} if args.only else ({"demo", "fast", "full"} if args.demo else {"fast", "full"})
    scratch = tempfile.mkdtemp(prefix="homie-bench-demo-")
    if "demo" in wanted:
        runs.append(("make demo (fresh core venv)", ["make", "demo", f"VENV={scratch}/venv"]))
    if "fast" in wanted:
        runs.append(("make test-fast (gate + fast tier)",
                     ["env", "HOMIE_LINT=1", f"VENV={venv}", "scripts/run_tests.sh", "-m", FAST_MARKERS, "-q"]))
    if "full" in wanted:
        runs.append(("make test (gate + whole suite)", ["env", f"VENV={venv}", "scripts/run_tests.sh", "-q"]))
    timings = [_timed(name, command, env) for name, command in runs]
    subprocess.run(["rm", "-rf", scratch], check=False)
    print(f"{'command':36} {'wall':>9} {'CPU':>9} {'exit':>4} {'load before/after':>18}  closing line")
    for t in timings:
        print(f"{t.name:36} {t.wall_s / 60:7.1f} m {t.cpu_s / 60:7.1f} m {t.exit_code:>4} "
              f"{t.load_before:>8.1f} / {t.load_after:<7.1f}  {t.summary}")
    return 0 if all(t.exit_code == 0 for t in timings) else 1


if __name__ == "__main__":
    sys.exit(main())
