"""``homie run`` writes the episode's HTML page at the end unless ``--no-report``; ``homie run --live`` serves the
running episode to a real Foxglove WebSocket client (Foxglove's protocol on loopback, protobuf decoded)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from homiebot.live.foxglove_view import live_missing

HOMIE = [str(Path(sys.executable).with_name("homie"))]
ENV = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}


@pytest.mark.slow
def test_run_writes_its_report_unless_told_not_to(tmp_path: Path) -> None:
    out = tmp_path / "with"
    done = subprocess.run([*HOMIE, "run", "--task", "demo-drawer", "--no-video", "--out", str(out)],
                          env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    page = out / "report.html"
    assert f"report: {page}" in done.stdout.replace("\n", "")
    html = page.read_text()
    assert 'id="timeline"' in html and 'alt="front view, round 1"' in html
    bare = tmp_path / "without"
    done = subprocess.run([*HOMIE, "run", "--task", "demo-drawer", "--no-render", "--no-report", "--out", str(bare)],
                          env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (bare / "summary.json").is_file() and not (bare / "report.html").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
@pytest.mark.skipif(live_missing() is not None, reason=str(live_missing()))
def test_run_live_serves_the_episode_to_a_websocket_client(tmp_path: Path) -> None:
    from homiebot.testing.foxglove_client import FoxgloveClient

    port = _free_port()
    out = tmp_path / "live"
    proc = subprocess.Popen([*HOMIE, "run", "--task", "emmoe-084", "--no-video", "--no-report", "--live",
                             "--live-port", str(port), "--out", str(out)],
                            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = None
    deadline = time.monotonic() + 60
    while client is None and time.monotonic() < deadline and proc.poll() is None:
        try:
            client = FoxgloveClient(f"ws://127.0.0.1:{port}", timeout_s=5)
        except OSError:
            time.sleep(0.02)
    assert client is not None, proc.communicate(timeout=60)
    got: dict[str, list] = {}
    with client:
        client.subscribe(["/planner/log", "/robot/pose", "/camera/front/image"])
        # Until the command closes the server at the end of the episode.
        while True:
            try:
                item = client.receive(timeout_s=1.0)
            except Exception:  # the server closed the connection: the episode is over
                break
            if item is None:
                if proc.poll() is not None:
                    break
                continue
            got.setdefault(item[0], []).append(item[2])
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert f"ws://127.0.0.1:{port}" in stderr
    lines = [m.message for m in got.get("/planner/log", [])]
    assert any(line.startswith("episode over after 8 rounds") for line in lines), lines[-5:]
    assert any(line.startswith("round 8:") for line in lines)
    assert got.get("/robot/pose") and got.get("/camera/front/image")
    assert (got["/camera/front/image"][-1].width, got["/camera/front/image"][-1].encoding) == (256, "rgb8")


@pytest.mark.slow
def test_eval_writes_the_html_report_unless_told_not_to(tmp_path: Path) -> None:
    out = tmp_path / "ev"
    done = subprocess.run([*HOMIE, "eval", "--suite", "demo", "--runs", "1", "--workers", "1", "--no-progress",
                           "--out", str(out)], env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"HTML report: {out / 'report.html'} (+ 2 episode pages)" in done.stdout.replace("\n", "")
    assert 'id="tasks"' in (out / "report.html").read_text()
    assert sorted(p.parent.parent.name for p in out.glob("episodes/*/run0/report.html")) == ["demo-drawer", "demo-green-can"]
    bare = tmp_path / "bare"
    done = subprocess.run([*HOMIE, "eval", "--suite", "demo", "--runs", "1", "--workers", "1", "--no-progress",
                           "--no-report", "--out", str(bare)], env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (bare / "report.md").is_file() and not list(bare.rglob("report.html"))
