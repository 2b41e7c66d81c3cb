"""--recovery / --recovery-stages: how the CLI options become the wrapper's options, and the pooled summary."""

from __future__ import annotations

import json

import pytest

from homiebot.planner.registry import PlannerError, make_planner
from homiebot.recovery.cli import recovery_planner, write_recovery_summary
from homiebot.recovery.planner import RecoveryPlanner
from homiebot.recovery.stats import RecoveryStats, write_stats


def test_without_recovery_the_planner_is_unchanged():
    assert recovery_planner("hf", {"model": "smollm2"}, None) == ("hf", {"model": "smollm2"})


def test_recovery_wraps_the_planner_and_its_options(tmp_path):
    name, options = recovery_planner("scripted", {"outputs": ["x"], "path": None}, "cmfr", "1,2", False, tmp_path)
    assert name == "recovery"
    assert options == {"base": "scripted", "base_options": {"outputs": ["x"]}, "mode": "cmfr", "stages": [1, 2],
                       "search": False, "stats_dir": str(tmp_path)}
    planner = make_planner(name, **{**options, "mode": "none"})
    assert isinstance(planner, RecoveryPlanner) and planner.inner.name == "scripted"
    assert planner.config.stages == frozenset({1, 2}) and not planner.config.search


@pytest.mark.parametrize(("args", "message"), [
    (("expert", {}, "magic"), "unknown --recovery 'magic'"),
    (("expert", {}, "cmfr", "1,7"), "stages are 1, 2, 3 and 4"),
    (("expert", {}, "cot", "1,2"), "--recovery-stages applies to --recovery cmfr"),
    (("expert", {}, None, "1,2"), "need --recovery"),
    (("recovery", {}, "cmfr"), "do not also name --planner recovery"),
])
def test_bad_recovery_options_are_one_line(args, message):
    with pytest.raises(ValueError, match=message):
        recovery_planner(*args)


def test_the_summary_is_written_beside_the_report(tmp_path):
    assert write_recovery_summary(tmp_path) is None  # an evaluation without --recovery
    stats = RecoveryStats(mode="cmfr", instruction="a", seed=1, failed_subtasks=2, unimportant=1,
                          reached={"1": 2, "2": 1, "3": 0, "4": 1}, failures_by_code={"L1": 2, "E1": 1},
                          llm_calls=5, prompt_tokens=100, completion_tokens=20)
    write_stats(tmp_path / "recovery", stats)
    write_stats(tmp_path / "recovery", RecoveryStats(mode="cmfr", instruction="b", seed=1))
    summary = write_recovery_summary(tmp_path, tmp_path / "report")
    assert summary is not None and summary["episodes"] == 2
    assert summary["reached_share"]["1"] == 1.0 and summary["unimportant_share"] == 0.5
    assert summary["llm_calls_per_episode"] == 2.5 and summary["tokens_per_episode"] == 60.0
    markdown = (tmp_path / "report" / "recovery.md").read_text()
    assert "| L1 | 2 | 0.67 |" in markdown and (tmp_path / "report" / "recovery.json").is_file()


def _homie(*args: str):
    from typer.testing import CliRunner

    from homiebot.cli import build_app

    return CliRunner().invoke(build_app(), list(args))


PICK = '["Analysis: pick\\nSubtask: [Pick, bowl]\\nModel: RT-1-X"]'


def test_homie_run_with_recovery_writes_the_episode_statistics(tmp_path):
    out = tmp_path / "rec"
    result = _homie("run", "--task", "emmoe-001", "--planner", "scripted", "-p", f"outputs={PICK}", "--recovery", "none",
                    "--no-render", "--no-report", "--out", str(out))
    assert result.exit_code == 0, result.output
    stats = json.loads((out / "recovery.json").read_text())
    assert stats["mode"] == "none" and stats["failed_subtasks"] == 1 and sum(stats["failures_by_code"].values()) == 1
    result = _homie("run", "--task", "emmoe-001", "--planner", "expert", "--recovery-stages", "1", "--out", str(tmp_path / "x"))
    assert result.exit_code == 2 and "need --recovery" in result.output and not (tmp_path / "x").exists()


@pytest.mark.slow
def test_homie_eval_with_recovery_pins_the_wrapper_and_writes_the_summary(tmp_path):
    out = tmp_path / "ev"
    result = _homie("eval", "--out", str(out), "--tasks", "emmoe-001", "--runs", "1", "--workers", "1", "--no-progress",
                    "--no-report", "--planner", "scripted", "-p", f"outputs={PICK}", "--recovery", "none")
    assert result.exit_code == 0, result.output
    settings = json.loads((out / "eval.json").read_text())["settings"]
    assert settings["planner"]["name"] == "recovery" and settings["planner"]["base"]["name"] == "scripted"
    assert settings["planner"]["mode"] == "none"
    assert "recovery: 1 episode(s), 1 failed subtask(s)" in result.output
    assert json.loads((out / "recovery.json").read_text())["failed_subtasks"] == 1
    (out / "recovery.md").unlink()
    result = _homie("metrics", str(out), "--no-plots")
    assert result.exit_code == 0 and "recovery: 1 episode(s)" in result.output and (out / "recovery.md").is_file()


def test_the_wrapper_named_with_its_base_builds_the_base_from_its_configuration():
    """``RecoveryPlanner("expert", {...})``: the base's options are the base's configuration, typed from text as a
    command line's (``-p``) and refused in one line, as ``--planner recovery -p base=...`` is."""
    wrapper = RecoveryPlanner("expert", {"interact_range_m": "1.5", "close_opened": "no"}, mode="none")
    assert wrapper.inner.interact_range_m == 1.5 and wrapper.inner.close_opened is False  # type: ignore[attr-defined]
    with pytest.raises(PlannerError, match=r"^planner 'expert' does not take option\(s\) reach; it takes: interact_range_m"):
        RecoveryPlanner("expert", {"reach": 1}, mode="none")
    with pytest.raises(PlannerError, match=r"^planner 'expert': interact_range_m: Input should be greater than 0$"):
        RecoveryPlanner("expert", {"interact_range_m": -1}, mode="none")
