"""A learned Go to in the ROS 2 graph (``homie up sim --skills physical --skill-model NoMaD=DIR``; docs/skills.md, "A
Go to policy in the graph"): the policy node's base side and its Go to.

**The base's interface** (what :class:`TopicBaseStream` sends and the sim bridge serves in physical mode):
geometry_msgs/Twist on :data:`CMD_VEL` (``linear.x`` m/s, ``angular.z`` rad/s: a planar base's velocity command, what
Nav2's controller server or a teleop node sends to a base controller), one message per control period (1/10 s: the
policy's action for that period). The base reports its pose on ``/odom`` (nav_msgs/Odometry) and the policy's camera on
``/skill_camera/head/image_raw`` (sensor_msgs/Image, rgb8, the policy's size; ``.../camera_info`` beside it): the head
camera, stamped with the robot's clock. A base stopped by its collision monitor says nothing on ``/cmd_vel``; the
loop reads it from odometry (:func:`homiebot.skills.learned_goto.stopped_short`).

**The goal photo.** An image-goal policy (NoMaD's, PixNav's) is given a picture of where to go; in the simulator it is
the head camera rendered with the base at the goal pose, as the recorder renders it. The policy node asks for it by
publishing the goal pose (geometry_msgs/PoseStamped, ``map`` frame) on :data:`GOAL_REQUEST_TOPIC`; the sim bridge
answers on ``/skill_camera/goal/image_raw`` (and ``camera_info``), the image stamped with the request's stamp, and
then publishes the head camera and ``/odom`` as they are now: the run's first frame. The request is thus also the
start of a run (as the time-0 point starts an arm stream, :mod:`homiebot.ros.policy_skill`). On a robot, the goal
photo comes with the task (NoMaD's topological map holds its images); whatever serves it answers the same request.

**The run's end**: however a run ends (arrived, blocked, held still, budget spent, its goal cancelled, the policy or
the robot failing), :meth:`TopicBaseStream.stop` sends one zero Twist on :data:`CMD_VEL`
(:func:`homiebot.skills.learned_goto.run_base_policy`'s ``finally``), as Nav2's controller server and teleop nodes
do when their goal ends: a base controller holds a twist until the next one or its own timeout. The sim bridge
takes a zero twist as the end of the run and spends no simulated time on it, so a policy whose action is exactly
zero mid-run is not served there (the frame it waits for never comes: a precise :class:`CallTimeout`); a robot
holds such a twist for the period as any other.

**One frame**: the head camera stamped at or after the moment asked for, and the pose from ``/odom`` stamped no
earlier. On the sim bridge a Twist moves the base by exactly one period and no more (the simulated clock stands still
between commands), so a frame is the state at the period's end; on a robot it is the latest state after the period.

:class:`InterfaceGoTo` is the Go to: the scripted Go to's refusals and the arm's tuck
(:class:`~homiebot.ros.physical_skills.PhysicalSkillRunner` on the standard interfaces), the goal pose from the world
graph (:func:`homiebot.skills.learned_goto.goal_pose`; no ComputePathToPose here, so the first free pose), the
policy's loop (:func:`homiebot.skills.learned_goto.run_base_policy`) and its result (the in-process slot's messages,
:func:`homiebot.skills.learned_goto.go_to_result`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry
from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import Image

from homiebot.ros import convert
from homiebot.ros.calls import LATCHED_QOS, SENSOR_QOS, CallTimeout
from homiebot.ros.physical_skills import PhysicalSkillRunner
from homiebot.ros.policy_skill import SKILL_CAMERA_NAMESPACE, STREAM_QOS, StreamError, image_topic
from homiebot.skills.learned import PolicyInputs, SkillPolicyError
from homiebot.skills.learned_goto import (
    BaseFrame,
    BaseLimits,
    BaseOutcome,
    go_to_refusal,
    go_to_result,
    goal_pose,
    run_base_policy,
)
from homiebot.types import Pose2D, SkillResult, SkillStatus

#: The base controller's velocity command (module docstring).
CMD_VEL = "/cmd_vel"
#: Where the goal photo is asked for (module docstring).
GOAL_REQUEST_TOPIC = f"{SKILL_CAMERA_NAMESPACE}/goal/pose"
#: The goal photo's camera name (its topics ``/skill_camera/goal/...``).
GOAL_CAMERA = "goal"


def twist_msg(linear_x: float, angular_z: float) -> Twist:
    msg = Twist()
    msg.linear.x = float(linear_x)
    msg.angular.z = float(angular_z)
    return msg


def goal_request_msg(goal: Pose2D, stamp: Any) -> PoseStamped:
    """The goal photo's request: ``goal`` in the map frame, stamped ``stamp`` (a builtin_interfaces/Time that names
    the request: the answer carries it)."""
    msg = PoseStamped(pose=convert.pose2d_to_pose(goal))
    msg.header.frame_id = convert.MAP_FRAME
    msg.header.stamp = stamp
    return msg


def _stamp_key(stamp: Any) -> tuple[int, int]:
    return int(stamp.sec), int(stamp.nanosec)


class TopicBaseStream:
    """:class:`~homiebot.skills.learned_goto.BaseStream` over a node's topics (module docstring). Calls block: call
    them from a thread that does not spin the node.

    Args:
        node: the node that owns the subscriptions and the publishers.
        cameras: the cameras the policy takes (``head``, ``goal``); ``size``: their side in pixels.
        timeout_s: how long a frame or the goal photo may take to come (the robot has stopped answering:
            :class:`CallTimeout`).
    """

    def __init__(self, node: Node, cameras: Sequence[str], size: int, *, cmd_vel: str = CMD_VEL,
                 camera_namespace: str = SKILL_CAMERA_NAMESPACE, odom: str = "/odom", timeout_s: float = 10.0,
                 callback_group: CallbackGroup | None = None) -> None:
        self.node = node
        self.cameras = tuple(cameras)
        self.size = size
        self.timeout_s = timeout_s
        self._changed = threading.Condition()
        self._head: tuple[float, np.ndarray] | None = None
        self._goal: dict[tuple[int, int], np.ndarray] = {}
        self._base: tuple[float, Pose2D] | None = None
        self._odom_count = 0
        self._last = 0.0
        #: Commands published, zero twists that ended runs, and frames received (what the graph test reads).
        self.sent = 0
        self.stops = 0
        self.frames = 0
        group = callback_group
        self._subscriptions = [
            node.create_subscription(Odometry, odom, self._on_odom, SENSOR_QOS, callback_group=group),
            node.create_subscription(Image, image_topic(GOAL_CAMERA, camera_namespace), self._on_goal, SENSOR_QOS,
                                     callback_group=group),
        ]
        if "head" in self.cameras:
            self._subscriptions.append(node.create_subscription(
                Image, image_topic("head", camera_namespace), self._on_head, SENSOR_QOS, callback_group=group))
        self._publisher = node.create_publisher(Twist, cmd_vel, STREAM_QOS)
        self._request = node.create_publisher(PoseStamped, f"{camera_namespace}/{GOAL_CAMERA}/pose", LATCHED_QOS)
        self.topic = cmd_vel

    # ------------------------------------------------------------------ BaseStream

    def start(self, goal: Pose2D) -> tuple[np.ndarray | None, BaseFrame]:
        stamp = self.node.get_clock().now().to_msg()
        key = _stamp_key(stamp)
        with self._changed:
            self._head = None  # the run's first frame is the one sent after the goal photo
            self._goal.clear()
        self._request.publish(goal_request_msg(goal, stamp))
        with self._changed:
            if not self._changed.wait_for(lambda: key in self._goal, timeout=self.timeout_s):
                raise CallTimeout(f"no goal photo on {image_topic(GOAL_CAMERA)} within {self.timeout_s:.1f} s of the "
                                  f"request on {GOAL_REQUEST_TOPIC}")
            goal_image = self._goal.pop(key)
            needed = self._odom_count + 1  # the base as it stands now
            if not self._changed.wait_for(lambda: self._odom_count >= needed, timeout=self.timeout_s):
                raise CallTimeout(f"no odometry within {self.timeout_s:.1f} s")
            assert self._base is not None
            now = self._base[0]
        self._check(GOAL_CAMERA, goal_image)
        return (goal_image if GOAL_CAMERA in self.cameras else None), self._frame(now)

    def send(self, linear_x: float, angular_z: float, seconds: float) -> BaseFrame:
        self._publisher.publish(twist_msg(linear_x, angular_z))
        self.sent += 1
        try:
            return self._frame(self._last + seconds / 2)  # the period's end (half a period: the stamps' rounding)
        except CallTimeout as err:
            if linear_x == 0.0 and angular_z == 0.0:  # the one command the sim bridge answers without a period
                raise CallTimeout(f"{err}; the policy sent an exact zero twist, which the sim bridge takes as the end "
                                  f"of the run (its clock does not advance)") from None
            raise

    def stop(self) -> None:
        """The run's end (module docstring, "The run's end"): one zero twist; no frame is waited for."""
        self._publisher.publish(twist_msg(0.0, 0.0))
        self.stops += 1

    # ------------------------------------------------------------------ internals

    def _frame(self, after: float) -> BaseFrame:
        """The first frame whose head image (or, without one, whose pose) is stamped at or after ``after``."""
        head = "head" in self.cameras

        def ready() -> bool:
            if self._base is None:
                return False
            if not head:
                return self._base[0] >= after
            return self._head is not None and self._head[0] >= after and self._base[0] >= self._head[0]

        with self._changed:
            if not self._changed.wait_for(ready, timeout=self.timeout_s):
                seen = "none" if self._head is None else f"{self._head[0]:.3f}"
                raise CallTimeout(f"no frame stamped after {after:.3f} s within {self.timeout_s:.1f} s (head image "
                                  f"stamped {seen})")
            assert self._base is not None
            images = {"head": self._head[1]} if head and self._head is not None else {}
            stamp = self._head[0] if head and self._head is not None else self._base[0]
            pose = self._base[1]
        for camera, image in images.items():
            self._check(camera, image)
        self._last = stamp
        self.frames += 1
        return BaseFrame(stamp, images, pose)

    def _check(self, camera: str, image: np.ndarray) -> None:
        if image.shape != (self.size, self.size, 3):
            raise StreamError(f"the {camera} camera gives {image.shape[1]} x {image.shape[0]} images; the policy "
                              f"takes {self.size} x {self.size}")

    def _on_odom(self, msg: Odometry) -> None:
        with self._changed:
            self._base = (convert.time_seconds(msg.header.stamp), convert.pose_to_pose2d(msg.pose.pose))
            self._odom_count += 1
            self._changed.notify_all()

    def _on_head(self, msg: Image) -> None:
        image = np.array(convert.image_from_msg(msg))  # a copy: the message's buffer is not ours to keep
        with self._changed:
            self._head = (convert.time_seconds(msg.header.stamp), image)
            self._changed.notify_all()

    def _on_goal(self, msg: Image) -> None:
        image = np.array(convert.image_from_msg(msg))
        with self._changed:
            self._goal[_stamp_key(msg.header.stamp)] = image
            self._changed.notify_all()


