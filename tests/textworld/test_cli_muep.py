"""``homie muep``: run, metrics, export and --alfworld-data; bad input is one line and exit code 2."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

import pytest
from typer.testing import CliRunner

from homiebot.cli import build_app
from homiebot.eval.muep_suite import load_suite, save_suite
from homiebot.tasks.alfred import TASK_TYPES
from homiebot.textworld import alfworld as engine

runner = CliRunner()


@dataclass
class Ran:
    """A command's result without the deprecation notice that ``homie muep run`` / ``metrics`` print first (these
    tests keep the old spellings working; tests/cli/test_vocabulary.py checks the notice itself)."""

    exit_code: int
    output: str
    exception: BaseException | None


def _without_notice(result) -> Ran:
    kept = "".join(line for line in result.output.splitlines(keepends=True) if not line.startswith("warning: "))
    return Ran(result.exit_code, kept, result.exception)


def invoke(*args: str) -> Ran:
    return _without_notice(runner.invoke(build_app(), ["muep", *args]))


@pytest.fixture()
def small_suite(tmp_path):
    suite = load_suite()
    tasks = [
        next(t for t in suite if t.task_type == kind and t.split == split)
        for kind in TASK_TYPES[:2]
        for split in ("seen", "unseen")
    ]
    path = tmp_path / "small.yaml"
    save_suite(tasks, path)
    return path


def test_run_in_the_text_world_and_recompute(small_suite, tmp_path) -> None:
    out = tmp_path / "run"
    result = invoke("run", "--agent", "expert", "--engine", "sim", "--suite", str(small_suite), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "| seen | Overall | 2 | 100.00 |" in result.output and "| unseen | Overall | 2 | 100.00 |" in result.output
    again = invoke("metrics", str(out), "--convention", "prose")
    assert again.exit_code == 0 and "| unseen | Overall | 2 | 100.00 |" in again.output
    papers = invoke(
        "run", "--suite", str(small_suite), "--split", "unseen", "--phrasing", "papers", "--out", str(tmp_path / "p")
    )
    assert papers.exit_code == 0 and "| seen |" not in papers.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "--agent", "oracle"], "unknown agent 'oracle'"),
        (["run", "--engine", "thor"], "unknown engine 'thor'"),
        (["run", "--phrasing", "old"], "unknown phrasing 'old'"),
        (["run", "--split", "train"], "unknown split 'train'"),
        (["run", "--suite", "/nonexistent/muep.yaml"], "MuEP suite not found"),
        (["run", "--alfworld-data", "/nonexistent"], "ALFWorld data directory not found"),
        (["metrics", "/nonexistent"], "no episodes.jsonl"),
        (["metrics", ".", "--convention", "mine"], "unknown convention 'mine'"),
    ],
)
def test_bad_input_is_one_precise_line(args, message, tmp_path) -> None:
    if "--out" not in args and args[0] == "run":
        args = [*args, "--out", str(tmp_path / "o")]
    result = invoke(*args)
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.output


@pytest.mark.skipif(not engine.available(), reason="the ALFWorld engine needs the 'textworld' extra")
def test_export_then_play_it_as_alfworld_data(small_suite, tmp_path) -> None:
    data = tmp_path / "json_2.1.1"
    exported = invoke("export", "--suite", str(small_suite), "--out", str(data))
    assert exported.exit_code == 0 and "4 game folders" in exported.output
    result = invoke(
        "run",
        "--alfworld-data",
        str(data),
        "--split",
        "valid_unseen",
        "--agent",
        "expert",
        "--out",
        str(tmp_path / "a"),
    )
    assert result.exit_code == 0, result.output
    assert "| valid_unseen | Overall | 2 | 100.00 |" in result.output
    empty = invoke("run", "--alfworld-data", str(data), "--split", "valid_train", "--out", str(tmp_path / "b"))
    assert empty.exit_code == 2 and "no playable ALFWorld game" in empty.output


def test_a_run_cut_short_is_completed_by_the_same_command(small_suite, tmp_path) -> None:
    out = tmp_path / "run"
    first = invoke("run", "--suite", str(small_suite), "--limit", "2", "--out", str(out))
    assert first.exit_code == 0, first.output
    played = (out / "episodes.jsonl").read_text().splitlines()
    # --limit takes the tasks in turns over types and splits: one seen and one unseen of the first type
    assert [line.split('"split": "')[1].split('"')[0] for line in played] == ["seen", "unseen"]
    again = invoke("run", "--suite", str(small_suite), "--out", str(out))
    assert again.exit_code == 0, again.output
    lines = (out / "episodes.jsonl").read_text().splitlines()
    assert lines[:2] == played and len(lines) == 4 and len({line.split('"task_id": ')[1] for line in lines}) == 4
    assert "| seen | Overall | 2 | 100.00 |" in again.output and "| unseen | Overall | 2 | 100.00 |" in again.output
    other = invoke("run", "--suite", str(small_suite), "--agent", "random", "--out", str(out))
    assert other.exit_code == 2
    assert "holds episodes of expert on sim" in other.output and len(other.output.strip().splitlines()) == 1
    assert (out / "episodes.jsonl").read_text().splitlines() == lines


@pytest.mark.parametrize("command", [["muep", "run"], ["eval", "--suite", "muep", "--planner", "expert"]])
def test_ctrl_c_prints_the_command_that_resumes(command, small_suite, tmp_path, monkeypatch) -> None:
    # Ctrl-C during the second episode: the first is kept, one line gives the command that plays the rest (as
    # homie eval does for EMMOE-100), and that command completes the run.
    from homiebot.eval import muep_run

    out = tmp_path / "run"
    suite = ["--suite", str(small_suite)] if command[0] == "muep" else ["--tasks", ",".join(_ids(small_suite))]
    argv = [*command, *suite, "--out", str(out)]
    play = muep_run.run_text_episode
    calls: list[str] = []

    def interrupted_second(*args, **kwargs):
        calls.append(args[1].id)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return play(*args, **kwargs)

    monkeypatch.setattr(muep_run, "run_text_episode", interrupted_second)
    monkeypatch.setattr("sys.argv", ["/venv/bin/homie", *argv])
    stopped = _without_notice(runner.invoke(build_app(), argv))
    assert stopped.exit_code == 130
    lines = [line for line in stopped.output.splitlines() if line.strip()]
    assert lines == [f"error: interrupted; to resume, run the same command again: {shlex.join(['homie', *argv])}"]
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 1
    monkeypatch.setattr(muep_run, "run_text_episode", play)
    resumed = _without_notice(runner.invoke(build_app(), argv))
    assert resumed.exit_code == 0, resumed.output
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 4


def _ids(suite_file) -> list[str]:
    return [task.id for task in load_suite(suite_file)]


def test_observe_option_is_checked_before_anything_runs(tmp_path) -> None:
    for args, message in [
        (["--observe", "smell"], "unknown observation mode 'smell'"),
        (["--observe", "images", "--engine", "alfworld"], "ALFWorld's engine has no images"),
    ]:
        result = invoke("run", *args, "--out", str(tmp_path / "o"))
        assert result.exit_code == 2 and message in result.output and len(result.output.strip().splitlines()) == 1
        assert not (tmp_path / "o").exists()


def test_homie_eval_runs_the_muep_suite_and_homie_metrics_recomputes_it(tmp_path) -> None:
    ids = [t.id for t in load_suite() if t.task_type == "pick_two_obj_and_place"][::20]  # one seen, one unseen
    out = tmp_path / "eval"
    app = build_app()
    ran = runner.invoke(
        app,
        [
            "eval",
            "--suite",
            "muep",
            "--planner",
            "expert",
            "--observe",
            "text",
            "--tasks",
            ",".join(ids),
            "--out",
            str(out),
        ],
    )
    assert ran.exit_code == 0, ran.output
    assert (
        "| seen | Pick two & place | 1 | 100.00 |" in ran.output and "| unseen | Overall | 1 | 100.00 |" in ran.output
    )
    (out / "report.md").unlink()
    again = runner.invoke(app, ["metrics", str(out)])
    assert again.exit_code == 0, again.output
    assert (out / "report.md").read_text() in again.output and "| unseen | Overall | 1 | 100.00 |" in again.output
    for args, message in [
        (["--runs", "5"], "--runs is not an option of --suite muep"),
        (["--planner", "openai"], "unknown agent 'openai'"),
        (["--tasks", "emmoe-001"], "unknown MuEP task id"),
        (["-p", "engine=alfworld", "--observe", "both"], "ALFWorld's engine has no images"),
    ]:
        bad = runner.invoke(app, ["eval", "--suite", "muep", *args, "--out", str(tmp_path / "bad")])
        assert bad.exit_code == 2 and message in bad.output and len(bad.output.strip().splitlines()) == 1, bad.output
        assert not (tmp_path / "bad").exists()
    emmoe = runner.invoke(app, ["eval", "--suite", "emmoe", "--observe", "text", "--out", str(tmp_path / "e")])
    assert emmoe.exit_code == 2 and "--observe" in emmoe.output and not (tmp_path / "e").exists()


def test_compare_puts_runs_side_by_side_on_their_common_tasks(small_suite, tmp_path) -> None:
    expert, rand = tmp_path / "expert", tmp_path / "random"
    assert invoke("run", "--suite", str(small_suite), "--out", str(expert)).exit_code == 0
    assert (
        invoke("run", "--suite", str(small_suite), "--agent", "random", "--limit", "2", "--out", str(rand)).exit_code
        == 0
    )
    result = invoke("compare", str(expert), str(rand))
    assert result.exit_code == 0, result.output
    rows = {line.split("|")[1].strip(): line.split("|") for line in result.output.splitlines()[2:]}
    assert rows["expert"][5].strip() == "2" and rows["expert"][6].strip() == "100.00"  # seen N, SR
    assert rows["random"][2].strip() == "random" and rows["random"][5].strip() == "1"
    common = invoke("compare", str(expert), str(rand), "--common")
    assert all(line.split("|")[5].strip() == "1" for line in common.output.splitlines()[2:])
    missing = invoke("compare", str(tmp_path / "nothing"))
    assert missing.exit_code == 2 and "no episodes.jsonl" in missing.output
