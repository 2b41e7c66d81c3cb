"""A learned policy in a low-level model's slot, run closed-loop (``--skill-model RT-1-X=DIR``; docs/skills.md).

EMMOE's planner names a low-level model with every subtask (``Model: RT-1-X``). With ``--skills physical`` the slots
are served by the scripted physical skills; ``--skill-model SLOT=DIR`` puts a LeRobot policy folder
(:class:`~homiebot.skills.learned.SkillPolicy`: ``homie train skill``'s ``OUT/policy``, or a user's own checkpoint with
the same inputs and outputs) in a slot, and the actions it learned are then run by the policy whenever the planner
names that slot; every other action, and every other slot, stays scripted.

**Which actions.** A policy of the arm's action space (the joints' position targets: :data:`JOINTS`) serves Pick in the
manipulation slots (``RT-1-X``, ``octo``; EMMOE table E2 gives RT-1-X picking). Open and Close share the action space
and are recorded by ``homie data skills``, but their serving is not written yet: they stay scripted. A policy of the
base's action space (its velocity, :data:`~homiebot.sim.mujoco.skill_observation.BASE_VELOCITY`) serves Go to in the
navigation slots (``NoMaD``, ``PixNav``): :mod:`homiebot.skills.learned_goto`. A policy of one action space in a slot
of the other is refused up front, in one line.

**One execution** (:meth:`LearnedArmSkill.pick`), after the skill set's own checks (the logical refusals, the arm
tucked through the trajectory controller, as before a scripted Pick):

* where to stand is the scripted Pick's decision (``PhysicalManipulation.pick_stance``): its refusals before the arm
  moves (an object no grasp fits), and, when no grasp reaches from where Go to left the robot, its turn or short
  drive to a pose from which one does; the recorded demonstrations start there too (the recorder's frames begin
  with the arm's first motion, after any such move; 4 of 30 training episodes moved). The base never moves under the
  policy;
* every 1/:data:`FPS` s of simulated time: the observation exactly as the recorder takes it
  (:class:`~homiebot.sim.mujoco.skill_observation.SkillObservation`: the same cameras at the policy's image size, the
  same joint state, and the target's box in the base's frame from the world graph the skills plan in, for a policy
  that takes it), the policy's next action, and that action sent as the controllers' setpoints for one period
  (:meth:`~homiebot.sim.mujoco.physical.PhysicalDriver.setpoint_stream`: the torso's and arm's targets as a streamed
  trajectory's, the two fingers' as the gripper's commanded gap);
* it stops on success, when the step budget is spent, or when the arm is blocked.

**What the policy is fed** is read from its folder's ``config.json`` (its input features), never assumed: the
images it names, each a camera plain (``head``, ``wrist``) or with the target marked (``head_marked``,
``wrist_marked``: the target's pixels tinted from the simulator's segmentation of it, as ``homie data skills
--mark-target`` records them; homiebot/sim/mujoco/skill_cameras.py), at its size; the joint state; the target's box
where it takes one. Images of other names, or of several sizes, are refused in one line. The ROS 2 graph's policy node
serves plain cameras only (:func:`check_graph_serves`): the bridge publishes no target mask.

**Outcome, from the physics, never from the policy.** Success is what the scripted Pick's is: the target held by the
grasp helper (which holds an object only while both fingers touch it) and lifted :data:`LIFT_M` above where it
stood; the arm is then brought back to the tuck by the scripted skills' checked motion, and the object must still be
in the hand there. Failures are the executor's ``execution_failed`` (EMMOE E1 once its tries are spent, as every
failed Pick), with a message that says what happened: the grasp missed (the fingers closed on nothing), another
object taken, the target held but not lifted, nothing grasped within the budget, the arm blocked (a joint farther
than the trajectory controller's path tolerance from its target for longer than its grace time, and what it
touches), or the simulator stopping; a target knocked out of place is said, as after a scripted Pick.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from homiebot.sim.mujoco.skill_cameras import IMAGE_NAMES, unmarked
from homiebot.sim.mujoco.skill_observation import (
    BASE_VELOCITY,
    FPS,
    GO_TO_CAMERAS,
    GOAL_STATE,
    JOINTS,
    TARGET_STATE,
    SkillObservation,
)
from homiebot.skills.learned import PolicyInputs, SkillPolicy, SkillPolicyError, read_inputs
from homiebot.skills.physical.manipulation import GRIPPED_GAP
from homiebot.skills.skillset import MANIPULATION_MODELS, NAVIGATION_MODELS
from homiebot.types import Action, SkillResult, SkillStatus

if TYPE_CHECKING:
    from homiebot.skills.physical.skillset import PhysicalSkillSet

logger = logging.getLogger(__name__)

#: The slots a policy may fill, by their lower-case spelling (the planner's names match case-insensitively).
SLOTS: dict[str, str] = {m.lower(): m for m in (*MANIPULATION_MODELS, *NAVIGATION_MODELS)}
#: The arm's cameras, in the recorder's order (homiebot/sim/mujoco/skill_cameras.py).
ARM_CAMERAS: tuple[str, ...] = ("head", "wrist")
#: The actions an arm policy runs; the rest stay scripted (module docstring).
ARM_ACTIONS = frozenset({Action.PICK})
#: Control steps one execution may take (30 s of simulated time; the recorded Picks took 11-23 s).
STEP_BUDGET = 300
#: How far above where it stood the held target must be for a Pick to have succeeded (m): half the scripted Pick's
#: lift (ArmSetup.lift), the least lift the scripted skill itself accepts where the full one is out of reach.
LIFT_M = 0.05
#: The largest image the skill cameras render (the embedded simulator's view size, its offscreen buffer).
MAX_IMAGE_SIZE = 256
#: Torso and arm joints (the trajectory's), then the fingers (the gripper's), in JOINTS' order.
ARM_JOINTS = JOINTS[:-2]


class LearnedSkillError(ValueError):
    """A ``--skill-model`` that cannot serve (one line for the user)."""


def slot_name(name: str) -> str:
    """EMMOE's spelling of a model slot given in any case (``rt-1-x`` -> ``RT-1-X``)."""
    slot = SLOTS.get(name.strip().lower())
    if slot is None:
        raise LearnedSkillError(f"--skill-model {name!r}: unknown model slot; use one of {', '.join(SLOTS.values())}")
    return slot


