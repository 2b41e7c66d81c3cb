"""``--skills oracle|physical`` on ``homie run`` and ``homie eval``: the setting reaches the episode, is kept in the
record and pinned in ``eval.json``; a wrong value is one line and exit 2 with nothing written (docs/robots.md,
"Physical skills")."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from homiebot.cli import build_app

TASK = "emmoe-084"


def test_homie_run_skills_physical_completes_and_keeps_the_setting(tmp_path: Path):
    out = tmp_path / "run"
    result = CliRunner().invoke(build_app(), ["run", "--task", TASK, "--skills", "physical", "--out", str(out),
                                              "--no-render", "--no-report"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["success"] is True
    assert summary["run"]["skills"] == {"mode": "physical", "noise": "off"}


def test_a_wrong_skills_value_is_one_line_and_writes_nothing(tmp_path: Path):
    out = tmp_path / "run"
    result = CliRunner().invoke(build_app(), ["run", "--task", TASK, "--skills", "physic", "--out", str(out)])
    assert result.exit_code == 2
    assert "--skills 'physic': use oracle or physical" in result.output
    assert not out.exists()


def test_homie_eval_pins_the_skills_and_refuses_a_resume_with_others(tmp_path: Path):
    out = tmp_path / "eval"
    base = ["eval", "--suite", "emmoe", "--tasks", TASK, "--runs", "1", "--workers", "1", "--no-images", "--out", str(out)]
    runner = CliRunner()
    first = runner.invoke(build_app(), [*base, "--skills", "physical"])
    assert first.exit_code == 0, first.output
    settings = json.loads((out / "eval.json").read_text())["settings"]
    assert settings["skills"] == "physical"
    assert json.loads((out / "eval.json").read_text())["run"]["skills"]["mode"] == "physical"
    # The expert with physical skills is not its own PLWSR reference: the oracle expert's episode is run beside it.
    assert (out / "reference" / TASK).is_dir()
    again = runner.invoke(build_app(), [*base, "--skills", "oracle"])
    assert again.exit_code == 2
    assert "skills: 'physical' there, 'oracle' now" in again.output


def test_homie_up_sim_refuses_a_wrong_skills_value_before_anything_starts(tmp_path: Path):
    out = tmp_path / "up"
    result = CliRunner().invoke(build_app(), ["up", "sim", "--task", TASK, "--skills", "physic", "--out", str(out)])
    assert result.exit_code == 2
    assert "--skills 'physic': use oracle or physical" in result.output
    assert not out.exists()
