"""The person as PARTNR's human partner (homiebot/play/episode.py ``play_episode`` with a partner): the expert drives the
robot on its share of a PARTNR-style task, the person does the human's share (the robot cannot switch
appliances) in the loop's lock-step rounds; the record holds both agents' rounds; quitting is a clean stop."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from homiebot.data.record import PLAY_FILE, EpisodeRecorder, read_summary
from homiebot.play.episode import play_config, play_episode, robot_planner
from homiebot.play.keyboard import KeyboardPlanner
from homiebot.play.screen import PlayScreen
from homiebot.sim.base import make_simulator
from homiebot.tasks.suite import get_task

TASK = "partnr-1-022"  # "Turn on the microwave and put the mug on the chair."


@pytest.fixture(scope="module")
def sim():
    simulator = make_simulator("mujoco", render=True, human=True)
    yield simulator
    simulator.shutdown()


def _play(sim, tmp_path, lines):
    task = get_task(TASK)
    robot, setting = robot_planner("expert", task)
    shown = io.StringIO()
    screen = PlayScreen(Console(file=shown, width=100), None, preview=False, role="human", task_id=task.id)
    person = KeyboardPlanner(io.StringIO("".join(f"{line}\n" for line in lines)), screen)
    outcome = play_episode(play_config(task, role="human", robot=setting, max_rounds=10), person,
                           EpisodeRecorder(tmp_path / "record", video=False), robot=robot, simulator=sim,
                           observers=[screen])
    return outcome, shown.getvalue()


def test_the_person_does_the_humans_share_beside_the_expert_robot(sim, tmp_path):
    outcome, shown = _play(sim, tmp_path, ["[Go to, microwave]", "[Turn on, microwave]", "[Wait]", "[End]"])
    trajectory = outcome.trajectory
    assert outcome.ended_by == "end" and trajectory.error is None
    assert trajectory.ended and trajectory.goal_satisfied
    assert trajectory.planner != "keyboard" and trajectory.partner_planner == "keyboard"
    assert [r.subtask_text for r in trajectory.partner_rounds] == ["[Go to, microwave]", "[Turn on, microwave]",
                                                                  "[Wait]", "[End]"]
    assert "[Put, mug, chair]" in [r.subtask_text for r in trajectory.rounds]  # the robot's share
    assert all(r.subtask_text != "[Turn on, microwave]" for r in trajectory.rounds)
    play = json.loads((outcome.record / PLAY_FILE).read_text())
    assert play["role"] == "human" and play["other_agent"] == trajectory.planner
    assert [r["subtask"] for r in play["partner_rounds"]][1] == "[Turn on, microwave]"
    assert read_summary(outcome.record)["success"] is True
    # The person saw the robot's rounds and where it is, and their own outcome.
    assert "robot: (1) [Go to, mug] -> OK" in shown and "you: (2) [Turn on, microwave] -> OK" in shown
    assert "mug: held by the robot" in shown
    assert "The robot is in the" in shown and "The robot's last round: (1) [Go to, mug] -> OK" in shown


def test_quit_in_a_two_agent_episode_is_a_clean_stop(sim, tmp_path):
    outcome, shown = _play(sim, tmp_path, ["list", "quit"])
    assert "[Wait]" in shown.split("Admissible subtasks:")[1]  # PARTNR's Wait is the human's too
    assert outcome.ended_by == "user" and outcome.trajectory.error is None
    assert outcome.trajectory.goal_satisfied is False
    summary = read_summary(outcome.record)
    assert summary["error"] is None and summary["success"] is False


def test_the_report_shows_the_persons_own_moves(sim, tmp_path):
    from homiebot.report import write_report

    outcome, _ = _play(sim, tmp_path, ["[Go to, microwave]", "[Turn on, microwave]", "[Wait]", "[End]"])
    play = json.loads((outcome.record / PLAY_FILE).read_text())
    # play.json keeps each of the person's rounds as rounds.jsonl keeps the robot's (what they were told, answered).
    assert play["partner_rounds"][1]["raw_output"].endswith("Subtask: [Turn on, microwave]\nModel: octo")
    assert play["partner_rounds"][1]["instruction"] and play["partner_rounds"][1]["error_code"] == "OK"
    (page,) = write_report(outcome.record)
    html = page.read_text()
    assert "played at the keyboard</td><td>the human (ended by end)" in html
    for index, subtask in enumerate(["[Go to, microwave]", "[Turn on, microwave]", "[Wait]", "[End]"], start=1):
        assert f'id="human-round{index}"' in html and f"human (you), round {index}: {subtask}" in html
    # In the loop's order: the robot's round 2, then the person's round 2, then the robot's round 3.
    assert html.index('id="round2"') < html.index('id="human-round2"') < html.index('id="round3"')
    assert "Timeline (5 robot rounds, 4 human (you) rounds)" in html
