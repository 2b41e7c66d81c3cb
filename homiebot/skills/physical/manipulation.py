"""Pick and Put through the arm's and the gripper's standard interfaces, planned from the world graph.

The skills see what a real robot's skill layer sees: the world graph's boxes (an object's, a receptacle's top and
interior), the base pose, the joint states; they act only through a
:class:`~homiebot.sim.robot_driver.RobotDriver` (FollowJointTrajectory goals, GripperCommand goals), and they
read the outcome from the gripper (a closed gripper that stopped short of its closed position holds something)
and from the world graph after the act. Inverse kinematics is mink's on the robot's own model
(:mod:`.kinematics`).

**Pick.** The grasp candidates of :mod:`.grasp`: top-down (the tool's x axis pointing down), then tilted, then
level, with the fingers closing across the object's narrow side when the world graph gives its heading and box,
ranked by how they fit the open gripper, the palm clear of the object; an open hollow object too wide for that (a
bowl) by its rim from above; an object no grasp fits is refused before the arm moves, and not retried. Each from a pre-grasp 15 cm back along the approach (or the shortest that clears the object).
Motions: tuck -> pre-grasp (joint space; the tuck keeps the arm inside the footprint and raises it clear of
counters, the reach-over seeds keep the elbow up), pre-grasp -> grasp in three straight-line steps, close, lift
10 cm, back to the tuck with the object (its box checked against the world graph's, drawn back level first when
the direct motion would sweep it through what it stood on). When these straight joint-space motions collide for
every grasp the arm reaches, the sampling planner of :mod:`.motion` searches around the obstacles (the two
best-ranked grasps; the same for a Put's approaches), with the same collision check; a search that failed is not
run again from the same state.

**Put.** The release point is chosen from the receptacle's box: inside its interior (``interior_min`` /
``interior_max``; a fridge, an opened drawer, a sink) when it has one and is open, else on its top; the spot
nearest the robot, 8 cm inside the edges and 10 cm from the objects already there. The held object is brought
2 cm above the surface (its offset from the tool centre read from the world graph's pose of it) from above, released, and the arm retreats up and
tucks. "Next to" an object puts beside it on that object's receptacle. An object held by its rim is released from
above only, so that it stands upright, its spot in a sink or drawer far enough in for the hand beside it.

**The base.** When no grasp or release reaches from where the base stands, but the oracle skill would act from there
(EMMOE's distance rule), the skill moves the base once, as a robot's manipulation skill repositions before it gives
up: it turns in place to face the target, plans again, and if still out of reach goes to the nearest of Go to's
poses near the target (NavigateToPose goals, :mod:`.navigation`'s poses) and plans again. The detail says what the
base did, whether the skill then succeeds or not. Poses from which the same plan already failed are not gone to
again; with none left the failure is not retried (``SkillResult.retryable``).

**The way back.** After a failure, and after a missed grasp, the arm goes back to the tuck by a motion checked
against the world graph as it is then, as every other motion is: straight (or the way it came) when that is clear,
else planned; when no clear motion is found the arm stays where it is and the failure says so.

Failures carry what happened, in words a planner can use, with the SkillStatus the executor maps onto EMMOE's
codes: no arm configuration reaches the grasp (unreachable pose), the arm was blocked (collision, from the
trajectory controller's path tolerance), the gripper closed on nothing (grasp missed), the object left the
hand on the way (dropped), the object did not end on or in the receptacle (dropped, EMMOE's E2).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import numpy as np
from numpy.typing import ArrayLike

from homiebot.config import FAR_THRESHOLD_M, NEAR_THRESHOLD_M
from homiebot.sim.robot_driver import (
    JointTrajectory,
    NavErrorCode,
    NavigateResult,
    RobotDriver,
    TrajectoryPoint,
    TrajectoryResult,
)
from homiebot.skills.physical.grasp import GraspCandidate, Outline, grasp_candidates, held_by_rim, impossible
from homiebot.skills.physical.kinematics import ArmKinematics
from homiebot.skills.physical.motion import CHECK_STEP, MotionPlan, PlannerSettings, plan_motion, segment_clear
from homiebot.skills.physical.navigation import approach_poses, facing_pose
from homiebot.types import EntityKind, EntityState, Pose2D, SkillResult, SkillStatus, WorldState

logger = logging.getLogger(__name__)

#: A gripper that closed this much short of its closed gap (m) or more holds something.
GRIPPED_GAP = 0.004
#: How far (rad; m for a prismatic joint) from the tuck the arm may be and count as tucked.
TUCKED_TOLERANCE = 0.05
#: Half the thickness of a wall on a room's edge (m; the scene library's walls are 0.1 m).
WALL_HALF_THICKNESS = 0.05
#: Approaches tilted below the horizontal tried between the top-down one and the level one (degrees): they reach
#: farther and lower (a cabinet's floor) than from straight above.
TILTS = (60.0, 40.0, 20.0)
#: Largest joint step (rad) between the configurations a path's collision check tests.
PATH_CHECK_STEP = CHECK_STEP
#: How many grasps (or release approaches), best ranked first, the sampling planner is tried for when the straight
#: motions to and from every one of them collide: each plan may take the planner's whole budget.
PLANNED_CANDIDATES = 2
#: How far (m) past an object's far face the space above the low surface it rests on counts as free (Obstacles.of).
BEYOND_RESTING = 0.05
#: How many failed plans a manipulation remembers (_plan_key): a try again from the same state fails at once.
FAILED_PLANS_KEPT = 32
#: How close (m) a held object's sampled points may come to a box of the world graph on a path (the arm's links keep
#: Obstacles.margin; the object's points lie on its surface).
HELD_MARGIN = 0.01
#: How far (m) the hand may draw a lifted object back level towards the base before it tucks, when the direct motion
#: to the tuck would sweep the object through what it stood on.
RETREATS = (0.15, 0.3)
#: A base already facing its target within this (rad) is not turned before a reposition's approach.
FACING_TOLERANCE = 0.15
#: Gaps between the base's edge and the target's (or its receptacle's) box at a reposition's approach poses (m),
#: nearest first: Go to's for a manipulation (homiebot.skills.physical.skillset.MANIPULATION_GAPS).
REPOSITION_GAPS = (0.06, 0.2, 0.45)
#: How far (m) from where the base stands a reposition's approach pose may be: a short move near the target, not
#: a Go to across the room (the oracle accepts the skill within FAR_THRESHOLD_M of the target's box).
REPOSITION_RANGE = 2.0
#: NavigateToPose goals one reposition's approach sends at most.
REPOSITION_GOALS = 3
#: Room (m) a rim grasp or release wants between the tool centre and a drawer's, cabinet's or sink's inner walls:
#: the palm reaches 6 cm either side of it along the fingers' closing direction (homiebot/sim/mujoco/robot.py).
HAND_ROOM = 0.07
#: Base poses closer than this (m, and REPOSITION_SAME_YAW rad) are one for the poses a reposition remembers.
REPOSITION_SAME_POSE = 0.08
REPOSITION_SAME_YAW = 0.2
#: How many targets' tried base poses a manipulation remembers (_tried_poses).
TRIED_TARGETS_KEPT = 32
#: Joint-space obstacles the arm touches where it stopped that a motion back to the tuck may leave (_escape).
ESCAPE_BOXES = 4


@dataclass(frozen=True)
class ArmSetup:
    """What the manipulation skills need to know about an arm beyond its URDF (a robot profile's ``arm`` and
    ``gripper`` sections, plus motion settings).

    ``reach_seeds`` are IK starting points in the arm's plane (the shoulder's pan is aimed at the target): a
    7-joint arm reaches most poses several ways, and these keep the elbow above what the hand reaches over.
    """

    chain: tuple[str, ...]
    tip_link: str
    tcp_offset: tuple[float, float, float]
    tuck: Mapping[str, float]
    pan_joint: str
    gripper_joints: tuple[str, ...]  # their positions add up to the gap between the fingers
    finger_reach: float  # m the finger tips reach beyond the tool centre along the approach
    open_gap: float
    closed_gap: float
    open_width: float  # m between the finger pads when open: the widest object the fingers can come down around
    palm_depth: float  # m from the tool centre back to the palm's face along the approach
    max_effort: float = 0.0  # N; 0: the controller's own limit
    joint_speed: float = 0.8  # rad/s (m/s x 10 for prismatic joints, see _duration)
    min_motion_time: float = 0.6  # s
    reach_seeds: tuple[Mapping[str, float], ...] = field(default_factory=tuple)
    pregrasp_distance: float = 0.15  # m back along the approach
    lift: float = 0.10  # m
    surface_clearance: float = 0.02  # m between the held object's bottom and the surface at release
    edge_margin: float = 0.08  # m from a receptacle's edges
    neighbour_margin: float = 0.10  # m from objects already on the receptacle
    #: The sampling planner's budget and seed, for motions whose straight joint-space segments collide.
    planner: PlannerSettings = field(default_factory=PlannerSettings)

    @property
    def pads_closed_width(self) -> float:
        """The pads' gap (m) with the gripper closed (``closed_gap`` is its joints' sum, not the pads' gap)."""
        return self.open_width - self.open_gap + self.closed_gap

    @property
    def least_width(self) -> float:
        """The narrowest thing (m) the fingers hold: their pads' gap when closed, plus the gap by which a closed
        gripper tells that it holds something (GRIPPED_GAP)."""
        return self.pads_closed_width + GRIPPED_GAP


