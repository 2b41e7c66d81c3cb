"""A live view of a running episode over Foxglove's WebSocket protocol, without ROS (docs/reports.md, "Live view").

The Foxglove app (desktop or browser) connects to ``ws://HOST:PORT`` and shows what this observer publishes
through the ``foxglove-sdk`` package (https://docs.foxglove.dev/docs/sdk/): the SDK runs the server and
encodes Foxglove's own message schemas (protobuf), so no ROS install and no message definitions are needed.

Topics (frames follow REP 103/105 as the ROS bridge does: ``map``, ``base_link``, ``<view>_camera_optical_frame``):

* ``/camera/<view>/image`` (foxglove.RawImage, rgb8): the four views the planner saw when it chose the round's
  subtask (and the views after the reset at the start);
* ``/robot/pose`` (foxglove.PoseInFrame in ``map``) and ``/robot/path`` (foxglove.PosesInFrame): the base
  pose after every round and the poses so far (one per round: the observer sees the world between rounds);
* ``/world_graph`` (foxglove.SceneUpdate): rooms, furniture and objects of the privileged world state as boxes
  with text labels (house > room > furniture > object, PARTNR's hierarchy), held objects at the robot;
* ``/planner/log`` (foxglove.Log): the task, each round's subtask and model, the feedback code and message;
* ``/tf`` (foxglove.FrameTransforms): ``map -> base_link`` and ``base_link -> <view>_camera_optical_frame``.

The layout file ``docs/foxglove/homiebot_layout.json`` arranges these panels in the app.

Cost: when no client is subscribed to a topic nothing is built for it (``Channel.has_sinks``); the world graph
is rebuilt only when an entity moved, opened or closed (BENCHMARKS.md, "Live view").

It is an episode observer (homiebot/agent/observers.py: ``on_start`` / ``on_round`` / ``on_end``), so it sees
the same calls in the in-process loop and in the ROS graph's episode.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from homiebot.agent.observers import ObserverBase
from homiebot.types import VIEW_NAMES, EntityKind, EntityState, Observation, RoundRecord, Trajectory, WorldState

log = logging.getLogger(__name__)

MAP_FRAME = "map"
BASE_FRAME = "base_link"
#: RGBA per entity kind (rooms faint floor slabs, furniture and objects solid enough to read the labels).
KIND_COLOURS: dict[EntityKind, tuple[float, float, float, float]] = {
    EntityKind.ROOM: (0.35, 0.55, 0.85, 0.12),
    EntityKind.FURNITURE: (0.55, 0.40, 0.75, 0.45),
    EntityKind.OBJECT: (0.85, 0.25, 0.55, 0.9),
}


def camera_frame(view: str) -> str:
    """The optical frame of a view, as the ROS bridge names it (``front_camera_optical_frame``)."""
    return f"{view}_camera_optical_frame"


def live_missing() -> str | None:
    """Why the live view cannot run here (None when it can)."""
    try:
        import foxglove  # noqa: F401
    except ImportError:
        return "foxglove-sdk is not installed (the 'live' extra: pip install -e '.[live]')"
    return None


def yaw_quaternion(yaw: float) -> tuple[float, float, float, float]:
    """(x, y, z, w) of a rotation by ``yaw`` about z."""
    return 0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)


def matrix_quaternion(rotation: np.ndarray) -> tuple[float, float, float, float]:
    """(x, y, z, w) of a 3x3 rotation matrix (Shepperd's method: the largest diagonal term keeps it stable)."""
    m = rotation
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    if trace > 0:
        s = 2.0 * math.sqrt(trace + 1.0)
        return (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, 0.25 * s
    i = int(np.argmax([m[0, 0], m[1, 1], m[2, 2]]))
    j, k = (i + 1) % 3, (i + 2) % 3
    s = 2.0 * math.sqrt(1.0 + m[i, i] - m[j, j] - m[k, k])
    q = [0.0, 0.0, 0.0, 0.0]
    q[i] = 0.25 * s
    q[j] = (m[j, i] + m[i, j]) / s
    q[k] = (m[k, i] + m[i, k]) / s
    q[3] = (m[k, j] - m[j, k]) / s
    return q[0], q[1], q[2], q[3]


def _base_to_world(x: float, y: float, yaw: float) -> np.ndarray:
    transform = np.eye(4)
    c, s = math.cos(yaw), math.sin(yaw)
    transform[:2, :2] = [[c, -s], [s, c]]
    transform[:2, 3] = [x, y]
    return transform


#: How often a waiting or holding view looks for viewers (s).
VIEWER_POLL_S = 0.05
#: After the first subscription, how long a waiting view lets the viewer's other subscriptions arrive (s): the
#: Foxglove app subscribes to every topic of its panels at once, in separate messages.
VIEWER_SETTLE_S = 0.5


@dataclass
class LiveViewConfig:
    host: str = "127.0.0.1"  # loopback by default: the stream is unauthenticated; pass 0.0.0.0 to share it
    port: int = 8765  # Foxglove's default; 0 picks a free port (see FoxgloveLiveView.port)
    name: str = "HomieBot"
    labels: bool = True  # text labels over the world graph's boxes
    # An episode is over in seconds, before anyone has opened the connection in the app: wait this long after the
    # reset for a viewer (a client subscribed to a topic) before the first round; 0 does not wait.
    wait_for_viewer_s: float = 0.0
    # Keep serving the last state this long after the episode's end (a viewer that connects then is sent it), or
    # until every viewer has left; 0 closes at once.
    hold_s: float = 0.0

    def __post_init__(self) -> None:
        if self.wait_for_viewer_s < 0 or self.hold_s < 0:
            raise ValueError("the live view's wait and hold are seconds >= 0")


@dataclass
class FoxgloveLiveView(ObserverBase):
    """Serves an episode live to the Foxglove app. ``start()`` opens the server, ``stop()`` closes it; it is a
    context manager too. Between the two it is an episode observer: ``run_episode(..., observers=[view])``."""

    config: LiveViewConfig = field(default_factory=LiveViewConfig)
    _server: Any = None
    _context: Any = None
    _channels: dict[str, Any] = field(default_factory=dict)
    _path: list[tuple[float, float, float]] = field(default_factory=list)
    _graph_key: tuple[Any, ...] | None = None
    # What a viewer that connects during the hold is sent: the last state and views, the last log line.
    _last: tuple[WorldState, Observation | None] | None = None
    _last_log: tuple[str, str] | None = None

    # ------------------------------------------------------------------------------------------ server

    def start(self) -> FoxgloveLiveView:
        import foxglove
        from foxglove.channels import (
            FrameTransformsChannel,
            LogChannel,
            PoseInFrameChannel,
            PosesInFrameChannel,
            RawImageChannel,
            SceneUpdateChannel,
        )

        # A context of its own: two live views (or a test beside a run) never share channels.
        context = self._context = foxglove.Context()  # kept: the SDK drops a context's channels with it
        self._channels = {
            **{view: RawImageChannel(f"/camera/{view}/image", context=context) for view in VIEW_NAMES},
            "pose": PoseInFrameChannel("/robot/pose", context=context),
            "path": PosesInFrameChannel("/robot/path", context=context),
            "graph": SceneUpdateChannel("/world_graph", context=context),
            "log": LogChannel("/planner/log", context=context),
            "tf": FrameTransformsChannel("/tf", context=context),
        }
        self._server = foxglove.start_server(
            name=self.config.name, host=self.config.host, port=self.config.port, context=context
        )
        log.info("live view on ws://%s:%d (open it in the Foxglove app)", self.config.host, self.port)
        return self

    @property
    def port(self) -> int:
        """The port the server listens on (the chosen one when the config asked for 0)."""
        if self._server is None:
            raise RuntimeError("the live view is not started")
        return int(self._server.port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        for channel in self._channels.values():
            channel.close()
        self._channels = {}
        self._context = None

    def has_viewer(self) -> bool:
        """Whether a client is subscribed to any topic (connecting alone subscribes to nothing)."""
        return any(channel.has_sinks() for channel in self._channels.values())

    def wait_for_viewer(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for a viewer, then let its other subscriptions arrive; whether one came."""
        log.info("live view: waiting up to %g s for a viewer on ws://%s:%d", timeout_s, self.config.host, self.port)
        deadline = time.monotonic() + timeout_s
        while not self.has_viewer():
            if time.monotonic() >= deadline:
                log.info("live view: no viewer within %g s; the episode runs without one", timeout_s)
                return False
            time.sleep(VIEWER_POLL_S)
        time.sleep(VIEWER_SETTLE_S)
        return True

    def hold(self, seconds: float) -> None:
        """Keep serving the last state for ``seconds``, or until every viewer has left; a viewer that connects
        meanwhile is sent the last state and log line. Ctrl-C ends the hold early (the command goes on)."""
        log.info("live view: holding the last state for up to %g s (Ctrl-C ends the hold)", seconds)
        deadline = time.monotonic() + seconds
        watched = self.has_viewer()
        try:
            while time.monotonic() < deadline:
                time.sleep(VIEWER_POLL_S)
                viewer = self.has_viewer()
                if watched and not viewer:
                    log.info("live view: the viewers left; the hold ends")
                    return
                if viewer and not watched:
                    time.sleep(VIEWER_SETTLE_S)  # its other subscriptions
                    self._resend_last()
                watched = viewer
        except KeyboardInterrupt:
            log.info("live view: hold ended by Ctrl-C")

    def _resend_last(self) -> None:
        if self._last is not None:
            self._graph_key = None  # the whole graph, also for a client that has part of it
            self._send(*self._last, time.time_ns())
        if self._last_log is not None:
            self._log(*self._last_log)

    def __enter__(self) -> FoxgloveLiveView:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---------------------------------------------------------------------------------- observer calls

    def on_start(self, trajectory: Trajectory, state: WorldState, observation: Observation | None) -> None:
        self._path = []
        self._graph_key = None
        if self.config.wait_for_viewer_s > 0:
            self.wait_for_viewer(self.config.wait_for_viewer_s)
        self._log("info", f"task {trajectory.task_id or '(free text)'} in {trajectory.scene}: {trajectory.instruction}")
        self._publish(state, observation)

    def on_round(self, record: RoundRecord, seen: Observation | None, state: WorldState) -> None:
        feedback = record.feedback
        self._log("info", f"round {record.index}: {record.subtask_text} model {record.output.model or '-'}")
        self._log("info" if feedback.success else "warning", f"round {record.index} feedback {feedback.code.value}: {feedback.message}")
        self._publish(state, seen)

    def on_end(self, trajectory: Trajectory, state: WorldState | None) -> None:
        # The simulator's own goal check, named as such: the episode's verdict (its suite's evaluation over the
        # recorded states, homiebot/eval/verdict.py) is judged from the record once it is written, and shown by
        # homie run's closing line, summary.json and the report.
        outcome = {True: "simulator goal check: met", False: "simulator goal check: not met",
                   None: "no simulator goal check"}[trajectory.goal_satisfied]
        ended = "ended with [End]" if trajectory.ended else "did not end"
        level = "error" if trajectory.error else "info"
        self._log(level, f"episode over after {len(trajectory.rounds)} rounds: {ended}, {outcome}"
                  + (f"; error: {trajectory.error}" if trajectory.error else ""))
        if self.config.hold_s > 0:
            self.hold(self.config.hold_s)

    # -------------------------------------------------------------------------------------- publishing

    def _publish(self, state: WorldState, observation: Observation | None) -> None:
        if not self._channels:
            raise RuntimeError("the live view is not started")
        pose = state.robot
        self._path.append((pose.x, pose.y, pose.yaw))
        self._last = (state, observation)
        self._send(state, observation, time.time_ns())

    def _send(self, state: WorldState, observation: Observation | None, now: int) -> None:
        if observation is not None:
            self._images(observation, now)
        self._pose(now)
        self._tf(state, observation, now)
        self._graph(state, now)

    def _stamp(self, now: int) -> Any:
        from foxglove.messages import Timestamp

        return Timestamp(now // 1_000_000_000, now % 1_000_000_000)

    def _images(self, observation: Observation, now: int) -> None:
        from foxglove.messages import RawImage

        for name, view in observation.views.items():
            channel = self._channels.get(name)
            if channel is None or not channel.has_sinks() or view.rgb.size == 0:
                continue
            rgb = np.ascontiguousarray(view.rgb, dtype=np.uint8)
            height, width = rgb.shape[:2]
            channel.log(
                RawImage(timestamp=self._stamp(now), frame_id=camera_frame(name), width=width, height=height,
                         encoding="rgb8", step=3 * width, data=rgb.tobytes()),
                log_time=now,
            )

    def _pose(self, now: int) -> None:
        from foxglove.messages import Pose, PoseInFrame, PosesInFrame, Quaternion, Vector3

        def pose_of(x: float, y: float, yaw: float) -> Any:
            qx, qy, qz, qw = yaw_quaternion(yaw)
            return Pose(position=Vector3(x=x, y=y, z=0.0), orientation=Quaternion(x=qx, y=qy, z=qz, w=qw))

        if self._channels["pose"].has_sinks():
            self._channels["pose"].log(
                PoseInFrame(timestamp=self._stamp(now), frame_id=MAP_FRAME, pose=pose_of(*self._path[-1])), log_time=now
            )
        if self._channels["path"].has_sinks():
            self._channels["path"].log(
                PosesInFrame(timestamp=self._stamp(now), frame_id=MAP_FRAME, poses=[pose_of(*p) for p in self._path]),
                log_time=now,
            )

    def _tf(self, state: WorldState, observation: Observation | None, now: int) -> None:
        from foxglove.messages import FrameTransform, FrameTransforms, Quaternion, Vector3

        if not self._channels["tf"].has_sinks():
            return
        x, y, yaw = self._path[-1]
        qx, qy, qz, qw = yaw_quaternion(yaw)
        stamp = self._stamp(now)
        transforms = [
            FrameTransform(timestamp=stamp, parent_frame_id=MAP_FRAME, child_frame_id=BASE_FRAME,
                           translation=Vector3(x=x, y=y, z=0.0), rotation=Quaternion(x=qx, y=qy, z=qz, w=qw))
        ]
        if observation is not None:
            # The cameras are fixed on the robot: their mount is read from the views' own robot pose (the views
            # of a round were rendered before it moved) and hung under the current base_link.
            seen_from = observation.robot_pose
            world_to_base = np.linalg.inv(_base_to_world(seen_from.x, seen_from.y, seen_from.yaw))
            for name, view in observation.views.items():
                local = world_to_base @ np.asarray(view.camera_to_world, dtype=float)
                rx, ry, rz, rw = matrix_quaternion(local[:3, :3])
                tx, ty, tz = (float(v) for v in local[:3, 3])
                transforms.append(
                    FrameTransform(timestamp=stamp, parent_frame_id=BASE_FRAME, child_frame_id=camera_frame(name),
                                   translation=Vector3(x=tx, y=ty, z=tz), rotation=Quaternion(x=rx, y=ry, z=rz, w=rw))
                )
        self._channels["tf"].log(FrameTransforms(transforms=transforms), log_time=now)

    def _graph(self, state: WorldState, now: int) -> None:
        channel = self._channels["graph"]
        if not channel.has_sinks():
            self._graph_key = None  # a client that subscribes later gets the whole graph
            return
        # Only what changes the drawing: boxes, open/closed, held.
        key = tuple((e.name, e.bbox_min, e.bbox_max, e.is_open, e.held) for e in state.entities.values())
        if key == self._graph_key:
            return
        self._graph_key = key
        channel.log(self._scene_update(state, now), log_time=now)

    def _scene_update(self, state: WorldState, now: int) -> Any:
        from foxglove.messages import (
            Color,
            CubePrimitive,
            Pose,
            Quaternion,
            SceneEntity,
            SceneUpdate,
            TextPrimitive,
            Vector3,
        )

        entities = []
        stamp = self._stamp(now)
        identity = Quaternion(x=0.0, y=0.0, z=0.0, w=1.0)
        for entity in state.entities.values():
            lo, hi = _drawn_box(entity)
            cx, cy, cz = (lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, (lo[2] + hi[2]) / 2
            centre = Vector3(x=cx, y=cy, z=cz)
            r, g, b, a = KIND_COLOURS[entity.kind]
            cube = CubePrimitive(pose=Pose(position=centre, orientation=identity),
                                 size=Vector3(x=hi[0] - lo[0], y=hi[1] - lo[1], z=hi[2] - lo[2]),
                                 color=Color(r=r, g=g, b=b, a=a))
            texts = []
            if self.config.labels:
                label = entity.name + (" (open)" if entity.is_open else "") + (" (held)" if entity.held else "")
                above = Vector3(x=cx, y=cy, z=hi[2] + 0.15)
                texts.append(TextPrimitive(pose=Pose(position=above, orientation=identity), billboard=True,
                                           font_size=14.0 if entity.kind is EntityKind.ROOM else 11.0,
                                           scale_invariant=True, color=Color(r=1.0, g=1.0, b=1.0, a=1.0), text=label))
            entities.append(SceneEntity(timestamp=stamp, frame_id=MAP_FRAME, id=entity.name, cubes=[cube], texts=texts))
        return SceneUpdate(entities=entities)

    def _log(self, level: str, message: str) -> None:
        from foxglove.messages import Log, LogLevel

        levels = {"info": LogLevel.Info, "warning": LogLevel.Warning, "error": LogLevel.Error}
        channel = self._channels.get("log")
        if channel is None:
            raise RuntimeError("the live view is not started")
        self._last_log = (level, message)
        now = time.time_ns()
        channel.log(Log(timestamp=self._stamp(now), level=levels[level], message=message, name="homiebot"), log_time=now)


def _drawn_box(entity: EntityState) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """A room is drawn as a 2 cm floor slab (its walls would hide everything inside)."""
    lo, hi = entity.bbox_min, entity.bbox_max
    if entity.kind is EntityKind.ROOM:
        return (lo[0], lo[1], 0.0), (hi[0], hi[1], 0.02)
    return lo, hi
