"""A learned Pick in the ROS 2 graph (``homie up sim --skills physical --skill-model RT-1-X=DIR``; docs/skills.md, "The
policy as its own ROS 2 node"): the policy node's robot side and its Pick.

**The streaming interface** (what :class:`TopicArmStream` sends and the sim bridge serves in physical mode):
trajectory_msgs/JointTrajectory on :data:`STREAM_TOPIC`, the topic interface of ros2_control's
JointTrajectoryController (``<controller>/joint_trajectory``: a new trajectory replaces the one in progress; an empty
one stops the arm where it is). Each message names the torso, the seven arm joints and the two fingers and holds one
point at ``time_from_start`` one control period: the policy's action for the period. The fingers ride on the same
message because Fetch's gripper controller (a GripperActionController) has no topic interface, and a GripperCommand goal
beside a topic command would reach the robot in either order; on the sim bridge the two fingers' positions are the
gripper's commanded gap (their sum), moved towards at the gripper's speed as a GripperCommand goal moves it. A point at
time 0 holds the arm where it is and starts the stream (the first frame).

**The policy's cameras** (:data:`SKILL_CAMERA_NAMESPACE`): ``/skill_camera/<camera>/image_raw`` (sensor_msgs/Image,
rgb8, the policy's size) and ``/skill_camera/<camera>/camera_info`` for ``head`` and ``wrist``
(homiebot/sim/mujoco/skill_cameras.py), published by the sim bridge at the end of every streamed period, stamped with
the robot's clock (the simulated time) as ``/joint_states`` is.

**One frame**: the images of every camera the policy takes, stamped at or after the moment asked for, and the joint
states stamped no earlier than them; the base from ``/odom``. On the sim bridge physics moves only inside a period,
so a frame is the state at the period's end; on a robot it is the latest state after the period.

:class:`InterfacePick` is the Pick: the scripted physical skills' refusals, tuck and stance
(:class:`~homiebot.ros.physical_skills.PhysicalSkillRunner` on the standard interfaces), the policy's loop
(:func:`homiebot.skills.learned_stream.run_policy`), then the arm tucked and the outcome read from the world graph.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from nav_msgs.msg import Odometry
from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image, JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from homiebot.ros import convert
from homiebot.ros.calls import SENSOR_QOS, CallTimeout
from homiebot.ros.physical_skills import PhysicalSkillRunner, pick_refusal
from homiebot.sim.mujoco.skill_observation import JOINTS
from homiebot.skills.learned import PolicyInputs, SkillPolicyError
from homiebot.skills.learned_skill import ARM_CAMERAS
from homiebot.skills.learned_stream import ArmFrame, StreamLimits, StreamOutcome, gap, run_policy
from homiebot.types import Pose2D, SkillResult, SkillStatus

#: JointTrajectoryController's topic interface of the arm's controller (module docstring).
STREAM_TOPIC = "/arm_controller/joint_trajectory"
#: Where the policy's cameras are published (module docstring).
SKILL_CAMERA_NAMESPACE = "/skill_camera"
#: Every streamed command counts: reliable, a few kept for a subscriber that is late by a period.
STREAM_QOS = QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)


class StreamError(RuntimeError):
    """The robot's side of the stream does not answer as the policy needs (one line)."""


def image_topic(camera: str, namespace: str = SKILL_CAMERA_NAMESPACE) -> str:
    return f"{namespace}/{camera}/image_raw"


def info_topic(camera: str, namespace: str = SKILL_CAMERA_NAMESPACE) -> str:
    return f"{namespace}/{camera}/camera_info"


def optical_frame(camera: str) -> str:
    """The skill camera's frame name (the wrist camera is a mount of homiebot/sim/mujoco/skill_cameras.py, not a link
    of the robot's URDF: neither frame is on /tf)."""
    return f"skill_{camera}_camera_optical_frame"


def stream_msg(positions: Mapping[str, float], seconds: float) -> JointTrajectory:
    """One streamed command: ``positions`` by joint name, reached at ``seconds`` (module docstring). The header stays
    zero: "start on receipt" to ros2_control."""
    return JointTrajectory(joint_names=list(positions), points=[JointTrajectoryPoint(
        positions=[float(v) for v in positions.values()], time_from_start=convert.duration_msg(seconds))])


def stream_points(msg: JointTrajectory) -> list[tuple[dict[str, float], float]]:
    """A streamed command's points as (positions by joint, seconds to hold them: from the previous point's time to
    this one's). Raises ValueError for names given twice, points of another length, or times that go back."""
    names = list(msg.joint_names)
    if len(set(names)) != len(names):
        raise ValueError(f"joint names given twice: {names}")
    points, before = [], 0.0
    for point in msg.points:
        if len(point.positions) != len(names):
            raise ValueError(f"a point has {len(point.positions)} positions for {len(names)} joints")
        at = convert.time_seconds(point.time_from_start)
        if at < before:
            raise ValueError("the points' times go back")
        points.append(({n: float(v) for n, v in zip(names, point.positions, strict=True)}, at - before))
        before = at
    return points


