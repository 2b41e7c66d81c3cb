"""``--skills physical``: the executor's skill runner on the robot's standard interfaces.

:class:`PhysicalSkillSet` is a :class:`~homiebot.skills.SkillSet` (the same model names, the same logical checks,
the same optional execution noise) whose Go to, Pick and Put act through a
:class:`~homiebot.sim.robot_driver.RobotDriver`: NavigateToPose goals (:mod:`.navigation`), and
FollowJointTrajectory and GripperCommand goals planned with inverse kinematics on the robot's URDF
(:mod:`.manipulation`). On the embedded simulator the driver is
:class:`~homiebot.sim.mujoco.physical.PhysicalDriver`: the arm moves under physics and objects are dynamic.

Open and Close (``articulation="physical"``, ARTICULATION, the default): the door or drawer is moved by the arm, its
handle or free edge held in the gripper (:mod:`.articulation`); with ``articulation="oracle"`` (``--articulation
oracle``) they run the simulator's oracle skill, which sets the joint to its end at once, the base first moved clear
of the door's sweep. The household
actions (Turn on, Heat, ...) run the simulator's oracle skill (docs/robots.md, "Physical skills").

Learned policies (``learned``: slot name -> :class:`~homiebot.skills.learned_skill.LearnedSkill`, from
``--skill-model``): an action the planner sends with a slot that holds a policy serving that action (Pick, in
``RT-1-X`` or ``octo``; Go to, in ``NoMaD`` or ``PixNav``) runs the policy closed-loop after the same checks and tuck;
everything else stays scripted (homiebot/skills/learned_skill.py, homiebot/skills/learned_goto.py).

The executor calls ``sim.reset_arm()`` before every try (EMMOE's retry from a known pose); on the oracle arm it
snaps the arm to its stow pose. Here the arm is the physics', so the skill set tells the simulator to leave it
alone, and each skill starts by tucking the arm through the trajectory controller instead.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from homiebot.sim.base import Simulator
from homiebot.skills.actions import action_spec
from homiebot.skills.noise import NoiseConfig, SupportsPrecheck
from homiebot.skills.physical import navigation
from homiebot.skills.physical.articulation import PhysicalArticulation
from homiebot.skills.physical.kinematics import ArmKinematics
from homiebot.skills.physical.manipulation import ArmSetup, PhysicalManipulation, base_moves, sim_arm_setup
from homiebot.skills.skillset import DEFAULT_SKILLS, PerceivedWorld, Skill, SkillSet
from homiebot.types import Action, SkillResult, SkillStatus, WorldState

if TYPE_CHECKING:
    from homiebot.skills.learned_skill import LearnedSkill

logger = logging.getLogger(__name__)

#: The actions this skill set runs physically; the rest run the simulator's oracle skill.
PHYSICAL_ACTIONS = frozenset({Action.GO_TO, Action.PICK, Action.PUT})
#: The actions ``articulation="physical"`` adds to them.
ARTICULATION_ACTIONS = frozenset({Action.OPEN, Action.CLOSE})
#: Gaps between the base's edge and an object's receptacle at the poses Go to tries, nearest first (m): close,
#: so that the arm reaches over a counter's depth (navigation.OBJECT_GAPS are the oracle-like standoffs).
MANIPULATION_GAPS = (0.06, 0.2, 0.45, 0.7)
#: NavigateToPose goals one Go to may send (the near rings hold more poses that a clutter of furniture occupies).
MAX_GOALS = 10
#: How far an opening door or drawer may sweep at most (m): a furniture's larger side, capped here.
MAX_SWEEP_M = 0.9
#: How Open and Close run by default: "oracle" (the simulator sets the joint) or "physical" (the arm moves the door
#: or drawer, :mod:`.articulation`). The arm's since it lost no episode against the oracle's on 12 EMMOE-100 tasks
#: that open or close something (docs/results/physical-articulation-2026-11-30.md, last section); a run config's
#: ``skills.articulation`` (``--articulation``) chooses per run.
ARTICULATION = "physical"
ARTICULATIONS = ("oracle", "physical")
#: The base's radius plus how far the tucked arm reaches beyond it, and a margin (m).
TUCKED_REACH_M = 0.40


class PhysicalSkillSet(SkillSet):
    """Skills over one simulator through its standard interfaces (module docstring).

    Args:
        sim: the embedded MuJoCo simulator (``homiebot.sim.mujoco.backend.MujocoSimulator``).
        noise, seed, skills, strict_models: as :class:`~homiebot.skills.SkillSet`; noise, when asked for, is
            sampled on top of what physics does.
        arm: the arm's setup (default: the embedded robot's).
        articulation: "physical": Open and Close move the door or drawer with the arm; "oracle": the simulator's
            skill (default: ARTICULATION).
        learned: learned policies by slot name (module docstring), None: all scripted.
    """

    def __init__(
        self,
        sim: Simulator,
        noise: NoiseConfig | str | None = None,
        seed: int = 0,
        skills: tuple[Skill, ...] = DEFAULT_SKILLS,
        strict_models: bool = False,
        arm: ArmSetup | None = None,
        articulation: str | None = None,
        learned: Mapping[str, LearnedSkill] | None = None,
    ) -> None:
        super().__init__(sim, noise=noise, seed=seed, skills=skills, strict_models=strict_models)
        self.learned = dict(learned or {})
        self._model_name = ""
        self._perceived: PerceivedWorld | None = None
        from homiebot.sim.mujoco.backend import MujocoSimulator
        from homiebot.sim.mujoco.physical import PhysicalDriver

        if not isinstance(sim, MujocoSimulator):
            raise TypeError(f"--skills physical needs the embedded MuJoCo simulator, not {type(sim).__name__}")
        self._simulator = sim
        self.driver = PhysicalDriver(sim)
        setup = arm or sim_arm_setup()
        kinematics = ArmKinematics(sim.robot_kinematics().urdf(), setup.chain, setup.tip_link, setup.tcp_offset)
        # The world graph read again after the base moved (a Pick or Put that repositions it) or the arm stopped.
        self.manipulation = PhysicalManipulation(self.driver, kinematics, setup, world=self.world)
        self.articulation_mode = articulation or ARTICULATION
        if self.articulation_mode not in ARTICULATIONS:
            raise ValueError(f"articulation must be one of {ARTICULATIONS}, not {self.articulation_mode!r}")
        self.articulation = PhysicalArticulation(self.driver, kinematics, setup, world=self.world,
                                                 manipulation=self.manipulation)

    def plan_in(self, world: PerceivedWorld | None) -> None:
        """Plan where to stand, grasp and release, and what to avoid, from ``world(state)`` (perception's world
        graph: :class:`~homiebot.skills.skillset.PlansInPerceivedWorld`); None: from the simulator's state."""
        self._perceived = world

    def world(self) -> WorldState:
        """The world the skills plan in now: the simulator's state, or perception's view of it (:meth:`plan_in`)."""
        state = self.sim.state()
        return self._perceived(state) if self._perceived is not None else state

    def reset_arm(self) -> None:
        """Tuck the arm through the trajectory controller (the oracle's snap would teleport it), by a motion checked
        against the world graph; when none is clear the arm stays, and the next skill's tuck says so."""
        self._simulator.use_physical_arm()
        stuck = self.manipulation.tuck_if_needed(self.world())
        if stuck is not None:
            logger.info("reset arm: %s", stuck)

    def run(self, action: Action, model: str, target: str, place: str | None = None) -> SkillResult:
        self._model_name = model  # which slot runs it: a learned policy's or the scripted skill (_attempt)
        return super().run(action, model, target, place)

    def _attempt(self, skill: Skill, target: str, place: str | None) -> SkillResult:
        # The simulator forgets at each reset (an evaluation worker keeps one simulator for oracle and physical
        # episodes): claim the arm again with every attempt.
        self._simulator.use_physical_arm()
        action = skill.action
        physical = PHYSICAL_ACTIONS | (ARTICULATION_ACTIONS if self.articulation_mode == "physical" else frozenset())
        if action is Action.OPEN and action not in physical:
            # The oracle Open swings the door or pulls the drawer out at once: stand clear of its sweep first,
            # as a robot backs up while it opens one.
            blocked = self._clear_of_sweep(target)
            if blocked is not None:
                return blocked
        if action not in physical:
            return super()._attempt(skill, target, place)
        if self.noise.config.failure(action) > 0.0 and self.noise.attempt_fails(action):
            return SkillResult(SkillStatus.EXECUTION_FAILED, f"{action.value} failed (execution noise '{self.noise.config.name}')")
        # The logical refusals (hand full or empty, too far, a closed container) are the oracle's, so that the
        # executor's error codes mean the same under both settings.
        if action is not Action.GO_TO and isinstance(self.sim, SupportsPrecheck):
            refusal = self.sim.precheck(action_spec(action).sim_name, target, place)
            if refusal is not None:
                return refusal
        stuck = self.manipulation.tuck_if_needed(self.world())
        if stuck is not None:
            return SkillResult(SkillStatus.EXECUTION_FAILED, f"{stuck}, before {action.value}")
        if action in (Action.GO_TO, Action.PICK):
            from homiebot.skills.learned_skill import serving

            policy = serving(self.learned, self._model_name, action)
            if policy is not None:
                return policy.run(self, action, target)
        if action is Action.GO_TO:
            return navigation.go_to(self.driver, self.world(), target, max_attempts=MAX_GOALS,
                                    object_gaps=MANIPULATION_GAPS)
        if action is Action.OPEN:
            return self.articulation.open(target)
        if action is Action.CLOSE:
            return self.articulation.close(target)
        if action is Action.PICK:
            return self.manipulation.pick(self.world(), target)
        assert place is not None, "the executor always gives Put a place"
        result = self.manipulation.put(self.world(), target, place)
        if not result.success:
            return result
        return self._check_put(target, place, result)

    def _clear_of_sweep(self, target: str) -> SkillResult | None:
        """Move the base (facing the piece) to where a door or drawer as deep as the furniture's larger side cannot
        reach the base and the tucked arm, trying Go to's poses around it from the nearest such; None when clear,
        moved clear, or no such pose can be reached (the Open then goes ahead as the oracle's does, the door
        swinging through where the robot stands, and the next Go to leaves from there)."""
        world = self.world()
        entity = world.entities.get(target)
        if entity is None or not entity.articulated or entity.is_open:
            return None
        lo, hi = np.array(entity.bbox_min[:2]), np.array(entity.bbox_max[:2])

        def gap(x: float, y: float) -> float:
            point = np.array([x, y])
            return float(np.linalg.norm(np.maximum(np.maximum(lo - point, point - hi), 0.0)))

        needed = min(float(np.max(hi - lo)), MAX_SWEEP_M) + TUCKED_REACH_M
        if gap(world.robot.x, world.robot.y) >= needed:
            return None
        clear = [p for p in navigation.approach_poses(world, target) if gap(p.x, p.y) >= needed]
        for pose in clear[:3]:
            if self.driver.navigate_to_pose(pose).succeeded:
                return None
        logger.info("no pose clear of %s's door or drawer within reach: opening it from where the robot stands", target)
        return None

    def _check_put(self, obj: str, place: str, released: SkillResult) -> SkillResult:
        """What the world graph says after the release: the object on or in the place (or beside it), or lost.
        The simulator's own state, with perception too: the outcome, as the executor checks every skill's, not a plan."""
        world = self.sim.state()
        entity = world.entities[obj]
        target = world.entities[place]
        receptacle = target.parent if target.kind.value == "object" else place
        if entity.parent == receptacle:
            return SkillResult(SkillStatus.SUCCESS, f"put {obj} {entity.relation} {receptacle}{base_moves(released.detail)}",
                               released.path_length, released_at=released.released_at)
        where = f"on {entity.parent}" if entity.parent else f"at ({entity.position[0]:.2f}, {entity.position[1]:.2f}, {entity.position[2]:.2f})"
        return SkillResult(SkillStatus.DROPPED, f"{released.detail}, but {obj} did not stay there: it came to rest {where}",
                           released.path_length)
