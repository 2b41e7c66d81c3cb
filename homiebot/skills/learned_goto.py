"""A learned Go to in a navigation slot (``--skill-model NoMaD=DIR`` or ``PixNav=DIR``; docs/skills.md).

EMMOE's planner names a navigation model with every Go to (``Model: NoMaD``). With ``--skills physical`` the scripted
Go to sends NavigateToPose goals (:mod:`homiebot.skills.physical.navigation`); a LeRobot policy in a navigation slot
drives the base itself instead, closed-loop, with velocity commands, as the image-goal navigation policies of those
slots do: NoMaD (Sridhar et al. 2023, "NoMaD: Goal Masked Diffusion Policies for Navigation and Exploration") and
PixNav (Cai et al. 2023, "Bridging Zero-shot Object Navigation and Foundation Models through Pixel-Guided Navigation
Skill") map the robot's camera image and a goal to the base's motion. The policy is one trained on ``homie data skills
--skill go_to`` (docs/skill-data.md), or a user's LeRobot checkpoint with the same inputs and outputs:

* inputs: ``observation.images.head`` (the head camera where the base is) and/or ``observation.images.goal`` (the head
  camera with the base at the goal pose), square RGB of one size, and optionally ``observation.state``, the goal pose
  in the base's frame (``goal_x``, ``goal_y``, ``goal_yaw``);
* output: ``action``, the base's velocity (``linear_x`` m/s, ``angular_z`` rad/s) for the next 1/:data:`FPS` s.

**One execution** (:meth:`LearnedGoTo.go_to`), after the skill set's own checks (the arm tucked, as before a scripted
Go to):

* the scripted Go to's refusals (a target not in the world graph; an object already held or a room the robot is in
  is success at once, as there);
* the goal pose is the scripted Go to's: the first of its poses (``approach_poses`` with the physical skills' gaps,
  at most as many as it sends) to which the planner finds a path (Nav2's ComputePathToPose: nothing moves), the pose
  the recorded demonstrations drove to. No pose with a path is ``NO_PATH``, as for the scripted skill;
* the goal image is the head camera rendered with the base at that pose (the simulator stands in for the goal photo
  an image-goal task gives; the recorder renders it the same way);
* every 1/FPS s of simulated time: the observation as the recorder wrote it
  (:func:`~homiebot.sim.mujoco.skill_observation.head_at`, :func:`~homiebot.sim.mujoco.skill_observation.goal_in_base`),
  the policy's next action, and that action held for one period as a ``/cmd_vel`` twist
  (:meth:`~homiebot.sim.robot_driver.SupportsBaseVelocity.base_velocity`: clamped to the base's speeds, stopped before a
  contact as a collision monitor stops a base).

**Outcome, from where the base is, never from the policy.** Success: the base within :data:`XY_TOLERANCE` of the goal
pose's position and :data:`YAW_TOLERANCE` of its heading, the defaults of Nav2's goal checker (``SimpleGoalChecker``:
``xy_goal_tolerance`` and ``yaw_goal_tolerance`` 0.25; the scripted Go to's NavigateToPose ends on the goal exactly
here, and on a real robot ends within these); the policy is stopped there. The failures are the scripted Go to's for a
base that did not arrive, ``EXECUTION_FAILED`` (EMMOE E1 once the executor's tries are spent): the base held before a
contact for :data:`BLOCKED_STEPS` commands in a row (what it would have touched, where, how far from the goal; a
command stopped short once is only cut, and the next may turn away), the policy holding the base still for
:data:`STILL_STEPS` steps short of the goal, or the step budget spent (how far from the goal it ended).

**Ending at rest.** A base controller holds the last ``/cmd_vel`` twist until the next one or its own timeout, so a
run over a robot's interfaces (:func:`run_base_policy`, the graph's policy node) ends, however it ends, with one zero
twist (:meth:`BaseStream.stop`), as Nav2's controller server and teleop nodes stop a base when their goal ends. The
embedded base here holds nothing: each command moves it for one period and no further
(:meth:`~homiebot.sim.robot_driver.SupportsBaseVelocity.base_velocity`), so :meth:`LearnedGoTo.go_to` ends at rest
without one, and neither wiring spends simulated time on the stop (the sim bridge takes the zero twist as the end of
the run: ros2_ws/src/sim_bridge/sim_bridge/node.py, "Base velocity").
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from homiebot.sim.mujoco.backend import DRIVE_SPEED, TURN_SPEED
from homiebot.sim.mujoco.skill_observation import FPS, GO_TO_CAMERAS, base_qpos, goal_in_base, head_at
from homiebot.sim.robot_driver import NavigateResult
from homiebot.skills.learned import SkillPolicyError
from homiebot.skills.learned_skill import ExecutionLog, slot_name, slot_policy
from homiebot.types import Action, EntityKind, Pose2D, SkillResult, SkillStatus, WorldState

if TYPE_CHECKING:
    from homiebot.skills.physical.skillset import PhysicalSkillSet

logger = logging.getLogger(__name__)

#: The action a base policy runs.
GO_TO_ACTIONS = frozenset({Action.GO_TO})
#: Control steps one execution may take (60 s of simulated time; docs/results/skills.md gives the recorded lengths).
GO_TO_STEP_BUDGET = 600
#: How near the goal pose the base must come (m, rad): Nav2's SimpleGoalChecker defaults (module docstring).
XY_TOLERANCE = 0.25
YAW_TOLERANCE = 0.25
#: A command slower than this (m/s and rad/s) holds the base still; this many such commands in a row short of the
#: goal end the execution (the policy has stopped where it thinks the goal is: 1 s).
STILL_SPEED = 0.01
STILL_STEPS = 10
#: Commands in a row that the collision check stopped short (the base held before a contact) after which the base
#: counts as blocked (1 s): a base stopped by its collision monitor may still turn away, as the arm stopped by a
#: contact has its trajectory controller's grace time (learned_skill.py); Nav2's progress checker likewise fails a
#: goal only after a time without progress.
BLOCKED_STEPS = 10


def reached(pose: Pose2D, goal: Pose2D) -> bool:
    """Whether ``pose`` is within the goal checker's tolerances of ``goal`` (module docstring)."""
    return (math.hypot(goal.x - pose.x, goal.y - pose.y) <= XY_TOLERANCE
            and abs(math.remainder(goal.yaw - pose.yaw, 2 * math.pi)) <= YAW_TOLERANCE)