def camera_msgs(images: Mapping[str, np.ndarray], fovy_deg: float, seconds: float) -> dict[str, tuple[Image, CameraInfo]]:
    """Each skill camera's image and camera info (a pinhole of vertical field of view ``fovy_deg``, square pixels)."""
    out = {}
    for camera, rgb in images.items():
        height, width = rgb.shape[:2]
        focal = (height / 2.0) / math.tan(math.radians(fovy_deg) / 2.0)
        frame = optical_frame(camera)
        info = CameraInfo(header=convert.header(seconds, frame), height=int(height), width=int(width),
                          distortion_model="plumb_bob", d=[0.0] * 5,
                          k=[focal, 0.0, width / 2.0, 0.0, focal, height / 2.0, 0.0, 0.0, 1.0],
                          r=[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
                          p=[focal, 0.0, width / 2.0, 0.0, 0.0, focal, height / 2.0, 0.0, 0.0, 0.0, 1.0, 0.0])
        out[camera] = (convert.image_to_msg(rgb, "rgb8", frame, seconds), info)
    return out


def head_fovy(model: Any) -> float:
    """The skill cameras' vertical field of view (degrees): the head camera's, which the wrist camera shares
    (homiebot/sim/mujoco/skill_cameras.py)."""
    import mujoco

    from homiebot.sim.mujoco import robot as robot_model
    from homiebot.sim.mujoco.skill_cameras import HEAD_VIEW

    camera = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, f"{robot_model.ROBOT_PREFIX}cam_{HEAD_VIEW}")
    return float(model.cam_fovy[camera])


def stream_base_pose(stream: Any) -> Pose2D:
    """The base's pose in a setpoint stream's physics (its planar joints; the simulator's state has it only once the
    stream has ended)."""
    import mujoco

    from homiebot.sim.mujoco import robot as robot_model

    x, y, yaw = (float(stream.data.qpos[stream.model.jnt_qposadr[mujoco.mj_name2id(
        stream.model, mujoco.mjtObj.mjOBJ_JOINT, robot_model.ROBOT_PREFIX + joint)]]) for joint in robot_model.BASE_JOINTS)
    return Pose2D(x, y, yaw)


def gripper_setpoint(driver: Any, stream: Any) -> float:
    """The gripper's commanded gap (m) on the sim bridge's physical driver: the last command's, else where the fingers
    are (a message that names no fingers keeps it)."""
    target = driver._finger_target  # the driver's own setpoint, which the stream moves
    return 2.0 * float(target) if target is not None else float(driver.gap(stream.data))


