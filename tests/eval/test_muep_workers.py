"""``homie eval --suite muep --workers N``: the tasks played in N processes give the same episodes as one process,
and a worker's failure is one error that records nothing false (homiebot.eval.muep_run.run_suite)."""

from __future__ import annotations

import pytest

from homiebot.eval.muep_run import WorkerFailed, balanced_order, load_records, run_suite
from homiebot.eval.muep_suite import load_suite


@pytest.fixture(scope="module")
def tasks():
    return balanced_order(load_suite())[:6]


def _by_task(records):
    return {r.episode.task_id: (r.episode, r.transcript) for r in records}


def test_two_workers_play_what_one_process_plays(tmp_path, tasks) -> None:
    alone = run_suite(tasks, "searching-expert", "sim", tmp_path / "one")
    side_by_side = run_suite(tasks, "searching-expert", "sim", tmp_path / "two", workers=2)
    assert _by_task(side_by_side) == _by_task(alone)
    assert len(load_records(tmp_path / "two")) == len(tasks)  # each once in episodes.jsonl
    # The same command on the same folder plays nothing again.
    again = run_suite(tasks, "searching-expert", "sim", tmp_path / "two", workers=2)
    assert len(again) == len(tasks) and len(load_records(tmp_path / "two")) == len(tasks)


def test_a_failing_worker_is_one_error_and_records_nothing(tmp_path, tasks) -> None:
    out = tmp_path / "broken"
    with pytest.raises(WorkerFailed, match="a worker failed: .*same command plays the rest"):
        run_suite(tasks[:2], "hf", "sim", out, agent_options={"model": str(tmp_path / "no-such-model")}, workers=2)
    assert not load_records(out)


def test_the_command_line_takes_workers_on_the_suite_only(tmp_path) -> None:
    from typer.testing import CliRunner

    from homiebot.cli import build_app

    runner = CliRunner()
    out = tmp_path / "cli"
    ran = runner.invoke(build_app(), ["eval", "--suite", "muep", "--planner", "searching-expert", "--limit", "3",
                                      "--workers", "2", "--out", str(out)])
    assert ran.exit_code == 0, ran.output
    assert len(load_records(out)) == 3
    games = runner.invoke(build_app(), ["eval", "--suite", "muep", "--planner", "random", "-p",
                                        f"alfworld_data={tmp_path}", "--workers", "2", "--out", str(tmp_path / "g")])
    assert games.exit_code == 2 and "--workers" in games.output and not (tmp_path / "g").exists(), games.output
