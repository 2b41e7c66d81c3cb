"""``--skills physical`` in the ROS graph: Go to, Pick, Put, Open and Close of the core's physical skills
(:mod:`homiebot.skills.physical`) run by the navigation and manipulation executor nodes on
:class:`~homiebot.ros.robot_driver.ActionRobotDriver`, so that the graph moves the robot only through the standard
interfaces (NavigateToPose, FollowJointTrajectory, GripperCommand) and reads it only through ``/joint_states`` and
``/odom``. The world graph the skills plan in comes from a state query (``world()``: the sim bridge's
``/sim/get_world_state`` here, a robot's world-graph node on a robot), fetched fresh for every skill, since the
base and the objects move between skills.

What the in-process skill set (:class:`homiebot.skills.physical.PhysicalSkillSet`) does around the skills is done
here too, from the world graph:

* the arm is tucked through the trajectory controller before each skill and when the executor resets the arm
  before a try (EMMOE's retry from a known pose);
* Pick and Put are refused before acting for the logical reasons the simulator's oracle precheck gives (hand full,
  hand empty, another object in the hand, an object inside a closed container), so that the executor's error
  codes mean the same under both settings; the executor's own checks (L1-L4, D1/D2) run before these;
* Open and Close are the core's arm articulation (:class:`homiebot.skills.physical.articulation.PhysicalArticulation`)
  on the same driver: it reads the world graph's ``is_open`` and box of the piece and estimates the door's angle or
  the drawer's slide from where the hand is (forward kinematics on ``/joint_states`` and ``/odom``), never a joint
  value a robot does not publish. The whole-body pull (the base's joints in the arm's trajectory) has no standard
  interface; :class:`~homiebot.ros.robot_driver.ActionRobotDriver` does not offer it, so a Close by a door's free
  edge whose plain pull falls short fails here where one process can carry the base along (docs/robots.md);
* after a Put, the world graph says whether the object stayed on or in the place (else ``DROPPED``, EMMOE's E2); a
  successful Put reports where the hand let go (``SkillResult.released_at``), which travels to perception
  (docs/ros.md, "Actions into the world graph").

Execution noise (the sim bridge's ``noise`` parameter) is not sampled on these skills: they fail only for what
happened.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from homiebot.sim.robot_driver import RobotDriver
from homiebot.skills.physical import navigation
from homiebot.skills.physical.articulation import PhysicalArticulation
from homiebot.skills.physical.kinematics import ArmKinematics
from homiebot.skills.physical.manipulation import ArmSetup, PhysicalManipulation, base_moves
from homiebot.types import EntityKind, SkillResult, SkillStatus, WorldState

logger = logging.getLogger(__name__)

#: Gaps between the base's edge and an object's receptacle at the poses Go to tries (m), nearest first: close
#: enough for the arm to reach over a counter's depth. The in-process skill set's values
#: (homiebot.skills.physical.skillset.MANIPULATION_GAPS), so that both settings stop at the same poses.
MANIPULATION_GAPS = (0.06, 0.2, 0.45)


class PhysicalSkillRunner:
    """Go to, Pick, Put and the arm's tuck on a :class:`RobotDriver`, planned in the world graph ``world()`` gives.

    Args:
        driver: the robot (an :class:`~homiebot.ros.robot_driver.ActionRobotDriver` in the graph).
        world: the world graph now (a blocking state query).
        urdf: the robot's description (``/robot_description``), for the arm's inverse kinematics.
        setup: the arm's setup (the embedded robot's: :func:`homiebot.skills.physical.manipulation.sim_arm_setup`).
        outcome: the world graph a Put's outcome is read from (default ``world``): the state query's, what happened,
            when ``world`` is perception's (what was seen). After the release and before the Put's result, perception
            still has the object in the hand (it hears of the Put with the result), where the hand is empty now; one
            process reads the outcome from the simulator's state too
            (:meth:`homiebot.skills.physical.skillset.PhysicalSkillSet._check_put`).
    """

    def __init__(self, driver: RobotDriver, world: Callable[[], WorldState], urdf: str, setup: ArmSetup,
                 outcome: Callable[[], WorldState] | None = None) -> None:
        self.driver = driver
        self.world = world
        self.outcome = outcome or world
        kinematics = ArmKinematics(urdf, setup.chain, setup.tip_link, setup.tcp_offset)
        # world: read again after a Pick or Put moved the base, and for the checks of the arm's way back to the tuck.
        self.manipulation = PhysicalManipulation(driver, kinematics, setup, world=world)
        # Keeps what its hand did (a door's hinge side, where it let the door go) across skills, as in one process.
        self.articulation = PhysicalArticulation(driver, kinematics, setup, world=world, manipulation=self.manipulation)

    def tuck(self) -> SkillResult:
        """Fold the arm through the trajectory controller, by a motion checked against the world graph; a failure
        says why."""
        stuck = self.manipulation.tuck_if_needed(self.world())
        if stuck is None:
            return SkillResult(SkillStatus.SUCCESS, "arm tucked")
        return SkillResult(SkillStatus.EXECUTION_FAILED, stuck)

    def go_to(self, target: str) -> SkillResult:
        tucked = self.tuck()
        if not tucked.success:
            return SkillResult(tucked.status, f"{tucked.detail} before Go to")
        return navigation.go_to(self.driver, self.world(), target, object_gaps=MANIPULATION_GAPS)

    def pick(self, obj: str) -> SkillResult:
        world = self.world()
        refusal = pick_refusal(world, obj)
        if refusal is not None:
            return refusal
        tucked = self.tuck()
        if not tucked.success:
            return SkillResult(tucked.status, f"{tucked.detail} before Pick")
        return self.manipulation.pick(self.world(), obj)  # the graph after the tuck, as the plan starts from it

    def put(self, obj: str, place: str) -> SkillResult:
        world = self.world()
        refusal = put_refusal(world, obj, place)
        if refusal is not None:
            return refusal
        tucked = self.tuck()
        if not tucked.success:
            return SkillResult(tucked.status, f"{tucked.detail} before Put")
        released = self.manipulation.put(self.world(), obj, place)  # the graph after the tuck (the held object moved)
        if not released.success:
            return released
        return put_outcome(self.outcome(), obj, place, released)

    def open(self, target: str) -> SkillResult:
        return self._articulate(target, opening=True)

    def close(self, target: str) -> SkillResult:
        return self._articulate(target, opening=False)

    def _articulate(self, target: str, opening: bool) -> SkillResult:
        verb = "Open" if opening else "Close"
        refusal = articulate_refusal(self.world(), target, opening)
        if refusal is not None:
            return refusal
        tucked = self.tuck()
        if not tucked.success:
            return SkillResult(tucked.status, f"{tucked.detail} before {verb}")
        return self.articulation.open(target) if opening else self.articulation.close(target)


def articulate_refusal(world: WorldState, target: str, opening: bool) -> SkillResult | None:
    """The oracle precheck's refusals of an Open or Close that the world graph can tell (the hand full, not a piece
    with a door or drawer), or None; the articulation answers a piece already as asked."""
    entity = world.entities.get(target)
    if entity is None:
        return SkillResult(SkillStatus.NOT_FOUND, f"{target} is not in the world graph")
    if world.held is not None:
        return SkillResult(SkillStatus.HAND_FULL, f"the hand is full (holding {world.held})")
    if entity.kind is not EntityKind.FURNITURE or not entity.articulated or not entity.interactive:
        return SkillResult(SkillStatus.NOT_INTERACTIVE, f"{target} is not interactive: it cannot be {'opened' if opening else 'closed'}")
    return None


def pick_refusal(world: WorldState, obj: str) -> SkillResult | None:
    """The oracle precheck's refusals of a Pick that the world graph can tell, or None."""
    entity = world.entities.get(obj)
    if entity is None:
        return SkillResult(SkillStatus.NOT_FOUND, f"{obj} is not in the world graph")
    if entity.kind is not EntityKind.OBJECT:
        return SkillResult(SkillStatus.NOT_INTERACTIVE, f"{obj} is {entity.kind.value}, it cannot be picked")
    if world.held is not None:
        what = "already holding it" if world.held == obj else f"holding {world.held}"
        return SkillResult(SkillStatus.HAND_FULL, f"the hand is full ({what})")
    receptacle = world.entities.get(entity.parent) if entity.parent else None
    if entity.relation == "in" and receptacle is not None and receptacle.is_open is False:
        return SkillResult(SkillStatus.CONTAINER_CLOSED, f"{obj} is in the {receptacle.name}, which is closed")
    return None


