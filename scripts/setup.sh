#!/usr/bin/env bash
# One-shot setup: Debian packages for headless GL, a virtual environment, the project and its extras.
#   scripts/setup.sh            core (embedded simulator, expert planner, CLI)
#   scripts/setup.sh test       + test tools, perception, model backends, ROS 2 (wheels + homie_msgs)
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE="${1:-core}"
VENV="${VENV:-.venv}"
# Python 3.12 or newer (pyproject.toml's requires-python: LeRobot 0.6 needs it, and it is ROS 2 Jazzy's Python).
# PYTHON=... names one; otherwise the first of python3, python3.13, python3.12 that runs and is new enough, then
# pyenv's installed 3.12/3.13 builds (a pyenv shim answers `command -v` even where that version is not selected, so
# each candidate is run, not just found).
find_python() {
  local candidate
  for candidate in python3 python3.13 python3.12 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[23].*/bin/python3; do
    if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then
      echo "$candidate"; return 0
    fi
  done
  return 1
}
if [ -z "${PYTHON:-}" ] && [ ! -x "$VENV/bin/python" ]; then
  if ! PYTHON="$(find_python)"; then
    echo "[setup] no Python 3.12 or newer found (python3 is $(python3 -V 2>&1)): install one, or set PYTHON=/path/to/python3.12" >&2
    exit 2
  fi
fi

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

# A venv made by an older setup (Python 3.11) cannot take the locked 3.12 set: say so instead of failing inside pip.
if [ -x "$VENV/bin/python" ] && ! "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then
  echo "[setup] $VENV is $("$VENV/bin/python" -V 2>&1); the project now needs Python 3.12 or newer: remove it (rm -rf $VENV) and run this again" >&2
  exit 2
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV with $("$PYTHON" -V 2>&1) ($PYTHON)"
  "$PYTHON" -m venv "$VENV"
  # pip itself pinned too: the locks are read by its hash-checking mode and written from its --report format.
  "$VENV/bin/pip" install -q "pip==26.3"
fi
PIP="$VENV/bin/pip"

case "$PROFILE" in
  core) EXTRAS="" ;;
  test) EXTRAS="[test,perception,models,browser,live,textworld,smollm2,ray,train,lerobot]" ;;
  *) echo "usage: $0 [core|test]" >&2; exit 2 ;;
