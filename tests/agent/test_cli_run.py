"""``homie run`` / ``homie tasks``: exit codes, messages, records (on the FakeWorld backend; MuJoCo in
``test_episode_mujoco.py``)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from homiebot.cli import build_app
from homiebot.sim.base import _BACKENDS, register_backend


@pytest.fixture(autouse=True)
def fake_backend():
    register_backend("fake", "homiebot.testing.fake_world:FakeWorld")
    yield
    _BACKENDS.pop("fake", None)


@pytest.fixture()
def cli():
    runner = CliRunner()
    app = build_app()

    def invoke(*args: str):
        return runner.invoke(app, list(args))

    return invoke


def test_tasks_lists_ids_one_per_line(cli):
    result = cli("tasks")
    assert result.exit_code == 0
    ids = result.stdout.split()
    assert "demo-drawer" in ids and all(" " not in i for i in ids)


def test_run_task_writes_record(cli, tmp_path):
    out = tmp_path / "demo"
    result = cli("run", "--task", "demo-drawer", "--out", str(out), "--simulator", "fake")
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["task"] == "demo-drawer" and summary["success"] is True
    assert summary["subtasks"][-1] == "[End]" and len(summary["error_codes"]) == summary["num_rounds"]
    assert (out / "subtask1_front.png").is_file()


def test_free_text_with_expert_is_refused_naming_the_planners(cli, tmp_path):
    result = cli("run", "tidy the kitchen", "--scene", "apartment_1", "--planner", "expert", "--out", str(tmp_path / "x"))
    assert result.exit_code == 2
    assert "planner 'expert' needs a built-in task" in result.stderr
    assert "scripted" in result.stderr and "random" in result.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (("run", "--task", "emmoe-999"), "unknown task id 'emmoe-999'"),
        (("run", "go", "--scene", "moon_base"), "unknown scene 'moon_base'"),
        (("run", "--task", "demo-drawer", "--planner", "oracle9000"), "unknown planner 'oracle9000'"),
        (("run",), "give either --task ID or a free-text INSTRUCTION"),
        (("run", "go to the sofa"), "needs --scene"),
        (("run", "--task", "demo-drawer", "--base-url", "http://x"), "planner 'expert' does not take option(s) base_url"),
        (("run", "--task", "demo-drawer", "-p", "oops"), "must look like key=value"),
    ],
)
def test_bad_input_exits_2_with_precise_message(cli, tmp_path, args, message):
    result = cli(*args, "--out", str(tmp_path / "o"))
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert not (tmp_path / "o").exists()


def test_output_path_that_is_a_file_is_refused(cli, tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    result = cli("run", "--task", "demo-drawer", "--out", str(target), "--simulator", "fake")
    assert result.exit_code == 2 and "exists and is not a directory" in result.stderr


def test_scripted_free_text_run(cli, tmp_path):
    script = tmp_path / "script.txt"
    script.write_text("Analysis: go\nSubtask: [Go to, fridge]\nModel: NoMaD\n---\nAnalysis: done\nSubtask: [End]\nModel: None\n")
    out = tmp_path / "ep"
    result = cli("run", "go to the fridge", "--scene", "apartment_1", "--planner", "scripted", "-p", f"path={script}",
                 "--simulator", "fake", "--out", str(out), "--no-video")
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["subtasks"] == ["[Go to, fridge]", "[End]"] and summary["success"] is None
    assert "[Go to, fridge]" in result.output  # the round table prints subtasks literally, not as rich markup


def test_noise_option(cli, tmp_path):
    result = cli("run", "--task", "demo-drawer", "--noise", "loud", "--out", str(tmp_path / "n"))
    assert result.exit_code == 2 and "unknown --noise 'loud'" in result.stderr
    out = tmp_path / "e"
    result = cli("run", "--task", "demo-drawer", "--noise", "emmoe", "--simulator", "fake", "--no-video", "--out", str(out))
    assert result.exit_code == 0, result.output
    codes = json.loads((out / "summary.json").read_text())["error_codes"]
    assert {"E1", "E2"} & set(codes) or any(r["attempts"] > 1 for r in map(json.loads, (out / "rounds.jsonl").read_text().splitlines()))
