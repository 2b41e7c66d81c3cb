"""A raw rclpy client written outside the project drives the graph with homie_msgs and standard types only."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from homiebot.testing.ros_helpers import graph_environment

pytestmark = [pytest.mark.ros, pytest.mark.slow]

CLIENT = Path(__file__).with_name("raw_client.py")


def test_client_imports_only_ros_packages():
    tree = ast.parse(CLIENT.read_text())
    modules = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    modules |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert modules <= {"__future__", "json", "sys", "time", "rclpy", "homie_msgs", "sensor_msgs"}, modules


def test_outside_client_sends_goals_and_reads_four_views(tmp_path, ros_domain):
    from homiebot.ros.supervisor import GraphSpec, Supervisor, load_graph

    graph = load_graph()
    nodes = [n for n in graph.nodes if n.name in ("sim_bridge", "nav_executor", "manip_executor", "executor")]
    env = graph_environment(ros_domain)
    supervisor = Supervisor(GraphSpec(nodes=nodes), env=env, log_dir=tmp_path / "logs")
    try:
        supervisor.start()
        completed = subprocess.run(
            [sys.executable, str(CLIENT), "apartment_1", "Go to,fridge", "Open,fridge", "Pick,unicorn"],
            env=env, capture_output=True, text=True, timeout=240,
        )
    finally:
        codes = supervisor.stop()
    logs = "\n".join(p.read_text()[-2000:] for p in (tmp_path / "logs").glob("*.log"))
    assert completed.returncode == 0, completed.stderr[-3000:] + logs
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert sorted(report["views"]) == ["back", "front", "left", "right"]
    for name, view in report["views"].items():
        assert (view["encoding"], view["height"], view["width"], view["bytes"]) == ("rgb8", 256, 256, 256 * 256 * 3)
        assert view["frame"] == f"{name}_camera_optical_frame"
        # The depth image comes from the same camera: the same intrinsics beside it.
        assert view["depth_camera_info"] == view["camera_info"]
        assert view["camera_info"]["size"] == [256, 256] and view["camera_info"]["k"][0] > 0
        assert view["camera_info"]["frame"] == f"{name}_camera_optical_frame"
    assert [(r["subtask"], r["code"]) for r in report["results"]] == [
        ("[Go to, fridge]", "OK"), ("[Open, fridge]", "OK"), ("[Pick, unicorn]", "F2"),
    ]
    assert "unicorn" in report["results"][2]["message"]
    assert "checking" in report["results"][0]["phases"]
    assert all(code == 0 for code in codes.values()), codes