def sim_arm_setup() -> ArmSetup:
    """The embedded robot's arm (homiebot/sim/mujoco/robot.py; the profile homiebot/config/robots/sim.yaml), with
    the torso as Fetch's ``arm_with_torso_controller`` moves it."""
    from homiebot.sim.mujoco import robot as robot_model  # the embedded robot's constants only

    arm = robot_model.ARM_JOINTS
    # The tuck with the torso raised 0.3 m: the folded arm and a held object ride above counters and opened
    # drawers (about 0.9 m) instead of at their height.
    tuck = {"torso_lift": 0.3, **robot_model.TUCK_POSE}

    def reach(torso: float, lift: float, elbow: float, wrist: float) -> dict[str, float]:
        return {"torso_lift": torso, "shoulder_lift": lift, "elbow_flex": elbow, "wrist_flex": wrist}

    return ArmSetup(
        chain=("torso_lift", *arm),
        tip_link="gripper_link",
        tcp_offset=(0.09, 0.0, 0.0),  # the MJCF's grip site
        tuck=tuck,
        pan_joint="shoulder_pan",
        gripper_joints=robot_model.FINGER_JOINTS,
        finger_reach=0.02,  # fingers 0.07 + 0.04 m along the gripper link, the grip site 0.09 m
        open_gap=2 * robot_model.FINGER_OPEN,
        closed_gap=0.0,
        open_width=2 * robot_model.FINGER_OPEN + robot_model.FINGER_PAD_GAP,
        palm_depth=0.06,  # the grip site 0.09 m along the gripper link, the palm box's face 0.03 m
        reach_seeds=(
            reach(0.386, -0.6, 1.2, 1.0),
            reach(0.2, -0.3, 1.5, 1.2),
            reach(0.0, 0.2, 1.6, 1.2),
            reach(0.386, -0.9, 1.8, 0.6),
            reach(0.1, 0.5, 1.0, 1.0),
        ),
    )


def _result(status: SkillStatus, detail: str) -> SkillResult:
    return SkillResult(status=status, detail=detail)


def tool_pose(position: ArrayLike, approach: ArrayLike, across: ArrayLike | None = None) -> np.ndarray:
    """A 4x4 tool pose: x along ``approach``; y (the fingers' closing axis) along ``across`` made orthogonal."""
    x = np.asarray(approach, dtype=float)
    x = x / np.linalg.norm(x)
    hint = np.asarray(across if across is not None else (0.0, 1.0, 0.0), dtype=float)
    y = hint - x * float(hint @ x)
    if np.linalg.norm(y) < 1e-6:
        y = np.cross((0.0, 0.0, 1.0), x)
    y = y / np.linalg.norm(y)
    z = np.cross(x, y)
    pose = np.eye(4)
    pose[:3, :3] = np.column_stack([x, y, z])
    pose[:3, 3] = position
    return pose