class TopicArmStream:
    """:class:`~homiebot.skills.learned_stream.ArmStream` over a node's topics (module docstring). Calls block: call
    them from a thread that does not spin the node.

    Args:
        node: the node that owns the subscriptions and the publisher.
        cameras: the cameras the policy takes; ``size``: their side in pixels.
        timeout_s: how long a frame may take to come (the robot has stopped answering: :class:`CallTimeout`).
    """

    def __init__(self, node: Node, cameras: Sequence[str], size: int, *, topic: str = STREAM_TOPIC,
                 camera_namespace: str = SKILL_CAMERA_NAMESPACE, joint_states: str = "/joint_states",
                 odom: str = "/odom", timeout_s: float = 10.0, callback_group: CallbackGroup | None = None) -> None:
        self.cameras = tuple(cameras)
        self.size = size
        self.timeout_s = timeout_s
        self._changed = threading.Condition()
        self._images: dict[str, tuple[float, np.ndarray]] = {}
        self._infos: dict[str, CameraInfo] = {}
        self._joints: tuple[float, dict[str, float]] | None = None
        self._joint_count = 0
        self._base: tuple[float, Pose2D] | None = None
        self._last = 0.0
        #: Commands published and frames received (what the graph test reads).
        self.sent = 0
        self.frames = 0
        group = callback_group
        self._subscriptions = [
            node.create_subscription(JointState, joint_states, self._on_joints, SENSOR_QOS, callback_group=group),
            node.create_subscription(Odometry, odom, self._on_odom, SENSOR_QOS, callback_group=group),
        ]
        for camera in self.cameras:
            on_image = functools.partial(self._on_image, camera)
            on_info = functools.partial(self._on_info, camera)
            self._subscriptions += [
                node.create_subscription(Image, image_topic(camera, camera_namespace), on_image, SENSOR_QOS,
                                         callback_group=group),
                node.create_subscription(CameraInfo, info_topic(camera, camera_namespace), on_info, SENSOR_QOS,
                                         callback_group=group),
            ]
        self._publisher = node.create_publisher(JointTrajectory, topic, STREAM_QOS)
        self.topic = topic

    # ------------------------------------------------------------------ ArmStream

    def start(self) -> ArmFrame:
        with self._changed:
            needed = self._joint_count + 1  # a joint state sent after now: the robot as it stands now
            self._images.clear()
            if not self._changed.wait_for(lambda: self._joint_count >= needed, timeout=self.timeout_s):
                raise CallTimeout(f"no joint states within {self.timeout_s:.1f} s")
            assert self._joints is not None
            now, joints = self._joints
        missing = [j for j in JOINTS if j not in joints]
        if missing:
            raise StreamError(f"the joint states lack {', '.join(missing)}")
        self._publish({j: joints[j] for j in JOINTS}, 0.0)  # hold where it is: the stream starts, no time passes
        return self._frame(now)

    def send(self, positions: Mapping[str, float], seconds: float) -> ArmFrame:
        self._publish(positions, seconds)
        return self._frame(self._last + seconds / 2)  # the period's end (half a period: the stamps' rounding)

    # ------------------------------------------------------------------ internals

    def _publish(self, positions: Mapping[str, float], seconds: float) -> None:
        self._publisher.publish(stream_msg(positions, seconds))
        self.sent += 1

    def _frame(self, after: float) -> ArmFrame:
        """The first frame whose images are stamped at or after ``after`` (module docstring)."""

        def ready() -> bool:
            images = [self._images.get(c) for c in self.cameras]
            if any(i is None or i[0] < after for i in images) or self._joints is None or self._base is None:
                return False
            taken = max(i[0] for i in images if i is not None)
            return self._joints[0] >= taken and self._base[0] >= taken

        with self._changed:
            if not self._changed.wait_for(ready, timeout=self.timeout_s):
                have = {c: round(i[0], 3) for c, i in self._images.items()}
                raise CallTimeout(f"no frame of the cameras {', '.join(self.cameras)} stamped after {after:.3f} s "
                                  f"within {self.timeout_s:.1f} s (images stamped {have or 'none'})")
            images = {c: self._images[c][1] for c in self.cameras}
            stamp = max(self._images[c][0] for c in self.cameras)
            assert self._joints is not None
            assert self._base is not None
            joints, base = dict(self._joints[1]), self._base[1]
        for camera, image in images.items():
            if image.shape != (self.size, self.size, 3):
                raise StreamError(f"the {camera} camera gives {image.shape[1]} x {image.shape[0]} images; the policy "
                                  f"takes {self.size} x {self.size}")
        self._last = stamp
        self.frames += 1
        return ArmFrame(stamp, images, joints, base)

    def _on_joints(self, msg: JointState) -> None:
        joints = {n: float(p) for n, p in zip(msg.name, msg.position, strict=False)}
        with self._changed:
            self._joints = (convert.time_seconds(msg.header.stamp), joints)
            self._joint_count += 1
            self._changed.notify_all()

    def _on_odom(self, msg: Odometry) -> None:
        with self._changed:
            self._base = (convert.time_seconds(msg.header.stamp), convert.pose_to_pose2d(msg.pose.pose))
            self._changed.notify_all()

    def _on_image(self, camera: str, msg: Image) -> None:
        image = np.array(convert.image_from_msg(msg))  # a copy: the message's buffer is not ours to keep
        with self._changed:
            self._images[camera] = (convert.time_seconds(msg.header.stamp), image)
            self._changed.notify_all()

    def _on_info(self, camera: str, msg: CameraInfo) -> None:
        self._infos[camera] = msg


