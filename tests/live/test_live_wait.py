"""``homie run --live --live-wait/--live-hold`` (docs/reports.md, "Live view in Foxglove"): a viewer that connects
only after the command started sees the episode from its first log line, and one that connects after the episode
is sent its last state; the hold ends when the viewers leave. A real WebSocket client speaks Foxglove's protocol."""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest

from homiebot.live.foxglove_view import live_missing

pytestmark = [pytest.mark.slow, pytest.mark.skipif(live_missing() is not None, reason=str(live_missing()))]

HOMIE = str(Path(sys.executable).with_name("homie"))
ENV = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
TOPICS = ["/planner/log", "/robot/pose"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _lines(stream: IO[str]) -> queue.Queue[str]:
    """The lines of a child's stream as they come (read by a thread, so the child never blocks on a full pipe)."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in stream], daemon=True).start()
    return lines


def _wait_for_line(lines: queue.Queue[str], text: str, proc: subprocess.Popen[str], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if text in lines.get(timeout=0.5):
                return
        except queue.Empty:
            assert proc.poll() is None, f"the command ended (exit {proc.returncode}) before printing {text!r}"
    raise AssertionError(f"no line with {text!r} within {timeout_s} s")


def _start(tmp_path: Path, port: int, *live: str) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    proc = subprocess.Popen([HOMIE, "run", "--task", "demo-drawer", "--no-video", "--no-report", "--live",
                             "--live-port", str(port), *live, "--out", str(tmp_path / "record")],
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    return proc, _lines(proc.stderr)


def _follow(client: Any, until: str) -> list[str]:
    """The log lines the client receives, up to the first that starts with ``until``."""
    log: list[str] = []
    while not (log and log[-1].startswith(until)):
        item = client.receive(timeout_s=60)
        assert item is not None, f"nothing more after {log[-3:]}"
        if item[0] == "/planner/log":
            log.append(item[2].message)
    return log


def test_a_late_viewer_sees_the_whole_episode_and_the_hold_ends_when_it_leaves(tmp_path: Path) -> None:
    from homiebot.testing.foxglove_client import FoxgloveClient

    port = _free_port()
    proc, stderr = _start(tmp_path, port, "--live-wait", "300", "--live-hold", "300")
    try:
        _wait_for_line(stderr, f"ws://127.0.0.1:{port}", proc)
        _wait_for_line(stderr, "waiting up to 300 s for a viewer", proc)
        time.sleep(3)  # a user opening the app meanwhile; the episode has not begun
        assert proc.poll() is None and not (tmp_path / "record").exists()
        with FoxgloveClient(f"ws://127.0.0.1:{port}", timeout_s=30) as client:
            client.subscribe(TOPICS)
            log = _follow(client, "episode over")
            assert log[0].startswith("task demo-drawer in apartment_1"), log[:3]
            assert any(line.startswith("round 1:") for line in log)
            time.sleep(2)
            assert proc.poll() is None  # held: the viewer keeps the last state
        assert proc.wait(timeout=60) == 0  # the viewer left: the hold ends long before its 300 s
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (tmp_path / "record" / "summary.json").is_file()


def test_a_viewer_that_connects_during_the_hold_is_sent_the_last_state(tmp_path: Path) -> None:
    from homiebot.testing.foxglove_client import FoxgloveClient

    port = _free_port()
    proc, stderr = _start(tmp_path, port, "--live-hold", "300")
    try:
        _wait_for_line(stderr, "holding the last state for up to 300 s", proc)
        with FoxgloveClient(f"ws://127.0.0.1:{port}", timeout_s=30) as client:
            client.subscribe(TOPICS)
            got: dict[str, Any] = {}
            while set(got) != set(TOPICS):
                item = client.receive(timeout_s=30)
                assert item is not None, sorted(got)
                got[item[0]] = item[2]
            assert got["/planner/log"].message.startswith("episode over after")
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_wait_and_hold_are_options_of_live(tmp_path: Path) -> None:
    done = subprocess.run([HOMIE, "run", "--task", "demo-drawer", "--live-hold", "5", "--out", str(tmp_path / "r")],
                          env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.strip() == "error: --live-wait and --live-hold are options of --live"
    assert not (tmp_path / "r").exists()
