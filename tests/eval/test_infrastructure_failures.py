"""An episode that could not run is never a result (docs/evaluation.md, "Runs that never happened").

The planner's OpenAI-compatible server is a real local server process (homiebot.planner.openai_server)
serving a tiny random vision-language model. ``homie eval`` runs first while nothing listens on the port:
the start-up check of the server stops it with one line and exit 1 before the output directory is touched
(docs/cli.md, "Checked before anything is written"). Then the server starts on that port and the same command
runs the episodes; the final metrics equal those of an evaluation that had the server from the start.

A server that goes down during an evaluation passes that check and fails the episodes themselves: a small local
HTTP server that lists its model (GET /models) but drops every chat completion stands in for it. The evaluation must
store no record and no index line for them, exit 1 with one line that counts them and says why, and the same command
runs them once the server answers. Also here: bad arguments are refused before the output directory is touched.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from homiebot.eval.runner import INDEX_FILE, EvalError, EvalSettings, run_evaluation

HOMIE = str(Path(sys.executable).with_name("homie"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    from homiebot.planner.tiny_vlm import save_tiny_vlm

    return save_tiny_vlm(tmp_path_factory.mktemp("models") / "tiny-llava", "llava", seed=0)


def _start_server(model: Path, port: int, log_path: Path) -> subprocess.Popen:
    log_file = open(log_path, "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "homiebot.planner.openai_server", "--model", str(model), "--port", str(port),
         "--port-file", str(log_path.with_suffix(".port")), "--torch-threads", "1", "--log-level", "WARNING"],
        stdout=log_file,
        stderr=subprocess.STDOUT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    deadline = time.monotonic() + 120
    while not log_path.with_suffix(".port").exists():
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {log_path.read_text()[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("server did not start within 120 s")
        time.sleep(0.05)
    return proc


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class _FailingChatServer:
    """An OpenAI-compatible server on 127.0.0.1 that is up (it lists its model at GET /models, so the start-up check
    passes) but, while ``answering`` is False, closes the connection on every chat completion without a reply: a
    server that went down after the evaluation started. With ``answering`` it gives one fixed, well-formed answer."""

    ANSWER = "Analysis: a fixed answer\nSubtask: [End]\nModel: NoMaD"

    def __init__(self) -> None:
        from homiebot.testing.openai_server import FakeOpenAIServer

        self.answering = False
        self.completions = 0  # chat completions asked for, answered or not
        self._server = FakeOpenAIServer(self._reply, model="tiny")
        self.port = self._server.port

    def _reply(self, body: dict) -> str | None:
        self.completions += 1
        return self.ANSWER if self.answering else None

    def close(self) -> None:
        self._server.close()


@pytest.fixture
def failing_server() -> Iterator[_FailingChatServer]:
    pytest.importorskip("openai")
    server = _FailingChatServer()
    try:
        yield server
    finally:
        server.close()


def _eval(out: Path, port: int, model: str = "tiny-llava") -> subprocess.CompletedProcess:
    command = [
        HOMIE, "eval", "--out", str(out), "--suite", "demo", "--planner", "openai",
        "-p", f"base_url=http://127.0.0.1:{port}/v1", "-p", f"model={model}", "-p", "max_retries=0",
        "-p", "max_tokens=24", "--runs", "1", "--workers", "1", "--max-rounds", "2", "--no-progress",
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "MUJOCO_GL": "egl"})


def _table(out: Path) -> dict:
    report = json.loads((out / "report.json").read_text())
    return {"table2": report["table2"], "table3": report["table3"]}


@pytest.mark.slow
@pytest.mark.models
def test_eval_with_the_server_down_stores_nothing_and_the_same_command_later_runs_it(
    tiny_model: Path, tmp_path: Path
) -> None:
    port = _free_port()
    out = tmp_path / "eval"
    down = _eval(out, port)
    assert down.returncode == 1, down.stderr
    assert "Traceback" not in down.stderr + down.stdout
    lines = [line for line in down.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: cannot reach the OpenAI-compatible server"), down.stderr
    assert f"127.0.0.1:{port}" in lines[0]
    assert not out.exists(), "a start that could not run left files behind"

    server = _start_server(tiny_model, port, tmp_path / "server.log")
    try:
        up = _eval(out, port)
        fresh = _eval(tmp_path / "fresh", port)  # the server up from the start
    finally:
        _stop(server)
    assert up.returncode == 0, up.stderr
    assert "4 episode(s) run, 0 already done" in up.stdout  # the 2 episodes and their expert references, afresh
    assert fresh.returncode == 0, fresh.stderr
    assert _table(out) == _table(tmp_path / "fresh")
    assert _table(out)["table2"]["n"] == 2


@pytest.mark.slow
def test_a_server_that_goes_down_during_the_evaluation_stores_nothing_and_the_same_command_later_runs_it(
    failing_server: _FailingChatServer, tmp_path: Path
) -> None:
    out = tmp_path / "eval"
    down = _eval(out, failing_server.port, model="tiny")
    assert failing_server.completions > 0, "the episodes never asked the server: the start-up check stopped them"
    assert down.returncode == 1, down.stderr
    assert "Traceback" not in down.stderr + down.stdout
    lines = [line for line in down.stderr.splitlines() if "could not run" in line]
    assert len(lines) == 1 and lines[0].startswith("2 episode(s) could not run: cannot reach"), down.stderr
    assert f"127.0.0.1:{failing_server.port}" in lines[0]
    assert not list(out.glob("episodes/*/run*")), "a run that never happened left a record"
    index = (out / INDEX_FILE).read_text().splitlines() if (out / INDEX_FILE).exists() else []
    assert not [line for line in index if '"kind": "episode"' in line]
    assert json.loads((out / "report.json").read_text())["table2"]["n"] == 0  # nothing averaged in

    failing_server.answering = True
    up = _eval(out, failing_server.port, model="tiny")
    fresh = _eval(tmp_path / "fresh", failing_server.port, model="tiny")  # the server answering from the start
    assert up.returncode == 0, up.stderr
    assert "2 episode(s) run, 2 already done" in up.stdout  # the episodes; their expert references were kept
    assert fresh.returncode == 0, fresh.stderr
    assert _table(out) == _table(tmp_path / "fresh")
    assert _table(out)["table2"]["n"] == 2


@pytest.mark.parametrize(
    ("arguments", "match"),
    [
        ({"runs": 0}, "--runs must be at least 1"),
        ({"workers": 0}, "--workers must be at least 1"),
        ({"task_ids": ["nope"]}, "unknown task id"),
        ({"split": "dev"}, "unknown split"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_written(tmp_path: Path, arguments: dict, match: str) -> None:
    out = tmp_path / "eval"
    with pytest.raises(EvalError, match=match):
        run_evaluation(EvalSettings(suite="demo"), out, progress=False, **arguments)
    assert not out.exists()


def test_a_directory_that_is_not_an_evaluation_is_refused_untouched(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(EvalError, match="holds no evaluation"):
        run_evaluation(EvalSettings(suite="demo"), tmp_path, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
