"""A learned arm policy's closed loop over a robot's interfaces, judged only from what the robot observes: the loop of
the policy node of the ROS graph (ros2_ws/src/executor_nodes/executor_nodes/policy_node.py; docs/skills.md, "The
policy as its own ROS 2 node"). The in-process slot (:mod:`homiebot.skills.learned_skill`) drives the simulator's
physics directly and judges from it; here the robot is an :class:`ArmStream` (a ROS 2 graph's topics in
:mod:`homiebot.ros.policy_skill`), and nothing of the simulator's is read.

**One period** (1/:data:`FPS` s): the frame the robot gave for the end of the last period (the policy's cameras, the
joints as ``/joint_states`` reports them, the base's pose from odometry), the observation built from it exactly as
``homie data skills`` records one (the images by camera, the :data:`JOINTS` positions, and for a policy that takes it
the target's box in the base's frame, :func:`~homiebot.sim.mujoco.skill_observation.target_state`), the policy's next
action, and that action sent as the ten joints' position targets for one period (the torso's and arm joints' and the
two fingers'); the robot answers with the frame at the period's end.

**When it stops**, from the joints alone (:class:`StreamOutcome`):

* ``lifted``: the fingers have closed on something (their gap wider than ``closed_gap + gripped_gap`` while the
  command asks for a narrower one by more than the gripper's tolerance, and the gap no longer closing: something
  between them stops them, the scripted Pick's test of a grasp, homiebot/skills/physical/manipulation.py, which
  tests a settled gripper) and the tool, by the arm's forward kinematics, has risen ``lift`` since they first did.
  Fingers still on their way to a narrower target are not a grasp: a policy's streamed gap jumps every period, and
  the fingers trail it by about a centimetre a period;
* ``blocked``: a joint farther than the trajectory controller's path tolerance from its commanded target and not
  moving towards it (slower than ``stall_speed``) for ``blocked_after`` seconds of the robot's clock in a row: the
  arm stopped by something. A joint that is far from a target the policy jumped to but still moving is not blocked
  (a streamed target is not an interpolated trajectory, whose path tolerance a JointTrajectoryController checks); what
  the arm touches is not observable, so it is not said;
* ``budget``: the step budget is spent.

What the object is, and whether it is the one asked for, is not the loop's to say: the caller reads it from the world
graph after the arm has been tucked (:class:`homiebot.ros.policy_skill.InterfacePick`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

from homiebot.sim.mujoco import robot as robot_model
from homiebot.sim.mujoco.physical import PhysicsSettings
from homiebot.sim.mujoco.skill_observation import FPS, JOINTS, target_state
from homiebot.skills.learned_skill import ARM_JOINTS, LIFT_M, STEP_BUDGET
from homiebot.skills.physical.manipulation import GRIPPED_GAP
from homiebot.types import Pose2D

#: The fingers, in JOINTS' order (the last two).
FINGERS: tuple[str, ...] = tuple(robot_model.FINGER_JOINTS)
#: A target box in the world frame: (min corner, max corner).
Box = tuple[Sequence[float], Sequence[float]]


@dataclass(frozen=True)
class ArmFrame:
    """What the robot reports at one moment: its clock (s), the policy's camera images (``H x W x 3`` uint8 RGB, by
    camera), the joints' positions by name and the base's pose."""

    stamp: float
    images: Mapping[str, np.ndarray]
    joints: Mapping[str, float]
    base: Pose2D


class ArmStream(Protocol):
    """A robot that takes streamed position targets (:mod:`homiebot.ros.policy_skill` over ROS 2)."""

    def start(self) -> ArmFrame:
        """Begin streaming from where the arm is; the frame now."""
        ...

    def send(self, positions: Mapping[str, float], seconds: float) -> ArmFrame:
        """Hold ``positions`` (:data:`JOINTS`' targets) for ``seconds``; the frame at the end."""
        ...


@dataclass(frozen=True)
class StreamLimits:
    """When the loop stops (module docstring). The defaults are the embedded robot's controller settings
    (:class:`~homiebot.sim.mujoco.physical.PhysicsSettings`) and gripper (closed gap 0)."""

    step_budget: int = STEP_BUDGET
    path_tolerance: float = PhysicsSettings.path_tolerance
    blocked_after: float = PhysicsSettings.path_grace
    gripper_tolerance: float = PhysicsSettings.gripper_tolerance
    closed_gap: float = 0.0
    gripped_gap: float = GRIPPED_GAP
    lift: float = LIFT_M
    stall_speed: float = 0.1  # rad/s (m/s for the torso): a joint slower than this has stopped
    # The gap's speed (m/s) below which the fingers have stopped: the embedded Pick's recordings show under 0.5 mm a
    # period while holding and about 10 mm a period while closing (docs/results/skills.md, homie data skills).
    finger_stall_speed: float = 0.02


@dataclass
class StreamOutcome:
    """How one run of the loop ended (module docstring): ``kind``, the steps taken, the robot's seconds from the first
    frame to the last, the last frame, whether the fingers were closed on something then, how far the tool rose since
    they closed (m), for ``blocked`` which joint by how much, and the wall time spent in the policy and waiting for
    the robot."""

    kind: Literal["lifted", "blocked", "budget"]
    steps: int = 0
    seconds: float = 0.0
    last: ArmFrame | None = None
    grasping: bool = False
    raised: float = 0.0
    detail: str = ""
    policy_seconds: float = 0.0
    robot_seconds: float = 0.0
    commands: list[dict[str, float]] | None = None


def gap(joints: Mapping[str, float]) -> float:
    """The gap between the fingers (m): the sum of their openings."""
    return float(sum(joints[f] for f in FINGERS))


def closed_on_something(joints: Mapping[str, float], before: Mapping[str, float], commanded_gap: float,
                        limits: StreamLimits, period: float) -> bool:
    """The fingers stopped by something between them (module docstring): ``before`` is the frame one ``period``
    earlier."""
    now = gap(joints)
    stopped = abs(now - gap(before)) < limits.finger_stall_speed * period
    return stopped and now > limits.closed_gap + limits.gripped_gap and commanded_gap < now - limits.gripper_tolerance


def observation(frame: ArmFrame, cameras: Sequence[str], target: Box | None) -> tuple[dict[str, np.ndarray], np.ndarray,
                                                                                     np.ndarray | None]:
    """The policy's inputs from a frame, as ``homie data skills`` records them: images, :data:`JOINTS`' positions and,
    with ``target``, its box in the base's frame."""
    missing = [j for j in JOINTS if j not in frame.joints]
    if missing:
        raise KeyError(f"the joint states lack {', '.join(missing)}")
    state = np.array([frame.joints[j] for j in JOINTS], dtype=np.float32)
    env = None if target is None else target_state(*target, frame.base.x, frame.base.y, frame.base.yaw)
    return {c: frame.images[c] for c in cameras}, state, env


def run_policy(policy: Any, stream: ArmStream, cameras: Sequence[str], target: Box | None,
               tool_height: Callable[[Mapping[str, float]], float], limits: StreamLimits | None = None,
               keep_commands: bool = False) -> StreamOutcome:
    """Run ``policy`` (``reset()``, ``act(images, state, env_state)`` as :class:`~homiebot.skills.learned.SkillPolicy`)
    closed-loop on ``stream`` until it stops (module docstring). ``tool_height``: the tool's height (m) at joint
    positions, by the arm's forward kinematics."""
    limits = limits or StreamLimits()
    period = 1.0 / FPS
    policy.reset()
    outcome = StreamOutcome("budget", commands=[] if keep_commands else None)
    started = time.perf_counter()
    frame = stream.start()
    outcome.robot_seconds += time.perf_counter() - started
    first = frame.stamp
    grasp_height: float | None = None
    off_for = 0.0
    before = frame.joints
    for step in range(limits.step_budget):
        t0 = time.perf_counter()
        images, state, env = observation(frame, cameras, target)
        action = np.asarray(policy.act(images, state, env), dtype=float).reshape(-1)
        t1 = time.perf_counter()
        command = {j: float(v) for j, v in zip(JOINTS, action, strict=True)}
        if outcome.commands is not None:
            outcome.commands.append(command)
        frame = stream.send(command, period)
        outcome.policy_seconds += t1 - t0
        outcome.robot_seconds += time.perf_counter() - t1
        outcome.steps, outcome.seconds, outcome.last = step + 1, frame.stamp - first, frame
        outcome.grasping = closed_on_something(frame.joints, before, gap(command), limits, period)
        if outcome.grasping:
            height = tool_height(frame.joints)
            grasp_height = height if grasp_height is None else grasp_height
            outcome.raised = height - grasp_height
            if outcome.raised >= limits.lift:
                outcome.kind = "lifted"
                return outcome
        else:
            grasp_height, outcome.raised = None, 0.0
        errors = {j: abs(frame.joints[j] - command[j]) for j in ARM_JOINTS
                  if abs(frame.joints[j] - before[j]) < limits.stall_speed * period}  # off target and stopped
        before = frame.joints
        worst = max(errors, key=errors.__getitem__, default=None)
        off_for = off_for + period if worst is not None and errors[worst] > limits.path_tolerance else 0.0
        if worst is not None and off_for >= limits.blocked_after - 1e-9:
            outcome.kind = "blocked"
            outcome.detail = f"{worst} was {errors[worst]:.2f} from its target for {off_for:.1f} s"
            return outcome
    return outcome


__all__ = ["ArmFrame", "ArmStream", "StreamLimits", "StreamOutcome", "closed_on_something", "gap", "observation",
           "run_policy"]
