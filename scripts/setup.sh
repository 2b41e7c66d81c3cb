#!/usr/bin/env bash
# One-shot setup: Debian packages for headless GL, a virtual environment, the project and its extras.
#   scripts/setup.sh            core (embedded simulator, expert planner, CLI)
#   scripts/setup.sh test       + test tools, perception, model backends, ROS 2 (wheels + homie_msgs)
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE="${1:-core}"
VENV="${VENV:-.venv}"
PYTHON="${PYTHON:-python3}"

need_apt=()
APT_PACKAGES="libegl1 libopengl0 libgl1-mesa-dri libosmesa6"
# The test profile also opens the HTML reports in a headless browser (tests/report/test_browser.py).
if [ "$PROFILE" = test ]; then APT_PACKAGES="$APT_PACKAGES chromium"; fi
for pkg in $APT_PACKAGES; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "[setup] installing Debian packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
fi
PIP="$VENV/bin/pip"

case "$PROFILE" in
  core) EXTRAS="" ;;
  test) EXTRAS="[test,perception,models,browser,live,textworld,smollm2,ray,train]" ;;
  *) echo "usage: $0 [core|test]" >&2; exit 2 ;;
esac
echo "[setup] installing homiebot$EXTRAS"
# torch is pinned to the CPU build; install it first so nothing pulls a CUDA build.
if [ "$PROFILE" = test ]; then "$PIP" install -q "torch==2.13.0"; fi
# The smollm2 extra's llama-cpp-python is compiled from source the first time (about 10-12 minutes on 2 cores, both
# used); pip keeps the built wheel in its cache (~/.cache/pip/wheels), so later setups on this machine reuse it.
if [ "$PROFILE" = test ]; then export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"; fi
# The venv's bin first on PATH: textworld's fast-downward build runs a bare `python build.py`.
PATH="$(cd "$VENV/bin" && pwd):$PATH" "$PIP" install -q -e ".$EXTRAS"

if [ "$PROFILE" = test ] && [ -x scripts/setup_ros.sh ]; then
  scripts/setup_ros.sh
fi
echo "[setup] done"
