"""The reaching views of the physical skills: a few frames of the arm in motion, from two cameras.

A round's four views are taken before the planner's next answer, when the arm is tucked again: they never show
it reaching. With the reaching views on (:meth:`MujocoSimulator.record_motion_views
<homiebot.sim.mujoco.backend.MujocoSimulator.record_motion_views>`), :class:`MotionViews` is told by the physical
driver (:class:`~homiebot.sim.mujoco.physical.PhysicalDriver`) of every arm or gripper goal that has ended
(:class:`~homiebot.sim.mujoco.physical.GoalEnd`) and renders, at those moments only:

* ``head``: the front head camera (``cam_front``, the planner's front view) with the robot's own body shown, so
  that the arm is seen reaching as a real robot's head camera sees its arm (the planner's views hide the body,
  whose geoms would hide the view where they pass in front of the lens);
* ``overview``: a third-person camera, a free MuJoCo camera (nothing is added to the model, so the robot's
  dynamics and the scene's physics are unchanged), behind and to one side of the robot, looking down at the space
  in front of it where the arm works; of a few such placements the one that sees that space from farthest without a
  wall or furniture in between is taken (:func:`overview_camera`). It is placed from the base's pose, so the
  frames of one skill share a viewpoint while the base stands.

The moments: the end of every FollowJointTrajectory goal (the arm at the pre-grasp pose, at the grasp, lifted,
back at the tuck), and of every GripperCommand goal that closed the fingers or let something go (the grasp, the
release); a gripper opened with nothing in it (before a reach) shows nothing new and is skipped. Frames are RGB
only, small (:data:`FRAME_SIZE`), and kept until taken (:meth:`MotionViews.take`); the record writes them as JPEG
beside the round's views (``homiebot/data/record.py``), the sim bridge publishes them as ``sensor_msgs/Image`` with
``CameraInfo``. Rendering costs a few milliseconds a moment; nothing is rendered while the views are off.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import mujoco
import numpy as np

from homiebot.sim.mujoco import human as human_model
from homiebot.sim.mujoco import robot as robot_model
from homiebot.types import MotionFrame, Pose2D

if TYPE_CHECKING:
    from homiebot.sim.mujoco.physical import GoalEnd

#: The two cameras, in the order a report shows them.
CAMERAS = ("head", "overview")
#: (width, height) of a frame, pixels (at most the simulator's view size).
FRAME_SIZE = (192, 144)
#: Where the overview camera looks, in the base frame (m): ahead of the base at a counter's height, where the
#: hand works.
LOOK_AT = (0.35, 0.0, 0.95)
#: How far the overview camera stands from that point (m) at most, and how far down it looks (degrees).
OVERVIEW_DISTANCE = 1.9
OVERVIEW_ELEVATION = -28.0
#: Where the camera stands around that point, as bearings from the base's heading (degrees), first choice first:
#: behind on the left, behind on the right, either side, straight behind.
BEARINGS = (135.0, -135.0, 100.0, -100.0, 180.0)
#: How far (m) the work area reaches to either side of the look-at point and below it, as the camera sees it.
WORK_AREA = 0.5
#: A sight line to a work-area point that ends this near it (m) reaches it (the point may lie on a surface).
SEEN_TOLERANCE = 0.15
#: Free space kept between the camera and the first wall or furniture behind it (m).
CLEARANCE = 0.15
#: Geom groups a sight line is checked against: the scene's (walls, furniture, objects: group 0), not the ceiling
#: (2), the fingers (1), the robot (3) or the human (4).
_SIGHT_GROUPS = np.array([1, 0, 0, 0, 0, 0], dtype=np.uint8)


def overview_camera(model: mujoco.MjModel, data: mujoco.MjData, base: Pose2D) -> mujoco.MjvCamera:
    """The free camera of the overview frames for the base at ``base`` (module docstring).

    For each of :data:`BEARINGS`, the camera stands :data:`OVERVIEW_DISTANCE` from the look-at point, or nearer
    where a wall or furniture is in the way; it is scored by how many of the work area's points (the look-at point,
    :data:`WORK_AREA` m to either side of it and below it) it sees without anything in between, then by its
    distance. The first placement that sees them all from the full distance is taken, else the best scored."""
    c, s = math.cos(base.yaw), math.sin(base.yaw)
    lx, ly, lz = LOOK_AT
    target = np.array([base.x + c * lx - s * ly, base.y + s * lx + c * ly, lz])
    elevation = math.radians(OVERVIEW_ELEVATION)
    best: tuple[int, float, float] | None = None  # (points seen, distance, bearing)
    geomid = np.zeros(1, dtype=np.int32)
    for bearing in BEARINGS:
        heading = base.yaw + math.radians(bearing)
        # From the point back towards the camera: out along the bearing and up.
        back = np.array([math.cos(heading) * math.cos(elevation), math.sin(heading) * math.cos(elevation),
                         -math.sin(elevation)])
        hit = mujoco.mj_ray(model, data, target, back, _SIGHT_GROUPS, 1, -1, geomid)
        distance = OVERVIEW_DISTANCE if hit < 0 else max(min(OVERVIEW_DISTANCE, hit - CLEARANCE), 0.3)
        eye = target + distance * back
        side = np.array([-math.sin(heading), math.cos(heading), 0.0]) * WORK_AREA
        seen = 0
        for point in (target, target + side, target - side, target - np.array([0.0, 0.0, WORK_AREA])):
            ray = point - eye
            length = float(np.linalg.norm(ray))
            hit = mujoco.mj_ray(model, data, eye, ray / length, _SIGHT_GROUPS, 1, -1, geomid)
            seen += int(hit < 0 or hit > length - SEEN_TOLERANCE)
        score = (seen, distance, bearing)
        if best is None or score[:2] > best[:2]:
            best = score
        if seen == 4 and distance >= OVERVIEW_DISTANCE:
            break
    assert best is not None
    camera = mujoco.MjvCamera()
    camera.type = mujoco.mjtCamera.mjCAMERA_FREE
    camera.lookat[:] = target
    camera.distance = best[1]
    # MuJoCo's free camera looks along its azimuth: the opposite of the bearing it stands at.
    camera.azimuth = math.degrees(base.yaw + math.radians(best[2])) + 180.0
    camera.elevation = OVERVIEW_ELEVATION
    return camera


class MotionViews:
    """Renders the reaching views of one simulator at the physical driver's goal ends (module docstring)."""

    def __init__(self, sim, size: Sequence[int] = FRAME_SIZE) -> None:
        self._sim = sim
        self.size = (int(size[0]), int(size[1]))
        self._frames: list[MotionFrame] = []
        #: Frames rendered and seconds spent rendering them, since the simulator switched the views on.
        self.rendered = 0
        self.render_s = 0.0
        self._last_hand: np.ndarray | None = None  # the grasp point in base_link at the last goal's end

    def goal_ended(self, event: GoalEnd) -> None:
        """A goal of the physical driver ended: render both cameras, unless the moment shows nothing new. An arm
        goal's label says how the hand moved since the goal before (in the base's frame: out or in, left or right,
        up or down), which tells the reach, the approach, the lift and the way back apart."""
        hand = self._hand()
        moved, self._last_hand = (None if hand is None or self._last_hand is None else hand - self._last_hand), hand
        if event.kind == "gripper" and not event.closing and event.released is None:
            return
        label = event.label
        if event.kind == "arm" and moved is not None:
            label = f"{label}, {hand_motion(moved)}"
        self.capture(label)

    def _hand(self) -> np.ndarray | None:
        """The grasp point in ``base_link`` now (None when the model has none)."""
        compiled, data = self._sim.physics_handles()
        return hand_in_base(compiled.model, data, self._sim.base_pose())

    def capture(self, label: str) -> MotionFrame | None:
        """Render both cameras now and keep the frame; None when the simulator does not render."""
        started = time.perf_counter()
        frame = self._sim.motion_frame(label, self.size)
        if frame is None:
            return None
        self._frames.append(frame)
        self.rendered += 1
        self.render_s += time.perf_counter() - started
        return frame

    def take(self) -> list[MotionFrame]:
        """The frames rendered since the last call, oldest first."""
        frames, self._frames = self._frames, []
        return frames


