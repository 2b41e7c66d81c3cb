#!/usr/bin/env bash
# ROS 2 for HomieBot: make rclpy importable from the project's venv and build the colcon workspace
# (homie_msgs in msgs/, the node packages in ros2_ws/src/, the bring-up package in launch/) into install/.
#
#   * On a machine with a system ROS 2 (/opt/ros/<distro>, e.g. from apt) it builds against that install.
#     The venv's python must be the one that ROS was built for (create the venv with the system python and
#     --system-site-packages); the script says so and stops when it is not.
#   * Otherwise it installs ROS 2 Jazzy from the pinned PyPI wheels (pyproject.toml extra "ros") into the
#     venv and repairs the wheels' CMake export files, which name the wheel build machine's Python include
#     folders (docs/ros.md), so that colcon can build a custom interface package against them.
#
# Where the ROS 2 in use lacks one of tf2_msgs, nav2_msgs, control_msgs (the wheels: none is on PyPI), the
# workspace also gets its stand-in from ros2_ws/compat/: an interface package with Jazzy's definitions of the
# types the graph uses (same type hashes), so that the bridge can publish /tf and the skill layer can talk to
# Nav2 and ros2_control servers (docs/robots.md). A ROS 2 that has the package keeps its own: never shadowed.
#
# Then `source scripts/ros_env.sh` makes `import rclpy, homie_msgs` work in the venv's python.
# Idempotent: when neither the pins nor the workspace sources changed, a second run only checks (~1 s).
# Environment: VENV (default .venv), HOMIE_ROS_FROM_WHEELS=1 to ignore a system ROS 2.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
VENV="${VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup_ros] no virtual environment at $VENV: run scripts/setup.sh first" >&2
  exit 2
fi
VENV="$(cd "$VENV" && pwd)"
PY="$VENV/bin/python"
START_S=$(date +%s)
log() { echo "[setup_ros] $*"; }
elapsed() { echo "$(($(date +%s) - START_S)) s"; }

