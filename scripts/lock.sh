#!/usr/bin/env bash
# Refresh the dependency locks (locks/core.txt, locks/test.txt) from a virtual environment that passed the tests.
#
#   scripts/lock.sh              lock what .venv holds (the test profile's venv after `make test` passed)
#   VENV=/path scripts/lock.sh   lock another venv
#
# Each lock lists every distribution a profile installs, at the exact version the venv has, with the sha256 of
# the file pip takes for this interpreter and platform (the lock's "# platform:" line). scripts/setup.sh installs
# a profile from its lock in pip's hash-checking mode (--require-hashes --no-deps), so a new release of any
# dependency, direct or not, changes nothing until the lock is refreshed here and the tests pass with it.
#
# How: pip's resolver, asked for the profile's extras with the venv's versions as constraints, in a dry run that
# ignores what is installed; its installation report (pip install --report, pip >= 23) names each file it would
# take and that file's hash. Nothing is installed or downloaded beyond what pip needs to resolve.
# The ROS 2 Jazzy wheels are not in these locks: the "ros" extra in pyproject.toml pins each of them exactly
# (scripts/setup_ros.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
PY="$VENV/bin/python"
if [ ! -x "$PY" ]; then
  echo "[lock] no virtual environment at $VENV: run 'make test' first, then lock what passed" >&2
  exit 2
fi
mkdir -p locks
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
# The venv's versions, as constraints (the project itself and what colcon built are not PyPI distributions).
"$VENV/bin/pip" freeze --exclude-editable --all | grep -v -E '^homiebot==' \
  | grep -E '^[A-Za-z0-9_.-]+==' > "$WORK/venv-versions.txt"

lock_profile() {
  local profile="$1" extras="$2"
  local spec="."
  [ -n "$extras" ] && spec=".[$extras]"
  echo "[lock] resolving $profile ($spec) against $VENV's versions"
  "$VENV/bin/pip" install -q --dry-run --ignore-installed --report "$WORK/$profile.json" \
    -c "$WORK/venv-versions.txt" "$spec" 2>&1 | grep -v '^WARNING: Location' >&2 || true
  "$PY" - "$WORK/$profile.json" "locks/$profile.txt" "$profile" "$extras" <<'EOF'
"""Write pip's installation report as a hash-checking requirements file (pip has no lock writer of its own that
its installer reads back: pip lock's pylock.toml is not yet installable by pip)."""
import json
import os
import platform
import sys
import sysconfig
from pathlib import Path

report_path, lock_path, profile, extras = sys.argv[1:5]
report = json.loads(Path(report_path).read_text())
lines = [
    f"# homiebot dependency lock, profile '{profile}'" + (f" (extras: {extras})" if extras else " (no extras)"),
    f"# platform: cp{sys.version_info.major}{sys.version_info.minor} {sysconfig.get_platform()}",
    "# Made by scripts/lock.sh from a venv that passed the tests; scripts/setup.sh installs it with --require-hashes.",
    "# Do not edit by hand: refresh with `make lock` (docs/setup.md).",
]
entries = []
for item in report["install"]:
    meta = item["metadata"]
    name = meta["name"]
    if name.lower() == "homiebot":
        continue
    hashes = item.get("download_info", {}).get("archive_info", {}).get("hashes", {})
    if "sha256" not in hashes:
        sys.exit(f"[lock] pip reported no sha256 for {name} {meta['version']}; cannot lock it with a hash")
    entries.append((name.lower(), f"{name}=={meta['version']} \\\n    --hash=sha256:{hashes['sha256']}"))
lines += [entry for _, entry in sorted(entries)]
tmp = Path(lock_path + ".tmp")
tmp.write_text("\n".join(lines) + "\n")
os.replace(tmp, lock_path)
print(f"[lock] {lock_path}: {len(entries)} distributions for {platform.python_implementation()} {platform.python_version()}")
EOF
}

lock_profile core ""
lock_profile test "$("$PY" - <<'EOF'
# The test profile's extras, read from scripts/setup.sh so that the two never disagree.
import re
from pathlib import Path

match = re.search(r'test\) EXTRAS="\[([^\]]+)\]"', Path("scripts/setup.sh").read_text())
print(match.group(1) if match else "")
EOF
)"
echo "[lock] done: review 'git diff locks/' and commit it with the change that needed it"
