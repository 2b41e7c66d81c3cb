"""The physical skills' reaching views through the graph: ``homie up sim --task emmoe-084 --skills physical --record``
(which keeps the views: --images is its default) keeps, beside the rounds' views, the arm's reaching frames that the sim bridge rendered at the end of each
arm and gripper goal and published as camera images (``/reach_camera/<camera>/image_raw`` + ``camera_info``, the
moment's label on ``/reach_camera/moments``: homiebot/ros/motion_views.py); the bag holds them and the report built
from the record shows them beside the Pick and the Put. The same episode in-process takes the same moments
(tests/report/test_reaching_views.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from homiebot.testing.ros_helpers import graph_environment

pytestmark = pytest.mark.ros

HOMIE = str(Path(sys.executable).with_name("homie"))
CAMERAS = ("head", "overview")


@pytest.fixture(scope="module")
def run(tmp_path_factory, ros_domain) -> Path:
    tmp = tmp_path_factory.mktemp("reaching_graph")
    out = tmp / "up84"
    env = {**graph_environment(ros_domain), "COLUMNS": "200"}
    done = subprocess.run([HOMIE, "up", "sim", "--task", "emmoe-084", "--skills", "physical", "--record",
                           "--out", str(out), "--domain-id", str(ros_domain)],
                          capture_output=True, text=True, env=env, cwd=tmp, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _moments(record: Path) -> dict[int, list[dict]]:
    from homiebot.data.record import read_motion_views

    return read_motion_views(record)


def _round_of(record: Path, action: str) -> int:
    rounds = [json.loads(line) for line in (record / "rounds.jsonl").read_text().splitlines()]
    return next(r["round"] for r in rounds if r["subtask"] and r["subtask"]["action"] == action)


def test_the_record_keeps_the_arm_reaching_from_both_cameras(run):
    record = run / "record"
    moments = _moments(record)
    pick, put = _round_of(record, "Pick"), _round_of(record, "Put")
    assert any(m["label"].startswith("gripper closed on short_can") for m in moments[pick])
    assert any(m["label"].startswith("gripper opened, let go of short_can") for m in moments[put])
    for index in (pick, put):
        assert len(moments[index]) >= 4
        for moment in moments[index]:
            assert set(moment["views"]) == set(CAMERAS)
            for camera in CAMERAS:
                image = np.asarray(Image.open(record / moment["views"][camera]))
                assert image.ndim == 3 and image.std() > 10


def test_the_bag_carries_them_as_camera_images_with_their_camera_info(run):
    from homiebot.ros.bag import bag_info, read_messages

    counts = {topic.name: topic.count for topic in bag_info(run / "bag").topics}
    taken = sum(len(v) for v in _moments(run / "record").values())
    assert counts["/reach_camera/moments"] == taken
    for camera in CAMERAS:
        assert counts[f"/reach_camera/{camera}/image_raw"] == taken
        assert counts[f"/reach_camera/{camera}/camera_info"] == taken
    infos = [m for m in read_messages(run / "bag", ["/reach_camera/overview/camera_info"])]
    assert infos
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import CameraInfo

    info = deserialize_message(infos[0].data, CameraInfo)
    assert info.header.frame_id == "overview_camera_optical_frame"
    assert info.k[0] > 0 and info.width > 0 and info.height > 0
    assert counts["/arm_controller/follow_joint_trajectory/_action/status"] > 0


def test_the_report_shows_them_beside_the_subtask(run):
    record = run / "record"
    done = subprocess.run([HOMIE, "report", str(record)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    page = (record / "report.html").read_text()
    pick = _round_of(record, "Pick")
    section = page[page.index(f'id="round{pick}"'):page.index(f'id="round{pick + 1}"')]
    assert section.count('data-camera="overview"') == len(_moments(record)[pick])
    assert "gripper closed on short_can" in section