def check_skill_model(slot: str, folder: str | Path, option: str = "--skill-model") -> PolicyInputs:
    """Refuse a policy folder that cannot fill ``slot`` (read from its ``config.json``; no LeRobot needed): not a
    LeRobot policy, or inputs and outputs that are not the slot's skills' (for the manipulation slots the arm's: the
    recorder's head and wrist cameras at one square size, the joint state, the target's box, the joints' targets; for
    the navigation slots Go to's: :func:`check_go_to_inputs`). ``option``: how the user named the model, for the line
    (the launch file's ``skill_models:=``)."""
    slot = slot_name(slot)
    try:
        inputs = read_inputs(folder)
    except SkillPolicyError as err:
        raise LearnedSkillError(f"{option} {slot}: {err}") from None
    where = f"{option} {slot}={folder}"
    if slot in NAVIGATION_MODELS:
        return check_go_to_inputs(where, inputs)
    if inputs.action_size != len(JOINTS):
        base = (f" (the base's velocity: a Go to policy, for {' or '.join(NAVIGATION_MODELS)})"
                if inputs.action_size == len(BASE_VELOCITY) else "")
        raise LearnedSkillError(f"{where}: the policy outputs {inputs.action_size} values{base}; an arm skill's action is "
                                f"the {len(JOINTS)} joints' targets ({', '.join(JOINTS)})")
    _check_images(where, inputs, IMAGE_NAMES, "the arm skills'")
    if inputs.state_size is not None and inputs.state_size != len(JOINTS):
        raise LearnedSkillError(f"{where}: the policy takes a state of {inputs.state_size} values; the arm skills' "
                                f"is the {len(JOINTS)} joints' positions")
    if inputs.env_state_size is not None and inputs.env_state_size != len(TARGET_STATE):
        raise LearnedSkillError(f"{where}: the policy takes an environment state of {inputs.env_state_size} values; "
                                f"the arm skills' is the target's box ({len(TARGET_STATE)} values)")
    return inputs


