#!/usr/bin/env bash
# The lint and type gate: ruff (rules and their justified exceptions in pyproject.toml's [tool.ruff]) over the
# whole tree, mypy over homiebot/ (strict where [tool.mypy] says), then the layers: import-linter's contracts
# ([tool.importlinter]: imports point down, docs/architecture.md) and no import of another package's private names
# (scripts/check_private_imports.py).
# scripts/run_tests.sh runs it before the full test suite (make test, CI); exit status non-zero on any finding.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
echo "[lint] ruff check"
"$VENV/bin/ruff" check --quiet .
echo "[lint] mypy homiebot"
"$VENV/bin/mypy" --no-error-summary homiebot
echo "[lint] import layers"
# No cache: the whole graph takes under a second, and a cache folder would be one more thing to ignore.
"$VENV/bin/lint-imports" --no-cache --no-logo
"$VENV/bin/python" scripts/check_private_imports.py
echo "[lint] ok"
