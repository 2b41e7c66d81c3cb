"""``homie up`` with two agents and ``--perception``: refused in one line that says why (the graph's one
perception node is the robot's) and where a world graph per agent does run (in-process, ``homie eval --agents``),
whether the pair comes from ``--partner-planner`` or from a graph file with a human; nothing is written. The
refusal comes before the ROS 2 environment is looked for, so this runs without ROS."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from homiebot.cli.ros import PAIR_PERCEPTION_REFUSAL

HOMIE = str(Path(sys.executable).with_name("homie"))
PAIR_GRAPH = str(Path(__file__).resolve().parents[2] / "launch" / "config" / "graph_pair.yaml")


@pytest.mark.parametrize("pair", [["--partner-planner", "expert"], ["--partner-planner", "expert", "--mode", "centralized"],
                                  ["--graph", PAIR_GRAPH]], ids=["partner_planner", "centralized", "pair_graph_file"])
def test_two_agents_with_perception_are_refused_with_the_reason(tmp_path: Path, pair: list[str]) -> None:
    out = tmp_path / "out"
    done = subprocess.run([HOMIE, "up", "sim", "--task", "partnr-1-022", *pair, "--perception", "privileged",
                           "--out", str(out)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0] == f"error: {PAIR_PERCEPTION_REFUSAL}"
    assert "robot's cameras only" in lines[0] and "homie eval --agents robot+human --perception" in lines[0]
    assert not out.exists()