@dataclass(frozen=True)
class Obstacles:
    """The world graph's boxes the arm must keep clear of (furniture and objects, world frame), seen from a base
    pose: a collision check of the arm's link points (kinematics.ArmKinematics.link_points) with a margin."""

    base: Pose2D
    boxes: tuple[tuple[str, np.ndarray, np.ndarray], ...]
    # The rooms' boxes (x0, y0, x1, y1): a point near none of their insides is in a wall (the world graph has rooms,
    # not walls; the walls stand on the rooms' edges).
    rooms: tuple[tuple[float, float, float, float], ...] = ()
    # Furniture -> its interior box: a point there is not in the furniture (the arm reaches into a fridge), but the
    # rest of its box is (its walls, top and floor).
    cavities: Mapping[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    margin: float = 0.05  # m: the links' radius
    _arrays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # The boxes as arrays (B x 3) for a check of all points against all boxes at once; a box without a cavity
        # gets an empty one (from +inf to -inf).
        lo = np.array([b[1] for b in self.boxes], dtype=float).reshape(-1, 3)
        hi = np.array([b[2] for b in self.boxes], dtype=float).reshape(-1, 3)
        cavity_lo, cavity_hi = np.full_like(lo, np.inf), np.full_like(hi, -np.inf)
        for i, (name, _, _) in enumerate(self.boxes):
            if name in self.cavities:
                cavity_lo[i], cavity_hi[i] = self.cavities[name]
        object.__setattr__(self, "_arrays", (lo - self.margin, hi + self.margin,
                                             cavity_lo + self.margin, cavity_hi - self.margin))

    @staticmethod
    def of(world: WorldState, ignore: set[str], open_into: set[str] = frozenset(),  # type: ignore[assignment]
           resting: EntityState | None = None) -> Obstacles:
        """The boxes of ``world`` but ``ignore``'s (and held objects); ``open_into``: furniture whose interior the
        arm may enter; ``resting``: an object on a surface lower than its furniture's box (a sofa's seat under its
        back, a shelf): the space above that surface is left free, as the box alone cannot tell a seat from the
        back behind it, except beyond the object's far side as the robot sees it, where such a back stands."""
        boxes = tuple(
            (e.name, np.array(e.bbox_min), np.array(e.bbox_max))
            for e in world.entities.values()
            if e.kind in (EntityKind.FURNITURE, EntityKind.OBJECT) and e.name not in ignore and not e.held
        )
        rooms = tuple(
            (e.bbox_min[0], e.bbox_min[1], e.bbox_max[0], e.bbox_max[1])
            for e in world.entities.values() if e.kind is EntityKind.ROOM
        )
        cavities = {}
        for name in open_into:
            e = world.entities.get(name)
            if e is None or e.interior_min is None or e.interior_max is None:
                continue
            top = np.array(e.interior_max, dtype=float)
            if top[2] >= e.bbox_max[2] - 0.01:
                top[2] = np.inf  # open at the top (a sink's basin, a drawer's tray): nothing above the interior
            cavities[name] = (np.array(e.interior_min, dtype=float), top)
        if resting is not None and resting.parent in world.entities and resting.parent not in cavities:
            e = world.entities[resting.parent]
            surface = resting.bbox_min[2]
            if surface < e.bbox_max[2] - 0.02:
                # The box above the surface is free (its x and y extents widened past the box), up to BEYOND_RESTING
                # past the object's far face along the axis nearer the robot's line to it: the arm reaches in from
                # the robot's side, and what stands behind the object (a sofa's back) must stay in the check of a
                # held object swinging back towards the tuck.
                lo = np.array([e.bbox_min[0] - 1.0, e.bbox_min[1] - 1.0, surface])
                hi = np.array([e.bbox_max[0] + 1.0, e.bbox_max[1] + 1.0, np.inf])
                towards = (resting.position[0] - world.robot.x, resting.position[1] - world.robot.y)
                axis = 0 if abs(towards[0]) >= abs(towards[1]) else 1
                if towards[axis] >= 0:
                    hi[axis] = resting.bbox_max[axis] + BEYOND_RESTING
                else:
                    lo[axis] = resting.bbox_min[axis] - BEYOND_RESTING
                cavities[e.name] = (lo, hi)
        return Obstacles(world.robot, boxes, rooms, cavities)

    def without(self, names: set[str]) -> Obstacles:
        return Obstacles(self.base, tuple(b for b in self.boxes if b[0] not in names), self.rooms, self.cavities, self.margin)

    def hit(self, points: np.ndarray) -> str | None:
        """The first box a point (base frame) is within ``margin`` of, or None."""
        c, s = math.cos(self.base.yaw), math.sin(self.base.yaw)
        world = np.column_stack([self.base.x + c * points[:, 0] - s * points[:, 1],
                                 self.base.y + s * points[:, 0] + c * points[:, 1], points[:, 2]])
        lo, hi, cavity_lo, cavity_hi = self._arrays
        # Only the boxes that overlap the points' bounds can hold one; all points against those at once.
        near = np.flatnonzero(np.all((hi > world.min(axis=0)) & (lo < world.max(axis=0)), axis=1))
        if len(near):
            points_ = world[:, None, :]  # N x 1 x 3 against the near boxes' n x 3
            inside = np.all((points_ > lo[near]) & (points_ < hi[near]), axis=2) & ~np.all(
                (points_ > cavity_lo[near]) & (points_ < cavity_hi[near]), axis=2)
            touched = inside.any(axis=0)
            if touched.any():  # the first in the boxes' order, as a loop over them finds
                return self.boxes[int(near[np.argmax(touched)])][0]
        if self.rooms:
            # Half a wall (the scene library's are 0.1 m thick) plus the links' radius inside some room's box.
            inset = WALL_HALF_THICKNESS + 0.02  # the hand reaches to a counter's back edge
            clear = np.zeros(len(world), dtype=bool)
            for x0, y0, x1, y1 in self.rooms:
                clear |= (world[:, 0] > x0 + inset) & (world[:, 0] < x1 - inset) & (world[:, 1] > y0 + inset) & (world[:, 1] < y1 - inset)
            if not clear.all():
                return "a wall"
        return None


def _plan_key(start: Sequence[float], goal: Sequence[float], obstacles: Obstacles,
              held: np.ndarray | None) -> tuple[object, ...]:
    """What a plan depends on, rounded (joints to 0.01 rad, boxes and the base to 1 cm) so that the same motion from
    the arm tucked again, among objects that settled by a millimetre, is the same key."""
    def rounded(values: ArrayLike) -> tuple[float, ...]:
        return tuple(np.round(np.asarray(values, dtype=float).ravel(), 2).tolist())

    base = obstacles.base
    return (rounded(start), rounded(goal), rounded((base.x, base.y, base.yaw)), obstacles.margin,
            tuple((name, rounded(lo), rounded(hi)) for name, lo, hi in obstacles.boxes), obstacles.rooms,
            tuple(sorted((name, rounded(np.concatenate(c))) for name, c in obstacles.cavities.items())),
            None if held is None else rounded(held))


_ItemT = TypeVar("_ItemT")


def _roomy_first(items: Sequence[_ItemT], room: Callable[[_ItemT], float],
                 concerned: Callable[[_ItemT], bool] = lambda _: True) -> list[_ItemT]:
    """``items`` (``concerned`` ones: those the hand's room matters for) with HAND_ROOM around the hand first, in
    their order, then the rest, most room first."""
    roomy = [item for item in items if not concerned(item) or room(item) >= HAND_ROOM]
    rest = sorted((item for item in items if concerned(item) and room(item) < HAND_ROOM), key=lambda item: -room(item))
    return roomy + rest


def _tilted(horizontal: np.ndarray, degrees: float) -> np.ndarray:
    """The direction ``degrees`` below ``horizontal`` (towards the floor)."""
    h = horizontal / max(float(np.linalg.norm(horizontal)), 1e-9)
    a = math.radians(degrees)
    return np.array([h[0] * math.cos(a), h[1] * math.cos(a), -math.sin(a)])


#: How a skill's detail says what the base did before the arm moved (_moves, base_moves).
BASE_MOVES = " (the base first "


def _moves(moves: Sequence[str]) -> str:
    """What the base did before the arm moved, for a skill's detail: "" when it did not move."""
    return f"{BASE_MOVES}{' and '.join(moves)})" if moves else ""


def base_moves(detail: str) -> str:
    """The part of a Pick's or Put's detail that says how the base moved first ("" when it did not), for a caller
    that words the skill's result anew (the Put's check of where the object came to rest)."""
    at = detail.find(BASE_MOVES)
    return detail[at:] if at >= 0 else ""


class Planning(Exception):
    """A plan that cannot be made or carried out, with the skill result to report."""

    def __init__(self, status: SkillStatus, detail: str, retryable: bool = True) -> None:
        super().__init__(detail)
        # retryable False: a failure another try finds the same (SkillResult.retryable): the place as the world graph
        # has it, or a target out of reach from every pose a reposition could go to.
        self.result = SkillResult(status, detail, retryable=retryable)
        self.travelled = 0.0  # m the base moved before the failure (a reposition's)


class Unreachable(Planning):
    """No grasp or release the arm can get to from where the base stands (a move of the base may help, unless
    ``retryable`` is False: every pose a move could go to was tried)."""

    def __init__(self, detail: str, retryable: bool = True) -> None:
        super().__init__(SkillStatus.EXECUTION_FAILED, detail, retryable)


_PlanT = TypeVar("_PlanT")


@dataclass(frozen=True)
class _Repositioned(Generic[_PlanT]):
    """What a reposition of the base did: the plan made from the new pose, the world graph there, how far the base
    went (m) and what it did, in words for the skill's detail."""

    plan: _PlanT
    world: WorldState
    travelled: float
    moves: str


class PhysicalManipulation:
    """Pick and Put on a :class:`RobotDriver` (module docstring).

    ``world`` reads the world graph now (the simulator's state, or the graph's state query through ROS): with it, a
    Pick or Put that no grasp or release reaches from where the base stands turns the base to face the target and,
    if that is not enough, moves it a short way closer (NavigateToPose goals), and the arm's motions back to the
    tuck after a failure are checked against the graph as it is then. Without it neither the base moves nor is the
    graph read again (the tuck's checks use the graph the plan started from).
    """

    def __init__(self, driver: RobotDriver, kinematics: ArmKinematics, setup: ArmSetup,
                 world: Callable[[], WorldState] | None = None) -> None:
        if set(kinematics.joints) != set(setup.chain):
            raise ValueError(f"the kinematics' joints {kinematics.joints} are not the arm setup's chain {setup.chain}")
        self.driver = driver
        self.kinematics = kinematics
        self.setup = setup
        self.world = world
        self._tuck = kinematics.vector(setup.tuck)
        # Motions the planner found none for, by what it was given (_plan_key): the executor tries a failed skill
        # again from the same state, and the same search would fail again after the whole budget.
        self._failed_plans: dict[tuple[object, ...], MotionPlan] = {}
        # Base poses from which a Pick's or Put's plan did not reach its target, by what the plan depends on
        # (_tried_key): a reposition goes to a pose not tried yet, and when none is left, another try cannot help.
        self._tried_poses: dict[tuple[object, ...], list[Pose2D]] = {}
        # Of those, the ones with no untried pose left: the same skill from one of their poses is refused at once.
        self._exhausted: set[tuple[object, ...]] = set()

    # ------------------------------------------------------------------ skills

    def tuck(self) -> TrajectoryResult:
        """Fold the arm inside the footprint (before the base moves, and at the end of every manipulation)."""
        return self._move([tuple(self._tuck)])

    def tuck_if_needed(self, world: WorldState) -> str | None:
        """Back to the tuck unless the arm is there already (no goal is sent then), by a motion checked against
        ``world``'s boxes (with the object in the hand, if any) as the skills' own motions are: straight when it is
        clear, else planned (:meth:`_back_to_tuck`). None when tucked, else why not."""
        if self._tucked():
            return None
        return self._back_to_tuck(Obstacles.of(world, set()), self._held_points(world))

    def pick(self, world: WorldState, obj: str) -> SkillResult:
        entity = world.entities.get(obj)
        if entity is None or entity.kind is not EntityKind.OBJECT:
            return _result(SkillStatus.NOT_FOUND, f"{obj} is not an object in the world graph")
        outline = Outline.of(entity, world.robot)
        refused = impossible(outline, obj, self.setup.open_width, self.setup.least_width, self.setup.finger_reach)
        if refused is not None:
            # Known before the arm moves: no grasp can put the open fingers around it (or its rim), from any side,
            # from any base pose; another try cannot change that.
            return SkillResult(SkillStatus.EXECUTION_FAILED, refused, retryable=False)
        known = self._out_of_reach_everywhere(world, "pick", obj)
        if known is not None:
            return known
        moved, travelled = "", 0.0
        try:
            try:
                grasp = self._grasp_plan(world, entity, outline)
            except Unreachable as unreachable:
                repositioned = self._reposition(world, "pick", obj, unreachable, lambda w: self._grasp_plan(
                    w, w.entities[obj], Outline.of(w.entities[obj], w.robot)))
                world, travelled, moved = repositioned.world, repositioned.travelled, repositioned.moves
                grasp = repositioned.plan
            self._gripper(grasp.open_gap)
            self._expect(self._move(grasp.reach), f"reaching for {obj}")
            self._expect(self._move(grasp.approach), f"reaching for {obj}")
            closed = self.driver.gripper_command(self.setup.closed_gap, self.setup.max_effort)
            if closed.position <= self.setup.closed_gap + GRIPPED_GAP:
                self._gripper(self.setup.open_gap)
                # Back out along the straight line in, then to the tuck the way the arm came when that is still
                # clear in the graph now (the fingers may have pushed the object), else as _back_to_tuck finds.
                self._move(list(reversed(grasp.approach[:-1])) + [grasp.pregrasp])
                stuck = self._back_to_tuck(self._obstacles_now(world), None,
                                           list(reversed(grasp.reach[:-1])) + [grasp.start])
                detail = f"grasp missed: the gripper closed on nothing at {obj}{moved}"
                return _result(SkillStatus.EXECUTION_FAILED, detail if stuck is None else f"{detail}; {stuck}")
            self._expect(self._move([grasp.lift]), f"lifting {obj}")
            self._expect(self._move(grasp.back), f"carrying {obj}")
        except Planning as failure:
            self._gripper(self.setup.open_gap)
            return self._after_failure(failure, world, None, moved, travelled)
        if self._gap() <= self.setup.closed_gap + GRIPPED_GAP:
            return _result(SkillStatus.EXECUTION_FAILED, f"{obj} slipped out of the gripper on the way back{moved}")
        return SkillResult(SkillStatus.SUCCESS, f"picked {obj} ({grasp.kind} grasp){moved}", travelled)

    def put(self, world: WorldState, obj: str, place: str) -> SkillResult:
        entity = world.entities.get(obj)
        target = world.entities.get(place)
        if entity is None or target is None:
            return _result(SkillStatus.NOT_FOUND, f"{obj if entity is None else place} is not in the world graph")
        known = self._out_of_reach_everywhere(world, "put", place)
        if known is not None:
            return known
        moved, travelled, held_points = "", 0.0, self._held_points(world)
        try:
            try:
                release = self._release_plan(world, entity, target)
            except Unreachable as unreachable:
                repositioned = self._reposition(world, "put", place, unreachable, lambda w: self._release_plan(
                    w, w.entities[obj], w.entities[place]))
                world, travelled, moved = repositioned.world, repositioned.travelled, repositioned.moves
                release = repositioned.plan
            self._expect(self._move(release.reach), f"bringing {obj} over {place}")
            self._expect(self._move(release.lower), f"lowering {obj} onto {place}")
            held_points = None  # released
            self._gripper(self.setup.open_gap)
            self._expect(self._move(release.back), f"retreating from {place}")
        except Planning as failure:
            return self._after_failure(failure, world, held_points, moved, travelled)
        return SkillResult(SkillStatus.SUCCESS, f"released {obj} {release.relation} {place}{moved}", travelled)

    # ------------------------------------------------------------------ plans

    @dataclass(frozen=True)
    class _Grasp:
        kind: str
        start: tuple[float, ...]  # where the arm was when the grasp was planned (the tuck)
        reach: list[tuple[float, ...]]  # from the start to the pre-grasp (through a via point if needed)
        approach: list[tuple[float, ...]]  # pre-grasp to grasp, straight
        lift: tuple[float, ...]
        back: list[tuple[float, ...]]  # from the lift to the tuck (drawn back level first if needed)
        open_gap: float  # the gripper's gap (GripperCommand's position) before the reach

        @property
        def pregrasp(self) -> tuple[float, ...]:
            return self.reach[-1]

    @dataclass(frozen=True)
    class _Release:
        relation: str
        reach: list[tuple[float, ...]]
        lower: list[tuple[float, ...]]
        back: list[tuple[float, ...]]  # up again, then to the tuck

    def _grasp_plan(self, world: WorldState, entity: EntityState, outline: Outline) -> PhysicalManipulation._Grasp:
        centre = outline.centre
        horizontal = np.array([centre[0], centre[1], 0.0])
        receptacle = entity.parent if entity.relation == "in" else None
        resting = entity if entity.parent is not None and entity.relation == "on" else None
        obstacles = Obstacles.of(world, {entity.name}, {receptacle} if receptacle else set(), resting)
        # The last few centimetres to the grasp come down onto what the object stands on.
        near = obstacles.without({entity.parent}) if entity.parent else obstacles
        # Across the object's narrow side first, the palm clear of it (grasp.grasp_candidates).
        reason = "no arm configuration reaches it"
        # Grasps the arm reaches but the straight motions to or from collide: (kind, pre-grasp, approach, lift, the
        # held object's points, the motion there or None, the motion back or None).
        blocked: list[tuple[GraspCandidate, tuple[float, ...], list[tuple[float, ...]], tuple[float, ...], np.ndarray,
                            list[tuple[float, ...]] | None, list[tuple[float, ...]] | None]] = []
        candidates = grasp_candidates(outline, self.setup.open_width, self.setup.palm_depth, self.setup.finger_reach,
                                      TILTS)
        walls = world.entities.get(receptacle) if receptacle is not None else None
        if walls is not None:
            # Inside a drawer or a cabinet, the hand goes to the rim where the walls leave it room (_hand_room).
            candidates = _roomy_first(candidates, lambda c: self._hand_room(world.robot, walls, c.position),
                                      lambda c: c.kind == "rim")
        for candidate in candidates:
            pose = tool_pose(candidate.position, candidate.approach, candidate.closing)
            # The full pre-grasp stand-off, else the shortest that keeps the finger tips clear of the object (a tall
            # object held near its top at the edge of the arm's reach).
            line = self._line(pose, -self.setup.pregrasp_distance, obstacles, near)
            if line is None and candidate.clear_distance < self.setup.pregrasp_distance - 0.01:
                line = self._line(pose, -candidate.clear_distance, obstacles, near)
            if line is None:
                continue
            pregrasp, approach = line[0], line[1:]
            lift = None
            for height in (self.setup.lift, self.setup.lift / 2):  # half as high where the full lift is out of reach
                lifted = pose.copy()
                lifted[2, 3] += height
                lift = self.kinematics.solve(lifted, [approach[-1]], acceptable=self._clear(near))
                if lift.converged:
                    break
            if lift is None or not lift.converged:
                continue
            # The object in the hand from here on (its box's points in the tool's frame): the motion back must not
            # sweep it through what it stood on.
            held = (outline.sample_points() - pose[:3, 3]) @ pose[:3, :3]
            reach = self._path(self._current(), pregrasp, obstacles)
            back = self._carry_back(lift.positions, obstacles, held)
            if reach is None or back is None:
                reason = "no collision-free arm motion gets there"
                blocked.append((candidate, pregrasp, approach, lift.positions, held, reach, back))
                continue
            return self._Grasp(candidate.kind, tuple(self._current()), reach, approach, lift.positions, back,
                               self._open_gap(candidate))
        # Every grasp the arm reaches is cut off by the straight motions: plan around what they hit, for the best
        # ranked grasps only.
        planner = ""  # why the planner found no motion, for the message
        for candidate, pregrasp, approach, lifted, held, straight_reach, straight_back in blocked[:PLANNED_CANDIDATES]:
            there = (MotionPlan(tuple(straight_reach), "", 0, 0.0) if straight_reach is not None
                     else self._plan(self._current(), pregrasp, obstacles))
            if there.waypoints is None:
                reason, planner = "no collision-free arm motion gets there", f": {there.failure}"
                continue
            away = (MotionPlan(tuple(straight_back), "", 0, 0.0) if straight_back is not None
                    else self._plan(lifted, tuple(self._tuck), obstacles, held))
            if away.waypoints is None:
                reason, planner = "no collision-free arm motion gets back with it", f": {away.failure}"
                continue
            return self._Grasp(candidate.kind, tuple(self._current()), list(there.waypoints), approach, lifted,
                               list(away.waypoints), self._open_gap(candidate))
        raise Unreachable(f"unreachable pose: {reason} to grasp {entity.name} from here "
                          f"({np.linalg.norm(horizontal):.2f} m from the base, {centre[2]:.2f} m high){planner}")

    def _hand_room(self, base: Pose2D, receptacle: EntityState, point: np.ndarray) -> float:
        """How far (m) the tool centre at ``point`` (base frame) is inside ``receptacle``'s interior walls,
        horizontally (negative: outside); infinite for a receptacle without an interior. The world graph's box of a
        drawer does not follow its pulled-out tray, so the arm's collision check cannot see the tray's walls."""
        if receptacle.interior_min is None or receptacle.interior_max is None:
            return math.inf
        c, s = math.cos(base.yaw), math.sin(base.yaw)
        x, y = base.x + c * point[0] - s * point[1], base.y + s * point[0] + c * point[1]
        lo, hi = receptacle.interior_min, receptacle.interior_max
        return float(min(x - lo[0], hi[0] - x, y - lo[1], hi[1] - y))

    def _open_gap(self, candidate: GraspCandidate) -> float:
        """The gripper's gap (its joints' sum) that opens the pads as far as ``candidate`` asks."""
        if candidate.pad_gap is None:
            return self.setup.open_gap
        gap = candidate.pad_gap - self.setup.pads_closed_width + self.setup.closed_gap
        return float(np.clip(gap, self.setup.closed_gap, self.setup.open_gap))

    def _release_plan(self, world: WorldState, held: EntityState, target: EntityState) -> PhysicalManipulation._Release:
        receptacle, near = target, None
        if target.kind is EntityKind.OBJECT:
            if target.parent is None or target.parent not in world.entities:
                raise Planning(SkillStatus.EXECUTION_FAILED, f"{target.name} stands on nothing to put beside it on",
                               retryable=False)
            receptacle, near = world.entities[target.parent], target
        inside = receptacle.interior_min is not None and receptacle.interior_max is not None and (
            not receptacle.articulated or receptacle.is_open)
        if inside:
            lo, hi = np.array(receptacle.interior_min), np.array(receptacle.interior_max)
            relation = "in"
        else:
            lo, hi = np.array(receptacle.bbox_min), np.array(receptacle.bbox_max)
            lo[2] = hi[2]
            relation = "on"
        half = (held.bbox_max[2] - held.bbox_min[2]) / 2
        # Where the hand holds the object (a tall one is held near its top): its centre and its box's points in the
        # tool's frame, from the world graph's pose of it and the arm's joints.
        tool = self.kinematics.forward(self._current())
        held_outline = Outline.of(held, world.robot)
        held_offset = (held_outline.centre - tool[:3, 3]) @ tool[:3, :3]
        held_points = (held_outline.sample_points() - tool[:3, 3]) @ tool[:3, :3]
        others = [e for e in world.entities.values() if e.parent == receptacle.name and e.name != held.name]
        by_rim = held_by_rim(held_outline, self.setup.open_width)
        # An object held by its rim between walls (a sink, a drawer): its centre far enough in that the hand beside it
        # keeps HAND_ROOM from them.
        margin = max(self.setup.edge_margin, held_outline.half[0] + HAND_ROOM) if by_rim and inside else None
        spot = self._spot(world.robot, lo, hi, others, near, margin)
        if spot is None:
            # The spot is chosen over the whole surface or interior, not from where the base stands.
            raise Planning(SkillStatus.EXECUTION_FAILED, f"no free spot {relation} {receptacle.name} within reach",
                           retryable=False)
        obstacles = Obstacles.of(world, {held.name}, {receptacle.name} if inside else set())
        # The hand comes down onto the surface (a top), or into the interior, which the obstacles already leave free.
        near_obstacles = obstacles if inside else obstacles.without({receptacle.name})
        # The object's centre sits where the grasp holds it, the tool centre; release it just above the surface.
        centre = np.array([spot[0], spot[1], lo[2] + half + self.setup.surface_clearance])
        centre_base = self._in_base(world.robot, centre)
        horizontal = np.array([centre_base[0], centre_base[1], 0.0])
        across = np.cross((0.0, 0.0, 1.0), horizontal / max(np.linalg.norm(horizontal), 1e-9))
        down = np.array([0.0, 0.0, -1.0])
        # From above (a top, a drawer, a sink), else level through the front (a fridge, a cabinet).
        releases: list[tuple[np.ndarray, np.ndarray]] = [
            (approach, across) for approach in (down, *(_tilted(horizontal, angle) for angle in TILTS), horizontal)]
        if by_rim:
            # Taken by the rim from above (grasp.rim_candidates): released from above only, so that it stands upright
            # again; the hand (off the object's centre by its radius) beside the spot, on the robot's side first.
            along = horizontal / max(float(np.linalg.norm(horizontal)), 1e-9)

            def hand_at(hand: np.ndarray) -> np.ndarray:
                return centre_base - tool_pose(centre_base, down, hand)[:3, :3] @ held_offset

            hands = sorted([across, -across, along, -along], key=lambda hand: float(np.linalg.norm(hand_at(hand))))
            if inside:  # between a sink's or a drawer's walls, where they leave the hand room first
                hands = _roomy_first(hands, lambda hand: self._hand_room(world.robot, receptacle, hand_at(hand)))
            releases = [(down, hand) for hand in hands]
        # Releases the arm reaches but the straight motions to or from collide: (the line down, the motion there or
        # None, the motion back or None).
        blocked: list[tuple[list[tuple[float, ...]], list[tuple[float, ...]] | None, list[tuple[float, ...]] | None]] = []
        for approach, hand in releases:
            pose = tool_pose(centre_base, approach, hand)
            pose[:3, 3] -= pose[:3, :3] @ held_offset  # the object's centre, not the tool's, at the release point
            line = self._line(pose, -self.setup.pregrasp_distance, obstacles, near_obstacles)
            if line is None:
                continue
            reach = self._path(self._current(), line[0], obstacles, held_points)
            back = self._path(line[0], tuple(self._tuck), obstacles)
            if reach is not None and back is not None:
                return self._Release(relation, reach, line[1:], list(reversed(line[:-1])) + back)
            blocked.append((line, reach, back))
        if not blocked:
            raise Unreachable(f"unreachable pose: no arm configuration reaches {relation} {receptacle.name} from here")
        detail = ""
        for line, straight_reach, straight_back in blocked[:PLANNED_CANDIDATES]:  # around what the straight motions hit
            there = (MotionPlan(tuple(straight_reach), "", 0, 0.0) if straight_reach is not None
                     else self._plan(self._current(), line[0], obstacles, held_points))
            away = there if there.waypoints is None else (
                MotionPlan(tuple(straight_back), "", 0, 0.0) if straight_back is not None
                else self._plan(line[0], tuple(self._tuck), obstacles))
            if there.waypoints is not None and away.waypoints is not None:
                return self._Release(relation, list(there.waypoints), line[1:],
                                     list(reversed(line[:-1])) + list(away.waypoints))
            detail = away.failure
        raise Unreachable(f"unreachable pose: no collision-free arm motion reaches {relation} {receptacle.name} "
                          f"from here: {detail}")

    def _spot(self, base: Pose2D, lo: np.ndarray, hi: np.ndarray, others: list[EntityState],
              near: EntityState | None, margin: float | None = None) -> tuple[float, float] | None:
        """The free point of the box's top face nearest the robot (or nearest ``near``), ``margin`` (the arm setup's
        edge margin by default) inside its edges."""
        margin = self.setup.edge_margin if margin is None else margin
        x0, y0, x1, y1 = lo[0] + margin, lo[1] + margin, hi[0] - margin, hi[1] - margin
        if x0 > x1:
            x0 = x1 = (lo[0] + hi[0]) / 2
        if y0 > y1:
            y0 = y1 = (lo[1] + hi[1]) / 2
        xs = np.linspace(x0, x1, max(2, math.ceil((x1 - x0) / 0.03) + 1))
        ys = np.linspace(y0, y1, max(2, math.ceil((y1 - y0) / 0.03) + 1))
        grid = np.stack(np.meshgrid(xs, ys), axis=-1).reshape(-1, 2)
        free = np.ones(len(grid), dtype=bool)
        for other in others:
            r = max(other.bbox_max[0] - other.bbox_min[0], other.bbox_max[1] - other.bbox_min[1]) / 2
            d = np.hypot(grid[:, 0] - other.position[0], grid[:, 1] - other.position[1])
            free &= d >= r + self.setup.neighbour_margin
        if not free.any():
            return None
        anchor = np.array(near.position[:2]) if near is not None else np.array([base.x, base.y])
        candidates = grid[free]
        best = candidates[np.argmin(np.hypot(*(candidates - anchor).T))]
        return float(best[0]), float(best[1])

    # ------------------------------------------------------------------ the base, the tuck after a failure

    def _reposition(self, world: WorldState, skill: str, target: str, unreachable: Unreachable,
                    plan: Callable[[WorldState], _PlanT]) -> _Repositioned[_PlanT]:
        """Move the base so that ``plan`` (a grasp or a release plan) reaches ``target``, once: turn in place to face
        it, plan again, and if that is still out of reach, go to the nearest of Go to's poses near it
        (:func:`~homiebot.skills.physical.navigation.approach_poses`, at most REPOSITION_GOALS goals within
        REPOSITION_RANGE) and plan again. Both moves are NavigateToPose goals, as Go to sends them.

        Poses from which the same plan (``skill`` on ``target`` in the same world, :meth:`_tried_key`) already failed
        to reach, in this try or an earlier one, are not gone to again: the executor's next try, and the planner's
        next [Pick, X] after an E1, go on to poses not tried yet instead of back and forth between the same two.
        When none is left, the Unreachable raised is not retryable.

        Only when the oracle skill would act from where the base stands (EMMOE's distance rule: the target's box
        between NEAR_THRESHOLD_M and FAR_THRESHOLD_M from the footprint) and the world graph can be read again;
        else ``unreachable`` is raised as it is. A target still out of reach after the moves raises Unreachable with
        what the base did; a base stopped on the way raises Planning (``EXECUTION_FAILED``) with Nav2's message.
        """
        if self.world is None or not NEAR_THRESHOLD_M <= world.reach_distance(target) <= FAR_THRESHOLD_M:
            raise unreachable
        key = self._tried_key(world, skill, target)
        tried = self._tried_poses.pop(key, [])
        if len(self._tried_poses) >= TRIED_TARGETS_KEPT:
            del self._tried_poses[next(iter(self._tried_poses))]  # the oldest
        self._tried_poses[key] = tried
        tried.append(world.robot)  # the plan from here did not reach

        def new(pose: Pose2D) -> bool:
            return not any(math.hypot(pose.x - t.x, pose.y - t.y) <= REPOSITION_SAME_POSE
                           and abs(math.remainder(pose.yaw - t.yaw, math.tau)) <= REPOSITION_SAME_YAW for t in tried)

        x, y = world.entities[target].position[:2]
        base = world.robot
        travelled, moves = 0.0, []
        last = unreachable
        facing = facing_pose(base.x, base.y, (x, y))
        turn = math.remainder(facing.yaw - base.yaw, math.tau)
        if abs(turn) > FACING_TOLERANCE and new(facing):
            turned = self.driver.navigate_to_pose(facing)
            travelled += turned.distance_travelled
            self._base_stopped(turned, target, f"turning to face {target}", travelled)
            if turned.succeeded:
                moves.append(f"turned {math.degrees(turn):+.0f} degrees to face {target}")
                world = self.world()
                try:
                    return _Repositioned(plan(world), world, travelled, _moves(moves))
                except Unreachable as failure:
                    last = failure
                    tried.extend((facing, world.robot))
        here = world.robot
        near = [pose for pose in approach_poses(world, target, object_gaps=REPOSITION_GAPS)
                if 0.05 < math.hypot(pose.x - here.x, pose.y - here.y) <= REPOSITION_RANGE]
        goals = [pose for pose in near if new(pose)]
        refused = []
        for goal in goals[:REPOSITION_GOALS]:
            approached = self.driver.navigate_to_pose(goal)
            travelled += approached.distance_travelled
            self._base_stopped(approached, target, f"moving closer to {target}{_moves(moves)}", travelled)
            if not approached.succeeded:
                refused.append(approached.error_msg)
                tried.append(goal)  # the base cannot get there
                continue
            moves.append(f"moved {math.hypot(goal.x - here.x, goal.y - here.y):.2f} m to a pose near {target}")
            world = self.world()
            try:
                return _Repositioned(plan(world), world, travelled, _moves(moves))
            except Unreachable as failure:
                last = failure
                tried.extend((goal, world.robot))
                break
        else:
            if not near:
                moves.append(f"found no free pose within {REPOSITION_RANGE:.1f} m near {target} to move to")
            elif not goals:
                moves.append(f"had tried every pose within {REPOSITION_RANGE:.1f} m near {target} already")
            else:
                moves.append(f"could not move closer: no goal near {target} was reached (last: {refused[-1]})")
        # Nothing left to move to: the same plan from the same poses fails the same way on every further try.
        exhausted = not any(new(pose) for pose in near)
        if exhausted:
            self._exhausted.add(key)
        still = Unreachable(f"{last.result.detail}{_moves(moves)}", retryable=not exhausted)
        still.travelled = travelled
        raise still from last

    def _out_of_reach_everywhere(self, world: WorldState, skill: str, target: str) -> SkillResult | None:
        """The result of a Pick or Put that earlier tries found out of reach from where the base stands and from every
        pose a reposition could go to (:meth:`_reposition`), without planning again; None when that is not known."""
        if self.world is None or target not in world.entities:
            return None
        key = self._tried_key(world, skill, target)
        here = world.robot
        if key not in self._exhausted or not any(
                math.hypot(here.x - t.x, here.y - t.y) <= REPOSITION_SAME_POSE
                and abs(math.remainder(here.yaw - t.yaw, math.tau)) <= REPOSITION_SAME_YAW
                for t in self._tried_poses.get(key, ())):
            return None
        return SkillResult(SkillStatus.EXECUTION_FAILED,
                           f"unreachable pose: {target} was out of reach from here and from every pose within "
                           f"{REPOSITION_RANGE:.1f} m near it in earlier tries", retryable=False)

    @staticmethod
    def _tried_key(world: WorldState, skill: str, target: str) -> tuple[object, ...]:
        """What decides whether ``skill`` reaches ``target`` from a base pose, besides the pose: the target's place
        (1 cm) and its receptacle's (a door opened since changes what reaches in), and what the hand holds."""
        entity = world.entities[target]
        receptacle = world.entities.get(entity.parent) if entity.parent is not None else None
        return (skill, target, tuple(np.round(entity.position, 2).tolist()), entity.is_open,
                None if receptacle is None else (receptacle.name, receptacle.is_open), world.held)

    @staticmethod
    def _base_stopped(result: NavigateResult, target: str, doing: str, travelled: float) -> None:
        """A base stopped on its way (Nav2's 1xx, an abort without a code): the robot moved, so it is the skill's
        failure (as Go to reports it), not a pose to skip."""
        if result.succeeded or int(result.error_code) >= 200:
            return
        words = (f"nav2 error {int(result.error_code)}" if result.error_code is not NavErrorCode.NONE
                 else "aborted without an error code")
        stopped = Planning(SkillStatus.EXECUTION_FAILED, f"the base stopped while {doing}: {words}: {result.error_msg}")
        stopped.travelled = travelled
        raise stopped

    def _after_failure(self, failure: Planning, world: WorldState, held: np.ndarray | None, moved: str,
                       travelled: float) -> SkillResult:
        """The failed skill's result, after the arm went back to the tuck (checked, :meth:`_back_to_tuck`) or said
        why it could not."""
        stuck = None if self._tucked() else self._back_to_tuck(self._obstacles_now(world), held)
        detail = failure.result.detail
        if moved and not detail.endswith(moved):
            detail += moved
        if stuck is not None:
            detail += f"; {stuck}"
        return SkillResult(failure.result.status, detail, max(travelled, failure.travelled), failure.result.retryable)

    def _tucked(self) -> bool:
        return float(np.max(np.abs(np.asarray(self._current()) - self._tuck))) <= TUCKED_TOLERANCE

    def _obstacles_now(self, fallback: WorldState) -> Obstacles:
        """The world graph's boxes as they are now (read again when the skills can), else ``fallback``'s."""
        return Obstacles.of(self.world() if self.world is not None else fallback, set())

    def _held_points(self, world: WorldState) -> np.ndarray | None:
        """The held object's box points in the tool's frame (from the world graph's pose of it and the arm's
        joints), or None when the hand is empty."""
        held = world.entities.get(world.held) if world.held is not None else None
        if held is None:
            return None
        tool = self.kinematics.forward(self._current())
        return np.asarray((Outline.of(held, world.robot).sample_points() - tool[:3, 3]) @ tool[:3, :3])

    def _back_to_tuck(self, obstacles: Obstacles, held: np.ndarray | None,
                      via: Sequence[Sequence[float]] = ()) -> str | None:
        """Move the arm from where it is to the tuck through a motion the collision check clears (with ``held``, the
        object's points in the tool's frame): along ``via`` when each of its segments is clear, else straight or
        through the tuck (:meth:`_path`), else planned (:meth:`_plan`). What the arm touches where it stands (it
        stopped against something) does not count against the motion that leaves it (:meth:`_escape`). None when
        the arm is tucked; else why not (the arm is then left where it is: no goal is sent for a motion that
        sweeps through the graph's boxes)."""
        current = self._current()
        tuck = tuple(self._tuck)
        obstacles = self._escape(current, obstacles, held)
        waypoints: Sequence[Sequence[float]] | None = None
        if via and all(self._segment_clear(a, b, obstacles, held)
                       for a, b in zip([current, *via[:-1]], via, strict=True)):
            waypoints = [*via, tuck] if not np.allclose(via[-1], tuck, atol=TUCKED_TOLERANCE) else list(via)
            if len(waypoints) > len(via) and not self._segment_clear(via[-1], tuck, obstacles, held):
                waypoints = None
        if waypoints is None:
            waypoints = self._path(current, tuck, obstacles, held)
        if waypoints is None:
            plan = self._plan(current, tuck, obstacles, held)
            if plan.waypoints is None:
                return f"the arm stays out: no collision-free motion back to the tuck ({plan.failure})"
            waypoints = list(plan.waypoints)
        moved = self._move(waypoints)
        if not moved.succeeded:
            return f"the arm could not tuck: {moved.error_string}"
        return None

    def _escape(self, q: Sequence[float], obstacles: Obstacles, held: np.ndarray | None) -> Obstacles:
        """``obstacles`` without the boxes (and walls) the arm or ``held`` at ``q`` already touches, at most
        ESCAPE_BOXES of them: an arm stopped against a counter leaves it, and the check would refuse every motion
        from there."""
        clear = self._clear(obstacles, held)
        for _ in range(ESCAPE_BOXES):
            if clear(q):
                break
            tight = dataclasses.replace(obstacles, margin=HELD_MARGIN)
            touched = obstacles.hit(self.kinematics.link_points(q))
            if touched is None and held is not None:
                touched = tight.hit(self.kinematics.tool_points(q, held))
            if touched is None:
                break
            obstacles = (dataclasses.replace(obstacles, rooms=()) if touched == "a wall"
                         else obstacles.without({touched}))
            clear = self._clear(obstacles, held)
        return obstacles

    # ------------------------------------------------------------------ motion

    def _in_base(self, base: Pose2D, point: ArrayLike) -> np.ndarray:
        point = np.asarray(point, dtype=float)
        c, s = math.cos(base.yaw), math.sin(base.yaw)
        dx, dy = point[0] - base.x, point[1] - base.y
        return np.array([c * dx + s * dy, -s * dx + c * dy, point[2]])

    def _seeds(self, target: np.ndarray, extra: Sequence[Sequence[float]] = ()) -> list[np.ndarray]:
        pan = math.atan2(target[1, 3], target[0, 3])
        seeds = [np.asarray(s, dtype=float) for s in extra]
        for seed in self.setup.reach_seeds:
            values = {**{j: 0.0 for j in self.setup.chain}, **seed, self.setup.pan_joint: pan}
            seeds.append(self.kinematics.vector(values))
        seeds.append(np.asarray(self._current(), dtype=float))
        return seeds

    def _current(self) -> tuple[float, ...]:
        joints = self.driver.joint_positions()
        return tuple(float(joints.get(j, 0.0)) for j in self.kinematics.joints)

    def _clear(self, obstacles: Obstacles, held: np.ndarray | None = None) -> Callable[[Sequence[float]], bool]:
        """Whether the arm at ``q`` keeps clear of ``obstacles``, and the object it holds (``held``: its points in
        the tool's frame) within HELD_MARGIN of them."""
        tight = dataclasses.replace(obstacles, margin=HELD_MARGIN)

        def clear(q: Sequence[float]) -> bool:
            if obstacles.hit(self.kinematics.link_points(q)) is not None:
                return False
            return held is None or tight.hit(self.kinematics.tool_points(q, held)) is None

        return clear

    def _carry_back(self, lifted: Sequence[float], obstacles: Obstacles, held: np.ndarray) -> list[tuple[float, ...]] | None:
        """Waypoints from the lifted grasp to the tuck with the object in the hand: as :meth:`_path` finds them,
        else drawn back level towards the base first (RETREATS, three straight steps), else None."""
        back = self._path(lifted, tuple(self._tuck), obstacles, held)
        if back is not None:
            return back
        start = self.kinematics.forward(lifted)
        towards = -start[:2, 3] / max(float(np.linalg.norm(start[:2, 3])), 1e-9)
        for distance in RETREATS:
            points = [tuple(lifted)]
            for k in range(1, 4):
                target = start.copy()
                target[:2, 3] += towards * distance * k / 3
                solution = self.kinematics.solve(target, [points[-1]], acceptable=self._clear(obstacles, held))
                if not solution.converged:
                    break
                points.append(solution.positions)
            else:
                rest = self._path(points[-1], tuple(self._tuck), obstacles, held)
                if rest is not None:
                    return points[1:] + rest
        return None

    def _line(self, pose: np.ndarray, back: float, obstacles: Obstacles, near: Obstacles,
              steps: int = 3) -> list[tuple[float, ...]] | None:
        """Joint positions along the straight line from ``back`` m along the tool's x axis to ``pose``: the first
        point solved from the seeds, clear of ``obstacles``, each next from the previous, clear of ``near`` (what
        the hand may come close to at the end: the surface under the object); None when out of reach."""
        start = pose.copy()
        start[:3, 3] += back * pose[:3, 0]
        first = self.kinematics.solve(start, self._seeds(start), acceptable=self._clear(obstacles))
        if not first.converged:
            return None
        points = [first.positions]
        for k in range(1, steps + 1):
            waypoint = pose.copy()
            waypoint[:3, 3] = start[:3, 3] + (pose[:3, 3] - start[:3, 3]) * k / steps
            solution = self.kinematics.solve(waypoint, [points[-1]], acceptable=self._clear(near))
            if not solution.converged:
                return None
            points.append(solution.positions)
        return points

    def _path(self, start: Sequence[float], goal: Sequence[float], obstacles: Obstacles,
              held: np.ndarray | None = None) -> list[tuple[float, ...]] | None:
        """Waypoints from ``start`` to ``goal`` whose joint-space segments stay clear of ``obstacles`` (with the held
        object's points, see :meth:`_clear`): straight when it is, else through the tuck (folded in the footprint,
        above counters), else None."""
        if self._segment_clear(start, goal, obstacles, held):
            return [tuple(goal)]
        tuck = tuple(self._tuck)
        if self._segment_clear(start, tuck, obstacles, held) and self._segment_clear(tuck, goal, obstacles, held):
            return [tuck, tuple(goal)]
        return None

    def _plan(self, start: Sequence[float], goal: Sequence[float], obstacles: Obstacles,
              held: np.ndarray | None = None) -> MotionPlan:
        """Waypoints from ``start`` to ``goal`` by the sampling planner (:mod:`.motion`), for a motion :meth:`_path`
        found no straight way for, with the same collision check, in the planner's budget."""
        key = _plan_key(start, goal, obstacles, held)
        failed = self._failed_plans.get(key)
        if failed is not None:
            return dataclasses.replace(failed, failure=f"{failed.failure}, in an earlier try from here", samples=0,
                                       seconds=0.0)
        scale = [10.0 if j == "torso_lift" else 1.0 for j in self.kinematics.joints]  # as _duration weighs them
        plan = plan_motion(start, goal, self._clear(obstacles, held), self.kinematics.lower, self.kinematics.upper,
                           weights=scale, settings=self.setup.planner, check_step=PATH_CHECK_STEP)
        logger.debug("motion planner: %s after %d samples in %.2f s (%d waypoints)",
                     "found" if plan.found else plan.failure, plan.samples, plan.seconds,
                     len(plan.waypoints or ()))
        if not plan.found:
            if len(self._failed_plans) >= FAILED_PLANS_KEPT:
                del self._failed_plans[next(iter(self._failed_plans))]  # the oldest
            self._failed_plans[key] = plan
        return plan

    def _segment_clear(self, a: Sequence[float], b: Sequence[float], obstacles: Obstacles,
                       held: np.ndarray | None = None) -> bool:
        # The start is where the arm is: a contact there (a door swung against the tucked arm) is not the motion's.
        return segment_clear(a, b, self._clear(obstacles, held), PATH_CHECK_STEP)

    def _duration(self, a: Sequence[float], b: Sequence[float]) -> float:
        scale = np.array([10.0 if j == "torso_lift" else 1.0 for j in self.kinematics.joints])
        travel = float(np.max(np.abs((np.asarray(b) - np.asarray(a)) * scale)))
        return max(self.setup.min_motion_time, travel / self.setup.joint_speed)

    def _move(self, waypoints: Sequence[Sequence[float]]) -> TrajectoryResult:
        """One FollowJointTrajectory goal through ``waypoints`` (chain order), timed by the joint speed."""
        current = self.driver.joint_positions()
        previous = [current.get(j, 0.0) for j in self.kinematics.joints]
        t = 0.0
        points = []
        for waypoint in waypoints:
            t += self._duration(previous, waypoint)
            points.append(TrajectoryPoint(tuple(float(v) for v in waypoint), t))
            previous = list(waypoint)
        return self.driver.follow_joint_trajectory(JointTrajectory(self.kinematics.joints, tuple(points)))

    def _expect(self, result: TrajectoryResult, doing: str) -> None:
        if not result.succeeded:
            raise Planning(SkillStatus.EXECUTION_FAILED, f"the arm stopped while {doing}: {result.error_string}")

    def _gripper(self, gap: float) -> None:
        self.driver.gripper_command(gap, self.setup.max_effort)

    def _gap(self) -> float:
        joints = self.driver.joint_positions()
        return float(sum(joints[j] for j in self.setup.gripper_joints))
