"""The lint and type gate (scripts/lint.sh, run by scripts/run_tests.sh before the whole suite): the project's
ruff and mypy configuration catch planted errors, and a failing gate stops the test run before pytest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _tool(name: str) -> Path:
    path = BIN / name
    if not path.exists():
        pytest.skip(f"{name} is not installed in this environment (the test extra installs it)")
    return path


def test_ruff_with_the_project_rules_fails_on_a_planted_error(tmp_path: Path):
    planted = tmp_path / "planted.py"
    planted.write_text("import os\n\n\ndef f(items=[]):\n    return items\n")
    result = subprocess.run([_tool("ruff"), "check", "--config", ROOT / "pyproject.toml", "--output-format", "concise",
                             planted], capture_output=True, text=True, check=False)
    assert result.returncode == 1
    assert "F401" in result.stdout and "B006" in result.stdout  # unused import; mutable default (bugbear)


def test_mypy_with_the_project_config_fails_on_a_planted_error(tmp_path: Path):
    planted = tmp_path / "planted.py"
    planted.write_text("def rounds() -> int:\n    return 'twenty'\n")
    result = subprocess.run([_tool("mypy"), "--config-file", ROOT / "pyproject.toml", "--cache-dir", tmp_path / "cache",
                             planted], capture_output=True, text=True, check=False, cwd=tmp_path)
    assert result.returncode == 1
    assert 'Incompatible return value type (got "str", expected "int")' in result.stdout


def _fake_venv(tmp_path: Path, ruff_exit: int) -> Path:
    """A venv whose ruff exits with ``ruff_exit``, whose mypy and lint-imports pass, and whose python records that
    pytest ran."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, body in (("ruff", f"echo planted.py:1:8: F401 >&2; exit {ruff_exit}"), ("mypy", "exit 0"), ("lint-imports", "exit 0"),
                       ("python", f'case "$*" in *pytest*) touch {tmp_path / "pytest_ran"};; esac')):
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(0o755)
    return tmp_path / "venv"


@pytest.mark.parametrize("ruff_exit", [0, 1])
def test_the_test_command_runs_the_gate_first_and_stops_on_a_finding(tmp_path: Path, ruff_exit: int):
    venv = _fake_venv(tmp_path, ruff_exit)
    result = subprocess.run([ROOT / "scripts" / "run_tests.sh"], capture_output=True, text=True, check=False,
                            env={**os.environ, "VENV": str(venv)})
    assert "[lint] ruff check" in result.stdout
    if ruff_exit:
        assert result.returncode != 0 and "F401" in result.stderr
        assert not (tmp_path / "pytest_ran").exists()
    else:
        assert result.returncode == 0 and "[lint] ok" in result.stdout
        assert (tmp_path / "pytest_ran").exists()


def test_chosen_test_files_skip_the_gate_unless_asked(tmp_path: Path):
    venv = _fake_venv(tmp_path, ruff_exit=1)
    env = {**os.environ, "VENV": str(venv)}
    env.pop("HOMIE_LINT", None)
    skipped = subprocess.run([ROOT / "scripts" / "run_tests.sh", "tests/core"], capture_output=True, text=True,
                             check=False, env=env)
    assert skipped.returncode == 0 and "[lint]" not in skipped.stdout
    asked = subprocess.run([ROOT / "scripts" / "run_tests.sh", "tests/core"], capture_output=True, text=True,
                           check=False, env={**env, "HOMIE_LINT": "1"})
    assert asked.returncode != 0


@pytest.mark.parametrize(("module", "strict"), [("config/planted.py", True), ("agent/planted.py", True),
                                                ("multiagent/evaluate.py", True), ("ros/planted.py", False)])
def test_mypy_is_strict_on_the_configuration_and_the_build_path(tmp_path: Path, module: str, strict: bool):
    """pyproject.toml's strict modules (the run configuration tree, the build path and its loop, the callers that
    build two-agent episodes) refuse an unannotated function; a module outside them does not."""
    planted = tmp_path / "homiebot" / module
    for package in (tmp_path / "homiebot", planted.parent):
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").touch()
    planted.write_text("def rounds(limit):\n    return limit\n")
    result = subprocess.run([_tool("mypy"), "--config-file", ROOT / "pyproject.toml", "--cache-dir", tmp_path / "cache",
                             f"homiebot/{module}"], capture_output=True, text=True, check=False, cwd=tmp_path)
    assert ("Function is missing a type annotation" in result.stdout) is strict, result.stdout
    assert result.returncode == (1 if strict else 0), result.stdout