def go_to_refusal(world: WorldState, target: str) -> SkillResult | None:
    """The scripted Go to's answers before the base moves (module docstring): a target not in the world graph
    (``NOT_FOUND``), an object already held or a room the robot is in (success at once); None: drive."""
    entity = world.entities.get(target)
    if entity is None:
        return SkillResult(SkillStatus.NOT_FOUND, f"{target} is not in the world graph")
    if entity.kind is EntityKind.OBJECT and world.held == target:
        return SkillResult(SkillStatus.SUCCESS, f"already holding {target}")
    if entity.kind is EntityKind.ROOM and world.robot_room == target:
        return SkillResult(SkillStatus.SUCCESS, f"already in {target}")
    return None


def goal_pose(world: WorldState, target: str,
              plan: Callable[[Pose2D], NavigateResult] | None = None) -> Pose2D | SkillResult:
    """The pose a learned Go to drives to (module docstring): the first of the scripted Go to's poses near ``target``
    (at most as many as it sends) to which ``plan`` (Nav2's ComputePathToPose: nothing moves) finds a path, or the
    NO_PATH result. Without ``plan`` (a robot that serves no ComputePathToPose: the ROS graph here) the first pose, which
    the world graph says is free; the base then finds out on the way whether it can get there."""
    from homiebot.sim.robot_driver import NavErrorCode
    from homiebot.skills.physical import navigation
    from homiebot.skills.physical.skillset import MANIPULATION_GAPS, MAX_GOALS

    poses = navigation.approach_poses(world, target, object_gaps=MANIPULATION_GAPS)
    if not poses:
        return SkillResult(SkillStatus.NO_PATH, f"no free pose near {target} in the world graph: every pose around "
                                                f"it overlaps furniture or a wall")
    if plan is None:
        return poses[0]
    failures = []
    for pose in poses[:MAX_GOALS]:
        planned = plan(pose)
        if planned.succeeded:
            return pose
        failures.append(planned)
        if planned.error_code not in (NavErrorCode.GOAL_OCCUPIED, NavErrorCode.NO_VALID_PATH,
                                      NavErrorCode.PLAN_TIMEOUT):
            return SkillResult(SkillStatus.NO_PATH, f"the base could not reach a pose near {target}: "
                                                    f"{navigation._code_words(planned.error_code)}: {planned.error_msg}")
    return SkillResult(SkillStatus.NO_PATH, f"no collision-free path to a pose near {target}: "
                                            f"{navigation._summary(failures)} (last: {failures[-1].error_msg})")