def marked_images(inputs: PolicyInputs) -> tuple[str, ...]:
    """The images of the policy with the target marked in them (``wrist_marked``; module docstring)."""
    return tuple(name for name in inputs.images if unmarked(name)[1])


def check_graph_serves(slot: str, folder: str | Path, option: str = "--skill-model") -> PolicyInputs:
    """:func:`check_skill_model`, and refuse a policy the ROS 2 graph's policy node cannot feed: one that takes an image
    with the target marked (the sim bridge publishes the skill cameras' plain images; a target mask from perception is
    not wired to them)."""
    inputs = check_skill_model(slot, folder, option)
    marks = marked_images(inputs)
    if marks:
        raise LearnedSkillError(f"{option} {slot_name(slot)}={folder}: the policy takes {', '.join(marks)} (the "
                                f"target marked in the image); the ROS 2 graph publishes plain skill cameras only: "
                                f"serve it in process (homie run, homie eval)")
    return inputs


def check_go_to_inputs(where: str, inputs: PolicyInputs) -> PolicyInputs:
    """Refuse a policy that cannot serve Go to in a navigation slot (``where``: the option, for the line): its action
    must be the base's velocity (:data:`BASE_VELOCITY`), its cameras ``head`` and/or ``goal`` (square RGB of one size),
    its state, if any, the goal pose in the base's frame (:data:`GOAL_STATE`), and it takes no environment state."""
    if inputs.action_size != len(BASE_VELOCITY):
        arm = (f" (the {len(JOINTS)} joints' targets: an arm policy, for {' or '.join(MANIPULATION_MODELS)})"
               if inputs.action_size == len(JOINTS) else "")
        raise LearnedSkillError(f"{where}: the policy outputs {inputs.action_size} values{arm}; a Go to policy's action "
                                f"is the base's velocity ({', '.join(BASE_VELOCITY)})")
    _check_images(where, inputs, GO_TO_CAMERAS, "Go to's")
    if inputs.state_size is not None and inputs.state_size != len(GOAL_STATE):
        raise LearnedSkillError(f"{where}: the policy takes a state of {inputs.state_size} values; Go to's is the goal "
                                f"pose in the base's frame ({', '.join(GOAL_STATE)})")
    if inputs.env_state_size is not None:
        raise LearnedSkillError(f"{where}: the policy takes an environment state of {inputs.env_state_size} values; "
                                f"Go to has none (its goal is the goal image and the goal pose)")
    return inputs


def _check_images(where: str, inputs: PolicyInputs, cameras: tuple[str, ...], whose: str) -> None:
    """The policy's cameras are among ``cameras`` and of one square RGB size the skill cameras render."""
    if not inputs.images:
        raise LearnedSkillError(f"{where}: the policy takes no camera; {whose} are {', '.join(cameras)}")
    other = sorted(set(inputs.images) - set(cameras))
    if other:
        raise LearnedSkillError(f"{where}: the policy takes camera(s) {', '.join(other)}; {whose} cameras are "
                                f"{', '.join(cameras)}")
    shapes = set(inputs.images.values())
    if len(shapes) != 1 or any(c != 3 or h != w for c, h, w in shapes):
        raise LearnedSkillError(f"{where}: the policy's images are {sorted(shapes)} (channels, height, width); the "
                                f"skill cameras give square RGB images of one size")
    side = next(iter(shapes))[1]
    if side > MAX_IMAGE_SIZE:
        raise LearnedSkillError(f"{where}: the policy's images are {side} pixels a side; the skill cameras render at "
                                f"most {MAX_IMAGE_SIZE} (the simulator's view size)")


#: Policy folders LeRobot has loaded in this process, with their weights' modification time (checked once).
_LOADED: set[tuple[str, float]] = set()


