"""A played episode in this process (homiebot/play/episode.py): the person's lines complete the task and the
record is any episode's plus ``play.json``; quitting ends it cleanly, recorded as ended by the user; the screen
saves every round's views and shows the rounds."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from homiebot.data.record import PLAY_FILE, EpisodeRecorder, read_episode, read_summary
from homiebot.eval.partnr.recording import StatesFileRecorder
from homiebot.play.episode import play_config, play_episode
from homiebot.play.keyboard import KeyboardPlanner
from homiebot.play.screen import PlayScreen, half_block_preview, mosaic
from homiebot.sim.base import make_simulator
from homiebot.tasks.suite import get_task
from homiebot.types import VIEW_NAMES

SOLUTION = ["[Go to, kitchen_drawer]", "[Open, kitchen drawer]", "[Go to, short_can]", "[Pick, short_can]",
            "[Go to, kitchen_drawer]", "[Put, short_can, kitchen_drawer]", "[Close, kitchen_drawer] octo", "[End]"]


@pytest.fixture(scope="module")
def sim():
    simulator = make_simulator("mujoco", render=True)
    yield simulator
    simulator.shutdown()


def _play(sim, tmp_path, lines, *, preview=False):
    task = get_task("demo-drawer")
    recorder = EpisodeRecorder(tmp_path / "record", video=False)
    views = tmp_path / "views"
    views.mkdir()
    shown = io.StringIO()
    screen = PlayScreen(Console(file=shown, width=100, force_terminal=preview, color_system="truecolor" if preview else None),
                        views, preview=preview, task_id=task.id)
    person = KeyboardPlanner(io.StringIO("".join(line + "\n" for line in lines)), screen)
    outcome = play_episode(play_config(task, max_rounds=12), person, recorder, simulator=sim,
                           observers=[StatesFileRecorder(recorder, task=task), screen])
    return outcome, shown.getvalue(), screen


def test_typed_subtasks_complete_the_task_and_are_recorded(sim, tmp_path):
    lines = ["help", "[Go to, fridg]", *SOLUTION[:3], "look", *SOLUTION[3:]]
    outcome, shown, screen = _play(sim, tmp_path, lines)
    trajectory = outcome.trajectory
    assert outcome.ended_by == "end" and trajectory.error is None
    assert trajectory.ended and trajectory.goal_satisfied
    assert trajectory.planner == "keyboard"
    assert [r.subtask_text for r in trajectory.rounds][-2:] == ["[Close, kitchen_drawer]", "[End]"]
    assert [r.output.model for r in trajectory.rounds][:2] == ["NoMaD", "octo"]
    record = outcome.record
    summary = read_summary(record)
    assert summary["success"] is True and summary["planner"] == "keyboard" and summary["error"] is None
    assert read_episode(record).goal_satisfied
    for name in ("states.jsonl", "evaluation.json", "rounds.jsonl", "conversation.json", PLAY_FILE):
        assert (record / name).is_file(), name
    assert {f"subtask1_{v}.png" for v in VIEW_NAMES} <= {p.name for p in record.iterdir()}
    play = json.loads((record / PLAY_FILE).read_text())
    assert play["ended_by"] == "end" and play["role"] == "robot" and play["quit_round"] is None
    assert [t["text"] for t in play["typed"]] == lines
    assert play["typed"][1]["outcome"].startswith("refused: there is no target 'fridg'")
    # The screen: every round's views saved and named, the refusal and each round's outcome shown.
    assert [p.name for p in screen.saved] == [f"round{i:02d}_views.png" for i in range(1, 9)]
    assert all(p.is_file() for p in screen.saved) and str(screen.saved[0]) in shown
    assert "there is no target 'fridg' in this house; did you mean 'fridge'" in shown
    assert "(4) [Pick, short_can] -> OK" in shown and "Furniture by room:" in shown
    assert "\u2580" not in shown  # no preview asked
    # EMMOE's success feedback is the word None: the person is told what it means instead.
    assert "Last feedback: None" not in shown and "Last feedback: none (your last subtask ran without an error)" in shown


def test_quit_is_recorded_as_ended_by_the_user(sim, tmp_path):
    outcome, shown, _ = _play(sim, tmp_path, [SOLUTION[0], "[Pick, apple]", "quit"])
    trajectory = outcome.trajectory
    assert outcome.ended_by == "user" and outcome.quit_round == 3
    assert trajectory.error is None and not trajectory.ended and trajectory.goal_satisfied is False
    assert len(trajectory.rounds) == 2 and trajectory.rounds[1].feedback.code.value == "D1"  # a failed try is kept
    summary = read_summary(outcome.record)
    assert summary["error"] is None and summary["success"] is False and summary["num_rounds"] == 2
    assert summary["stopped"] == trajectory.stopped == "the player quit in round 3 (typed quit)"
    play = json.loads((outcome.record / PLAY_FILE).read_text())
    assert play["ended_by"] == "user" and play["quit_round"] == 3 and play["quit_reason"] == "typed quit"
    assert "(2) [Pick, apple] -> D1" in shown


def test_the_end_of_the_input_stops_like_quit(sim, tmp_path):
    outcome, _, _ = _play(sim, tmp_path, [SOLUTION[0]])
    assert outcome.ended_by == "user" and outcome.quit_round == 2 and outcome.trajectory.error is None
    assert json.loads((outcome.record / PLAY_FILE).read_text())["quit_reason"] == "end of input"


def test_the_preview_draws_the_views_with_half_blocks(sim, tmp_path):
    _, shown, _ = _play(sim, tmp_path, ["quit"], preview=True)
    assert "\u2580" in shown and "\x1b[38;2;" in shown  # truecolour half blocks


def test_mosaic_and_preview_sizes():
    import numpy as np

    views = [np.full((64, 64, 3), 40 * i, dtype=np.uint8) for i in range(4)]
    image = mosaic(views)
    assert image.shape == (128, 128, 3) and tuple(image[100, 100]) == (120, 120, 120)
    text = half_block_preview(image, columns=20)
    rows = text.plain.splitlines()
    assert len(rows) == 10 and all(len(r) == 20 for r in rows)