def go_to_result(slot: str, world: WorldState, target: str, goal: Pose2D, outcome: str, end: Pose2D, steps: int,
                 sim_seconds: float, travelled: float, step_budget: int, blocker: str | None = None) -> SkillResult:
    """One learned Go to's result from how its loop ended (``outcome``: ``""`` reached, ``blocked``, ``still``,
    ``budget`` or ``cancelled``, its goal cancelled over ROS) and where the base ended (module docstring). ``blocker``: what the base would have touched, where the
    robot says it (the embedded simulator's collision check); a robot that only reports its pose does not."""
    off = math.hypot(goal.x - end.x, goal.y - end.y)
    turn = abs(math.remainder(goal.yaw - end.yaw, 2 * math.pi))
    taken = f"{steps} policy steps, {sim_seconds:.1f} s"
    where = f"({goal.x:.2f}, {goal.y:.2f})"
    failed = SkillStatus.EXECUTION_FAILED
    if not outcome:
        entity = world.entities[target]
        if entity.kind is EntityKind.ROOM:
            return SkillResult(SkillStatus.SUCCESS, f"reached {target} ({slot} policy, {taken})", travelled)
        from dataclasses import replace

        reach = replace(world, robot=end).reach_distance(target)
        return SkillResult(SkillStatus.SUCCESS, f"reached {target} ({reach:.2f} m away; {slot} policy, {taken})",
                           travelled)
    if outcome == "blocked":
        into = f"into {blocker}" if blocker else "against something that stopped it short"
        return SkillResult(failed, f"the base could not reach a pose near {target}: the {slot} policy drove it {into} "
                                   f"at ({end.x:.2f}, {end.y:.2f}), {off:.2f} m short of goal {where} ({taken})",
                           travelled)
    if outcome == "cancelled":
        return SkillResult(failed, f"cancelled: the {slot} policy's Go to {target} was stopped {off:.2f} m and "
                                   f"{turn:.2f} rad from goal {where} ({taken})", travelled)
    if outcome == "still":
        return SkillResult(failed, f"the {slot} policy stopped the base {off:.2f} m and {turn:.2f} rad from the pose "
                                   f"near {target} (goal {where}; within {XY_TOLERANCE} m and {YAW_TOLERANCE} rad is "
                                   f"arrived) ({taken})", travelled)
    return SkillResult(failed, f"timed out: the {slot} policy did not bring the base to the pose near {target} in its "
                               f"budget of {step_budget} steps: it ended {off:.2f} m and {turn:.2f} rad from goal "
                               f"{where} ({taken})", travelled)


# ------------------------------------------------------------------------------------ over a robot's interfaces


@dataclass(frozen=True)
class BaseFrame:
    """What the robot reports at one moment, for a base policy: its clock (s), the policy's camera images (``H x W x
    3`` uint8 RGB: ``head``) and the base's pose (odometry)."""

    stamp: float
    images: Mapping[str, np.ndarray]
    pose: Pose2D


class BaseStream(Protocol):
    """A base that takes velocity commands (``/cmd_vel``) and reports its camera and pose after each
    (:mod:`homiebot.ros.policy_goto` over ROS 2)."""

    def start(self, goal: Pose2D) -> tuple[np.ndarray | None, BaseFrame]:
        """Begin a run to ``goal``: the goal image (None when the policy takes none) and the frame now."""
        ...

    def send(self, linear_x: float, angular_z: float, seconds: float) -> BaseFrame:
        """Hold the twist for ``seconds``; the frame at the end."""
        ...

    def stop(self) -> None:
        """End the run with the base at rest: one zero twist, as Nav2's controller server and teleop nodes send one
        when a goal ends (a base controller otherwise holds the last twist until its own timeout). Waits for
        nothing."""
        ...