def check_skill_models(models: Mapping[str, str]) -> dict[str, PolicyInputs]:
    """:func:`check_skill_model` for each slot (slot -> folder), then each policy loaded once with LeRobot (a folder
    LeRobot cannot load, or LeRobot missing, refused here too: before any episode runs)."""
    checked = {slot_name(slot): check_skill_model(slot, folder) for slot, folder in models.items()}
    for slot, folder in models.items():
        path = Path(folder).expanduser().absolute()
        key = (str(path), (path / "model.safetensors").stat().st_mtime)
        if key in _LOADED:
            continue
        try:
            SkillPolicy(path)
        except SkillPolicyError as err:
            raise LearnedSkillError(f"--skill-model {slot_name(slot)}: {err}") from None
        _LOADED.add(key)
    return checked


def slot_policy(slot: str, folder: str | Path | None, *, threads: int = 1,
                policy: Any = None) -> tuple[PolicyInputs, Any]:
    """The inputs and the loaded policy of a learned skill in ``slot``: the folder checked for the slot
    (:func:`check_skill_model`) and loaded, or ``policy`` as given (anything with SkillPolicy's ``inputs``, ``reset()``
    and ``act()``: a replay of recorded actions in the tests)."""
    if policy is not None:
        return policy.inputs, policy
    assert folder is not None, "a policy folder, or a policy"
    inputs = check_skill_model(slot, folder)
    return inputs, SkillPolicy(folder, threads=threads)


@dataclass
class ExecutionLog:
    """What one learned execution did (for tests, benchmarks and the log line)."""

    steps: int = 0
    sim_seconds: float = 0.0
    wall_seconds: float = 0.0
    policy_seconds: float = 0.0
    observe_seconds: float = 0.0
    result: SkillResult | None = None
    gaps: list[float] = field(default_factory=list)


