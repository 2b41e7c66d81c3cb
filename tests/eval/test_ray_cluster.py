"""A two-node Ray cluster on one machine: a head and a second node started as separate ``ray start`` processes,
each with one CPU of its own; ``homie eval --backend ray --address HEAD`` runs episodes on both (asserted from
the index lines' ``worker_node``), the second node is killed (SIGKILL to its whole process group: raylet and
workers) mid-run, and the evaluation still finishes with every episode exactly once and the metrics of a local
run of the same command."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from homiebot.eval.ray_backend import ray_missing
from homiebot.eval.runner import INDEX_FILE, EvalSettings, run_evaluation

pytestmark = [pytest.mark.slow, pytest.mark.skipif(ray_missing() is not None, reason=str(ray_missing()))]

BIN = Path(sys.executable).parent
TASKS = [f"emmoe-{i:03d}" for i in range(1, 21)]  # 20 tasks under noise: 20 episodes + 20 references
SETTINGS = EvalSettings(suite="emmoe100", planner="expert", noise="emmoe")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on port {port} after {timeout_s} s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End one `ray start --block` and everything it started (its own process group), never other Ray processes."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def _lines(out: Path) -> list[dict]:
    index = out / INDEX_FILE
    if not index.exists():
        return []
    return [json.loads(line) for line in index.read_text().splitlines() if line.endswith("}")]


def _report(out: Path) -> dict:
    report = json.loads((out / "report.json").read_text())
    report.pop("plots", None)
    return report


def test_two_nodes_one_killed_mid_run_every_episode_once(tmp_path: Path) -> None:
    port = _free_port()
    # A short root: Ray's socket paths under it must stay within the 107 bytes of a Unix socket name.
    temp_dir = Path(tempfile.mkdtemp(prefix="rayt", dir="/tmp"))
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    env.pop("RAY_ADDRESS", None)
    common = ["--num-cpus=1", "--object-store-memory=100000000", "--disable-usage-stats", f"--temp-dir={temp_dir}", "--block"]
    logs = tmp_path / "logs"
    logs.mkdir()
    head = subprocess.Popen([str(BIN / "ray"), "start", "--head", f"--port={port}", "--include-dashboard=false", *common],
                            env=env, start_new_session=True, stdout=open(logs / "head.log", "wb"), stderr=subprocess.STDOUT)
    node = None
    try:
        _wait_port(port, 60)
        node = subprocess.Popen([str(BIN / "ray"), "start", f"--address=127.0.0.1:{port}", *common], env=env,
                                start_new_session=True, stdout=open(logs / "node.log", "wb"), stderr=subprocess.STDOUT)
        out = tmp_path / "cluster"
        command = [str(BIN / "homie"), "eval", "--suite", "emmoe", "--planner", "expert", "--noise", "emmoe",
                   "--runs", "1", "--workers", "2", "--tasks", ",".join(TASKS), "--no-progress", "--no-report",
                   "--backend", "ray", "--address", f"127.0.0.1:{port}", "--out", str(out)]
        evaluation = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Wait until both nodes have finished episodes, then kill the second node (its raylet and its worker).
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and evaluation.poll() is None:
            if len({line["worker_node"] for line in _lines(out)}) >= 2:
                break
            time.sleep(0.05)
        before = _lines(out)
        assert evaluation.poll() is None, evaluation.communicate()
        assert len({line["worker_node"] for line in before}) == 2, "episodes did not land on both nodes"
        os.killpg(node.pid, signal.SIGKILL)
        node.wait(timeout=10)
        stdout, stderr = evaluation.communicate(timeout=400)
    finally:
        for proc in (node, head):
            if proc is not None:
                _stop(proc)
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert evaluation.returncode == 0, stderr
    lines = _lines(out)
    keys = [f"{line['kind']}:{line['task_id']}:{line['run']}" for line in lines]
    assert len(keys) == len(set(keys)) == 2 * len(TASKS), "every episode exactly once"
    assert len(lines) > len(before), "the evaluation went on after the node was killed"
    assert len(list(out.glob("*/*/run0/summary.json"))) == 2 * len(TASKS)
    assert not list(out.glob("*/*/.*tmp-*"))
    print(f"{len(before)} of {len(lines)} episodes finished before the kill; nodes {len({x['worker_node'] for x in lines})}")
    # The same evaluation on the local backend gives the same metrics.
    local = tmp_path / "local"
    run_evaluation(SETTINGS, local, runs=1, workers=2, task_ids=TASKS, progress=False)
    assert _report(out) == _report(local)