@dataclass(frozen=True)
class BaseLimits:
    """When a base policy's loop over a robot's interfaces stops (:func:`run_base_policy`), and the base's speed
    limits (the embedded base's: the path follower's), which say how far a command should have taken it."""

    step_budget: int = GO_TO_STEP_BUDGET
    blocked_steps: int = BLOCKED_STEPS
    still_steps: int = STILL_STEPS
    still_speed: float = STILL_SPEED
    max_linear: float = DRIVE_SPEED
    max_angular: float = TURN_SPEED
    #: A command counts as stopped short when the base covered less than this share of the distance or the turn it
    #: asked for (the embedded collision check stops a base after at most half of a period's motion).
    short_share: float = 0.9
    #: Motion below this (m, rad) is not checked (a near-zero command).
    least_motion: float = 1e-4


@dataclass
class BaseOutcome:
    """How one run of :func:`run_base_policy` ended: ``kind`` (``""`` reached, ``blocked``, ``still``, ``budget``,
    ``cancelled``),
    the steps, the robot's seconds from the first frame to the last, where the base ended, how far it drove (m, along
    the reported poses), and the wall time spent in the policy and waiting for the robot."""

    kind: str = "budget"
    steps: int = 0
    seconds: float = 0.0
    end: Pose2D | None = None
    travelled: float = 0.0
    policy_seconds: float = 0.0
    robot_seconds: float = 0.0
    commands: list[tuple[float, float]] = field(default_factory=list)


def stopped_short(linear_x: float, angular_z: float, seconds: float, before: Pose2D, after: Pose2D,
                  limits: BaseLimits | None = None) -> bool:
    """Whether a command held for ``seconds`` left the base short of where it should have taken it, from the poses
    before and after (what odometry reports: a robot's collision monitor or bumper stops the base and says nothing on
    ``/cmd_vel``). The command is clamped to the base's speeds; the straight line it should have covered is the chord
    of its arc."""
    limits = limits or BaseLimits()
    v = min(abs(linear_x), limits.max_linear)
    w = min(abs(angular_z), limits.max_angular)
    half_turn = w * seconds / 2
    chord = v * seconds * (math.sin(half_turn) / half_turn if half_turn > 1e-9 else 1.0)
    turn = w * seconds
    moved = math.hypot(after.x - before.x, after.y - before.y)
    turned = abs(math.remainder(after.yaw - before.yaw, 2 * math.pi))
    return ((chord > limits.least_motion and moved < limits.short_share * chord)
            or (turn > limits.least_motion and turned < limits.short_share * turn))


def run_base_policy(policy: Any, stream: BaseStream, cameras: Sequence[str], goal: Pose2D, takes_state: bool,
                    limits: BaseLimits | None = None, cancelled: Callable[[], bool] | None = None) -> BaseOutcome:
    """Run ``policy`` (``reset()``, ``act(images, state)`` as :class:`~homiebot.skills.learned.SkillPolicy`) closed-loop
    on ``stream`` towards ``goal`` until it stops, step for step as :meth:`LearnedGoTo.go_to` runs on the simulator
    (the same observation, tolerances and stopping rules), judged from the frames alone: a command
    :func:`stopped_short` counts towards ``blocked``. ``cancelled``, asked before every step: the run's goal was
    cancelled (``kind`` ``cancelled``).

    However the run ends (arrived, blocked, held still, budget spent, cancelled, or an exception from the policy or the
    robot), it ends with exactly one :meth:`BaseStream.stop`: the base is left at rest, never on the policy's last
    twist."""
    limits = limits or BaseLimits()
    policy.reset()
    outcome = BaseOutcome()
    try:
        _drive(policy, stream, cameras, goal, takes_state, limits, cancelled, outcome)
    finally:
        try:
            stream.stop()
        except Exception:  # noqa: BLE001 - a stop that cannot go out must not hide how the run ended; said loudly
            logger.exception("the base could not be told to stop at the end of the Go to policy's run")
    return outcome