class LearnedArmSkill:
    """An arm policy serving Pick in one slot (module docstring). One instance per run: the policy is loaded once,
    the cameras made again for each new scene's model."""

    def __init__(self, slot: str, folder: str | Path | None, *, step_budget: int = STEP_BUDGET, threads: int = 1,
                 policy: Any = None) -> None:
        self.slot = slot_name(slot)
        self.inputs, self.policy = slot_policy(self.slot, folder, threads=threads, policy=policy)
        self.step_budget = step_budget
        self.size = next(iter(self.inputs.images.values()))[1]
        # The policy's own images (its config.json), in the recorder's order: plain and marked cameras.
        self.cameras = tuple(c for c in IMAGE_NAMES if c in self.inputs.images)
        self.marks = bool(marked_images(self.inputs))
        self._model: Any = None
        self._observation: SkillObservation | None = None
        self._moved, self._travelled = "", 0.0  # the current execution's base move before the policy (pick_stance)
        #: The last execution's log.
        self.last: ExecutionLog | None = None

    @property
    def actions(self) -> frozenset[Action]:
        return ARM_ACTIONS

    def run(self, skills: PhysicalSkillSet, action: Action, target: str) -> SkillResult:
        assert action is Action.PICK, action
        return self.pick(skills, target)

    def close(self) -> None:
        if self._observation is not None:
            self._observation.cameras.close()
            self._observation = None
            self._model = None

    def _observer(self, model: Any) -> SkillObservation:
        from homiebot.sim.mujoco.skill_cameras import SkillCameras

        if model is not self._model or self._observation is None:
            self.close()
            self._observation = SkillObservation(SkillCameras(model, self.size), model)
            self._model = model
        return self._observation

    def pick(self, skills: PhysicalSkillSet, obj: str) -> SkillResult:
        """One learned Pick of ``obj`` on the skill set's robot (module docstring)."""
        import mujoco

        log = ExecutionLog()
        self.last = log
        started = time.perf_counter()
        self._moved, self._travelled = "", 0.0
        stance = skills.manipulation.pick_stance(skills.world(), obj)
        if isinstance(stance, SkillResult):  # refused, or no pose to pick from, as the scripted Pick says
            log.result = stance
            return stance
        before, self._moved, self._travelled = stance
        entity = before.entities[obj]
        target_box = (tuple(entity.bbox_min), tuple(entity.bbox_max))
        driver = skills.driver
        setup = skills.manipulation.setup
        compiled, _ = skills.sim.physics_handles()  # type: ignore[attr-defined]  # MujocoSimulator (PhysicalSkillSet)
        try:
            observer = self._observer(compiled.model)
        except Exception as err:  # noqa: BLE001 - a renderer that cannot start is the environment's, said in one line
            return SkillResult(SkillStatus.EXECUTION_FAILED, f"the {self.slot} policy's cameras cannot render: {err}")
        takes_target = self.inputs.env_state_size is not None
        marks = None
        if self.marks:
            from homiebot.sim.mujoco.skill_cameras import object_geoms

            try:
                marks = object_geoms(compiled.model, obj)
            except ValueError as err:
                return SkillResult(SkillStatus.EXECUTION_FAILED, f"the {self.slot} policy's target mark: {err}")
        period = 1.0 / FPS
        self.policy.reset()
        outcome: tuple[str, str] | None = None  # (kind, detail) of a failure; None: success
        blocked_for = 0.0
        try:
            with driver.setpoint_stream(f"{self.slot} policy picking {obj}") as stream:
                start_z = float(stream.body_position(obj)[2])
                outcome = ("budget", "")
                for step in range(self.step_budget):
                    t0 = time.perf_counter()
                    frame = observer.observe(stream.data, target_box if takes_target else None, self.cameras, marks)
                    t1 = time.perf_counter()
                    images = {cam: frame[f"observation.images.{cam}"] for cam in self.cameras}
                    action = self.policy.act(images, frame["observation.state"],
                                             frame.get("observation.environment_state"))
                    t2 = time.perf_counter()
                    log.observe_seconds += t1 - t0
                    log.policy_seconds += t2 - t1
                    positions = {j: float(v) for j, v in zip(ARM_JOINTS, action[:len(ARM_JOINTS)], strict=True)}
                    # Summed as Python floats, as the graph's sim bridge sums the two fingers' targets: a float32 sum
                    # differs in the ninth digit, and once the fingers touch something the physics amplifies it.
                    gap = float(action[-2]) + float(action[-1])
                    done = stream.send(positions, gap, period)
                    log.steps = step + 1
                    log.gaps.append(done.gap)
                    if done.held == obj and float(stream.body_position(obj)[2]) - start_z >= LIFT_M:
                        outcome = None
                        break
                    blocked_for = blocked_for + period if done.blocker is not None else 0.0
                    if blocked_for >= driver.settings.path_grace:
                        outcome = ("blocked", f"{done.worst_joint} was {done.worst_error:.2f} from its target for "
                                              f"{blocked_for:.1f} s (blocked: {done.blocker})")
                        break
                held_at_end = stream.held
                lifted = float(stream.body_position(obj)[2]) - start_z
                # The scripted Pick's test of a missed grasp: the fingers closed (nearly) all the way.
                closed_on_nothing = held_at_end is None and driver.gap(stream.data) <= setup.closed_gap + GRIPPED_GAP
            log.sim_seconds = stream.elapsed
        except mujoco.FatalError as err:
            log.wall_seconds = time.perf_counter() - started
            return self._finish(skills, log, before, obj, SkillResult(
                SkillStatus.EXECUTION_FAILED, f"the simulator stopped while the {self.slot} policy picked {obj}: {err}"))
        except SkillPolicyError as err:
            return self._finish(skills, log, before, obj, SkillResult(SkillStatus.EXECUTION_FAILED, f"the {self.slot} policy: {err}"))
        steps = f"{log.steps} policy steps, {log.sim_seconds:.1f} s"
        if outcome is None:
            result = SkillResult(SkillStatus.SUCCESS, f"picked {obj} ({self.slot} policy, {steps}){self._moved}")
        elif outcome[0] == "blocked":
            result = SkillResult(SkillStatus.EXECUTION_FAILED,
                                 f"the arm stopped while the {self.slot} policy reached for {obj}: {outcome[1]} ({steps})")
        elif held_at_end == obj:
            result = SkillResult(SkillStatus.EXECUTION_FAILED,
                                 f"timed out: the {self.slot} policy held {obj} but lifted it only {100 * lifted:.0f} cm "
                                 f"in its budget of {self.step_budget} steps ({steps})")
        elif held_at_end is not None:
            result = SkillResult(SkillStatus.EXECUTION_FAILED,
                                 f"grasp missed: the {self.slot} policy took {held_at_end} instead of {obj} ({steps})")
        elif closed_on_nothing:
            result = SkillResult(SkillStatus.EXECUTION_FAILED,
                                 f"grasp missed: the gripper closed on nothing at {obj} ({self.slot} policy, {steps})")
        else:
            result = SkillResult(SkillStatus.EXECUTION_FAILED,
                                 f"timed out: the {self.slot} policy did not grasp {obj} in its budget of "
                                 f"{self.step_budget} steps ({steps})")
        log.wall_seconds = time.perf_counter() - started
        return self._finish(skills, log, before, obj, result)

    def _finish(self, skills: PhysicalSkillSet, log: ExecutionLog, before: Any, obj: str,
                result: SkillResult) -> SkillResult:
        """Back to the tuck as the scripted Pick ends (the fingers opened first after a failure), the outcome checked
        there (module docstring)."""
        manipulation = skills.manipulation
        if not result.success:
            manipulation.driver.gripper_command(manipulation.setup.open_gap, manipulation.setup.max_effort)
        stuck = manipulation.tuck_if_needed(skills.world())
        if result.success and skills.driver.held() != obj:
            result = SkillResult(SkillStatus.EXECUTION_FAILED, f"{obj} slipped out of the gripper on the way back "
                                                               f"({self.slot} policy)")
        if self._moved and not result.success:
            result = SkillResult(result.status, f"{result.detail}{self._moved}", result.path_length, result.retryable)
        if stuck is not None:
            result = SkillResult(result.status, f"{result.detail}; {stuck}", result.path_length, result.retryable)
        result = SkillResult(result.status, result.detail, max(result.path_length, self._travelled), result.retryable)
        if not result.success:
            result = manipulation._knocked(result, before, obj)
        log.result = result
        logger.info("%s policy: %s (%d steps, %.1f s simulated, %.1f s wall)", self.slot, result.detail, log.steps,
                    log.sim_seconds, log.wall_seconds)
        return result


