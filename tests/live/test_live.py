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
def test_websocket_client_decodes_views_pose_tf_graph_and_log() -> None:
    from foxglove_client import FoxgloveClient

    from homiebot.eval.tasks import get_task
    from homiebot.live import FoxgloveLiveView, LiveViewConfig
    from homiebot.live.foxglove_view import yaw_quaternion
    from homiebot.sim.base import make_simulator
    from homiebot.types import ErrorCode, Feedback, PlannerOutput, RoundRecord, Subtask, Trajectory

    task = get_task("emmoe-084")
    sim = make_simulator("mujoco", render=True)
    observation = sim.reset(task.scene, seed=task.seed)
    state = sim.state()
    trajectory = Trajectory(task.id, task.instruction, task.scene, 0, "expert")
    with FoxgloveLiveView(LiveViewConfig(port=0)) as view, FoxgloveClient(f"ws://127.0.0.1:{view.port}") as client:
        assert client.server_info.get("name", "HomieBot") == "HomieBot"
        client.subscribe(TOPICS)
        # The server applies a subscription asynchronously: repeat the start until the first messages arrive.
        got: dict[str, list[Any]] = {}
        for _ in range(20):
            view.on_start(trajectory, state, observation)
            got = _drain(client, set(TOPICS) - {"/robot/path"}, timeout_s=0.5)
            if set(TOPICS) <= set(got):
                break
        assert set(TOPICS) <= set(got), sorted(got)
        image = got["/camera/front/image"][-1]
        front = observation.views["front"]
        assert (image.width, image.height, image.encoding, image.frame_id) == (256, 256, "rgb8", "front_camera_optical_frame")
        assert bytes(image.data) == front.rgb.tobytes()
        graph = got["/world_graph"][-1]
        labels = {t.text for e in graph.entities for t in e.texts}
        assert {"kitchen", "kitchen_drawer", "short_can"} <= labels and len(graph.entities) == len(state.entities)
        assert any("emmoe-084" in m.message for m in got["/planner/log"])

        # One real round: the robot drives to the drawer and opens it.
        assert sim.go_to("kitchen_drawer").success and sim.open("kitchen_drawer").success
        after = sim.state()
        record = RoundRecord(
            index=1, instruction="Task: ...",
            output=PlannerOutput("Analysis: open it\nSubtask: [Open, kitchen_drawer]\nModel: octo", "open it",
                                 Subtask("Open", "kitchen_drawer"), "octo"),
            feedback=Feedback(ErrorCode.OK, "None", attempts=1),
        )
        view.on_round(record, observation, after)
        got = _drain(client, {"/robot/pose", "/world_graph", "/planner/log", "/tf"})
        pose = got["/robot/pose"][-1]
        assert pose.frame_id == "map"
        assert (pose.pose.position.x, pose.pose.position.y) == pytest.approx((after.robot.x, after.robot.y), abs=1e-9)
        q = pose.pose.orientation
        assert 2 * math.atan2(q.z, q.w) == pytest.approx(after.robot.yaw, abs=1e-9)
        assert len(got["/robot/path"][-1].poses) >= 2
        labels = {t.text for e in got["/world_graph"][-1].entities for t in e.texts}
        assert "kitchen_drawer (open)" in labels
        lines = [m.message for m in got["/planner/log"]]
        assert "round 1: [Open, kitchen_drawer] model octo" in lines and "round 1 feedback OK: None" in lines
        # /tf: map -> base_link -> front camera reproduces the camera's pose in the world.
        tf = {t.child_frame_id: t for t in got["/tf"][-1].transforms}
        assert tf["base_link"].parent_frame_id == "map" and tf["front_camera_optical_frame"].parent_frame_id == "base_link"
        assert np.allclose(_transform(tf["base_link"])[:2, 3], (after.robot.x, after.robot.y))
        # The mount is rigid: hung under the base pose the views were taken from, it gives the view's camera pose.
        seen = observation.robot_pose
        base_then = np.eye(4)
        base_then[:3, :3] = _quaternion_matrix(type("Q", (), dict(zip("xyzw", yaw_quaternion(seen.yaw))))())
        base_then[:2, 3] = (seen.x, seen.y)
        assert np.allclose(base_then @ _transform(tf["front_camera_optical_frame"]), front.camera_to_world, atol=1e-6)
        view.on_end(trajectory, after)
        assert any("episode over" in m.message for m in _drain(client, {"/planner/log"})["/planner/log"])


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