def _drive(policy: Any, stream: BaseStream, cameras: Sequence[str], goal: Pose2D, takes_state: bool,
           limits: BaseLimits, cancelled: Callable[[], bool] | None, outcome: BaseOutcome) -> None:
    """:func:`run_base_policy`'s loop, filling ``outcome``."""
    period = 1.0 / FPS
    started = time.perf_counter()
    goal_image, frame = stream.start(goal)
    outcome.robot_seconds += time.perf_counter() - started
    first = frame.stamp
    still = blocked = 0
    outcome.end = frame.pose
    for step in range(limits.step_budget):
        if reached(frame.pose, goal):
            outcome.kind = ""
            break
        if cancelled is not None and cancelled():
            outcome.kind = "cancelled"
            break
        t0 = time.perf_counter()
        images = {"goal": goal_image} if goal_image is not None and "goal" in cameras else {}
        if "head" in cameras:
            images["head"] = frame.images["head"]
        state = np.array(goal_in_base(frame.pose, goal), dtype=np.float32) if takes_state else None
        action = np.asarray(policy.act(images, state), dtype=float).reshape(-1)
        linear, angular = float(action[0]), float(action[1])
        outcome.commands.append((linear, angular))
        t1 = time.perf_counter()
        before = frame.pose
        frame = stream.send(linear, angular, period)
        outcome.policy_seconds += t1 - t0
        outcome.robot_seconds += time.perf_counter() - t1
        outcome.steps, outcome.seconds = step + 1, frame.stamp - first
        outcome.end = frame.pose
        outcome.travelled += math.hypot(frame.pose.x - before.x, frame.pose.y - before.y)
        blocked = blocked + 1 if stopped_short(linear, angular, period, before, frame.pose, limits) else 0
        if blocked >= limits.blocked_steps:
            outcome.kind = "blocked"
            break
        still = still + 1 if abs(linear) < limits.still_speed and abs(angular) < limits.still_speed else 0
        if still >= limits.still_steps:
            outcome.kind = "still"
            break
    else:
        if reached(frame.pose, goal):
            outcome.kind = ""


