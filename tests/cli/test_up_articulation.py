"""``homie up sim --articulation oracle|physical``: how ``--skills physical`` opens and closes doors and drawers
through the graph (docs/robots.md, "Physical skills through the ROS graph"). Refused in one line without ``--skills
physical`` as ``homie run`` and ``homie eval`` refuse it; given, it reaches the manipulation executor's and the sim
bridge's ``articulation`` parameter, and the planner node's, whose record names it. No ROS: the overlay and the
supervisor are stand-ins that keep what ``homie up`` hands them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from homiebot.cli import build_app

TASK = "emmoe-005"  # a drawer opened and closed


@pytest.mark.parametrize(("args", "message"), [
    (["--articulation", "physical"], "--articulation needs --skills physical"),
    (["--skills", "oracle", "--articulation", "oracle"], "--articulation needs --skills physical"),
    (["--skills", "physical", "--articulation", "arm"], "--articulation 'arm': use oracle or physical"),
])
def test_up_sim_refuses_articulation_as_run_does_before_anything_starts(tmp_path: Path, args, message):
    out = tmp_path / "up"
    result = CliRunner().invoke(build_app(), ["up", "sim", "--task", TASK, *args, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert len([line for line in result.stderr.splitlines() if line.strip()]) == 1, result.output
    assert not out.exists()
    # The same words as homie run's (one flag means one thing across commands).
    run = CliRunner().invoke(build_app(), ["run", "--task", TASK, *args, "--out", str(tmp_path / "run")])
    assert run.exit_code == 2 and message in run.output


class _Supervisor:
    """Keeps the overrides ``homie up sim`` gives the graph's nodes; starts nothing."""

    seen: list[dict[str, dict[str, Any]]] = []

    def __init__(self, graph, params, *, overrides, **_kwargs) -> None:
        self.seen.append(overrides)

    def start(self) -> None:
        pass

    def run(self, _stop, timeout_s=None):
        return None

    def stop(self) -> dict[str, int]:
        return {}


@pytest.fixture
def no_ros(monkeypatch):
    from homiebot.ros import environment, supervisor

    monkeypatch.setattr(environment, "find_overlay", lambda *a, **k: None)
    monkeypatch.setattr(environment, "overlay_environment", lambda *a, **k: {})
    monkeypatch.setattr(supervisor, "Supervisor", _Supervisor)
    _Supervisor.seen = []
    return _Supervisor.seen


@pytest.mark.parametrize("articulation", ["oracle", "physical"])
def test_up_sim_articulation_reaches_the_bridge_the_manipulation_executor_and_the_record(tmp_path, no_ros,
                                                                                        articulation):
    result = CliRunner().invoke(build_app(), ["up", "sim", "--task", TASK, "--skills", "physical",
                                              "--articulation", articulation, "--out", str(tmp_path / "up")])
    assert result.exit_code == 0, result.output
    (overrides,) = no_ros
    assert {name for name, params in overrides.items() if "articulation" in params} == {
        "sim_bridge", "manip_executor", "planner_node"}
    assert {params["articulation"] for params in overrides.values() if "articulation" in params} == {articulation}
    assert overrides["manip_executor"]["skills"] == overrides["sim_bridge"]["skills"] == "physical"


def test_up_sim_without_articulation_leaves_the_nodes_their_default(tmp_path, no_ros):
    result = CliRunner().invoke(build_app(), ["up", "sim", "--task", TASK, "--skills", "physical",
                                              "--out", str(tmp_path / "up")])
    assert result.exit_code == 0, result.output
    (overrides,) = no_ros
    assert not any("articulation" in params for params in overrides.values())
