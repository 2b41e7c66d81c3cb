"""Episode records: files of every round, summary, paper-format conversation, atomic writes, read-back."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from homiebot.agent.loop import run_episode
from homiebot.data.record import EpisodeRecorder, RecordError, read_episode, read_summary
from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.scripted import ScriptedPlanner
from homiebot.testing.case_studies import CASE1_TASK, case1_outputs
from homiebot.testing.fake_world import FakeWorld, kitchen_world
from homiebot.types import VIEW_NAMES


def record_case1(out, **kw):
    world = FakeWorld(kitchen_world(), image_size=32)
    recorder = EpisodeRecorder(out, **kw)
    traj = run_episode(world, ScriptedPlanner(case1_outputs()), instruction=CASE1_TASK, scene="fake", recorder=recorder)
    return traj


def test_record_holds_every_round(tmp_path):
    out = tmp_path / "ep"
    traj = record_case1(out)
    names = set(os.listdir(out))
    for i in range(1, 16):
        for view in VIEW_NAMES:
            assert f"subtask{i}_{view}.png" in names
    assert {"conversation.json", "rounds.jsonl", "summary.json", "episode.mp4", "topdown.png"} <= names
    summary = read_summary(out)
    assert summary["task"] is None and summary["success"] is None  # free text: no goal
    assert summary["num_rounds"] == 15 and summary["ended"] is True
    assert summary["subtasks"][3] == "[Put, green_can, fridge]"
    assert summary["error_codes"][3:5] == ["L3", "L1"]
    conversation = json.loads((out / "conversation.json").read_text())
    assert len(conversation) == 15
    assert conversation[0] == f"USER:\n{traj.rounds[0].instruction}ASSISTANT:\n{case1_outputs()[0]}\n"
    assert (out / "episode.mp4").stat().st_size > 1000


def test_read_episode_round_trips(tmp_path):
    traj = record_case1(tmp_path / "ep", video=False)
    back = read_episode(tmp_path / "ep")
    assert [(r.index, r.instruction, r.output, r.feedback, r.inventory_before) for r in back.rounds] == [
        (r.index, r.instruction, r.output, r.feedback, r.inventory_before) for r in traj.rounds
    ]
    assert (back.instruction, back.scene, back.ended, back.goal_satisfied) == (traj.instruction, "fake", True, None)


class Interrupting(Planner):
    name = "interrupting"

    def plan(self, request: PlanRequest) -> str:
        if request.round_index == 3:
            raise KeyboardInterrupt
        return "Analysis: a\nSubtask: [Go to, fridge]\nModel: NoMaD"


def test_interrupted_episode_leaves_nothing(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        run_episode(FakeWorld(), Interrupting(), instruction="x", scene="fake", recorder=EpisodeRecorder(tmp_path / "ep"))
    assert os.listdir(tmp_path) == []


def test_failure_while_finishing_leaves_nothing(tmp_path):
    recorder = EpisodeRecorder(tmp_path / "ep")
    world = FakeWorld()
    world.render_topdown = lambda size=512: np.zeros((4, 4, 7), np.uint8)  # PIL cannot write 7 channels
    with pytest.raises((TypeError, ValueError, OSError)):
        run_episode(world, ScriptedPlanner([]), instruction="x", scene="fake", recorder=recorder)
    assert os.listdir(tmp_path) == []


def test_existing_record_is_replaced_other_content_refused(tmp_path):
    out = tmp_path / "ep"
    record_case1(out, video=False)
    first = read_summary(out)["num_rounds"]
    run_episode(FakeWorld(), ScriptedPlanner([]), instruction="x", scene="fake", recorder=EpisodeRecorder(out, video=False))
    assert read_summary(out)["num_rounds"] == 1 != first
    assert sorted(os.listdir(tmp_path)) == ["ep"]
    other = tmp_path / "notes"
    other.mkdir()
    (other / "todo.txt").write_text("mine")
    with pytest.raises(RecordError, match="not empty and holds no episode record"):
        EpisodeRecorder(other)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_parent_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(RecordError, match="not writable"):
            EpisodeRecorder(locked / "ep")
    finally:
        locked.chmod(0o700)


def test_no_render_record_has_logs_only(tmp_path):
    from homiebot.agent.loop import EpisodeConfig

    out = tmp_path / "ep"
    run_episode(FakeWorld(), ScriptedPlanner(case1_outputs()), instruction=CASE1_TASK, scene="fake",
                config=EpisodeConfig(render=False), recorder=EpisodeRecorder(out))
    names = set(os.listdir(out))
    assert not any(n.endswith(".png") and n.startswith("subtask") for n in names)
    assert "episode.mp4" not in names and "rounds.jsonl" in names


def test_grounded_subtasks_round_trip(tmp_path):
    from homiebot.data.record import _round_from_json, _round_to_json
    from homiebot.types import ErrorCode, Feedback, PlannerOutput, RoundRecord, Subtask

    output = PlannerOutput(raw="r", analysis="a", subtask=Subtask("Put", "apple_1", "sofa_1"), model="RT-1-X")
    record = RoundRecord(3, "i", output, Feedback(ErrorCode.OK, "None"), grounded=Subtask("Put", "apple_2", "sofa"))
    data = json.loads(json.dumps(_round_to_json(record)))
    assert data["grounded_subtask"] == {"action": "Put", "target": "apple_2", "place": "sofa"}
    assert _round_from_json(data).grounded == record.grounded
    plain = _round_to_json(RoundRecord(1, "i", output, Feedback(ErrorCode.OK, "None")))
    assert "grounded_subtask" not in plain and _round_from_json(plain).grounded is None
