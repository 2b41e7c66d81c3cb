"""One verdict per episode (homiebot/eval/verdict.py): the evaluation ``homie metrics`` applies is the one the play
result, ``summary.json``, the episode page and ``homie metrics`` itself show.

Driven through the play episode API (the person's lines from a stream, no keyboard):

* ``partnr-1-030`` ("Put the mug on the sofa, then turn on the floor lamp.") with the lamp turned on first: the
  final state meets the goal (the mug is on the sofa) and the episode ends with ``[End]``, but PARTNR's evaluation
  function has a temporal constraint (the mug before the lamp): a failure everywhere, PC 0.5;
* the same task in the right order: a success everywhere;
* an EMMOE task (demo-drawer) whose keypath is done but whose can is picked up again before ``[End]``: EMMOE's
  SR (TP = 100%) says success, the final-state goal check does not; every surface says EMMOE's success.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from homiebot.data.record import EpisodeRecorder, read_summary
from homiebot.eval.partnr.recording import StatesFileRecorder
from homiebot.play.episode import play_config, play_episode
from homiebot.play.keyboard import KeyboardPlanner
from homiebot.play.screen import PlayScreen
from homiebot.report import write_report
from homiebot.sim.base import make_simulator
from homiebot.tasks.suite import get_task

HOMIE = str(Path(sys.executable).with_name("homie"))
MUG_THEN_LAMP = ["[Go to, mug]", "[Pick, mug]", "[Go to, sofa]", "[Put, mug, sofa]", "[Go to, floor_lamp]",
                 "[Turn on, floor_lamp]", "[End]"]
LAMP_THEN_MUG = ["[Go to, floor_lamp]", "[Turn on, floor_lamp]", "[Go to, mug]", "[Pick, mug]", "[Go to, sofa]",
                 "[Put, mug, sofa]", "[End]"]
# demo-drawer's keypath done ([Open, ...], [Put, short_can, kitchen_drawer], [End]), the can taken out again.
DRAWER_TAKEN_BACK = ["[Go to, kitchen_drawer]", "[Open, kitchen_drawer]", "[Go to, short_can]", "[Pick, short_can]",
                     "[Go to, kitchen_drawer]", "[Put, short_can, kitchen_drawer]", "[Pick, short_can]", "[End]"]


@pytest.fixture(scope="module")
def sim():
    simulator = make_simulator("mujoco", render=False)
    yield simulator
    simulator.shutdown()


def _play(sim, tmp_path: Path, task_id: str, lines: list[str]):
    task = get_task(task_id)
    recorder = EpisodeRecorder(tmp_path / "record", images=False, video=False)
    screen = PlayScreen(Console(file=io.StringIO(), width=120), None, preview=False, task_id=task.id)
    person = KeyboardPlanner(io.StringIO("".join(f"{line}\n" for line in lines)), screen)
    # What homie play passes: the states recorder, which also judges the episode when its summary is written.
    outcome = play_episode(play_config(task, max_rounds=12), person, recorder, simulator=sim,
                           observers=[StatesFileRecorder(recorder, task=task), screen])
    assert outcome.ended_by == "end" and outcome.trajectory.error is None
    assert [r.feedback.code.value for r in outcome.trajectory.rounds] == ["OK"] * len(lines)
    return outcome


def _play_line(outcome, tmp_path: Path, capsys) -> str:
    """The play result as ``homie play`` prints it at the end."""
    from homiebot.cli.play import _finish

    capsys.readouterr()
    _finish(outcome, False, tmp_path / "play.log")
    return capsys.readouterr().out


def _page_title(record: Path) -> str:
    (page,) = write_report(record)
    return re.search(r"<title>(.*?)</title>", page.read_text(), re.S).group(1)


def _metrics(record: Path, cwd: Path) -> tuple[dict, str]:
    env = {**os.environ, "COLUMNS": "200"}
    as_json = subprocess.run([HOMIE, "metrics", str(record), "--json"], capture_output=True, text=True, cwd=cwd,
                             env=env, timeout=300)
    assert as_json.returncode == 0, as_json.stderr
    table = subprocess.run([HOMIE, "metrics", str(record)], capture_output=True, text=True, cwd=cwd, env=env,
                           timeout=300)
    assert table.returncode == 0, table.stderr
    return json.loads(as_json.stdout), table.stdout


@pytest.mark.slow
def test_a_violated_temporal_order_is_a_failure_on_every_surface(sim, tmp_path, capsys):
    outcome = _play(sim, tmp_path, "partnr-1-030", LAMP_THEN_MUG)
    trajectory = outcome.trajectory
    assert trajectory.ended and trajectory.goal_satisfied  # the old rule (ended and goal met) said success
    summary = read_summary(outcome.record)
    assert summary["success"] is False and summary["verdict"]["pc"] == pytest.approx(0.5)
    verdict = outcome.verdict
    assert verdict is not None and verdict.success is False and verdict.judged_by == "partnr"
    assert verdict.pc == pytest.approx(0.5) and verdict.explanation
    line = _play_line(outcome, tmp_path, capsys)
    assert line.startswith("failure (the task's PARTNR evaluation function: PC 0.50;"), line
    assert "(failure)" in _page_title(outcome.record)
    report, table = _metrics(outcome.record, tmp_path)
    assert report["summary"]["sr"] == 0.0 and report["partnr"]["summary"]["pc"] == pytest.approx(0.5)
    assert "failure (the task's PARTNR evaluation function: PC 0.50" in table
    assert "PARTNR (1 episodes with states): success 0.0%, PC 50.0%" in table


@pytest.mark.slow
def test_the_right_order_is_a_success_on_every_surface(sim, tmp_path, capsys):
    outcome = _play(sim, tmp_path, "partnr-1-030", MUG_THEN_LAMP)
    assert read_summary(outcome.record)["success"] is True
    assert outcome.verdict is not None and outcome.verdict.success is True
    assert _play_line(outcome, tmp_path, capsys).startswith("success (the task's PARTNR evaluation function: PC 1.00)")
    assert "(success)" in _page_title(outcome.record)
    report, table = _metrics(outcome.record, tmp_path)
    assert report["summary"]["sr"] == 1.0 and "success (the task's PARTNR evaluation function: PC 1.00)" in table


def test_an_emmoe_episode_has_one_verdict_too(sim, tmp_path, capsys):
    outcome = _play(sim, tmp_path, "demo-drawer", DRAWER_TAKEN_BACK)
    trajectory = outcome.trajectory
    assert trajectory.ended and trajectory.goal_satisfied is False  # the old rule said failure, SR says success
    summary = read_summary(outcome.record)
    assert summary["success"] is True and summary["verdict"]["tp"] == "1"
    assert outcome.verdict is not None and outcome.verdict.success is True and outcome.verdict.judged_by == "keypaths"
    assert _play_line(outcome, tmp_path, capsys).startswith("success (EMMOE keypaths: TP 100%)")
    assert "(success)" in _page_title(outcome.record)
    report, table = _metrics(outcome.record, tmp_path)
    assert report["summary"]["sr"] == 1.0 and report["summary"]["goal_sr"] == 0.0
    assert "success (EMMOE keypaths: TP 100%)" in table
