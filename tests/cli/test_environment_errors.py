"""The planner classes of errors, per command: an unreachable OpenAI-compatible server is the environment
(exit 1), a model path that does not exist is bad input (exit 2); either way one ``error:`` line naming the
backend and what to check, and no traceback (the graph's ``homie up`` case: tests/ros/test_ros_up_record.py;
``homie eval``'s: tests/eval/test_infrastructure_failures.py, with a real server down, then up)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HOMIE = str(Path(sys.executable).with_name("homie"))


def _run(tmp_path: Path, *options: str) -> subprocess.CompletedProcess:
    argv = [HOMIE, "run", "--task", "demo-drawer", "--no-render", "--out", str(tmp_path / "record"), *options]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "COLUMNS": "200"})


def _errors(done: subprocess.CompletedProcess) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("error:")]


@pytest.mark.slow
def test_unreachable_server_in_run(tmp_path: Path) -> None:
    # Port 9 (discard): nothing listens. max_retries=0 keeps the test short.
    done = _run(tmp_path, "--planner", "openai", "--base-url", "http://127.0.0.1:9/v1", "--model", "nobody",
                "-p", "max_retries=0")
    assert done.returncode == 1, done.stderr[-2000:]
    errors = _errors(done)
    assert len(errors) == 1 and "OpenAI-compatible server at http://127.0.0.1:9/v1" in errors[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr + done.stdout
    assert "PlannerBackendError" not in done.stderr  # the OpenAI backend's own error, not the transformers one's


@pytest.mark.slow
def test_bad_model_path_in_run(tmp_path: Path) -> None:
    done = _run(tmp_path, "--planner", "hf", "--model", str(tmp_path / "no-such-model"))
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: planner 'hf'") and "no-such-model" in lines[0], done.stderr
    assert not (tmp_path / "record").exists()