class InterfaceGoTo:
    """One learned Go to of ``slot``'s policy through the standard interfaces (module docstring). The outcome is read
    from what the robot reports (odometry), and the messages are the in-process slot's; a failure is
    ``EXECUTION_FAILED``, the executor's E1 once its tries are spent, as for every Go to that did not arrive."""

    def __init__(self, slot: str, policy: Any, inputs: PolicyInputs, stream: Any, limits: BaseLimits | None = None) -> None:
        self.slot = slot
        self.policy = policy
        self.inputs = inputs
        self.stream = stream
        self.limits = limits or BaseLimits()
        self.cameras = tuple(c for c in ("head", GOAL_CAMERA) if c in inputs.images)
        #: The last execution's loop and goal pose (tests and the log line).
        self.last: BaseOutcome | None = None
        self.goal: Pose2D | None = None
        self.executions = 0
        self._log = ""

    def go_to(self, runner: PhysicalSkillRunner, target: str, cancelled: Callable[[], bool] | None = None) -> SkillResult:
        """One Go to ``target``; ``cancelled``, asked before every policy step: its goal was cancelled (the run ends,
        the base stopped)."""
        started = time.perf_counter()
        self.last, self.goal, self._log = None, None, ""
        refused = go_to_refusal(runner.world(), target)
        if refused is not None:
            return refused
        tucked = runner.tuck()
        if not tucked.success:
            return SkillResult(tucked.status, f"{tucked.detail} before Go to")
        world = runner.world()
        goal = goal_pose(world, target)
        if isinstance(goal, SkillResult):
            return goal
        self.goal = goal
        self.executions += 1
        try:
            outcome = run_base_policy(self.policy, self.stream, self.cameras, goal, self.inputs.state_size is not None,
                                      self.limits, cancelled)
        except (CallTimeout, StreamError, SkillPolicyError, KeyError) as err:
            return SkillResult(SkillStatus.EXECUTION_FAILED, f"the {self.slot} policy could not run: {err}")
        self.last = outcome
        assert outcome.end is not None
        result = go_to_result(self.slot, world, target, goal, outcome.kind, outcome.end, outcome.steps, outcome.seconds,
                              outcome.travelled, self.limits.step_budget)
        self._log = (f"{self.slot} policy: {result.detail} ({outcome.steps} steps, {outcome.seconds:.1f} s of the "
                     f"robot's clock, {time.perf_counter() - started:.1f} s wall, policy {outcome.policy_seconds:.1f} s, "
                     f"waiting for the robot {outcome.robot_seconds:.1f} s)")
        return result

    def log_line(self) -> str:
        return self._log


__all__ = ["CMD_VEL", "GOAL_CAMERA", "GOAL_REQUEST_TOPIC", "InterfaceGoTo", "TopicBaseStream", "goal_request_msg",
           "twist_msg"]