class LearnedSkill(Protocol):
    """A policy in a slot: :class:`LearnedArmSkill` (Pick), :class:`~homiebot.skills.learned_goto.LearnedGoTo` (Go to)."""

    slot: str
    last: ExecutionLog | None

    @property
    def actions(self) -> frozenset[Action]: ...

    def run(self, skills: PhysicalSkillSet, action: Action, target: str) -> SkillResult: ...

    def close(self) -> None: ...


def load_learned_skills(models: Mapping[str, str], *, step_budget: int | None = None) -> dict[str, LearnedSkill]:
    """The learned skills of ``models`` (slot -> policy folder), by EMMOE's slot name: a Go to policy for a navigation
    slot, an arm policy for a manipulation slot; ``step_budget`` None: each skill's own."""
    from homiebot.skills.learned_goto import GO_TO_STEP_BUDGET, LearnedGoTo

    skills: dict[str, LearnedSkill] = {}
    for name, folder in models.items():
        slot = slot_name(name)
        if slot in NAVIGATION_MODELS:
            skills[slot] = LearnedGoTo(slot, folder, step_budget=step_budget or GO_TO_STEP_BUDGET)
        else:
            skills[slot] = LearnedArmSkill(slot, folder, step_budget=step_budget or STEP_BUDGET)
    return skills


def serving(learned: Mapping[str, LearnedSkill], model: str, action: Action) -> LearnedSkill | None:
    """The learned skill that runs ``action`` when the planner names ``model``, or None (scripted)."""
    skill = learned.get(SLOTS.get(model.strip().lower(), ""))
    return skill if skill is not None and action in skill.actions else None


__all__ = [
    "FPS",
    "LIFT_M",
    "SLOTS",
    "STEP_BUDGET",
    "ExecutionLog",
    "LearnedArmSkill",
    "LearnedSkill",
    "LearnedSkillError",
    "check_go_to_inputs",
    "check_graph_serves",
    "check_skill_model",
    "check_skill_models",
    "load_learned_skills",
    "serving",
    "slot_name",
]
