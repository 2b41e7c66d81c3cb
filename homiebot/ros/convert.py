"""Conversions between the core's types (:mod:`homiebot.types`) and the ``homie_msgs`` / standard messages.

Every node and every bag tool converts through these functions, so a message on the wire means the same
thing everywhere. Round trips are exact for everything the planner and the executor decide on (strings,
codes, inventories, entity geometry as float64); poses that travel as quaternions come back within
floating-point rounding (about 1e-16 rad).

Decisions:

* **Optional strings** (``Subtask.target``, ``EntityState.room`` ...) travel as ``""`` for ``None``; a
  ``Subtask`` carries ``has_target`` / ``has_place`` flags because a planner may write an empty target
  (``[Go to, ]``), which the executor must see as empty, not as absent.
* **Optional points** (a Put's ``released_at``) travel as a ``geometry_msgs/Point`` beside a ``has_...`` flag, in
  the style of ``has_target``: the origin is a point, not "unknown".
* **Error codes** are the ``Feedback`` constants (``OK=0``, ``L1=1`` ... ``E2=10``) in the order of
  :class:`~homiebot.types.ErrorCode`; the EMMOE message text travels unchanged beside the code.
* **Images** use the REP 118 encodings ``rgb8`` (colour), ``32FC1`` (depth in metres), ``32SC1`` (instance
  ids), little-endian as produced by numpy on every supported machine. No cv_bridge: it is not on PyPI, and
  a numpy view of the message buffer is all it would do here.
* **World-graph states** are ``diagnostic_msgs/KeyValue`` text: booleans ``true``/``false``, numbers in
  Python's ``repr`` (exact for floats), anything else verbatim. A string state that reads as a boolean or
  a number (``"true"``, ``"1.5"``) therefore comes back typed; no state of the world graph has such values.
* **Time**: simulation time (seconds) becomes ``builtin_interfaces/Time`` (sec, nanosec).
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Sequence

import numpy as np
from builtin_interfaces.msg import Duration, Time
from diagnostic_msgs.msg import KeyValue
from geometry_msgs.msg import Point, Pose, Quaternion, TransformStamped, Vector3
from homie_msgs.msg import CameraView as CameraViewMsg
from homie_msgs.msg import EntityState as EntityStateMsg
from homie_msgs.msg import Feedback as FeedbackMsg
from homie_msgs.msg import MultiView, WorldGraphEdge, WorldGraphNode
from homie_msgs.msg import PlannerOutput as PlannerOutputMsg
from homie_msgs.msg import SkillResult as SkillResultMsg
from homie_msgs.msg import Subtask as SubtaskMsg
from homie_msgs.msg import Task as TaskMsg
from homie_msgs.msg import WorldGraph as WorldGraphMsg
from homie_msgs.msg import WorldState as WorldStateMsg
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Header

from homiebot.types import (
    AgentState,
    CameraView,
    EntityKind,
    EntityState,
    ErrorCode,
    Feedback,
    Observation,
    PlannerOutput,
    Pose2D,
    SkillResult,
    SkillStatus,
    Subtask,
    WorldState,
)

MAP_FRAME = "map"
BASE_FRAME = "base_link"
ODOM_FRAME = "odom"


class ConversionError(ValueError):
    """A message does not hold what its type promises (unknown code, image size mismatch, ...)."""


# ------------------------------------------------------------------------------------------------ time


def time_msg(seconds: float) -> Time:
    seconds = max(float(seconds), 0.0)
    sec = int(math.floor(seconds))
    nanosec = int(round((seconds - sec) * 1e9))
    if nanosec >= 1_000_000_000:
        sec, nanosec = sec + 1, nanosec - 1_000_000_000
    return Time(sec=sec, nanosec=nanosec)


def time_seconds(stamp: Time | Duration) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def duration_msg(seconds: float) -> Duration:
    """A non-negative span (an action's elapsed time, a trajectory point's ``time_from_start``)."""
    seconds = max(float(seconds), 0.0)
    sec = int(math.floor(seconds))
    nanosec = min(int(round((seconds - sec) * 1e9)), 999_999_999)
    return Duration(sec=sec, nanosec=nanosec)


def header(seconds: float, frame_id: str = MAP_FRAME) -> Header:
    return Header(stamp=time_msg(seconds), frame_id=frame_id)


# ------------------------------------------------------------------------------------------------ geometry


def yaw_quaternion(yaw: float) -> Quaternion:
    return Quaternion(x=0.0, y=0.0, z=math.sin(yaw / 2.0), w=math.cos(yaw / 2.0))


def quaternion_yaw(q: Quaternion) -> float:
    """Rotation about z of a quaternion (exact inverse of :func:`yaw_quaternion` up to rounding)."""
    return math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))


def pose2d_to_pose(pose: Pose2D) -> Pose:
    return Pose(position=Point(x=float(pose.x), y=float(pose.y), z=0.0), orientation=yaw_quaternion(pose.yaw))


def pose_to_pose2d(pose: Pose) -> Pose2D:
    return Pose2D(pose.position.x, pose.position.y, quaternion_yaw(pose.orientation))


def point(values: Sequence[float]) -> Point:
    x, y, z = (float(v) for v in values)
    return Point(x=x, y=y, z=z)


def vector(values: Sequence[float]) -> Vector3:
    x, y, z = (float(v) for v in values)
    return Vector3(x=x, y=y, z=z)


def point_tuple(p: Point) -> tuple[float, float, float]:
    return (p.x, p.y, p.z)


def matrix_to_pose(matrix: np.ndarray) -> Pose:
    """A 4x4 rigid transform as a Pose (rotation as a unit quaternion, Shepperd's method)."""
    m = np.asarray(matrix, dtype=np.float64)
    if m.shape != (4, 4):
        raise ConversionError(f"expected a 4x4 transform, got shape {m.shape}")
    r = m[:3, :3]
    trace = r[0, 0] + r[1, 1] + r[2, 2]
    if trace > 0:
        s = math.sqrt(trace + 1.0) * 2
        w, x, y, z = 0.25 * s, (r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s
    elif r[0, 0] > r[1, 1] and r[0, 0] > r[2, 2]:
        s = math.sqrt(1.0 + r[0, 0] - r[1, 1] - r[2, 2]) * 2
        w, x, y, z = (r[2, 1] - r[1, 2]) / s, 0.25 * s, (r[0, 1] + r[1, 0]) / s, (r[0, 2] + r[2, 0]) / s
    elif r[1, 1] > r[2, 2]:
        s = math.sqrt(1.0 + r[1, 1] - r[0, 0] - r[2, 2]) * 2
        w, x, y, z = (r[0, 2] - r[2, 0]) / s, (r[0, 1] + r[1, 0]) / s, 0.25 * s, (r[1, 2] + r[2, 1]) / s
    else:
        s = math.sqrt(1.0 + r[2, 2] - r[0, 0] - r[1, 1]) * 2
        w, x, y, z = (r[1, 0] - r[0, 1]) / s, (r[0, 2] + r[2, 0]) / s, (r[1, 2] + r[2, 1]) / s, 0.25 * s
    norm = math.sqrt(w * w + x * x + y * y + z * z)
    return Pose(
        position=point(m[:3, 3].tolist()),
        orientation=Quaternion(x=float(x / norm), y=float(y / norm), z=float(z / norm), w=float(w / norm)),
    )


def pose_to_matrix(pose: Pose) -> np.ndarray:
    q = pose.orientation
    x, y, z, w = q.x, q.y, q.z, q.w
    m = np.eye(4)
    m[:3, :3] = [
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ]
    m[:3, 3] = [pose.position.x, pose.position.y, pose.position.z]
    return m


def transform_stamped(pose: Pose, parent: str, child: str, seconds: float) -> TransformStamped:
    t = TransformStamped()
    t.header = header(seconds, parent)
    t.child_frame_id = child
    t.transform.translation.x = pose.position.x
    t.transform.translation.y = pose.position.y
    t.transform.translation.z = pose.position.z
    t.transform.rotation = pose.orientation
    return t


# ------------------------------------------------------------------------------------------------ subtask / feedback

#: ErrorCode <-> homie_msgs/Feedback constant, in the enum's order (OK=0, L1=1 ... E2=10).
ERROR_CODE_VALUES: dict[ErrorCode, int] = {code: getattr(FeedbackMsg, code.value) for code in ErrorCode}
_ERROR_CODES_BY_VALUE: dict[int, ErrorCode] = {v: k for k, v in ERROR_CODE_VALUES.items()}


def subtask_to_msg(subtask: Subtask) -> SubtaskMsg:
    return SubtaskMsg(
        action=subtask.action,
        target=subtask.target or "",
        has_target=subtask.target is not None,
        place=subtask.place or "",
        has_place=subtask.place is not None,
    )


def subtask_from_msg(msg: SubtaskMsg) -> Subtask:
    return Subtask(
        action=msg.action,
        target=msg.target if msg.has_target else None,
        place=msg.place if msg.has_place else None,
    )


def error_code_from_value(value: int) -> ErrorCode:
    try:
        return _ERROR_CODES_BY_VALUE[int(value)]
    except KeyError:
        raise ConversionError(f"unknown feedback code {value}; known: {sorted(_ERROR_CODES_BY_VALUE)}") from None


def feedback_to_msg(feedback: Feedback) -> FeedbackMsg:
    return FeedbackMsg(
        code=ERROR_CODE_VALUES[feedback.code],
        message=feedback.message,
        inventory=list(feedback.inventory),
        attempts=int(feedback.attempts),
    )


def feedback_from_msg(msg: FeedbackMsg) -> Feedback:
    return Feedback(
        code=error_code_from_value(msg.code),
        message=msg.message,
        inventory=tuple(msg.inventory),
        attempts=int(msg.attempts),
    )


def planner_output_to_msg(output: PlannerOutput, round_index: int, instruction: str, seconds: float = 0.0) -> PlannerOutputMsg:
    msg = PlannerOutputMsg(
        header=header(seconds),
        round_index=int(round_index),
        instruction=instruction,
        raw=output.raw,
        analysis=output.analysis,
        has_subtask=output.subtask is not None,
        model=output.model,
        parse_error=output.parse_error or "",
    )
    if output.subtask is not None:
        msg.subtask = subtask_to_msg(output.subtask)
    return msg


def planner_output_from_msg(msg: PlannerOutputMsg) -> PlannerOutput:
    return PlannerOutput(
        raw=msg.raw,
        analysis=msg.analysis,
        subtask=subtask_from_msg(msg.subtask) if msg.has_subtask else None,
        model=msg.model,
        parse_error=msg.parse_error or None,
    )


#: SkillStatus <-> homie_msgs/SkillResult constant.
SKILL_STATUS_VALUES: dict[SkillStatus, int] = {s: getattr(SkillResultMsg, s.name) for s in SkillStatus}
_SKILL_STATUS_BY_VALUE: dict[int, SkillStatus] = {v: k for k, v in SKILL_STATUS_VALUES.items()}


def skill_result_to_msg(result: SkillResult) -> SkillResultMsg:
    msg = SkillResultMsg(status=SKILL_STATUS_VALUES[result.status], detail=result.detail, path_length=float(result.path_length))
    msg.has_released_at, msg.released_at = released_at_to_msg(result.released_at)
    return msg


def skill_result_from_msg(msg: SkillResultMsg) -> SkillResult:
    try:
        status = _SKILL_STATUS_BY_VALUE[int(msg.status)]
    except KeyError:
        raise ConversionError(f"unknown skill status {msg.status}") from None
    return SkillResult(status=status, detail=msg.detail, path_length=msg.path_length,
                       released_at=released_at_from_msg(msg.has_released_at, msg.released_at))


def released_at_to_msg(released_at: Sequence[float] | None) -> tuple[bool, Point]:
    """A Put's release point (``SkillResult.released_at``) as the messages' pair (``has_released_at``,
    ``released_at``): ``(False, origin)`` when the skill does not know it, since a point has no "absent"."""
    if released_at is None:
        return False, Point()
    return True, point(released_at)


def released_at_from_msg(known: bool, released_at: Point) -> tuple[float, float, float] | None:
    """The inverse of :func:`released_at_to_msg`: None when ``known`` is false."""
    return point_tuple(released_at) if known else None


def task_msg(task_id: str, instruction: str, scene: str, seed: int, max_rounds: int = 0, seconds: float = 0.0) -> TaskMsg:
    return TaskMsg(
        header=header(seconds),
        task_id=task_id,
        instruction=instruction,
        scene=scene,
        seed=int(seed),
        max_rounds=int(max_rounds),
    )


# ------------------------------------------------------------------------------------------------ world state

_KIND_VALUES = {EntityKind.ROOM: EntityStateMsg.ROOM, EntityKind.FURNITURE: EntityStateMsg.FURNITURE, EntityKind.OBJECT: EntityStateMsg.OBJECT}
_KINDS_BY_VALUE = {v: k for k, v in _KIND_VALUES.items()}


def _tri_state(value: bool | None) -> int:
    return EntityStateMsg.UNKNOWN if value is None else EntityStateMsg.YES if value else EntityStateMsg.NO


def _from_tri_state(value: int) -> bool | None:
    return None if value == EntityStateMsg.UNKNOWN else value == EntityStateMsg.YES


def entity_to_msg(entity: EntityState) -> EntityStateMsg:
    return EntityStateMsg(
        name=entity.name,
        category=entity.category,
        kind=_KIND_VALUES[entity.kind],
        aliases=list(entity.aliases),
        position=point(entity.position),
        bbox_min=point(entity.bbox_min),
        bbox_max=point(entity.bbox_max),
        room=entity.room or "",
        parent=entity.parent or "",
        relation=entity.relation or "",
        articulated=entity.articulated,
        interactive=entity.interactive,
        open_state=_tri_state(entity.is_open),
        held=entity.held,
        color=entity.color or "",
        appliance=entity.appliance,
        powered_state=_tri_state(entity.powered_on),
        level=int(entity.level),
        functions=list(entity.functions),
        clean_state=_tri_state(entity.is_clean),
        hot_state=_tri_state(entity.is_hot),
        cold_state=_tri_state(entity.is_cold),
        filled_state=_tri_state(entity.is_filled),
        has_interior=entity.interior_min is not None and entity.interior_max is not None,
        interior_min=point(entity.interior_min or (0.0, 0.0, 0.0)),
        interior_max=point(entity.interior_max or (0.0, 0.0, 0.0)),
        has_box=entity.half_extents is not None,
        half_extents=vector(entity.half_extents or (0.0, 0.0, 0.0)),
        yaw_known=entity.half_extents is not None and entity.yaw is not None,
        yaw=float(entity.yaw or 0.0),
        wall_thickness=float(entity.wall_thickness or 0.0),
    )


def entity_from_msg(msg: EntityStateMsg) -> EntityState:
    try:
        kind = _KINDS_BY_VALUE[msg.kind]
    except KeyError:
        raise ConversionError(f"entity {msg.name!r}: unknown kind {msg.kind}") from None
    return EntityState(
        name=msg.name,
        category=msg.category,
        kind=kind,
        aliases=tuple(msg.aliases),
        position=point_tuple(msg.position),
        bbox_min=point_tuple(msg.bbox_min),
        bbox_max=point_tuple(msg.bbox_max),
        room=msg.room or None,
        parent=msg.parent or None,
        relation=msg.relation or None,
        articulated=msg.articulated,
        interactive=msg.interactive,
        is_open=_from_tri_state(msg.open_state),
        held=msg.held,
        color=msg.color or None,
        appliance=msg.appliance,
        powered_on=_from_tri_state(msg.powered_state),
        level=msg.level,
        functions=tuple(msg.functions),
        is_clean=_from_tri_state(msg.clean_state),
        is_hot=_from_tri_state(msg.hot_state),
        is_cold=_from_tri_state(msg.cold_state),
        is_filled=_from_tri_state(msg.filled_state),
        interior_min=point_tuple(msg.interior_min) if msg.has_interior else None,
        interior_max=point_tuple(msg.interior_max) if msg.has_interior else None,
        half_extents=(msg.half_extents.x, msg.half_extents.y, msg.half_extents.z) if msg.has_box else None,
        yaw=msg.yaw if msg.has_box and msg.yaw_known else None,
        wall_thickness=msg.wall_thickness if msg.wall_thickness > 0.0 else None,
    )


def world_state_to_msg(state: WorldState, seconds: float = 0.0) -> WorldStateMsg:
    return WorldStateMsg(
        header=header(seconds),
        scene=state.scene,
        robot_pose=pose2d_to_pose(state.robot),
        robot_radius=float(state.robot_radius),
        held=state.held or "",
        robot_room=state.robot_room or "",
        entities=[entity_to_msg(e) for e in state.entities.values()],
    )


def world_state_from_msg(msg: WorldStateMsg) -> WorldState:
    entities = {e.name: entity_from_msg(e) for e in msg.entities}
    return WorldState(
        robot=pose_to_pose2d(msg.robot_pose),
        robot_radius=msg.robot_radius,
        held=msg.held or None,
        entities=entities,
        scene=msg.scene,
        robot_room=msg.robot_room or None,
    )


# ------------------------------------------------------------------------------------------------ images

_LITTLE_ENDIAN = sys.byteorder == "little"
_ENCODINGS: dict[str, tuple[np.dtype, int]] = {
    "rgb8": (np.dtype(np.uint8), 3),
    "bgr8": (np.dtype(np.uint8), 3),
    "mono8": (np.dtype(np.uint8), 1),
    "32FC1": (np.dtype(np.float32), 1),
    "32SC1": (np.dtype(np.int32), 1),
    "16UC1": (np.dtype(np.uint16), 1),
}


def image_to_msg(array: np.ndarray, encoding: str, frame_id: str, seconds: float = 0.0) -> Image:
    """A numpy image as ``sensor_msgs/Image`` (one copy into the message's buffer)."""
    try:
        dtype, channels = _ENCODINGS[encoding]
    except KeyError:
        raise ConversionError(f"unsupported encoding {encoding!r}; supported: {', '.join(_ENCODINGS)}") from None
    data = np.ascontiguousarray(array, dtype=dtype)
    if data.ndim == 2 and channels == 1:
        height, width = data.shape
    elif data.ndim == 3 and data.shape[2] == channels:
        height, width = data.shape[:2]
    else:
        raise ConversionError(f"{encoding} needs shape (H, W{f', {channels}' if channels > 1 else ''}), got {data.shape}")
    msg = Image(
        header=header(seconds, frame_id),
        height=int(height),
        width=int(width),
        encoding=encoding,
        is_bigendian=0 if _LITTLE_ENDIAN else 1,
        step=int(width * channels * dtype.itemsize),
    )
    msg.data = data.tobytes()
    return msg


def image_from_msg(msg: Image) -> np.ndarray:
    """A read-only numpy view of a ``sensor_msgs/Image`` buffer (copy it to modify)."""
    try:
        dtype, channels = _ENCODINGS[msg.encoding]
    except KeyError:
        raise ConversionError(f"unsupported encoding {msg.encoding!r}; supported: {', '.join(_ENCODINGS)}") from None
    if msg.width == 0 or msg.height == 0:
        return np.zeros((0, 0, channels) if channels > 1 else (0, 0), dtype=dtype)
    dtype = dtype.newbyteorder(">" if msg.is_bigendian else "<")
    row = msg.width * channels * dtype.itemsize
    if msg.step < row:
        raise ConversionError(f"image step {msg.step} is shorter than a row of {row} bytes")
    buffer = np.frombuffer(msg.data, dtype=np.uint8)
    if buffer.size < msg.step * msg.height:
        raise ConversionError(f"image data holds {buffer.size} bytes, {msg.step * msg.height} expected")
    rows = buffer[: msg.step * msg.height].reshape(msg.height, msg.step)[:, :row]
    image = np.ascontiguousarray(rows).view(dtype)
    shape = (msg.height, msg.width, channels) if channels > 1 else (msg.height, msg.width)
    return image.reshape(shape).astype(dtype.newbyteorder("="), copy=False)


def camera_info_msg(view: CameraView, frame_id: str, seconds: float = 0.0) -> CameraInfo:
    height, width = view.rgb.shape[:2]
    return CameraInfo(
        header=header(seconds, frame_id),
        height=int(height),
        width=int(width),
        distortion_model="plumb_bob",
        d=[0.0] * 5,
        k=[view.fx, 0.0, view.cx, 0.0, view.fy, view.cy, 0.0, 0.0, 1.0],
        r=[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
        p=[view.fx, 0.0, view.cx, 0.0, 0.0, view.fy, view.cy, 0.0, 0.0, 0.0, 1.0, 0.0],
    )


def optical_frame(view_name: str) -> str:
    return f"{view_name}_camera_optical_frame"


def camera_view_to_msg(view: CameraView, seconds: float = 0.0, *, depth: bool = True, segmentation: bool = True) -> CameraViewMsg:
    frame = optical_frame(view.name)
    msg = CameraViewMsg(
        name=view.name,
        rgb=image_to_msg(view.rgb, "rgb8", frame, seconds),
        camera_info=camera_info_msg(view, frame, seconds),
        camera_pose=matrix_to_pose(view.camera_to_world),
    )
    if depth:
        msg.depth = image_to_msg(view.depth, "32FC1", frame, seconds)
    if segmentation:
        msg.segmentation = image_to_msg(view.segmentation, "32SC1", frame, seconds)
    return msg


def camera_view_from_msg(msg: CameraViewMsg) -> CameraView:
    rgb = image_from_msg(msg.rgb)
    height, width = rgb.shape[:2]
    depth = image_from_msg(msg.depth) if msg.depth.width else np.zeros((height, width), np.float32)
    segmentation = image_from_msg(msg.segmentation) if msg.segmentation.width else np.zeros((height, width), np.int32)
    k = msg.camera_info.k
    return CameraView(
        name=msg.name,
        rgb=rgb,
        depth=depth,
        segmentation=segmentation,
        fx=float(k[0]),
        fy=float(k[4]),
        cx=float(k[2]),
        cy=float(k[5]),
        camera_to_world=pose_to_matrix(msg.camera_pose),
    )


def observation_to_msg(observation: Observation, *, depth: bool = True, segmentation: bool = True) -> MultiView:
    seconds = observation.sim_time
    ids = sorted(observation.instance_names)
    return MultiView(
        header=header(seconds),
        views=[camera_view_to_msg(v, seconds, depth=depth, segmentation=segmentation) for v in observation.views.values()],
        instance_ids=[int(i) for i in ids],
        instance_names=[observation.instance_names[i] for i in ids],
        robot_pose=pose2d_to_pose(observation.robot_pose),
        held_object=observation.held_object or "",
    )


def observation_from_msg(msg: MultiView) -> Observation:
    if len(msg.instance_ids) != len(msg.instance_names):
        raise ConversionError(
            f"MultiView has {len(msg.instance_ids)} instance ids but {len(msg.instance_names)} names"
        )
    return Observation(
        views={v.name: camera_view_from_msg(v) for v in msg.views},
        instance_names=dict(zip((int(i) for i in msg.instance_ids), msg.instance_names, strict=False)),
        robot_pose=pose_to_pose2d(msg.robot_pose),
        held_object=msg.held_object or None,
        sim_time=time_seconds(msg.header.stamp),
    )


def multiview_images(msg: MultiView) -> list[np.ndarray]:
    """Only the RGB images, in the message's (planner's) order: what a planner needs, without depth decoding."""
    return [image_from_msg(v.rgb) for v in msg.views]


# ------------------------------------------------------------------------------------------------ world graph


def state_value_text(value: bool | float | int | str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(float(value))
    return str(value)


def state_value_from_text(text: str) -> bool | float | str:
    if text == "true":
        return True
    if text == "false":
        return False
    try:
        return float(text)
    except ValueError:
        return text


def world_graph_to_msg(export, seconds: float = 0.0) -> WorldGraphMsg:
    """A :class:`homiebot.perception.world_graph.WorldGraphExport` as ``homie_msgs/WorldGraph``."""
    nodes = []
    for n in export.nodes:
        nodes.append(
            WorldGraphNode(
                id=n.id,
                kind=n.kind,
                category=n.category,
                name=n.name,
                aliases=list(n.aliases),
                pose=Pose(position=point(n.position), orientation=Quaternion(w=1.0)),
                bbox_min=point(n.bbox_min),
                bbox_max=point(n.bbox_max),
                states=[KeyValue(key=k, value=state_value_text(v)) for k, v in sorted(n.states.items())],
                affordances=list(n.affordances),
                detections=int(n.detections),
                confidence=float(n.confidence),
            )
        )
    edges = [WorldGraphEdge(source=e.source, target=e.target, relation=e.relation) for e in export.edges]
    return WorldGraphMsg(header=header(seconds), scene=export.scene, schema_version=int(export.schema_version), nodes=nodes, edges=edges)


def world_graph_from_msg(msg: WorldGraphMsg):
    """``homie_msgs/WorldGraph`` back to a :class:`homiebot.perception.world_graph.WorldGraphExport` (validated)."""
    from homiebot.perception.world_graph import WorldGraphExport

    return WorldGraphExport.from_dict(
        {
            "schema_version": msg.schema_version,
            "scene": msg.scene,
            "nodes": [
                {
                    "id": n.id,
                    "kind": n.kind,
                    "category": n.category,
                    "name": n.name,
                    "aliases": list(n.aliases),
                    "position": list(point_tuple(n.pose.position)),
                    "bbox_min": list(point_tuple(n.bbox_min)),
                    "bbox_max": list(point_tuple(n.bbox_max)),
                    "states": {kv.key: state_value_from_text(kv.value) for kv in n.states},
                    "affordances": list(n.affordances),
                    "detections": n.detections,
                    "confidence": n.confidence,
                }
                for n in msg.nodes
            ],
            "edges": [{"source": e.source, "target": e.target, "relation": e.relation} for e in msg.edges],
        }
    )


#: Marker colours (RGBA) per world-graph node kind: rooms faint, furniture brown, objects bright, agents blue.
_KIND_COLORS = {
    "room": (0.6, 0.6, 0.6, 0.15),
    "furniture": (0.55, 0.35, 0.2, 0.5),
    "object": (0.95, 0.45, 0.1, 0.9),
    "agent": (0.2, 0.4, 0.95, 0.9),
}


def world_graph_markers(export, seconds: float = 0.0):
    """rviz markers for a world graph: a box per room / furniture / object / agent (its bounding box), a
    label above it, and a line from every object to the furniture or agent that holds it.

    Marker ids are stable per node (its index in a sorted id list), and a DELETEALL comes first, so a
    node that left the graph disappears from rviz."""
    from std_msgs.msg import ColorRGBA
    from visualization_msgs.msg import Marker, MarkerArray

    stamp = header(seconds)
    markers = [Marker(header=stamp, action=Marker.DELETEALL)]
    by_id = {n.id: n for n in export.nodes}
    for index, node_id in enumerate(sorted(by_id)):
        node = by_id[node_id]
        if node.kind == "house":
            continue
        r, g, b, a = _KIND_COLORS.get(node.kind, (0.8, 0.8, 0.8, 0.5))
        lo, hi = node.bbox_min, node.bbox_max
        size = [max(top - bottom, 0.02) for bottom, top in zip(lo, hi, strict=False)]
        extent = any(top > bottom for bottom, top in zip(lo, hi, strict=False))
        centre = [(bottom + top) / 2 for bottom, top in zip(lo, hi, strict=False)] if extent else list(node.position)
        box = Marker(header=stamp, ns=f"graph/{node.kind}", id=index, type=Marker.CUBE, action=Marker.ADD)
        box.pose.position = point(centre)
        box.pose.orientation.w = 1.0
        box.scale = vector(size)
        box.color = ColorRGBA(r=r, g=g, b=b, a=a)
        label = Marker(header=stamp, ns=f"labels/{node.kind}", id=index, type=Marker.TEXT_VIEW_FACING, action=Marker.ADD)
        label.pose.position = point((centre[0], centre[1], max(hi[2], node.position[2]) + 0.15))
        label.pose.orientation.w = 1.0
        label.scale.z = 0.12 if node.kind == "object" else 0.2
        label.color = ColorRGBA(r=1.0, g=1.0, b=1.0, a=1.0)
        is_open = node.states.get("is_open")
        label.text = node.name + ("" if not isinstance(is_open, bool) else " (open)" if is_open else " (closed)")
        markers += [box, label]
    lines = Marker(header=stamp, ns="graph/relations", id=0, type=Marker.LINE_LIST, action=Marker.ADD)
    lines.scale.x = 0.01
    lines.color = ColorRGBA(r=1.0, g=1.0, b=0.3, a=0.8)
    lines.pose.orientation.w = 1.0
    for edge in export.edges:
        if edge.relation in ("on", "in", "held_by") and edge.source in by_id and edge.target in by_id:
            lines.points += [point(by_id[edge.source].position), point(by_id[edge.target].position)]
    if lines.points:
        markers.append(lines)
    return MarkerArray(markers=markers)


# ------------------------------------------------------------------------------------------------ two agents

#: PARTNR's agents by id (the robot is agent 0, the human agent 1), as the simulator lists them.
AGENT_NAMES = {0: "robot", 1: "human"}
#: Where each agent is served in the graph (the sim bridge's human:=true, launch/config/graph_pair.yaml).
ROLE_NAMESPACES = {"robot": "", "human": "/human"}


def with_both_agents(state: WorldState, agent: int, other_state: WorldState) -> WorldState:
    """``state``, agent ``agent``'s view from a WorldState message, with both agents listed in
    ``WorldState.agents`` as the in-process simulator lists them. The message carries only the viewing agent, so
    the other's pose and hand come from ``other_state``, its own view of the same world."""

    def listed(role: int, seen: WorldState) -> AgentState:
        return AgentState(role, AGENT_NAMES[role], seen.robot, seen.robot_radius, seen.held, seen.robot_room)

    other = 1 - agent
    agents = {agent: listed(agent, state), other: listed(other, other_state)}
    return dataclasses.replace(state, agents=(agents[0], agents[1]))
