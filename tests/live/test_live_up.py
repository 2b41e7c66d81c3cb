"""``homie up sim --live``: the ROS graph's planner node serves the episode to a real Foxglove WebSocket client
(the same observer as ``homie run --live``, attached to the graph's episode)."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from homiebot.live.foxglove_view import live_missing

pytestmark = [pytest.mark.ros, pytest.mark.slow,
              pytest.mark.skipif(live_missing() is not None, reason=str(live_missing()))]

HOMIE = str(Path(sys.executable).with_name("homie"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_up_live_serves_the_graph_episode(tmp_path: Path) -> None:
    from homiebot.ros.environment import overlay_environment
    from homiebot.testing.foxglove_client import FoxgloveClient

    domain = random.Random(os.getpid() ^ time.time_ns()).randrange(100, 221)  # a DDS domain of its own
    env = {**overlay_environment(), "ROS_DOMAIN_ID": str(domain), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
           "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    port = _free_port()
    proc = subprocess.Popen([HOMIE, "up", "sim", "--task", "demo-drawer", "--live", "--live-port", str(port),
                             "--domain-id", str(domain), "--out", str(tmp_path / "up")],
                            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = None
    deadline = time.monotonic() + 120
    while client is None and time.monotonic() < deadline and proc.poll() is None:
        try:
            client = FoxgloveClient(f"ws://127.0.0.1:{port}", timeout_s=5)
        except OSError:
            time.sleep(0.05)
    if client is None:
        proc.kill()
        pytest.fail(f"the live view never listened: {proc.communicate(timeout=30)[1][-3000:]}")
    got: dict[str, list] = {}
    with client:
        client.subscribe(["/planner/log", "/robot/pose", "/camera/front/image"])
        while True:
            try:
                item = client.receive(timeout_s=1.0)
            except Exception:  # the node closed the server: the episode is over
                break
            if item is None:
                if proc.poll() is not None:
                    break
                continue
            got.setdefault(item[0], []).append(item[2])
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr[-3000:]
    lines = [m.message for m in got.get("/planner/log", [])]
    assert any(line.startswith("episode over after 8 rounds") for line in lines), lines[-5:]
    assert got.get("/robot/pose"), "no pose"
    image = got["/camera/front/image"][-1]
    assert (image.width, image.height, image.encoding) == (256, 256, "rgb8") and any(bytes(image.data))
