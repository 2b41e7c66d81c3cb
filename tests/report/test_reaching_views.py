"""The physical skills' reaching views (homiebot/sim/mujoco/motion_views.py): frames of the arm in motion from the
head camera and a third-person camera, taken at the end of each arm and gripper goal, kept in the record beside the
round of the subtask and shown in the report's timeline; none rendered when the record keeps no images.

Episode: emmoe-084 (the README's demo task) with ``--skills physical``: Go to, Open, Go to, Pick short_can, Go to,
Put into the kitchen drawer, Close, End.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from homiebot.agent.loop import run_episode
from homiebot.data.record import MOTION_FILE, EpisodeRecorder, read_motion_views
from homiebot.planner.expert import ExpertPlanner
from homiebot.report import write_report
from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.sim.mujoco.motion_views import FRAME_SIZE, hand_motion, overview_camera
from homiebot.skills.physical import PhysicalSkillSet
from homiebot.tasks.suite import get_task

TASK = get_task("emmoe-084")


def _physical(sim, seed):
    return PhysicalSkillSet(sim, seed=seed)


@pytest.fixture(scope="module")
def physical_record(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, MujocoSimulator, list]:
    out = tmp_path_factory.mktemp("reach") / "t84"
    sim = MujocoSimulator(render=True)
    calls: list[str] = []
    render = sim.motion_frame

    def counted(label, size):
        calls.append(label)
        return render(label, size)

    sim.motion_frame = counted  # type: ignore[method-assign]
    trajectory = run_episode(sim, ExpertPlanner(), task=TASK, skills=_physical,
                             recorder=EpisodeRecorder(out, video=False))
    assert trajectory.goal_satisfied
    yield out, sim, calls
    sim.shutdown()


def _round_of(record: Path, action: str) -> int:
    rounds = [json.loads(line) for line in (record / "rounds.jsonl").read_text().splitlines()]
    return next(r["round"] for r in rounds if r["subtask"] and r["subtask"]["action"] == action)


def test_the_pick_and_the_put_keep_frames_of_the_arm_reaching_from_both_cameras(physical_record):
    record, sim, calls = physical_record
    moments = read_motion_views(record)
    pick, put = _round_of(record, "Pick"), _round_of(record, "Put")
    for index, closing in ((pick, "gripper closed on short_can"), (put, "gripper opened, let go of short_can")):
        taken = moments[index]
        # At the pre-grasp (or over the drawer), at the grasp (or lowered), the gripper's goal, the lift or retreat.
        assert 4 <= len(taken) <= 6, taken
        assert any(m["label"].startswith(closing) for m in taken)
        assert all("m in base_link" in m["label"] for m in taken)
        # The arm goals say how the hand moved: out to the object or the place, in again to the tuck.
        assert any(" cm out" in m["label"] for m in taken) and any(" cm in" in m["label"] for m in taken)
        stamps = [m["stamp"] for m in taken]
        assert stamps == sorted(stamps)
        for moment in taken:
            assert set(moment["views"]) == {"head", "overview"}
            for camera in ("head", "overview"):
                image = np.asarray(Image.open(record / moment["views"][camera]))
                assert image.shape == (FRAME_SIZE[1], FRAME_SIZE[0], 3)
                assert image.std() > 10  # a picture, not a blank
        # The arm moves between the moments: the overview frames differ.
        first, last = (np.asarray(Image.open(record / m["views"]["overview"]), dtype=float) for m in (taken[0], taken[-1]))
        assert np.abs(first - last).mean() > 1.0
    # Only the physical skills' arm and gripper goals render: the Go to's takes none but the tuck from the start pose
    # (the arm starts stowed, not tucked); the arm's Open and Close (the default articulation) take their own.
    opened, closed = _round_of(record, "Open"), _round_of(record, "Close")
    assert set(moments) <= {_round_of(record, "Go to"), pick, put, opened, closed}
    assert opened in moments and closed in moments
    assert len(calls) == sum(len(v) for v in moments.values())
    assert json.loads((record / "summary.json").read_text())["files"]["reaching"] == MOTION_FILE
    assert sim.motion_views is None  # switched off again after the episode


def test_the_report_shows_the_reaching_frames_beside_the_subtask(physical_record):
    record, _sim, _calls = physical_record
    page = write_report(record, record / "page.html", embed=True)[0].read_text()
    pick = _round_of(record, "Pick")
    section = page[page.index(f'id="round{pick}"'):page.index(f'id="round{pick + 1}"')]
    assert section.count('data-camera="head"') == len(read_motion_views(record)[pick])
    assert section.count('data-camera="overview"') == len(read_motion_views(record)[pick])
    assert "data:image/jpeg;base64," in section
    assert "gripper closed on short_can" in section


def test_with_the_views_off_nothing_is_rendered(tmp_path: Path):
    sim = MujocoSimulator(render=True)
    calls: list[str] = []
    sim.motion_frame = lambda label, size: calls.append(label)  # type: ignore[method-assign]
    try:
        trajectory = run_episode(sim, ExpertPlanner(), task=TASK, skills=_physical,
                                 recorder=EpisodeRecorder(tmp_path / "t84", images=False, video=False))
    finally:
        sim.shutdown()
    assert trajectory.goal_satisfied
    assert calls == []
    assert not (tmp_path / "t84" / MOTION_FILE).exists()
    assert not list((tmp_path / "t84").glob("*_reach*"))


def test_a_simulator_that_does_not_render_has_no_reaching_views():
    sim = MujocoSimulator(render=False)
    try:
        assert sim.record_motion_views(True) is None
        assert sim.motion_views is None
    finally:
        sim.shutdown()


def test_the_overview_camera_stands_where_it_sees_the_work_area(physical_record):
    _record, sim, _calls = physical_record
    sim.reset(TASK.scene, seed=TASK.seed)
    compiled, data = sim.physics_handles()
    base = sim.state().robot
    camera = overview_camera(compiled.model, data, base)
    eye = np.array(camera.lookat) - camera.distance * np.array([
        np.cos(np.radians(camera.elevation)) * np.cos(np.radians(camera.azimuth)),
        np.cos(np.radians(camera.elevation)) * np.sin(np.radians(camera.azimuth)),
        np.sin(np.radians(camera.elevation))])
    # Above the work area and behind the base's front, looking down at it.
    assert eye[2] > camera.lookat[2] and camera.elevation < 0
    heading = np.array([np.cos(base.yaw), np.sin(base.yaw)])
    assert float(np.dot(eye[:2] - np.array([base.x, base.y]), heading)) < 0.35


def test_an_arm_goal_says_how_the_hand_moved():
    assert hand_motion(np.array([0.52, 0.0, 0.004])) == "hand 52 cm out"
    assert hand_motion(np.array([0.0, 0.01, -0.14])) == "hand 14 cm down"
    assert hand_motion(np.array([-0.52, 0.0, 0.04])) == "hand 52 cm in, 4 cm up"
    assert hand_motion(np.array([0.05, -0.2, 0.1])) == "hand 20 cm right, 10 cm up"
    assert hand_motion(np.zeros(3)) == "hand still"