class LearnedGoTo:
    """A base policy serving Go to in one navigation slot (module docstring). One instance per run: the policy is
    loaded once, the camera made again for each new scene's model."""

    def __init__(self, slot: str, folder: str | Path | None, *, step_budget: int = GO_TO_STEP_BUDGET, threads: int = 1,
                 policy: Any = None) -> None:
        self.slot = slot_name(slot)
        self.inputs, self.policy = slot_policy(self.slot, folder, threads=threads, policy=policy)
        self.step_budget = step_budget
        self.size = next(iter(self.inputs.images.values()))[1]
        self.cameras = tuple(c for c in GO_TO_CAMERAS if c in self.inputs.images)
        self._model: Any = None
        self._cameras: Any = None
        #: The last execution's log, and the goal pose it drove to.
        self.last: ExecutionLog | None = None
        self.goal: Pose2D | None = None

    @property
    def actions(self) -> frozenset[Action]:
        return GO_TO_ACTIONS

    def close(self) -> None:
        if self._cameras is not None:
            self._cameras.close()
            self._cameras = None
            self._model = None

    def _camera_of(self, model: Any) -> Any:
        from homiebot.sim.mujoco.skill_cameras import SkillCameras

        if model is not self._model or self._cameras is None:
            self.close()
            self._cameras = SkillCameras(model, self.size)
            self._model = model
        return self._cameras

    def run(self, skills: PhysicalSkillSet, action: Action, target: str) -> SkillResult:
        assert action is Action.GO_TO, action
        return self.go_to(skills, target)

    def goal_pose(self, skills: PhysicalSkillSet, world: WorldState, target: str) -> Pose2D | SkillResult:
        """The pose the scripted Go to would drive to (module docstring), or its NO_PATH result."""
        return goal_pose(world, target, skills.driver.compute_path_to_pose)

    def go_to(self, skills: PhysicalSkillSet, target: str) -> SkillResult:
        """One learned Go to ``target`` on the skill set's robot (module docstring)."""
        import mujoco

        log = ExecutionLog()
        self.last, self.goal = log, None
        started = time.perf_counter()
        world = skills.world()
        refused = go_to_refusal(world, target)
        if refused is not None:
            return self._done(log, refused)
        goal = self.goal_pose(skills, world, target)
        if isinstance(goal, SkillResult):
            return self._done(log, goal)
        self.goal = goal
        driver = skills.driver
        compiled, data = skills.sim.physics_handles()  # type: ignore[attr-defined]  # MujocoSimulator (PhysicalSkillSet)
        model = compiled.model
        try:
            cameras = self._camera_of(model)
        except Exception as err:  # noqa: BLE001 - a renderer that cannot start is the environment's, said in one line
            return self._done(log, SkillResult(SkillStatus.EXECUTION_FAILED,
                                               f"the {self.slot} policy's camera cannot render: {err}"))
        base = base_qpos(model)
        here = driver.base_pose()
        goal_image = head_at(cameras, model, data, base, goal) if "goal" in self.cameras else None
        data.qpos[base] = (here.x, here.y, here.yaw)
        mujoco.mj_forward(model, data)
        takes_state = self.inputs.state_size is not None
        period = 1.0 / FPS
        tolerated = driver.base_contact()  # what the base touches where it starts, it may leave (module docstring)
        self.policy.reset()
        travelled = 0.0
        still = blocked = 0
        outcome, blocker = "budget", ""
        try:
            for step in range(self.step_budget):
                pose = driver.base_pose()
                if reached(pose, goal):
                    outcome = ""
                    break
                t0 = time.perf_counter()
                images = {"goal": goal_image} if goal_image is not None else {}
                if "head" in self.cameras:
                    images["head"] = head_at(cameras, model, data, base, pose)
                state = np.array(goal_in_base(pose, goal), dtype=np.float32) if takes_state else None
                t1 = time.perf_counter()
                action = self.policy.act(images, state)
                t2 = time.perf_counter()
                log.observe_seconds += t1 - t0
                log.policy_seconds += t2 - t1
                linear, angular = float(action[0]), float(action[1])
                motion = driver.base_velocity(linear, angular, period, tolerated)
                log.steps = step + 1
                log.sim_seconds += period
                travelled += motion.travelled
                blocked = blocked + 1 if motion.blocker is not None else 0
                if blocked >= BLOCKED_STEPS:
                    outcome, blocker = "blocked", str(motion.blocker)
                    break
                if tolerated is not None and driver.base_contact() != tolerated:
                    tolerated = None  # left it: from here on every contact stops the base
                still = still + 1 if abs(linear) < STILL_SPEED and abs(angular) < STILL_SPEED else 0
                if still >= STILL_STEPS:
                    outcome = "still"
                    break
            else:
                if reached(driver.base_pose(), goal):
                    outcome = ""
        except SkillPolicyError as err:
            return self._done(log, SkillResult(SkillStatus.EXECUTION_FAILED, f"the {self.slot} policy: {err}", travelled),
                              started)
        end = driver.base_pose()
        result = go_to_result(self.slot, world, target, goal, outcome, end, log.steps, log.sim_seconds, travelled,
                              self.step_budget, blocker)
        return self._done(log, result, started)

    def _done(self, log: ExecutionLog, result: SkillResult, started: float | None = None) -> SkillResult:
        log.result = result
        if started is not None:
            log.wall_seconds = time.perf_counter() - started
            logger.info("%s policy: %s (%d steps, %.1f s simulated, %.1f s wall)", self.slot, result.detail, log.steps,
                        log.sim_seconds, log.wall_seconds)
        return result


__all__ = [
    "BLOCKED_STEPS",
    "BaseFrame",
    "BaseLimits",
    "BaseOutcome",
    "BaseStream",
    "GO_TO_STEP_BUDGET",
    "STILL_STEPS",
    "XY_TOLERANCE",
    "YAW_TOLERANCE",
    "LearnedGoTo",
    "go_to_refusal",
    "go_to_result",
    "goal_pose",
    "reached",
    "run_base_policy",
    "stopped_short",
]
