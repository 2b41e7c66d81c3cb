"""``homie data collect``'s planner is the suite's when none is named: EMMOE-100's perturbed expert, the PARTNR-style
and MuEP-style suites' expert (the only planner their collections play), so ``homie data collect --suite partnr --out
D`` collects instead of refusing its own default."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from homiebot.cli import build_app
from homiebot.training.collect import PLANNERS, collect_episodes, default_planner
from homiebot.training.episodes import TrainingDataError


def test_each_suite_has_a_default_planner_it_plays() -> None:
    assert default_planner("emmoe") == default_planner("emmoe100") == "perturbed-expert"
    assert default_planner("partnr") == default_planner("muep") == "expert"
    assert {default_planner(s) for s in ("emmoe", "partnr", "muep")} <= set(PLANNERS)
    with pytest.raises(TrainingDataError, match="unknown suite 'nope'"):
        default_planner("nope")


def test_the_help_says_the_default_per_suite() -> None:
    result = CliRunner().invoke(build_app(), ["data", "collect", "--help"], env={"COLUMNS": "200"})
    text = " ".join(result.output.replace("│", " ").split())  # the help column's lines, joined
    assert result.exit_code == 0 and "perturbed-expert for emmoe, expert for partnr and muep" in text, result.output


def test_a_partnr_or_muep_collection_without_planner_gets_past_the_planner(tmp_path) -> None:
    """Cheap: options that fail later (an evaluation seed, a split MuEP has not) show that the default planner was
    accepted (before, both were refused for --planner perturbed-expert)."""
    runner = CliRunner()
    partnr = runner.invoke(build_app(), ["data", "collect", "--suite", "partnr", "--out", str(tmp_path / "p"),
                                         "--tasks", "partnr-1-001", "--seed-offset", "0"])
    assert partnr.exit_code == 2 and "partnr evaluation plays" in partnr.output, partnr.output
    muep = runner.invoke(build_app(), ["data", "collect", "--suite", "muep", "--out", str(tmp_path / "m"),
                                       "--split", "test"])
    assert muep.exit_code == 2 and "unknown split 'test' for --suite muep" in muep.output, muep.output
    with pytest.raises(TrainingDataError, match="partnr evaluation plays"):
        collect_episodes(tmp_path / "api", suite="partnr", task_ids=["partnr-1-001"], seed_offset=0)


def test_homie_data_collect_suite_partnr_out_collects(tmp_path) -> None:
    """The user's command of the report, on one task and seed: partnr-4-020 on seed +3000, the episode the PARTNR
    expert used to repeat a failing Put on until the round limit (tests/planner/test_partnr_expert_next_to.py)."""
    out = tmp_path / "partnr"
    result = CliRunner().invoke(build_app(), ["data", "collect", "--suite", "partnr", "--out", str(out), "--tasks",
                                              "partnr-4-020", "--seed-offset", "3000"])
    assert result.exit_code == 0, result.output
    assert "1 episodes recorded (0 already there), 1 successful" in result.output, result.output
    assert json.loads((out / "collect.json").read_text())["planner"] == "expert"
    summary = json.loads((out / "episodes" / "partnr-4-020" / "run0" / "summary.json").read_text())
    assert "prompt-bound-partnr-expert" in json.dumps(summary)
