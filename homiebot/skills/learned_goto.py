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
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from homiebot.sim.mujoco.skill_observation import FPS, GO_TO_CAMERAS, base_qpos, goal_in_base, head_at
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
        from homiebot.sim.robot_driver import NavErrorCode
        from homiebot.skills.physical import navigation
        from homiebot.skills.physical.skillset import MANIPULATION_GAPS, MAX_GOALS

        poses = navigation.approach_poses(world, target, object_gaps=MANIPULATION_GAPS)
        if not poses:
            return SkillResult(SkillStatus.NO_PATH, f"no free pose near {target} in the world graph: every pose around "
                                                    f"it overlaps furniture or a wall")
        failures = []
        for pose in poses[:MAX_GOALS]:
            planned = skills.driver.compute_path_to_pose(pose)
            if planned.succeeded:
                return pose
            failures.append(planned)
            if planned.error_code not in (NavErrorCode.GOAL_OCCUPIED, NavErrorCode.NO_VALID_PATH,
                                          NavErrorCode.PLAN_TIMEOUT):
                return SkillResult(SkillStatus.NO_PATH, f"the base could not reach a pose near {target}: "
                                                        f"{navigation._code_words(planned.error_code)}: {planned.error_msg}")
        return SkillResult(SkillStatus.NO_PATH, f"no collision-free path to a pose near {target}: "
                                                f"{navigation._summary(failures)} (last: {failures[-1].error_msg})")

    def go_to(self, skills: PhysicalSkillSet, target: str) -> SkillResult:
        """One learned Go to ``target`` on the skill set's robot (module docstring)."""
        import mujoco

        log = ExecutionLog()
        self.last, self.goal = log, None
        started = time.perf_counter()
        world = skills.world()
        entity = world.entities.get(target)
        if entity is None:
            return self._done(log, SkillResult(SkillStatus.NOT_FOUND, f"{target} is not in the world graph"))
        if entity.kind is EntityKind.OBJECT and world.held == target:
            return self._done(log, SkillResult(SkillStatus.SUCCESS, f"already holding {target}"))
        if entity.kind is EntityKind.ROOM and world.robot_room == target:
            return self._done(log, SkillResult(SkillStatus.SUCCESS, f"already in {target}"))
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
        off = math.hypot(goal.x - end.x, goal.y - end.y)
        turn = abs(math.remainder(goal.yaw - end.yaw, 2 * math.pi))
        steps = f"{log.steps} policy steps, {log.sim_seconds:.1f} s"
        where = f"({goal.x:.2f}, {goal.y:.2f})"
        if not outcome:
            if entity.kind is EntityKind.ROOM:
                detail = f"reached {target} ({self.slot} policy, {steps})"
            else:
                from dataclasses import replace

                reach = replace(world, robot=end).reach_distance(target)
                detail = f"reached {target} ({reach:.2f} m away; {self.slot} policy, {steps})"
            result = SkillResult(SkillStatus.SUCCESS, detail, travelled)
        elif outcome == "blocked":
            result = SkillResult(SkillStatus.EXECUTION_FAILED,
                                 f"the base could not reach a pose near {target}: the {self.slot} policy drove it into "
                                 f"{blocker} at ({end.x:.2f}, {end.y:.2f}), {off:.2f} m short of goal {where} ({steps})",
                                 travelled)
        elif outcome == "still":
            result = SkillResult(SkillStatus.EXECUTION_FAILED,
                                 f"the {self.slot} policy stopped the base {off:.2f} m and {turn:.2f} rad from the pose "
                                 f"near {target} (goal {where}; within {XY_TOLERANCE} m and {YAW_TOLERANCE} rad is "
                                 f"arrived) ({steps})", travelled)
        else:
            result = SkillResult(SkillStatus.EXECUTION_FAILED,
                                 f"timed out: the {self.slot} policy did not bring the base to the pose near {target} in "
                                 f"its budget of {self.step_budget} steps: it ended {off:.2f} m and {turn:.2f} rad from "
                                 f"goal {where} ({steps})", travelled)
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
    "GO_TO_STEP_BUDGET",
    "STILL_STEPS",
    "XY_TOLERANCE",
    "YAW_TOLERANCE",
    "LearnedGoTo",
    "reached",
]