class InterfacePick:
    """One learned Pick of ``slot``'s policy through the standard interfaces (module docstring).

    The outcome is read from what a robot observes: the loop stops on the joints (fingers closed on something and the
    tool raised, a joint off its target, the budget; :mod:`homiebot.skills.learned_stream`); after the arm is tucked,
    the world graph says what the hand holds, and where the target is when it was not taken (knocked out of place, as
    after a scripted Pick). A failure is ``EXECUTION_FAILED`` with what happened: the executor's E1 once its tries are
    spent, as for every failed Pick.
    """

    def __init__(self, slot: str, policy: Any, inputs: PolicyInputs, stream: Any,
                 limits: StreamLimits | None = None) -> None:
        self.slot = slot
        self.policy = policy
        self.inputs = inputs
        self.stream = stream
        self.limits = limits or StreamLimits()
        self.cameras = tuple(c for c in ARM_CAMERAS if c in inputs.images)
        #: The last execution's loop (tests and the log line).
        self.last: StreamOutcome | None = None
        self.executions = 0

    def pick(self, runner: PhysicalSkillRunner, obj: str) -> SkillResult:
        started = time.perf_counter()
        refusal = pick_refusal(runner.world(), obj)
        if refusal is not None:
            return refusal
        tucked = runner.tuck()
        if not tucked.success:
            return SkillResult(tucked.status, f"{tucked.detail} before Pick")
        manipulation = runner.manipulation
        stance = manipulation.pick_stance(runner.world(), obj)
        if isinstance(stance, SkillResult):
            return stance
        before, moved, travelled = stance
        entity = before.entities[obj]
        target = (tuple(entity.bbox_min), tuple(entity.bbox_max)) if self.inputs.env_state_size is not None else None
        kinematics = manipulation.kinematics

        def tool_height(joints: Mapping[str, float]) -> float:
            return float(kinematics.forward([joints.get(j, 0.0) for j in kinematics.joints])[2, 3])

        self.executions += 1
        outcome: StreamOutcome | None = None
        failure: SkillResult | None = None
        try:
            outcome = run_policy(self.policy, self.stream, self.cameras, target, tool_height, self.limits)
        except (CallTimeout, StreamError, SkillPolicyError, KeyError) as err:
            failure = SkillResult(SkillStatus.EXECUTION_FAILED, f"the {self.slot} policy could not run: {err}")
        self.last = outcome
        if outcome is not None:
            failure = self._failure(runner, outcome, obj)
        if failure is not None:  # the fingers opened before the arm folds, as after a failed scripted Pick
            manipulation.driver.gripper_command(manipulation.setup.open_gap, manipulation.setup.max_effort)
        stuck = manipulation.tuck_if_needed(runner.world())
        steps = "" if outcome is None else f"{outcome.steps} policy steps, {outcome.seconds:.1f} s"
        if failure is None:  # lifted: still in the hand after the tuck, as the world graph says
            held = runner.world().held
            if held != obj:
                failure = SkillResult(SkillStatus.EXECUTION_FAILED, (
                    f"grasp missed: the {self.slot} policy took {held} instead of {obj} ({steps})" if held is not None
                    else f"{obj} slipped out of the gripper on the way back ({self.slot} policy, {steps})"))
        if failure is None:
            result = SkillResult(SkillStatus.SUCCESS, f"picked {obj} ({self.slot} policy, {steps}){moved}")
        else:
            result = SkillResult(failure.status, f"{failure.detail}{moved}")
        if stuck is not None:
            result = dataclasses.replace(result, detail=f"{result.detail}; {stuck}")
        result = dataclasses.replace(result, path_length=max(result.path_length, travelled))
        if not result.success:
            result = manipulation._knocked(result, before, obj)
        if outcome is not None:
            self._log = (f"{self.slot} policy: {result.detail} ({outcome.steps} steps, {outcome.seconds:.1f} s of the "
                         f"robot's clock, {time.perf_counter() - started:.1f} s wall, policy {outcome.policy_seconds:.1f} s,"
                         f" waiting for the robot {outcome.robot_seconds:.1f} s)")
        return result

    def _failure(self, runner: PhysicalSkillRunner, outcome: StreamOutcome, obj: str) -> SkillResult | None:
        """What went wrong, or None when the loop ended lifted (judged again after the tuck)."""
        steps = f"{outcome.steps} policy steps, {outcome.seconds:.1f} s"
        failed = SkillStatus.EXECUTION_FAILED
        if outcome.kind == "lifted":
            return None
        if outcome.kind == "blocked":
            return SkillResult(failed, f"the arm stopped while the {self.slot} policy reached for {obj}: "
                                       f"{outcome.detail} ({steps})")
        budget = self.limits.step_budget
        if outcome.grasping:
            held = runner.world().held  # the fingers are still closed on it
            if held == obj:
                return SkillResult(failed, f"timed out: the {self.slot} policy held {obj} but raised it only "
                                           f"{100 * outcome.raised:.0f} cm in its budget of {budget} steps ({steps})")
            if held is not None:
                return SkillResult(failed, f"grasp missed: the {self.slot} policy took {held} instead of {obj} ({steps})")
        if outcome.last is not None and gap(outcome.last.joints) <= self.limits.closed_gap + self.limits.gripped_gap:
            return SkillResult(failed, f"grasp missed: the gripper closed on nothing at {obj} ({self.slot} policy, {steps})")
        return SkillResult(failed, f"timed out: the {self.slot} policy did not grasp {obj} in its budget of {budget} "
                                   f"steps ({steps})")

    def log_line(self) -> str:
        return getattr(self, "_log", "")


__all__ = ["SKILL_CAMERA_NAMESPACE", "STREAM_TOPIC", "InterfacePick", "StreamError", "TopicArmStream", "camera_msgs",
           "image_topic", "info_topic", "stream_msg", "stream_points"]
