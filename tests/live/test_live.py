"""The Foxglove live view on loopback: a real WebSocket client (Foxglove's protocol, protobuf decoded from the
advertised schemas) subscribes and reads a camera image, the pose, /tf, the world graph and the log lines while
the observer is driven with real simulator states and views."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from homiebot.live.foxglove_view import live_missing

pytestmark = pytest.mark.skipif(live_missing() is not None, reason=str(live_missing()))

TOPICS = ["/camera/front/image", "/robot/pose", "/robot/path", "/tf", "/world_graph", "/planner/log"]


def _client_missing() -> str | None:
    try:
        import google.protobuf  # noqa: F401
        import websockets  # noqa: F401
    except ImportError as err:
        return f"{err.name} is missing (the 'live' extra: pip install -e '.[live]')"
    return None


def _quaternion_matrix(q: Any) -> np.ndarray:
    x, y, z, w = q.x, q.y, q.z, q.w
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def _transform(t: Any) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3] = _quaternion_matrix(t.rotation)
    out[:3, 3] = [t.translation.x, t.translation.y, t.translation.z]
    return out


def _drain(client: Any, wanted: set[str], timeout_s: float = 5.0) -> dict[str, list[Any]]:
    got: dict[str, list[Any]] = defaultdict(list)
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not wanted <= set(got):
        item = client.receive(timeout_s=0.3)
        if item is not None:
            got[item[0]].append(item[2])
    # Whatever else is already on the way (a round publishes a few messages per topic).
    while (item := client.receive(timeout_s=0.3)) is not None:
        got[item[0]].append(item[2])
    return got


@pytest.mark.slow
@pytest.mark.skipif(_client_missing() is not None, reason=str(_client_missing()))
def test_websocket_client_follows_a_real_episode(tmp_path: Path) -> None:
    """A real expert episode through the loop with the live view as its observer (and a record beside it): the
    client decodes every round's front view (the record's PNG of that round), the final pose, /tf, the graph
    and the log lines."""
    from PIL import Image

    from homiebot.agent.loop import run_episode
    from homiebot.agent.observers import EpisodeObserver
    from homiebot.data.record import EpisodeRecorder, view_filename
    from homiebot.live import FoxgloveLiveView, LiveViewConfig
    from homiebot.live.foxglove_view import yaw_quaternion
    from homiebot.planner.expert import ExpertPlanner
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task
    from homiebot.testing.foxglove_client import FoxgloveClient
    from homiebot.types import Trajectory

    task = get_task("emmoe-084")
    sim = make_simulator("mujoco", render=True)
    with FoxgloveLiveView(LiveViewConfig(port=0)) as view, FoxgloveClient(f"ws://127.0.0.1:{view.port}") as client:
        assert isinstance(view, EpisodeObserver)
        client.subscribe(TOPICS)
        assert client.server_info.get("name") == "HomieBot"
        # The server applies a subscription asynchronously: probe with a start until messages arrive.
        probe = sim.reset(task.scene, seed=task.seed)
        for _ in range(20):
            view.on_start(Trajectory(task.id, task.instruction, task.scene, 0, "probe"), sim.state(), probe)
            if set(TOPICS) - {"/robot/path"} <= set(_drain(client, set(TOPICS), timeout_s=0.5)):
                break
        else:
            pytest.fail("the live view's messages never reached the client")
        record_dir = tmp_path / "t84"
        trajectory = run_episode(sim, ExpertPlanner(), task=task, recorder=EpisodeRecorder(record_dir, video=False),
                                 observers=[view])
        got = _drain(client, set(TOPICS))
    assert trajectory.goal_satisfied and len(trajectory.rounds) == 8
    # The views: the start's, then one per round, each the record's PNG of the views the planner saw.
    images = got["/camera/front/image"]
    assert len(images) == 1 + len(trajectory.rounds)
    for index, image in enumerate(images[1:], start=1):
        assert (image.width, image.height, image.encoding, image.frame_id) == (256, 256, "rgb8", "front_camera_optical_frame")
        expected = np.asarray(Image.open(record_dir / view_filename(index, "front")))
        assert bytes(image.data) == expected.tobytes()
    # The pose after the last round is the simulator's final pose; the path has one pose per call.
    final = sim.state().robot
    pose = got["/robot/pose"][-1]
    assert pose.frame_id == "map"
    assert (pose.pose.position.x, pose.pose.position.y) == pytest.approx((final.x, final.y), abs=1e-9)
    q = pose.pose.orientation
    assert 2 * math.atan2(q.z, q.w) == pytest.approx(final.yaw, abs=1e-9)
    assert len(got["/robot/path"][-1].poses) == 1 + len(trajectory.rounds)
    # The log: the task, every round's subtask and feedback, the end.
    lines = [m.message for m in got["/planner/log"]]
    for record in trajectory.rounds:
        assert f"round {record.index}: {record.subtask_text} model {record.output.model or '-'}" in lines
        assert f"round {record.index} feedback {record.feedback.code.value}: {record.feedback.message}" in lines
    assert any(line.startswith("episode over after 8 rounds: ended with [End], simulator goal check: met") for line in lines)
    # The graph: re-sent when something changed; the drawer was opened and closed, the can moved into it.
    labels = [{t.text for e in update.entities for t in e.texts} for update in got["/world_graph"]]
    assert any("kitchen_drawer (open)" in seen for seen in labels)
    assert any("short_can (held)" in seen for seen in labels)
    assert "kitchen_drawer" in labels[-1] and len(got["/world_graph"][-1].entities) == len(sim.state().entities)
    # /tf: map -> base_link is the final pose; base_link -> camera hung under the pose the views were taken
    # from reproduces that view's camera pose.
    tf = {t.child_frame_id: t for t in got["/tf"][-1].transforms}
    assert tf["base_link"].parent_frame_id == "map" and tf["front_camera_optical_frame"].parent_frame_id == "base_link"
    assert np.allclose(_transform(tf["base_link"])[:2, 3], (final.x, final.y))
    last_seen = sim.observe()  # the episode ended after [End]: the robot has not moved since the last views
    base = np.eye(4)
    base[:3, :3] = _quaternion_matrix(type("Q", (), dict(zip("xyzw", yaw_quaternion(last_seen.robot_pose.yaw))))())
    base[:2, 3] = (last_seen.robot_pose.x, last_seen.robot_pose.y)
    assert np.allclose(base @ _transform(tf["front_camera_optical_frame"]), last_seen.views["front"].camera_to_world,
                       atol=1e-6)


def test_quaternions_round_trip() -> None:
    from scipy.spatial.transform import Rotation

    from homiebot.live.foxglove_view import matrix_quaternion, yaw_quaternion

    rng = np.random.default_rng(0)
    for rotation in Rotation.random(200, random_state=rng):
        q = matrix_quaternion(rotation.as_matrix())
        assert np.allclose(np.abs(np.dot(q, rotation.as_quat())), 1.0, atol=1e-9)
    assert np.allclose(yaw_quaternion(math.pi / 2), Rotation.from_euler("z", math.pi / 2).as_quat())


def test_live_view_refuses_calls_before_start(tmp_path: Path) -> None:
    from homiebot.live import FoxgloveLiveView
    from homiebot.types import Trajectory

    with pytest.raises(RuntimeError, match="not started"):
        FoxgloveLiveView().on_end(Trajectory(None, "x", "apartment_1", 0, "expert"), None)


def test_layout_file_is_the_generated_one_and_names_published_topics() -> None:
    import json
    import re

    from homiebot.live.layout import LAYOUT_PATH, build_layout

    assert LAYOUT_PATH.read_text() == build_layout(), "regenerate docs/foxglove/homiebot_layout.json (docs/reports.md)"
    text = LAYOUT_PATH.read_text()
    topics = set(re.findall(r'"(/[a-z_/]+)"', text))
    published = {f"/camera/{v}/image" for v in ("front", "left", "back", "right")} | {
        "/robot/pose", "/robot/path", "/world_graph", "/planner/log"}
    assert topics == published
    assert json.loads(text)["content"]["type"] == "split"
