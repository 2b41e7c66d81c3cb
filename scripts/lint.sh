#!/usr/bin/env bash
# The lint and type gate: ruff (rules and their justified exceptions in pyproject.toml's [tool.ruff]) over the
# whole tree, then mypy over homiebot/ (strict on homiebot/types.py, executor/ and eval/: [tool.mypy]).
# scripts/run_tests.sh runs it before the full test suite (make test, CI); exit status non-zero on any finding.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
echo "[lint] ruff check"
"$VENV/bin/ruff" check --quiet .
echo "[lint] mypy homiebot"
"$VENV/bin/mypy" --no-error-summary homiebot
echo "[lint] ok"
