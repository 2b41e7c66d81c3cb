"""``homie data collect``'s planner is the suite's when none is named: EMMOE-100's perturbed expert, the PARTNR-style
and MuEP-style suites' expert (the PARTNR collection plays no other), so ``homie data collect --suite partnr --out
D`` collects instead of refusing its own default. Its seed offset, when none is given, is the first that meets no
evaluation's seed (before, the default 0 was refused in every suite: runs 0-9 of every task are reserved)."""

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


@pytest.mark.parametrize(("suite", "tasks", "expected"), [
    ("emmoe", ["--tasks", "emmoe-001", "--planner", "expert"], "the task's seed + 10 (--seed-offset) + the run"),
    ("partnr", ["--tasks", "partnr-1-001"], "the task's seed + 2592 (--seed-offset) + the run"),
])
def test_without_a_seed_offset_the_collection_takes_the_first_free_one_and_says_it(tmp_path, suite, tasks,
                                                                                   expected) -> None:
    from homiebot.tasks.reserved import reserved_seeds
    from homiebot.tasks.suite import load_suite

    out = tmp_path / suite
    result = CliRunner().invoke(build_app(), ["data", "collect", "--suite", suite, "--out", str(out), *tasks])
    assert result.exit_code == 0, result.output
    assert "1 episodes recorded (0 already there), 1 successful" in result.output and expected in result.output
    offset = json.loads((out / "collect.json").read_text())["seed_offset"]
    task = next(t for t in load_suite(suite).tasks if t.id == tasks[1])
    assert task.seed + offset not in reserved_seeds() and task.seed + offset - 1 in reserved_seeds()  # the first free
    # The same command again finds its own collection (the same default), and plays nothing twice.
    again = CliRunner().invoke(build_app(), ["data", "collect", "--suite", suite, "--out", str(out), *tasks])
    assert again.exit_code == 0 and "0 episodes recorded (1 already there)" in again.output, again.output
    assert json.loads((out / "collect.json").read_text())["seed_offset"] == offset


def test_more_runs_than_fit_between_the_task_seeds_go_past_every_evaluation_seed() -> None:
    from homiebot.tasks.reserved import last_reserved_seed
    from homiebot.tasks.suite import load_suite
    from homiebot.training.collect import free_offsets

    task = next(t for t in load_suite("emmoe").tasks if t.id == "emmoe-001")
    assert free_offsets([task], 6) == (10, 31)  # the task seeds are 37 apart: runs 0-9 reserved, 27 free after them
    first, last = free_offsets([task], 30) or (0, 0)
    assert last is None and task.seed + first == last_reserved_seed() + 1