esac
# The smollm2 extra's llama-cpp-python exists on PyPI as source only: it is compiled once per machine and CPU (about
# 10-12 minutes on 2 cores, both used) into our own wheel cache, keyed by its version and its CPU flags.
# Why not pip's own build: llama.cpp builds for "this CPU" (-march=native) by default, and that includes Intel AMX
# where the processor lists it; on virtual machines whose kernel does not grant AMX to processes (seen here:
# "Illegal instruction" at `tilezero` in libggml-cpu.so) every decode then kills the process. So the instruction
# sets are named one by one from /proc/cpuinfo, AMX never, and pip's wheel cache, which does not key on build
# flags, is not used for it.
if [ "$PROFILE" = test ]; then export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"; fi
llama_cpp_cmake_args() {
  [ "$(uname -m)" = x86_64 ] || { echo ""; return; }
  local flags args="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
  flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
  for pair in avx:AVX avx2:AVX2 fma:FMA f16c:F16C bmi2:BMI2 avx_vnni:AVX_VNNI avx512f:AVX512 \
              avx512vbmi:AVX512_VBMI avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16; do
    case "$flags" in *" ${pair%%:*} "*) args="$args -DGGML_${pair#*:}=ON" ;; *) args="$args -DGGML_${pair#*:}=OFF" ;; esac
  done
  echo "$args"
}
# install_llama_cpp "REQUIREMENT LINES": build (once) and install llama-cpp-python from its hash-checked source.
install_llama_cpp() {
  local requirement="$1" args key dir wheel
  args="$(llama_cpp_cmake_args)"
  key="$(printf '%s\n%s\n%s\n' "$requirement" "$args" "$PLATFORM" | sha256sum | cut -c1-16)"
  dir="${XDG_CACHE_HOME:-$HOME/.cache}/homiebot/wheels/llama-cpp-python-$key"
  if [ -f "$VENV/.homie-llama-cpp.stamp" ] && [ "$(cat "$VENV/.homie-llama-cpp.stamp")" = "$key" ]; then return; fi
  if ! ls "$dir"/*.whl >/dev/null 2>&1; then
    echo "[setup] compiling llama-cpp-python once for this machine (about 10-12 minutes on 2 cores): CMAKE_ARGS=$args"
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    printf '%s\n' "$requirement" > "$dir.tmp/requirement.txt"
    CMAKE_ARGS="$args" "$PIP" wheel -q --no-deps --no-cache-dir --require-hashes -w "$dir.tmp" -r "$dir.tmp/requirement.txt"
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  wheel="$(ls "$dir"/*.whl | head -n1)"
  "$PIP" install -q --no-deps --force-reinstall "$wheel"
  echo "$key" > "$VENV/.homie-llama-cpp.stamp"
}
# The venv's bin first on PATH: textworld's fast-downward build runs a bare `python build.py`.
export PATH="$(cd "$VENV/bin" && pwd):$PATH"

# Every dependency comes from the profile's lock (locks/PROFILE.txt, made by scripts/lock.sh from a venv that passed
# the tests): exact versions, each file checked against its sha256, so no new release upstream can change what a
# fresh machine installs. A lock is made for one interpreter and platform (its "# platform:" line); elsewhere the
# same versions are installed without the hashes, which name this platform's files.
LOCK="locks/$PROFILE.txt"
PLATFORM="$("$VENV/bin/python" -c 'import sys, sysconfig; print(f"cp{sys.version_info.major}{sys.version_info.minor} {sysconfig.get_platform()}")')"
if [ "${HOMIE_UNLOCKED:-0}" = 1 ] || [ ! -f "$LOCK" ]; then
  # Unlocked (to try new releases before `make lock`): the newest versions pyproject.toml allows.
  echo "[setup] installing homiebot$EXTRAS unlocked (newest allowed versions)"
  # torch first, at the pinned release, so that nothing resolves another one.
  if [ "$PROFILE" = test ]; then "$PIP" install -q "torch==2.11.0" "torchvision==0.26.0"; fi
  CMAKE_ARGS="$(llama_cpp_cmake_args)" "$PIP" install -q -e ".$EXTRAS"
elif grep -qx "# platform: $PLATFORM" "$LOCK"; then
  echo "[setup] installing homiebot$EXTRAS from $LOCK (hash-checked)"
  # llama-cpp-python (two lines: the pin and its hash) is built apart (install_llama_cpp, above).
  LLAMA_REQUIREMENT="$(grep -A1 -E '^llama[-_]cpp[-_]python==' "$LOCK" || true)"
  grep -v -x -F -f <(printf '%s\n' "$LLAMA_REQUIREMENT" | grep .) "$LOCK" > "$VENV/.homie-lock-rest.txt" \
    || cp "$LOCK" "$VENV/.homie-lock-rest.txt"
  "$PIP" install -q --require-hashes --no-deps -r "$VENV/.homie-lock-rest.txt"
  if [ -n "$LLAMA_REQUIREMENT" ]; then install_llama_cpp "$LLAMA_REQUIREMENT"; fi
  "$PIP" install -q --no-deps -e .
  # Every installed distribution's requirements are met (a lock that missed one fails here, not at an import).
  # pip check also flags textworld's wheel tag, which it reads as another platform's although it runs here.
  if ! problems="$("$PIP" check 2>&1)"; then
    if printf '%s\n' "$problems" | grep -v -E '^textworld [^ ]+ is not supported on this platform$' | grep .; then exit 1; fi
  fi
else
  echo "[setup] $LOCK was made for '$(sed -n 's/^# platform: //p' "$LOCK")', this is '$PLATFORM': installing its versions without hashes"
  grep -E '^[A-Za-z0-9_.-]+==' "$LOCK" | sed 's/ *\\$//' > "$VENV/.homie-lock-versions.txt"
  if [ "$PROFILE" = test ]; then "$PIP" install -q "torch==2.11.0" "torchvision==0.26.0"; fi
  CMAKE_ARGS="$(llama_cpp_cmake_args)" "$PIP" install -q -c "$VENV/.homie-lock-versions.txt" -e ".$EXTRAS"
fi

if [ "$PROFILE" = test ] && [ -x scripts/setup_ros.sh ]; then
  scripts/setup_ros.sh
fi
echo "[setup] done"