# ---------------------------------------------------------------------------------------------------------
# 1. Which ROS 2: the system's, or the wheels.
SYSTEM_ROS=""
if [ "${HOMIE_ROS_FROM_WHEELS:-0}" != 1 ]; then
  if [ -n "${ROS_DISTRO:-}" ] && [ -f "/opt/ros/${ROS_DISTRO}/setup.bash" ]; then
    SYSTEM_ROS="/opt/ros/${ROS_DISTRO}"
  else
    for candidate in /opt/ros/*/setup.bash; do
      [ -f "$candidate" ] && SYSTEM_ROS="$(dirname "$candidate")"
    done
  fi
fi

if [ -n "$SYSTEM_ROS" ]; then
  MODE="system:$SYSTEM_ROS"
  log "using the system ROS 2 at $SYSTEM_ROS"
  # The distro's setup script reads unset variables; relax -u while sourcing it.
  set +u
  # shellcheck disable=SC1091
  source "$SYSTEM_ROS/setup.bash"
  set -u
  if ! "$PY" -c "import rclpy, rosidl_generator_py" 2>/dev/null; then
    echo "[setup_ros] $PY cannot import the system rclpy from $SYSTEM_ROS." >&2
    echo "[setup_ros] Create the venv with the python ROS was built for, e.g.:" >&2
    echo "[setup_ros]   rm -rf $VENV && /usr/bin/python3 -m venv --system-site-packages $VENV && scripts/setup.sh test" >&2
    echo "[setup_ros] or set HOMIE_ROS_FROM_WHEELS=1 to use the PyPI wheels instead." >&2
    exit 1
  fi
  if ! command -v colcon >/dev/null 2>&1 && [ ! -x "$VENV/bin/colcon" ]; then
    log "installing colcon into the venv"
    "$VENV/bin/pip" install -q "colcon-common-extensions==0.3.0"
  fi
  PREFIX_PATH="$SYSTEM_ROS"
else
  MODE="wheels"
  # The pins live in pyproject.toml (extra "ros"); install them only when they changed since the last run.
  PINS="$("$PY" - <<'EOF'
import sys
try:
    import tomllib
except ImportError:  # Python 3.10: fall back to installing the extra through pip (slower, same pins).
    print("EXTRA")
    sys.exit(0)
with open("pyproject.toml", "rb") as handle:
    print("\n".join(tomllib.load(handle)["project"]["optional-dependencies"]["ros"]))
EOF
)"
  PIN_STAMP="$VENV/.homie-ros-wheels.stamp"
  PIN_HASH="$(printf '%s\n%s\n' "$PINS" "$("$PY" -c 'import sys; print(sys.version)')" | sha256sum | cut -d' ' -f1)"
  if [ -f "$PIN_STAMP" ] && [ "$(cat "$PIN_STAMP")" = "$PIN_HASH" ] && "$PY" -c "import rclpy" 2>/dev/null; then
    log "ROS 2 Jazzy wheels already installed"
  else
    log "installing the pinned ROS 2 Jazzy wheels into $VENV"
    if [ "$PINS" = EXTRA ]; then
      "$VENV/bin/pip" install -q -e ".[ros]"
    else
      # shellcheck disable=SC2086
      printf '%s\n' "$PINS" > "$VENV/.homie-ros-requirements.txt"
      "$VENV/bin/pip" install -q -r "$VENV/.homie-ros-requirements.txt"
    fi
    echo "$PIN_HASH" > "$PIN_STAMP"
    log "wheels installed ($(elapsed))"
  fi

  # Repair the CMake export files: they hard-code the include folders of the machine that built the wheels.
  "$PY" - "$VENV" <<'EOF'
import pathlib
import re
import sys
import sysconfig

import numpy

venv = pathlib.Path(sys.argv[1])
python_include = sysconfig.get_paths()["include"]
numpy_include = numpy.get_include()
# Order matters: the numpy pattern contains the interpreter prefix that the first pattern would cut short.
replacements = [
    (re.compile(r"/opt/python/cp3\d+-cp3\d+/lib/python3\.\d+/site-packages/numpy/_core/include"), numpy_include),
    (re.compile(r"/opt/python/cp3\d+-cp3\d+/include/python3\.\d+"), python_include),
]
repaired = 0
for path in sorted((venv / "share").glob("*/cmake/*.cmake")):
    text = path.read_text()
    if "/opt/python/" not in text:
        continue
    fixed = text
    for pattern, replacement in replacements:
        fixed = pattern.sub(replacement, fixed)
    if fixed != text:
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(fixed)
        tmp.replace(path)
        repaired += 1
if repaired:
    print(f"[setup_ros] repaired the Python include paths in {repaired} CMake export files")
EOF
  PREFIX_PATH="$VENV"
  export LD_LIBRARY_PATH="$VENV/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # The wheels' bootstrapper re-executes every python once to set LD_LIBRARY_PATH; we set it ourselves.
  export _ROS_WHEELS_BOOTSTRAP_COMPLETE=1
fi

# ---------------------------------------------------------------------------------------------------------
# 2. Which packages: ours, plus a stand-in for each standard interface package the ROS 2 underneath lacks.
#    The check leaves this workspace's own install/ out of PYTHONPATH (a shell that sourced ros_env.sh has it
#    there), so it asks the ROS install alone, never a stand-in built by an earlier run.
BASE_PATHS=(msgs ros2_ws/src launch)
BASE_PYTHONPATH="$("$PY" -c '
import os, sys
root = os.path.join(sys.argv[1], "install")
print(os.pathsep.join(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                      if p and not os.path.abspath(p).startswith(root + os.sep)))' "$ROOT")"
# package:module that the ROS install must import for its own package to be used.
STAND_INS=(tf2_msgs:tf2_msgs.msg nav2_msgs:nav2_msgs.action control_msgs:control_msgs.action)
COMPAT=()
for stand_in in "${STAND_INS[@]}"; do
  package="${stand_in%%:*}"
  if PYTHONPATH="$BASE_PYTHONPATH" "$PY" -c "import ${stand_in#*:}" 2>/dev/null; then
    if [ -d "install/$package" ]; then
      # Left by an earlier build against a ROS 2 without it: it would shadow the real one.
      log "the ROS 2 in use has $package: removing the stand-in from install/"
      rm -rf "install/$package" "build/$package"
      rm -f install/.homie-build.stamp
    fi
  else
    COMPAT+=("$package")
    BASE_PATHS+=("ros2_ws/compat/$package")
  fi
done

# ---------------------------------------------------------------------------------------------------------
# 3. Build the workspace when its sources (or the ROS underneath) changed.
# A build made for another Python (the venv remade on a new interpreter) is removed first: CMake's cache in build/
# keeps the old interpreter's include folders, and the type supports compiled against them abort at run time
# (a 3.11 header's assertion in a 3.12 process).
PY_IDENTITY="$("$PY" -c 'import sys, sysconfig; print(sys.version.split()[0], sysconfig.get_paths()["include"])')"
if [ -d build ] && [ "$(cat build/.homie-python 2>/dev/null)" != "$PY_IDENTITY" ]; then
  log "the workspace was built for another Python: removing build/ and install/ (now: $PY_IDENTITY)"
  rm -rf build install
fi
mkdir -p build && echo "$PY_IDENTITY" > build/.homie-python
BUILD_STAMP="install/.homie-build.stamp"
SOURCE_HASH="$(
  {
    echo "$MODE" "$PY" "compat=${COMPAT[*]}"
    find "${BASE_PATHS[@]}" -type f \
      ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | sort -z | xargs -0 -r sha256sum
  } | sha256sum | cut -d' ' -f1
)"
if [ -f "$BUILD_STAMP" ] && [ "$(cat "$BUILD_STAMP")" = "$SOURCE_HASH" ] && [ -d install/homie_msgs ]; then
  log "workspace up to date (install/)"
else
  log "building the workspace with colcon (homie_msgs, node packages, bring-up${COMPAT[*]:+, stand-ins: ${COMPAT[*]}})"
  COLCON="$VENV/bin/colcon"
  [ -x "$COLCON" ] || COLCON="colcon"
  mkdir -p build
  # The build runs under the venv's python so that the ament_python entry points and the generated
  # Python bindings belong to it; testing targets are off (the project's tests are pytest's).
  if ! CMAKE_PREFIX_PATH="$PREFIX_PATH${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}" \
    AMENT_PREFIX_PATH="$PREFIX_PATH${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}" \
    PATH="$VENV/bin:$PATH" MAKEFLAGS="-j$(nproc)" \
    "$COLCON" --log-base log build \
      --base-paths "${BASE_PATHS[@]}" \
      --build-base build --install-base install \
      --symlink-install \
      --cmake-args -DPython3_EXECUTABLE="$PY" -DBUILD_TESTING=OFF \
      > build/setup_ros.log 2>&1; then
    tail -n 60 build/setup_ros.log >&2
    echo "[setup_ros] colcon build failed; full log: $ROOT/build/setup_ros.log" >&2
    exit 1
  fi
  echo "$MODE" > install/.homie-ros-mode
  echo "$SOURCE_HASH" > "$BUILD_STAMP"
  log "workspace built ($(elapsed))"
fi

# ---------------------------------------------------------------------------------------------------------
# 4. Check the result the way the tests will use it.
# shellcheck disable=SC1091
source scripts/ros_env.sh
if ! "$PY" -c "import rclpy, homie_msgs.msg, homie_msgs.action, homie_msgs.srv, tf2_msgs.msg, nav2_msgs.action, control_msgs.action" 2>build/setup_ros.check.log; then
  cat build/setup_ros.check.log >&2
  echo "[setup_ros] the built overlay does not import; see above" >&2
  exit 1
fi
log "ROS 2 ready ($MODE) in $(elapsed): source scripts/ros_env.sh"
