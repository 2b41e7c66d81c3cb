"""What the standard-interface stand-ins (ros2_ws/compat/nav2_msgs, control_msgs) add to the ROS 2 setup.

    python -m benchmarks.bench_ros_stand_ins                  # the stand-ins alone, then the rest of the workspace
    python -m benchmarks.bench_ros_stand_ins --only stand-ins # one of: stand-ins, rest

Each part is a first colcon build (empty build and install folders in a temporary directory) with the arguments
scripts/setup_ros.sh uses, against the ROS 2 of the venv (the PyPI wheels; run ``scripts/setup_ros.sh`` once
before, for the wheels and the repaired CMake files). Printed per part: wall seconds, CPU seconds of the build's
processes (the figure that adds up when setup_ros.sh builds everything in one colcon run on two cores), and
colcon's own per-package times; the load average before and after each part, since a figure taken beside other
jobs says little. "rest" is what setup_ros.sh built before the stand-ins existed (homie_msgs, the node packages,
the bring-up package, the tf2_msgs stand-in).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARTS = {
    "stand-ins": ["ros2_ws/compat/nav2_msgs", "ros2_ws/compat/control_msgs"],
    "rest": ["msgs", "ros2_ws/src", "launch", "ros2_ws/compat/tf2_msgs"],
}


def build(base_paths: list[str], scratch: Path) -> tuple[float, float, str]:
    venv = Path(sys.prefix)
    env = dict(os.environ)
    env.update(
        CMAKE_PREFIX_PATH=str(venv), AMENT_PREFIX_PATH=str(venv), PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}",
        LD_LIBRARY_PATH=f"{venv / 'lib'}{os.pathsep}{env.get('LD_LIBRARY_PATH', '')}",
        _ROS_WHEELS_BOOTSTRAP_COMPLETE="1", MAKEFLAGS=f"-j{os.cpu_count()}",
    )
    env.pop("PYTHONPATH", None)  # the workspace's own install/ must not stand in for what is being built
    command = [str(venv / "bin" / "colcon"), "--log-base", str(scratch / "log"), "build",
               "--base-paths", *[str(ROOT / p) for p in base_paths], "--build-base", str(scratch / "build"),
               "--install-base", str(scratch / "install"), "--cmake-args", f"-DPython3_EXECUTABLE={sys.executable}",
               "-DBUILD_TESTING=OFF"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    result = subprocess.run(command, env=env, cwd=scratch, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        sys.exit(f"error: colcon build failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    finished = "; ".join(re.findall(r"Finished <<< (\S+ \[[^\]]+\])", result.stdout))
    return wall, cpu, finished


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(PARTS))
    args = parser.parse_args()
    for name in [args.only] if args.only else list(PARTS):
        load_before = os.getloadavg()[0]
        with tempfile.TemporaryDirectory(prefix="bench-colcon-") as scratch:
            wall, cpu, finished = build(PARTS[name], Path(scratch))
        print(f"{name}: {wall:.1f} s wall, {cpu:.1f} s CPU ({finished}); load {load_before:.1f} -> "
              f"{os.getloadavg()[0]:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