def put_refusal(world: WorldState, obj: str, place: str) -> SkillResult | None:
    """The oracle precheck's refusals of a Put that the world graph can tell, or None."""
    for name in (obj, place):
        if name not in world.entities:
            return SkillResult(SkillStatus.NOT_FOUND, f"{name} is not in the world graph")
    if world.held is None:
        return SkillResult(SkillStatus.HAND_EMPTY, "the hand is empty")
    if world.held != obj:
        return SkillResult(SkillStatus.EXECUTION_FAILED, f"the hand holds {world.held}, not {obj}")
    return None


def put_outcome(world: WorldState, obj: str, place: str, released: SkillResult) -> SkillResult:
    """After the release, what the world graph says: the object on or in the place (a Put "next to" an object:
    on that object's receptacle), or lost (``DROPPED``) with where it came to rest."""
    entity = world.entities[obj]
    target = world.entities[place]
    receptacle = target.parent if target.kind is EntityKind.OBJECT else place
    if entity.parent == receptacle:
        return SkillResult(SkillStatus.SUCCESS, f"put {obj} {entity.relation} {receptacle}{base_moves(released.detail)}",
                           released.path_length, released_at=released.released_at)
    x, y, z = entity.position
    where = f"on {entity.parent}" if entity.parent else f"at ({x:.2f}, {y:.2f}, {z:.2f})"
    return SkillResult(SkillStatus.DROPPED, f"{released.detail}, but {obj} did not stay there: it came to rest {where}",
                       released.path_length)