def render_motion_frame(renderer, model: mujoco.MjModel, data: mujoco.MjData, head_camera: int, base: Pose2D,
                        label: str, stamp: float, size: tuple[int, int], has_human: bool) -> MotionFrame:
    """Both cameras of the reaching views (module docstring) with ``renderer``
    (:class:`~homiebot.sim.mujoco.rendering.MultiViewRenderer`) at the data's state now."""
    # The head camera as the planner's views have it (the robot's body hidden, the fingers shown); the overview
    # with the robot's body (and the human's, in a scene with one).
    head_groups = {human_model.ROBOT_GROUP: False, human_model.HUMAN_GROUP: True} if has_human else None
    overview_groups = {human_model.ROBOT_GROUP: True, **({human_model.HUMAN_GROUP: True} if has_human else {})}
    head = mujoco.MjvCamera()
    head.type = mujoco.mjtCamera.mjCAMERA_FIXED
    head.fixedcamid = head_camera
    views = {
        "head": renderer.render_rgb(data, head, "head", size, head_groups),
        "overview": renderer.render_rgb(data, overview_camera(model, data, base), "overview", size, overview_groups),
    }
    return MotionFrame(stamp=stamp, label=f"{label}; {_hand_in_base(model, data, base)}", views=views)


def hand_in_base(model: mujoco.MjModel, data: mujoco.MjData, base: Pose2D) -> np.ndarray | None:
    """The gripper's grasp point in ``base_link`` (x ahead, y left, z up from the floor), m; None without one."""
    site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, robot_model.ROBOT_PREFIX + "grip")
    if site < 0:
        return None
    dx, dy, z = data.site_xpos[site] - np.array([base.x, base.y, 0.0])
    c, s = math.cos(base.yaw), math.sin(base.yaw)
    return np.array([c * dx + s * dy, -s * dx + c * dy, z])


def hand_motion(moved: np.ndarray, least: float = 0.03) -> str:
    """How the hand moved, in words: its two largest moves of at least ``least`` m along the base's axes ("hand
    52 cm out, 40 cm up"), or "hand still"."""
    words = (("out", "in"), ("left", "right"), ("up", "down"))
    parts = sorted(((abs(float(d)), f"{100 * abs(float(d)):.0f} cm {words[i][0] if d > 0 else words[i][1]}")
                    for i, d in enumerate(moved) if abs(float(d)) >= least), reverse=True)
    return "hand " + ", ".join(p for _, p in parts[:2]) if parts else "hand still"


def _hand_in_base(model: mujoco.MjModel, data: mujoco.MjData, base: Pose2D) -> str:
    """Where the grasp point is in ``base_link``, for a label."""
    hand = hand_in_base(model, data, base)
    if hand is None:
        return ""
    return f"hand at x {hand[0]:.2f}, y {hand[1]:.2f}, z {hand[2]:.2f} m in base_link"


__all__ = ["CAMERAS", "FRAME_SIZE", "MotionViews", "overview_camera", "render_motion_frame"]
