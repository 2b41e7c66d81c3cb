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

**Into a fridge or cabinet.** An opened piece's interior opens through its front face in the collision check (its
frame, top and floor stay solid); the hand is checked as its own outline (the palm and the open fingers) within a
smaller margin than the arm's thick links; the object to pick is in the check of the arm's way to the pre-grasp;
and when the straight motion to a pre-grasp or pre-release inside collides, the hand starts outside the opening and
goes straight in. So a can on a fridge's floor is taken as a Fetch-sized arm can take it, the torso lowered
(docs/robots.md, "Reaching into a fridge or cabinet"). The opened door's leaf, which the world graph lacks, is
assumed on either side of the opening (not on a side where the base stands); the sampling planner gets a larger
budget for the narrow way in under a low cabinet's top; and a Pick out of a fridge or cabinet that does not reach
first moves the base to the poses square in front of the opening nearest the object (navigation.front_poses).

**Put.** The release point is chosen from the receptacle's box: inside its interior (``interior_min`` /
``interior_max``; a fridge, an opened drawer, a sink) when it has one and is open, else on its top; the spot
nearest the robot, 8 cm inside the edges and 10 cm from the objects already there. The held object is brought
2 cm above the surface (its offset from the tool centre read from the world graph's pose of it) from above, released, and the arm retreats up and
tucks. The hand holds it rigidly, so an object the Pick took at a slant is released at the slant that sets it down
the way up it stood, when one reaches (from straight above, a box taken 60 degrees down would land tilted on a
corner and topple). "Next to" an object puts beside it on that object's receptacle. An object held by its rim is released from
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
from homiebot.skills.physical.grasp import (
    FIT_CLEARANCE,
    GraspCandidate,
    Outline,
    grasp_candidates,
    held_by_rim,
    impossible,
)
from homiebot.skills.physical.kinematics import ArmKinematics, IKSolution
from homiebot.skills.physical.motion import CHECK_STEP, MotionPlan, PlannerSettings, plan_motion, segment_clear
from homiebot.skills.physical.navigation import (
    approach_poses,
    door_leaf_slabs,
    facing_pose,
    front_poses,
    opening_side,
)
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
#: How far (degrees) a release may turn the held object from the way up it stood when the Pick took it and still
#: count as setting it down as it stood (_upright_first).
UPRIGHT_TOLERANCE = 10.0
#: How far (m) past an object's far face the space above the low surface it rests on counts as free (Obstacles.of).
BEYOND_RESTING = 0.05
#: How far (m) an object must have moved during a failed Pick for the result to say where it went (_knocked).
KNOCKED_DISTANCE = 0.05
#: Depth (m) of the back assumed along one long side of a seat (a sofa, couch or armchair) that an object rests on,
#: from the seat up to the piece's top: a sofa's back cushion and frame are about 20-25 cm deep (e.g. Neufert,
#: Architects' Data, "Seating"); the world graph gives the piece's box, not its back (Obstacles.of).
SEAT_BACK_DEPTH = 0.22
#: The name of a seat's back in the collision check (a part of the seat's box, as a drawer's tray is).
SEAT_BACK_PART = "/back"
#: Categories whose box holds a seat and a back above it.
SEATS = ("sofa", "couch", "armchair", "loveseat")
#: How deep (m) a chair's back may be, inside any side of its box (_chair_backs): a dining chair's back is a frame
#: or panel a few centimetres thick (the scene library's are 4 cm).
CHAIR_BACK_DEPTH = 0.06
#: A chair whose box rises less than this (m) above its seat has no back (a stool).
CHAIR_BACK_RISE = 0.1
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
#: How far apart (m) the poses in front of an opened fridge or cabinet are that a reposition goes to one after the
#: other (navigation.front_poses): the arm's reach low inside is spent within a few centimetres, and where the world
#: graph has the base fit but the simulator's or a real robot's map does not (a door leaf an inch farther out), the
#: next goal should be only a little farther from the object.
FRONT_GOALS_APART = 0.03
#: How many targets' tried base poses a manipulation remembers (_tried_poses).
TRIED_TARGETS_KEPT = 32
#: Joint-space obstacles the arm touches where it stopped that a motion back to the tuck may leave (_escape).
ESCAPE_BOXES = 4
#: The farthest (m) a pre-grasp or pre-release outside a fridge's or cabinet's opening may stand off
#: (PhysicalManipulation._outside_stand_off): beyond, the arm's reach is spent on the way in.
MAX_OUTSIDE_STAND_OFF = 0.6
#: The longest step (m) between the IK points of a long straight line in (PhysicalManipulation._line).
LINE_STEP = 0.05
#: A pulled-out drawer's front panel (Obstacles.of, _drawer_parts): how thick it is (m; the world graph does not say,
#: the scene library's are 4 and 6 cm), beyond the interior's outer face, as wide and as tall as the piece's box.
DRAWER_FRONT = 0.06
#: A drawer tray's walls and floor (m; the scene library's are 1.2 cm): the side walls stand inside the interior's
#: box, the floor under it.
TRAY_WALL = 0.015
#: How far (m) an interior must reach out of its piece's box to count as a pulled-out drawer's tray.
PULLED_OUT = 0.01
#: Name suffixes of a pulled-out drawer's parts in the collision check (Obstacles.of).
DRAWER_FRONT_PART = "/front"
#: ... and of an opened door's leaf, on either side of the opening.
DOOR_LEAF_PART = "/door"
DRAWER_TRAY_PART = "/tray"
DRAWER_FLOOR_PART = "/tray_floor"


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
    #: The planner's budget for a motion to or from a grasp or release inside an opened fridge, cabinet or drawer
    #: (its front opened in the collision check): the folded tuck and a posture reaching in low under the piece's top
    #: lie on either side of a narrow passage (the arm unfolds clear of the top and of the door leaves beside the
    #: opening, then swings in), which a search found after 1,400-4,200 samples (seeds 0-2) into emmoe-032's 1.1 m
    #: cabinet, where one over an open counter takes under 150. The same seed, so the first ``planner.max_samples``
    #: samples are the default search's: only a search that would have failed goes on (a failing one costs about
    #: 2 ms of CPU a sample).
    interior_planner: PlannerSettings = field(
        default_factory=lambda: PlannerSettings(max_samples=6000, time_budget=40.0))
    #: The hand, checked as its own shape rather than as the arm's thick line: the links it is made of (their points
    #: keep ``hand_margin``), and points on its outline in the tool's frame (the palm's box and the open fingers).
    #: The arm's links are capsules 4-5.5 cm thick, which Obstacles.margin covers; the hand is 5 cm thick but 12.8 cm
    #: wide with the fingers open, so one margin is too much above and below it (it could not enter a fridge low
    #: down or a cabinet through its front) and too little beside it. Without these, every link keeps the margin.
    hand_links: tuple[str, ...] = ()
    hand_outline: tuple[tuple[float, float, float], ...] = ()
    #: How close (m) the hand's outline may come to a box of the world graph: the hand's position error after a
    #: straight-line motion (IK tolerance and tracking, under a centimetre) plus some room.
    hand_margin: float = 0.015

    @property
    def pads_closed_width(self) -> float:
        """The pads' gap (m) with the gripper closed (``closed_gap`` is its joints' sum, not the pads' gap)."""
        return self.open_width - self.open_gap + self.closed_gap

    @property
    def least_width(self) -> float:
        """The narrowest thing (m) the fingers hold: their pads' gap when closed, plus the gap by which a closed
        gripper tells that it holds something (GRIPPED_GAP)."""
        return self.pads_closed_width + GRIPPED_GAP


def _box_outline(lo: tuple[float, float, float], hi: tuple[float, float, float],
                 spacing: float = 0.03) -> tuple[tuple[float, float, float], ...]:
    """Points on the faces of the box ``lo`` .. ``hi`` at most ``spacing`` apart along each edge (corners included):
    a thin box's outline for a point check with a margin of half the spacing or more."""
    axes = [np.linspace(a, b, max(2, math.ceil((b - a) / spacing - 1e-9) + 1)) for a, b in zip(lo, hi, strict=True)]
    points = []
    for x in axes[0]:
        for y in axes[1]:
            for z in axes[2]:
                on_face = x in (axes[0][0], axes[0][-1]) or y in (axes[1][0], axes[1][-1]) or z in (axes[2][0], axes[2][-1])
                if on_face:
                    points.append((float(x), float(y), float(z)))
    return tuple(points)


#: The embedded robot's hand in the tool frame (the grip site; x along the approach, y the fingers' closing axis), from
#: homiebot/sim/mujoco/robot.py: the palm box (0.03 x 0.06 x 0.025 half sizes, 0.09 m behind the grip site) and the
#: two fingers wide open (0.08 m long, their pads 0.014 m thick with the outer faces 0.064 m out, 0.024 m high): the
#: open hand is the widest the hand gets.
_SIM_PALM = ((-0.12, -0.06, -0.025), (-0.06, 0.06, 0.025))
_SIM_LEFT_FINGER = ((-0.06, 0.05, -0.012), (0.02, 0.064, 0.012))
_SIM_RIGHT_FINGER = ((-0.06, -0.064, -0.012), (0.02, -0.05, 0.012))


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
        hand_links=("gripper_link", robot_model.FINGER_JOINTS[0] + "_link", robot_model.FINGER_JOINTS[1] + "_link"),
        hand_outline=_box_outline(*_SIM_PALM) + _box_outline(*_SIM_LEFT_FINGER) + _box_outline(*_SIM_RIGHT_FINGER),
        reach_seeds=(
            reach(0.386, -0.6, 1.2, 1.0),
            reach(0.2, -0.3, 1.5, 1.2),
            reach(0.0, 0.2, 1.6, 1.2),
            reach(0.386, -0.9, 1.8, 0.6),
            reach(0.1, 0.5, 1.0, 1.0),
        ),
    )


def _point(v: np.ndarray) -> tuple[float, float, float]:
    return float(v[0]), float(v[1]), float(v[2])


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
    pose: a collision check of the arm's link points (kinematics.ArmKinematics.link_points) with a margin, the
    arm's (``margin``) or one per point (the hand's, :meth:`hit`)."""

    base: Pose2D
    boxes: tuple[tuple[str, np.ndarray, np.ndarray], ...]
    # The rooms' boxes (x0, y0, x1, y1): a point near none of their insides is in a wall (the world graph has rooms,
    # not walls; the walls stand on the rooms' edges).
    rooms: tuple[tuple[float, float, float, float], ...] = ()
    # Furniture -> its interior box: a point there is not in the furniture (the arm reaches into a fridge), but the
    # rest of its box is (its walls, top and floor). An opened door's interior reaches out through its front.
    cavities: Mapping[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    margin: float = 0.05  # m: the links' radius
    _arrays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] = field(init=False, repr=False, compare=False)
    _names: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # The boxes as arrays (B x 3) for a check of all points against all boxes at once; a box without a cavity
        # gets an empty one (from +inf to -inf).
        lo = np.array([b[1] for b in self.boxes], dtype=float).reshape(-1, 3)
        hi = np.array([b[2] for b in self.boxes], dtype=float).reshape(-1, 3)
        cavity_lo, cavity_hi = np.full_like(lo, np.inf), np.full_like(hi, -np.inf)
        for i, (name, _, _) in enumerate(self.boxes):
            if name in self.cavities:
                cavity_lo[i], cavity_hi[i] = self.cavities[name]
        object.__setattr__(self, "_arrays", (lo, hi, cavity_lo, cavity_hi))
        object.__setattr__(self, "_names", tuple(b[0] for b in self.boxes))

    @staticmethod
    def of(world: WorldState, ignore: set[str], open_into: set[str] = frozenset(),  # type: ignore[assignment]
           resting: EntityState | None = None) -> Obstacles:
        """The boxes of ``world`` but ``ignore``'s (and held objects); ``open_into``: furniture whose interior the
        arm may enter (through its top when the interior is open there, through its front when its door or drawer
        is open); ``resting``: an object on a surface lower than its furniture's box (a sofa's seat under its
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
        # A pulled-out drawer's front panel and tray stand outside its piece's box (the world graph's box is the closed
        # cabinet's): each is a box of its own, the tray hollow when the arm may reach into it.
        for piece in world.entities.values():
            if piece.kind is EntityKind.FURNITURE and piece.name not in ignore:
                boxes += _drawer_parts(piece)
        cavities = {}
        for name in open_into:
            e = world.entities.get(name)
            if e is None or e.interior_min is None or e.interior_max is None:
                continue
            bottom, top = np.array(e.interior_min, dtype=float), np.array(e.interior_max, dtype=float)
            if top[2] >= e.bbox_max[2] - 0.01:
                top[2] = np.inf  # open at the top (a sink's basin, a drawer's tray): nothing above the interior
            front = opening_side(world, e) if e.articulated and e.is_open else None
            if front is not None:
                # The door is open (or the drawer pulled out): its interior opens through the front face, between
                # the frame's sides, its top and its floor, which stay solid. A hinged door's leaf has swung out to
                # the side of the opening (the world graph has no leaves; Go to keeps the base out of their sweep).
                axis = front // 2  # west / east: x, south / north: y
                if front % 2 == 0:
                    bottom[axis] = -np.inf
                else:
                    top[axis] = np.inf
            cavities[name] = (bottom, top)
            if front is not None:
                boxes += _door_leaves(e, front, world.robot, world.robot_radius)
            tray = _tray_cavity(e)
            if tray is not None:
                cavities[name + DRAWER_TRAY_PART] = tray
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
                back = _seat_back(world, e, resting)
                if back is not None:
                    # A seat's back is a box of its own, solid whichever side the robot reaches from (from behind
                    # the seat the arm stopped on the back's top when only the object's far side counted), and kept
                    # when the hand's last straight move comes down onto the seat (Obstacles.without(the seat)).
                    back_axis, sign, face = back
                    back_lo, back_hi = np.array(e.bbox_min, dtype=float), np.array(e.bbox_max, dtype=float)
                    back_lo[2] = surface
                    if sign > 0:
                        back_lo[back_axis] = face
                    else:
                        back_hi[back_axis] = face
                    boxes += ((e.name + SEAT_BACK_PART, back_lo, back_hi),)
                boxes += _chair_backs(e, resting)
        return Obstacles(world.robot, boxes, rooms, cavities)

    def without(self, names: set[str]) -> Obstacles:
        return Obstacles(self.base, tuple(b for b in self.boxes if b[0] not in names), self.rooms, self.cavities,
                         self.margin)

    def hit(self, points: np.ndarray, margins: np.ndarray | None = None) -> str | None:
        """The first box a point (base frame) is within its margin of, or None: ``margins`` (m) one per point (the
        hand keeps a smaller one than the arm's thicker links), else ``margin`` for every point."""
        c, s = math.cos(self.base.yaw), math.sin(self.base.yaw)
        # The points' world coordinates as three rows (x, y, z): each row's bounds and comparisons run over
        # contiguous memory (a collision check of a straight motion tests several hundred points at once).
        world = np.empty((3, len(points)))
        world[0] = self.base.x + c * points[:, 0] - s * points[:, 1]
        world[1] = self.base.y + s * points[:, 0] + c * points[:, 1]
        world[2] = points[:, 2]
        lo, hi, cavity_lo, cavity_hi = self._arrays
        margin = np.full((1, len(points), 1), self.margin) if margins is None else np.asarray(
            margins, dtype=float).reshape(1, -1, 1)
        widest = float(margin.max()) if margin.size else self.margin
        # Only the boxes that overlap the points' bounds can hold one; all points against those at once.
        least, most = world.min(axis=1), world.max(axis=1)
        near = np.flatnonzero(np.all((hi + widest > least) & (lo - widest < most), axis=1))
        if len(near):
            points_ = world[:, :, None]  # 3 x N x 1 against the near boxes' 3 x 1 x n
            low, high = lo[near].T[:, None, :], hi[near].T[:, None, :]
            inside = np.all((points_ > low - margin) & (points_ < high + margin), axis=0) & ~np.all(
                (points_ > cavity_lo[near].T[:, None, :] + margin) & (points_ < cavity_hi[near].T[:, None, :] - margin),
                axis=0)
            touched = inside.any(axis=0)
            if touched.any():  # the first in the boxes' order, as a loop over them finds
                return self._names[int(near[np.argmax(touched)])]
        if self.rooms:
            # Half a wall (the scene library's are 0.1 m thick) plus the links' radius inside some room's box.
            inset = WALL_HALF_THICKNESS + 0.02  # the hand reaches to a counter's back edge
            if any(least[0] > x0 + inset and most[0] < x1 - inset and least[1] > y0 + inset and most[1] < y1 - inset
                   for x0, y0, x1, y1 in self.rooms):
                return None  # the points' bounds inside one room: every point is
            clear = np.zeros(len(points), dtype=bool)
            for x0, y0, x1, y1 in self.rooms:
                clear |= (world[0] > x0 + inset) & (world[0] < x1 - inset) & (world[1] > y0 + inset) & (world[1] < y1 - inset)
            if not clear.all():
                return "a wall"
        return None


def _seat_back(world: WorldState, e: EntityState, resting: EntityState) -> tuple[int, int, float] | None:
    """Where a seat's back stands, for an object resting on the seat of ``e`` (a sofa, couch or armchair): the
    horizontal axis across the piece (0: x, 1: y), the side (+1: towards the box's max, -1: its min) and the back's
    inner face (world frame), or None (not a seat, or no room box to tell the sides apart).

    The world graph gives the piece's axis-aligned box without its heading, so which long side carries the back is
    inferred: the one facing the nearer edge of the piece's room, as a sofa's back usually stands towards a wall
    and its front towards the room. The back is SEAT_BACK_DEPTH deep, but never reaches over the object itself
    (which rests on the seat in front of it): its inner face stays 1 cm past the object's box."""
    if not any(k in e.category.lower() for k in SEATS):
        return None
    room = world.entities.get(e.room) if e.room is not None else None
    if room is None or room.kind is not EntityKind.ROOM:
        return None
    size = np.array(e.bbox_max[:2]) - np.array(e.bbox_min[:2])
    axis = 0 if size[0] < size[1] else 1  # across the piece: its shorter horizontal side
    to_min = e.bbox_min[axis] - room.bbox_min[axis]
    to_max = room.bbox_max[axis] - e.bbox_max[axis]
    if to_max <= to_min:
        return axis, 1, max(e.bbox_max[axis] - SEAT_BACK_DEPTH, resting.bbox_max[axis] + 0.01)
    return axis, -1, min(e.bbox_min[axis] + SEAT_BACK_DEPTH, resting.bbox_min[axis] - 0.01)


def _chair_backs(e: EntityState, resting: EntityState) -> tuple[tuple[str, np.ndarray, np.ndarray], ...]:
    """Where a chair's back may stand, for an object resting on its seat: a slab CHAIR_BACK_DEPTH deep inside each
    of the four sides of the chair's box, from the seat to the top, each kept 1 cm off the object's box (world
    frame); nothing for a piece that is not a chair (a sofa's back is :func:`_seat_back`), or whose top is not
    CHAIR_BACK_RISE above the seat (a stool).

    A chair is about square, often stands free of the walls and is turned towards its table at any angle, so neither
    its shape nor its room tells which side its back is on (the world graph gives the box, not the heading). Without
    these slabs the space above the seat was free up to the chair's top, and in emmoe-048 the planner's way to the
    plum swung the forearm through the back (physics stopped it there, "blocked: chair"). The slabs keep the arm
    above the chair's top wherever it crosses the seat's edge; the seat's middle stays free."""
    category = e.category.lower()
    if "chair" not in category or any(k in category for k in SEATS):
        return ()
    surface = resting.bbox_min[2]
    if e.bbox_max[2] < surface + CHAIR_BACK_RISE:
        return ()
    backs = []
    for axis in (0, 1):
        for sign in (-1, 1):
            lo, hi = np.array(e.bbox_min, dtype=float), np.array(e.bbox_max, dtype=float)
            lo[2] = surface
            if sign > 0:
                lo[axis] = max(hi[axis] - CHAIR_BACK_DEPTH, resting.bbox_max[axis] + 0.01)
            else:
                hi[axis] = min(lo[axis] + CHAIR_BACK_DEPTH, resting.bbox_min[axis] - 0.01)
            if hi[axis] > lo[axis]:
                backs.append((e.name + SEAT_BACK_PART, lo, hi))
    return tuple(backs)


def _pulled_out(e: EntityState) -> tuple[int, int] | None:
    """The horizontal axis (0: x, 1: y) and the direction (-1, +1) in which an opened drawer's tray stands out of its
    piece's box (the world graph's interior is where the tray is now, its box the closed piece's), or None: not a
    pulled-out drawer (a fridge's or a cabinet's interior stays inside its box)."""
    if not e.articulated or not e.is_open or e.interior_min is None or e.interior_max is None:
        return None
    for axis in (0, 1):
        if e.interior_min[axis] < e.bbox_min[axis] - PULLED_OUT:
            return axis, -1
        if e.interior_max[axis] > e.bbox_max[axis] + PULLED_OUT:
            return axis, 1
    return None


def _drawer_parts(e: EntityState) -> tuple[tuple[str, np.ndarray, np.ndarray], ...]:
    """A pulled-out drawer's parts outside its piece's box, as boxes (world frame): the front panel beyond the
    interior's outer face (DRAWER_FRONT thick, as wide and as tall as the box); the tray's side walls, between the
    panel and the box, up to the interior's top (one box, hollow between the walls: :func:`_tray_cavity`); and the
    tray's floor (TRAY_WALL under the interior). Nothing for any other piece."""
    out = _pulled_out(e)
    if out is None:
        return ()
    axis, sign = out
    assert e.interior_min is not None and e.interior_max is not None
    inner, outer = np.array(e.interior_min, dtype=float), np.array(e.interior_max, dtype=float)
    face = (outer if sign > 0 else inner)[axis]  # the interior's outer face: the panel's inner face
    box_face = (e.bbox_max if sign > 0 else e.bbox_min)[axis]
    front_lo, front_hi = np.array(e.bbox_min, dtype=float), np.array(e.bbox_max, dtype=float)
    front_lo[axis], front_hi[axis] = sorted((face, face + sign * DRAWER_FRONT))
    walls_lo, walls_hi = inner.copy(), outer.copy()
    walls_lo[axis], walls_hi[axis] = sorted((face, box_face))
    floor_lo, floor_hi = walls_lo.copy(), walls_hi.copy()
    floor_lo[2], floor_hi[2] = inner[2] - TRAY_WALL, inner[2]
    return ((e.name + DRAWER_FRONT_PART, front_lo, front_hi), (e.name + DRAWER_TRAY_PART, walls_lo, walls_hi),
            (e.name + DRAWER_FLOOR_PART, floor_lo, floor_hi))


def _door_leaves(e: EntityState, front: int, base: Pose2D, radius: float) -> tuple[tuple[str, np.ndarray, np.ndarray], ...]:
    """Where the leaf of an opened hinged door stands (world frame), for the piece the arm reaches into: the world
    graph has no leaves and does not say on which side the door is hinged, so a slab on each side of the opening
    (navigation.door_leaf_slabs). Without them, a way in that swings the arm out beside the opening (the planner's, round the
    piece's top) was planned clear and stopped by the leaf under physics. A slab the base's footprint (``base``,
    ``radius``) overlaps is left out: the base stands there, so the leaf is on the other side. Nothing for a
    pulled-out drawer (its front and tray are :func:`_drawer_parts`)."""
    if _pulled_out(e) is not None:
        return ()
    leaves = []
    for leaf_lo, leaf_hi in door_leaf_slabs(e, front):
        gap = np.hypot(*np.maximum(np.maximum(leaf_lo[:2] - (base.x, base.y), 0.0), (base.x, base.y) - leaf_hi[:2]))
        if gap >= radius:
            leaves.append((e.name + DOOR_LEAF_PART, leaf_lo, leaf_hi))
    return tuple(leaves)


def _tray_cavity(e: EntityState) -> tuple[np.ndarray, np.ndarray] | None:
    """The free space between a pulled-out drawer's tray walls (:func:`_drawer_parts`), TRAY_WALL inside the
    interior's box on either side; None for any other piece."""
    out = _pulled_out(e)
    if out is None:
        return None
    axis, _ = out
    assert e.interior_min is not None and e.interior_max is not None
    lo, hi = np.array(e.interior_min, dtype=float), np.array(e.interior_max, dtype=float)
    across = 1 - axis
    lo[across] += TRAY_WALL
    hi[across] -= TRAY_WALL
    # Along the tray, the panel closes it on the outside and the piece's box on the inside; below is the floor's box,
    # above nothing.
    lo[axis], hi[axis], lo[2], hi[2] = -np.inf, np.inf, -np.inf, np.inf
    return lo, hi


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


def _distinct(poses: Sequence[Pose2D], apart: float) -> list[Pose2D]:
    """``poses`` in their order without those within ``apart`` (m) of an earlier one."""
    kept: list[Pose2D] = []
    for pose in poses:
        if all(math.hypot(pose.x - k.x, pose.y - k.y) >= apart - 1e-9 for k in kept):
            kept.append(pose)
    return kept


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


class _Clearance:
    """PhysicalManipulation._clear's check: called with a configuration, whether the arm there keeps clear of
    ``obstacles`` (and the held object's points of ``held`` within HELD_MARGIN of them); :meth:`many` answers the
    same for several configurations at once (motion.segment_clear tests a straight motion's with it): one test of
    all their points against the boxes instead of one per configuration."""

    def __init__(self, manipulation: PhysicalManipulation, obstacles: Obstacles, held: np.ndarray | None) -> None:
        self._manipulation = manipulation
        self._obstacles = obstacles
        self._tight = dataclasses.replace(obstacles, margin=HELD_MARGIN)
        self._held = held
        outline = manipulation._hand_outline  # noqa: SLF001 (the module's own)
        self._tool = tuple(p for p in (outline, held) if p is not None)

    def __call__(self, q: Sequence[float]) -> bool:
        return self.many((q,))

    def many(self, qs: Sequence[Sequence[float]]) -> bool:
        """Whether every configuration of ``qs`` is clear."""
        manipulation = self._manipulation
        posed = manipulation.kinematics.posed_points(qs, self._tool)
        if self._obstacles.hit(*manipulation._arm_points(self._obstacles, posed)) is not None:  # noqa: SLF001
            return False
        return self._held is None or self._tight.hit(posed[2][-1]) is None


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
        # Which of the kinematics' point links are the hand's (they keep the hand's margin), and the hand's outline.
        self._hand_point_links = np.array([link in setup.hand_links for link in kinematics.point_links], dtype=bool)
        self._hand_outline = np.asarray(setup.hand_outline, dtype=float) if setup.hand_outline else None
        # Motions the planner found none for, by what it was given (_plan_key): the executor tries a failed skill
        # again from the same state, and the same search would fail again after the whole budget.
        self._failed_plans: dict[tuple[object, ...], MotionPlan] = {}
        # Base poses from which a Pick's or Put's plan did not reach its target, by what the plan depends on
        # (_tried_key): a reposition goes to a pose not tried yet, and when none is left, another try cannot help.
        self._tried_poses: dict[tuple[object, ...], list[Pose2D]] = {}
        # Of those, the ones with no untried pose left: the same skill from one of their poses is refused at once.
        self._exhausted: set[tuple[object, ...]] = set()
        # The object the last Pick took, its box's points in the tool's frame as the gripper closed on it and the way
        # up it stood then (a unit vector, in the tool's frame): the hand carries it rigidly from there, whatever the
        # world graph's upright pose of it says (_held_points, _up_in_hand).
        self._holding: tuple[str, np.ndarray, np.ndarray] | None = None

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

    def _pick_refusal(self, world: WorldState, obj: str) -> tuple[EntityState, Outline] | SkillResult:
        """The object and its outline, or pick's refusal known before the arm moves (no such object, one no grasp
        fits, one out of reach from every pose tried before)."""
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
        return known if known is not None else (entity, outline)

    def _grasp_plan_of(self, obj: str) -> Callable[[WorldState], PhysicalManipulation._Grasp]:
        """The grasp plan of ``obj`` in a world (after a reposition: :meth:`_reposition`)."""
        return lambda w: self._grasp_plan(w, w.entities[obj], Outline.of(w.entities[obj], w.robot))

    def pick(self, world: WorldState, obj: str) -> SkillResult:
        checked = self._pick_refusal(world, obj)
        if isinstance(checked, SkillResult):
            return checked
        entity, outline = checked
        moved, travelled = "", 0.0
        self._holding = None
        try:
            try:
                grasp = self._grasp_plan(world, entity, outline)
            except Unreachable as unreachable:
                repositioned = self._reposition(world, "pick", obj, unreachable, self._grasp_plan_of(obj))
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
            # Where the object sits in the hand: the graph's pose of it before the grasp (from the base pose the grasp
            # was planned from) in the frame of the tool as it is now, closed on it.
            tool = self.kinematics.forward(self._current())
            grasped = Outline.of(world.entities[obj], world.robot).sample_points()
            self._holding = (obj, np.asarray((grasped - tool[:3, 3]) @ tool[:3, :3]), tool[:3, :3].T @ (0.0, 0.0, 1.0))
            self._expect(self._move([grasp.lift]), f"lifting {obj}")
            self._expect(self._move(grasp.back), f"carrying {obj}")
        except Planning as failure:
            self._gripper(self.setup.open_gap)
            return self._knocked(self._after_failure(failure, world, None, moved, travelled), world, obj)
        holding = self._holding_now()
        if holding != obj:
            if holding is not None:
                self._gripper(self.setup.open_gap)  # something else came along: let it go, as the failure says
            return self._knocked(_result(SkillStatus.EXECUTION_FAILED,
                                         f"{obj} slipped out of the gripper on the way back{moved}"), world, obj)
        return SkillResult(SkillStatus.SUCCESS, f"picked {obj} ({grasp.kind} grasp){moved}", travelled)

    def _holding_now(self) -> str | None:
        """What the hand holds at the end of a Pick. The driver's grasp, where it tells (the simulator's
        ``PhysicalDriver.held``: the one answer the executor's checks, the state and the next skills read too), else
        the fingers' gap: closed to within GRIPPED_GAP of shut, nothing (the object the Pick took otherwise). The
        gap alone is wrong on a thin wall: emmoe-050's bowl, taken by its 2 cm rim, was carried in the grasp while the
        fingers closed to 0.3 mm, and a Pick reported failed with the bowl in the hand left the executor's inventory
        empty, every Put refused (L2) and every Pick too (the hand is full)."""
        held = getattr(self.driver, "held", None)
        if callable(held):
            answer = held()
            return answer if isinstance(answer, str) else None
        holding = self._holding[0] if self._holding is not None else None
        return holding if self._gap() > self.setup.closed_gap + GRIPPED_GAP else None

    def pick_stance(self, world: WorldState, obj: str) -> tuple[WorldState, str, float] | SkillResult:
        """Where :meth:`pick` would act from, without reaching: its refusals before the arm moves (no such object, one
        no grasp fits, one out of reach from every pose tried before), and the base turned or moved as pick moves it
        when no grasp reaches from where it stands (:meth:`_reposition`). Returns the world from there, pick's words for
        the move ("" when none) and the metres the base travelled, or the failure pick would report. A learned Pick
        (homiebot/skills/learned_skill.py) runs its policy from there, as the recorded demonstrations started there."""
        checked = self._pick_refusal(world, obj)
        if isinstance(checked, SkillResult):
            return checked
        entity, outline = checked
        try:
            try:
                self._grasp_plan(world, entity, outline)
                return world, "", 0.0
            except Unreachable as unreachable:
                repositioned = self._reposition(world, "pick", obj, unreachable, self._grasp_plan_of(obj))
                return repositioned.world, repositioned.moves, repositioned.travelled
        except Planning as failure:
            return SkillResult(failure.result.status, failure.result.detail, failure.travelled, failure.result.retryable)

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
            self._holding = None
            self._gripper(self.setup.open_gap)
            self._expect(self._move(release.back), f"retreating from {place}")
        except Planning as failure:
            return self._after_failure(failure, world, held_points, moved, travelled)
        return SkillResult(SkillStatus.SUCCESS, f"released {obj} {release.relation} {place}{moved}", travelled,
                           released_at=release.centre)

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
        centre: tuple[float, float, float] = (0.0, 0.0, 0.0)  # the object's centre where the hand lets go (map frame)

    def _grasp_plan(self, world: WorldState, entity: EntityState, outline: Outline) -> PhysicalManipulation._Grasp:
        centre = outline.centre
        horizontal = np.array([centre[0], centre[1], 0.0])
        receptacle = entity.parent if entity.relation == "in" else None
        resting = entity if entity.parent is not None and entity.relation == "on" else None
        obstacles = Obstacles.of(world, {entity.name}, {receptacle} if receptacle else set(), resting)
        # On the way to the pre-grasp the object is in the way as anything else is: an arm reaching low into a fridge
        # would sweep its forearm through the can (physics stops it there). Only the hand's approach from the
        # pre-grasp, whose fingers close around it, and the carry, with it in the hand, leave it out.
        reaching = Obstacles.of(world, set(), {receptacle} if receptacle else set(), resting)
        # The last few centimetres to the grasp come down onto what the object stands on (a pulled-out drawer's tray
        # floor with it; the tray's walls and the drawer's front stay in the way of the arm coming down into it).
        near = obstacles.without({entity.parent, entity.parent + DRAWER_FLOOR_PART}) if entity.parent else obstacles
        basin = world.entities.get(receptacle) if receptacle is not None else None
        if basin is not None and not basin.articulated and basin.name in obstacles.cavities:
            # In a basin (a sink): only its floor is what the object stands on. Its walls stay in the check, the
            # cavity reaching down through the floor: with the whole sink left out, emmoe-035's straight way down to
            # the mug in the sink swept the arm through the basin's wall ("blocked: sink").
            floor_lo, floor_hi = obstacles.cavities[basin.name]
            floor_lo = np.array(floor_lo, dtype=float)
            floor_lo[2] = -np.inf
            near = dataclasses.replace(obstacles, cavities={**obstacles.cavities, basin.name: (floor_lo, floor_hi)})
        # Across the object's narrow side first, the palm clear of it (grasp.grasp_candidates).
        reason = "no arm configuration reaches it"
        # Grasps the arm reaches but the straight motions to or from collide: (kind, pre-grasp, approach, lift, the
        # held object's points, the motion there or None, the motion back or None).
        blocked: list[tuple[GraspCandidate, tuple[float, ...], list[tuple[float, ...]], tuple[float, ...], np.ndarray,
                            list[tuple[float, ...]] | None, list[tuple[float, ...]] | None]] = []
        candidates = grasp_candidates(outline, self.setup.open_width, self.setup.palm_depth, self.setup.finger_reach,
                                      TILTS)
        walls = world.entities.get(receptacle) if receptacle is not None else None
        # A chair the object rests on, whose back the check assumes on any side (_chair_backs): the arm comes in
        # and goes out over its top.
        seat = (world.entities.get(resting.parent) if resting is not None and resting.parent is not None
                and _chair_backs(world.entities[resting.parent], resting) else None)
        if walls is not None:
            # Inside a drawer or a cabinet, the hand goes to the rim where the walls leave it room (_hand_room).
            candidates = _roomy_first(candidates, lambda c: self._hand_room(world.robot, walls, c.position),
                                      lambda c: c.kind == "rim")
        planner = ""  # why the planner found no motion, for the message
        planned = 0  # how many of the blocked grasps the planner has been tried for
        budget = self._budget(world, walls)

        def plan_blocked() -> PhysicalManipulation._Grasp | None:
            """Plan around what the straight motions hit, for the best ranked blocked grasps only."""
            nonlocal reason, planner, planned
            for candidate, pregrasp, approach, lifted, held, straight_reach, straight_back in blocked[
                    planned:PLANNED_CANDIDATES]:
                planned += 1
                there = (MotionPlan(tuple(straight_reach), "", 0, 0.0) if straight_reach is not None
                         else self._plan(self._current(), pregrasp, reaching, settings=budget))
                if there.waypoints is None:
                    reason, planner = "no collision-free arm motion gets there", f": {there.failure}"
                    continue
                away = (MotionPlan(tuple(straight_back), "", 0, 0.0) if straight_back is not None
                        else self._plan(lifted, tuple(self._tuck), obstacles, held, settings=budget))
                if away.waypoints is None:
                    reason, planner = "no collision-free arm motion gets back with it", f": {away.failure}"
                    continue
                return self._Grasp(candidate.kind, tuple(self._current()), list(there.waypoints), approach, lifted,
                                   list(away.waypoints), self._open_gap(candidate))
            return None

        for candidate in candidates:
            if blocked and candidate.width is not None and candidate.width > self.setup.open_width - 2 * FIT_CLEARANCE:
                # A grasp with room to spare that the planner gets to beats a tight one (the pads come down on the
                # object's edges: emmoe-001's 10 cm box in the 10 cm opening, when its 5.5 cm side was there to take).
                found = plan_blocked()
                if found is not None:
                    return found
            pose = tool_pose(candidate.position, candidate.approach, candidate.closing)
            # The full pre-grasp stand-off, else the shortest that keeps the finger tips clear of the object (a tall
            # object held near its top at the edge of the arm's reach).
            line = self._line(pose, -self.setup.pregrasp_distance, reaching, near)
            if line is None and candidate.clear_distance < self.setup.pregrasp_distance - 0.01:
                line = self._line(pose, -candidate.clear_distance, reaching, near)
            if line is None:
                logger.debug("grasp %s of %s closing %s: no clear pre-grasp and approach", candidate.kind,
                             entity.name, np.round(candidate.closing, 2))
                continue
            pregrasp, approach = line[0], line[1:]
            lift = self._lift(pose, approach[-1], near)
            if lift is None:
                logger.debug("grasp %s of %s: no clear lift", candidate.kind, entity.name)
                continue
            # The object in the hand from here on (its box's points in the tool's frame): the motion back must not
            # sweep it through what it stood on.
            held = (outline.sample_points() - pose[:3, 3]) @ pose[:3, :3]
            reach = self._path(self._current(), pregrasp, reaching)
            outside = self._outside_stand_off(world, walls, pose) if reach is None and walls is not None else None
            if reach is None and outside is None and seat is not None:
                # On a chair's seat, among the slabs where its back may stand: from above its top, straight down.
                outside = self._stand_off_out_of(world.robot, seat, pose)
            if outside is not None:
                # Inside a fridge or cabinet, from a pre-grasp outside its opening and straight in (_outside_stand_off).
                longer = self._line(pose, -outside, reaching, near, near_within=self.setup.pregrasp_distance)
                lift_there = self._lift(pose, longer[-1], near) if longer is not None else None
                reach_there = self._path(self._current(), longer[0], reaching) if longer is not None else None
                if longer is not None and lift_there is not None:
                    # Also when the motion there is not straight: the planner's way to a pre-grasp in the open in
                    # front of the cupboard is easier to find than one to a pre-grasp inside it.
                    pregrasp, approach, lift, reach = longer[0], longer[1:], lift_there, reach_there
            back = self._carry_back(lift.positions, obstacles, held,
                                    None if seat is None else (seat.bbox_max[2] + HELD_MARGIN + 0.02))
            if reach is None or back is None:
                logger.debug("grasp %s of %s: no straight motion %s", candidate.kind, entity.name,
                             "there" if reach is None else "back")
                reason = "no collision-free arm motion gets there"
                blocked.append((candidate, pregrasp, approach, lift.positions, held, reach, back))
                continue
            return self._Grasp(candidate.kind, tuple(self._current()), reach, approach, lift.positions, back,
                               self._open_gap(candidate))
        # Every grasp the arm reaches is cut off by the straight motions: plan around what they hit, for the best
        # ranked grasps only.
        found = plan_blocked()
        if found is not None:
            return found
        raise Unreachable(f"unreachable pose: {reason} to grasp {entity.name} from here "
                          f"({np.linalg.norm(horizontal):.2f} m from the base, {centre[2]:.2f} m high){planner}")

    def _lift(self, pose: np.ndarray, grasped: Sequence[float], near: Obstacles) -> IKSolution | None:
        """The arm lifting the object from the grasp ``pose`` (reached at ``grasped``): ArmSetup.lift up, or half as
        high where that is out of reach; None when neither is."""
        for height in (self.setup.lift, self.setup.lift / 2):
            lifted = pose.copy()
            lifted[2, 3] += height
            lift = self.kinematics.solve(lifted, [grasped], acceptable=self._clear(near))
            if lift.converged:
                return lift
        return None

    def _outside_stand_off(self, world: WorldState, receptacle: EntityState, pose: np.ndarray) -> float | None:
        """How far back along the approach (m) the tool must start for the whole hand to be outside ``receptacle``'s
        box, when the hand reaches into its interior through an opened door's or drawer's front (Obstacles.of) from
        farther than the usual pre-grasp: the arm then gets there in free space (a straight motion, no search among
        the frame's edges) and goes in along a straight line, as a person reaches into a cupboard. None when the
        receptacle has no such opening or the usual pre-grasp is outside already. A pulled-out drawer's box includes
        its tray and front (:func:`_drawer_parts`): the hand comes down into the tray from above its front's top."""
        if (receptacle.interior_min is None or not receptacle.articulated or not receptacle.is_open
                or opening_side(world, receptacle) is None):
            return None
        return self._stand_off_out_of(world.robot, receptacle, pose)

    def _stand_off_out_of(self, base: Pose2D, piece: EntityState, pose: np.ndarray) -> float | None:
        """How far back along the approach of the tool ``pose`` (base frame) the tool must start for the whole hand
        to be outside ``piece``'s box (a pulled-out drawer's tray and front included), or None when the usual
        pre-grasp is outside already or that is farther than MAX_OUTSIDE_STAND_OFF (:meth:`_outside_stand_off`; an
        object on a chair's seat is reached from above the chair's top the same way)."""
        c, s = math.cos(base.yaw), math.sin(base.yaw)
        rotation = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        start = rotation @ pose[:3, 3] + np.array([base.x, base.y, 0.0])
        back = -(rotation @ pose[:3, 0])
        lo, hi = np.array(piece.bbox_min, dtype=float), np.array(piece.bbox_max, dtype=float)
        for _, part_lo, part_hi in _drawer_parts(piece):
            # A pulled-out drawer: outside its tray and front as well (over the front panel, into the tray from above).
            lo, hi = np.minimum(lo, part_lo), np.maximum(hi, part_hi)
        if not (np.all(start > lo) and np.all(start < hi)):
            return None
        with np.errstate(divide="ignore"):
            exits = np.where(back > 1e-9, (hi - start) / back, np.where(back < -1e-9, (lo - start) / back, np.inf))
        # Past the box's face, the finger tips (finger_reach ahead of the tool centre) clear it by the hand's margin.
        distance = float(exits.min()) + self.setup.finger_reach + self.setup.hand_margin + 0.02
        if distance <= self.setup.pregrasp_distance + 0.02 or distance > MAX_OUTSIDE_STAND_OFF:
            return None
        return distance

    def _budget(self, world: WorldState, receptacle: EntityState | None) -> PlannerSettings:
        """The planner's budget for a grasp or release in ``receptacle`` (None: on a surface): the larger one
        (ArmSetup.interior_planner) inside an opened fridge, cabinet or drawer, whose front or tray the collision
        check opens (Obstacles.of); the usual one elsewhere, a sink's basin included."""
        if (receptacle is not None and receptacle.interior_min is not None and receptacle.articulated
                and receptacle.is_open and (opening_side(world, receptacle) is not None
                                            or _pulled_out(receptacle) is not None)):
            return self.setup.interior_planner
        return self.setup.planner

    def _hand_room(self, base: Pose2D, receptacle: EntityState, point: np.ndarray) -> float:
        """How far (m) the tool centre at ``point`` (base frame) is inside ``receptacle``'s interior walls,
        horizontally (negative: outside); infinite for a receptacle without an interior. Grasps and releases with room
        for the palm come first: the collision check sees a pulled-out drawer's tray walls (:func:`_drawer_parts`),
        but a rim grasp pressed against one would be planned only to be refused."""
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
        # Where the hand holds the object (a tall one is held near its top): its box's points in the tool's frame
        # (_held_points: as the Pick took it) and their centre.
        held_outline = Outline.of(held, world.robot)
        held_points = self._points_in_hand(world, held)
        held_offset = held_points.mean(axis=0)  # the 27 points are symmetric about the box's centre
        others = [e for e in world.entities.values() if e.parent == receptacle.name and e.name != held.name]
        by_rim = held_by_rim(held_outline, self.setup.open_width)
        # An object held by its rim between walls (a sink, a drawer): its centre far enough in that the hand beside it
        # keeps HAND_ROOM from them.
        margin = max(self.setup.edge_margin, held_outline.half[0] + HAND_ROOM) if by_rim and inside else None
        if inside and margin is None:
            # Between walls, the object as the hand carries it from above (a long one may lie across the fingers):
            # its farthest point from its centre, about the vertical, inside the walls with a centimetre to spare.
            carried = (held_points - held_offset) @ tool_pose((0.0, 0.0, 0.0), (0.0, 0.0, -1.0))[:3, :3].T
            extent = float(np.hypot(carried[:, 0], carried[:, 1]).max()) + 0.01
            margin = extent if extent > self.setup.edge_margin else None
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
        # Last, from above with the hand turned a quarter (the object with it: a long one held across the fingers
        # then lies across the robot's line of sight rather than along it, as a sink's narrow bowl may need).
        releases.append((down, horizontal / max(float(np.linalg.norm(horizontal)), 1e-9)))
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
        releases = self._upright_first(releases, self._up_in_hand(held))
        # Releases the arm reaches but the straight motions to or from collide: (the line down, the motion there or
        # None, the motion back or None).
        blocked: list[tuple[list[tuple[float, ...]], list[tuple[float, ...]] | None, list[tuple[float, ...]] | None]] = []
        for approach, hand in releases:
            pose = tool_pose(centre_base, approach, hand)
            pose[:3, 3] -= pose[:3, :3] @ held_offset  # the object's centre, not the tool's, at the release point
            # Its lowest point (upright: its bottom; taken at a slant and released from another side: a corner) the
            # surface clearance above the surface.
            lowest = float((held_points @ pose[:3, :3].T)[:, 2].min()) + pose[2, 3]
            pose[2, 3] += lo[2] + self.setup.surface_clearance - lowest
            line = self._line(pose, -self.setup.pregrasp_distance, obstacles, near_obstacles)
            if line is None:
                logger.debug("release of %s %s %s from %s: no clear approach", held.name, relation, receptacle.name,
                             np.round(approach, 2))
                continue
            reach = self._path(self._current(), line[0], obstacles, held_points)
            outside = self._outside_stand_off(world, receptacle, pose) if reach is None and inside else None
            if outside is not None:
                # Into a fridge or cabinet from outside its opening, straight in (_outside_stand_off).
                longer = self._line(pose, -outside, obstacles, near_obstacles,
                                    near_within=self.setup.pregrasp_distance)
                reach_there = self._path(self._current(), longer[0], obstacles, held_points) if longer else None
                logger.debug("release of %s in %s from %s, %.2f m back: %s", held.name, receptacle.name,
                             np.round(approach, 2), outside, "no clear line in" if longer is None else
                             "no straight motion there" if reach_there is None else "clear")
                if longer is not None:
                    # Also when the motion there is not straight: the planner's way to a pre-release in the open in
                    # front of the cupboard is easier to find than one to a pre-release inside it.
                    line, reach = longer, reach_there
            back = self._path(line[0], tuple(self._tuck), obstacles)
            logger.debug("release of %s %s %s from %s: straight motion there %s, back %s", held.name, relation,
                         receptacle.name, np.round(approach, 2), reach is not None, back is not None)
            if reach is not None and back is not None:
                return self._Release(relation, reach, line[1:], list(reversed(line[:-1])) + back, _point(centre))
            blocked.append((line, reach, back))
        if not blocked:
            raise Unreachable(f"unreachable pose: no arm configuration reaches {relation} {receptacle.name} from here")
        # The planner's ways to a pre-release outside a cupboard's opening first (_outside_stand_off: a longer line
        # in), then in their order.
        blocked.sort(key=lambda item: -len(item[0]))
        budget = self._budget(world, receptacle if inside else None)
        detail = ""
        for line, straight_reach, straight_back in blocked[:PLANNED_CANDIDATES]:  # around what the straight motions hit
            there = (MotionPlan(tuple(straight_reach), "", 0, 0.0) if straight_reach is not None
                     else self._plan(self._current(), line[0], obstacles, held_points, settings=budget))
            away = there if there.waypoints is None else (
                MotionPlan(tuple(straight_back), "", 0, 0.0) if straight_back is not None
                else self._plan(line[0], tuple(self._tuck), obstacles, settings=budget))
            if there.waypoints is not None and away.waypoints is not None:
                return self._Release(relation, list(there.waypoints), line[1:],
                                     list(reversed(line[:-1])) + list(away.waypoints), _point(centre))
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
        # In front of an opened fridge's or cabinet's opening first, in line with the object as near as the base
        # fits (navigation.front_poses), then Go to's poses.
        near = [pose for pose in _distinct(front_poses(world, target, REPOSITION_GAPS[0]), FRONT_GOALS_APART)
                + approach_poses(world, target, object_gaps=REPOSITION_GAPS)
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

    def _knocked(self, result: SkillResult, before: WorldState, obj: str) -> SkillResult:
        """``result`` with where ``obj`` is now added when a failed Pick left it out of the hand and away from where
        it was (knocked, or dropped when the arm stopped with it), as the world graph reads after the skill: the
        planner learns that it moved, and where to look for it."""
        if self.world is None or obj not in before.entities:
            return result
        now = self.world()
        entity = now.entities.get(obj)
        if entity is None or now.held == obj:
            return result
        if math.dist(entity.position, before.entities[obj].position) < KNOCKED_DISTANCE:
            return result
        if entity.parent is not None:
            where = f"{entity.relation} {entity.parent}"
        else:  # on the floor, or on something the graph does not name as a receptacle (the robot's own arm)
            where = "on the floor" if entity.bbox_min[2] < KNOCKED_DISTANCE else "on no furniture"
        x, y, z = entity.position
        detail = f"{result.detail}; {obj} was knocked out of place: it is {where} at ({x:.2f}, {y:.2f}, {z:.2f})"
        return dataclasses.replace(result, detail=detail)

    def _tucked(self) -> bool:
        return float(np.max(np.abs(np.asarray(self._current()) - self._tuck))) <= TUCKED_TOLERANCE

    def _obstacles_now(self, fallback: WorldState) -> Obstacles:
        """The world graph's boxes as they are now (read again when the skills can), else ``fallback``'s."""
        return Obstacles.of(self.world() if self.world is not None else fallback, set())

    def _held_points(self, world: WorldState) -> np.ndarray | None:
        """The held object's box points in the tool's frame (:meth:`_points_in_hand`), or None when the hand is
        empty."""
        held = world.entities.get(world.held) if world.held is not None else None
        return None if held is None else self._points_in_hand(world, held)

    def _points_in_hand(self, world: WorldState, held: EntityState) -> np.ndarray:
        """``held``'s box points in the tool's frame. The hand carries it rigidly: the points the Pick recorded as
        the gripper closed on it, when it took this object; else (an object in the hand from elsewhere) from the
        world graph's pose of it and the arm's joints now, which is right only while the tool keeps the orientation
        it had at the grasp (the graph keeps a held object upright, whereas the hand tilts it in the tuck)."""
        if self._holding is not None and self._holding[0] == held.name:
            return self._holding[1].copy()
        tool = self.kinematics.forward(self._current())
        return np.asarray((Outline.of(held, world.robot).sample_points() - tool[:3, 3]) @ tool[:3, :3])

    def _up_in_hand(self, held: EntityState) -> np.ndarray | None:
        """The way up ``held`` stood when this Pick took it, in the tool's frame (a unit vector); None for an object in
        the hand from elsewhere (a learned Pick's), whose pose in the hand is not known: the world graph keeps it
        upright whatever the tool's tilt now (the tuck's)."""
        if self._holding is not None and self._holding[0] == held.name:
            return self._holding[2].copy()
        return None

    def _upright_first(self, releases: list[tuple[np.ndarray, np.ndarray]], up: np.ndarray | None
                       ) -> list[tuple[np.ndarray, np.ndarray]]:
        """``releases`` (approach, closing direction) with those that set the held object down the way up it stood
        (``up``: :meth:`_up_in_hand`; within UPRIGHT_TOLERANCE) first, when the first does not; else (and when ``up``
        is not known) as they are. The hand holds the object rigidly, so a release turns it as the tool turns from
        its pose at the grasp: an object taken 60 degrees down and released from straight above comes down tilted
        30 degrees on a corner and topples (emmoe-056's 21 cm box, off the table's edge); released 60 degrees down it
        stands as it stood."""
        if up is None or not releases:
            return releases
        level = math.cos(math.radians(UPRIGHT_TOLERANCE))
        upright = [float((tool_pose((0.0, 0.0, 0.0), *release)[:3, :3] @ up)[2]) >= level for release in releases]
        if upright[0]:
            return releases
        order = sorted(range(len(releases)), key=lambda i: not upright[i])  # stable: in their order otherwise
        return [releases[i] for i in order]

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
            touched = self._arm_hit(obstacles, q)
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

    def _clear(self, obstacles: Obstacles, held: np.ndarray | None = None) -> _Clearance:
        """Whether the arm at ``q`` keeps clear of ``obstacles``, and the object it holds (``held``: its points in
        the tool's frame) within HELD_MARGIN of them."""
        return _Clearance(self, obstacles, held)

    def _arm_hit(self, obstacles: Obstacles, q: Sequence[float]) -> str | None:
        """The first box (or "a wall") the arm at ``q`` comes within its margin of: the links within
        ``obstacles.margin``, the hand's links and outline (ArmSetup.hand_outline) within ``hand_margin``."""
        tool = () if self._hand_outline is None else (self._hand_outline,)
        return obstacles.hit(*self._arm_points(obstacles, self.kinematics.posed_points((q,), tool)))

    def _arm_points(self, obstacles: Obstacles, posed: tuple[np.ndarray, np.ndarray, list[np.ndarray]]
                    ) -> tuple[np.ndarray, np.ndarray]:
        """The points :meth:`_arm_hit` tests and their margins, of one or more configurations (ArmKinematics.
        posed_points, the hand's outline first among its tool point sets). Which box a point hits first does not
        depend on the points' order (Obstacles.hit)."""
        points, links, tool = posed
        margins = np.where(self._hand_point_links[links], self.setup.hand_margin, obstacles.margin)
        if self._hand_outline is not None:
            points = np.vstack([points, tool[0]])
            margins = np.concatenate([margins, np.full(len(tool[0]), self.setup.hand_margin)])
        return points, margins

    def _carry_back(self, lifted: Sequence[float], obstacles: Obstacles, held: np.ndarray,
                    rise_to: float | None = None) -> list[tuple[float, ...]] | None:
        """Waypoints from the lifted grasp to the tuck with the object in the hand: as :meth:`_path` finds them,
        else drawn back level towards the base first (RETREATS, three straight steps), else (``rise_to``: a height in
        the base frame) raised straight up until the object's lowest point is that high (steps of LINE_STEP at
        most: out of a chair's seat over where its back may stand), else None."""
        back = self._path(lifted, tuple(self._tuck), obstacles, held)
        if back is not None:
            return back
        start = self.kinematics.forward(lifted)
        if rise_to is not None:
            lowest = float((held @ start[:3, :3].T)[:, 2].min()) + start[2, 3]
            if rise_to > lowest:
                steps = max(1, math.ceil((rise_to - lowest) / LINE_STEP - 1e-9))
                points = self._straight(lifted, start, np.array([0.0, 0.0, rise_to - lowest]), steps, obstacles, held)
                if points is not None:
                    rest = self._path(points[-1], tuple(self._tuck), obstacles, held)
                    if rest is None:
                        plan = self._plan(points[-1], tuple(self._tuck), obstacles, held)
                        rest = list(plan.waypoints) if plan.waypoints is not None else None
                    if rest is not None:
                        return points + rest
        towards = -start[:2, 3] / max(float(np.linalg.norm(start[:2, 3])), 1e-9)
        for distance in RETREATS:
            points = self._straight(lifted, start, np.array([*(towards * distance), 0.0]), 3, obstacles, held)
            if points is not None:
                rest = self._path(points[-1], tuple(self._tuck), obstacles, held)
                if rest is not None:
                    return points + rest
        return None

    def _straight(self, q: Sequence[float], pose: np.ndarray, shift: np.ndarray, steps: int, obstacles: Obstacles,
                  held: np.ndarray) -> list[tuple[float, ...]] | None:
        """Joint positions moving the tool from ``pose`` (the arm at ``q``) by ``shift`` (base frame) in ``steps``
        equal straight steps, each solved from the last and clear of ``obstacles`` with ``held``; None when a step
        has no such solution."""
        clear = self._clear(obstacles, held)
        points = [tuple(q)]
        for k in range(1, steps + 1):
            target = pose.copy()
            target[:3, 3] += shift * k / steps
            solution = self.kinematics.solve(target, [points[-1]], acceptable=clear)
            if not solution.converged:
                return None
            points.append(solution.positions)
        return points[1:]

    def _line(self, pose: np.ndarray, back: float, obstacles: Obstacles, near: Obstacles,
              steps: int = 3, near_within: float | None = None) -> list[tuple[float, ...]] | None:
        """Joint positions along the straight line from ``back`` m along the tool's x axis to ``pose``: the first
        point solved from the seeds, clear of ``obstacles``, each next from the previous, clear of ``near`` (what
        the hand may come close to at the end: the surface under the object); when a collision cuts that line off,
        from the next seeds, and then the same from ``pose`` back to the first point; None when out of reach.
        ``near_within``: only the points that close to ``pose`` (m) are checked against ``near``, the others against
        ``obstacles``, in steps of LINE_STEP at most (a long way in through a cupboard's front)."""
        start = pose.copy()
        start[:3, 3] += back * pose[:3, 0]
        if near_within is not None:
            steps = max(steps, math.ceil(abs(back) / LINE_STEP - 1e-9))
        waypoints = []
        for k in range(steps + 1):
            waypoint = pose.copy()
            waypoint[:3, 3] = start[:3, 3] + (pose[:3, 3] - start[:3, 3]) * k / steps
            check = (obstacles if k == 0 else near if near_within is None
                     or abs(back) * (steps - k) / steps <= near_within + 1e-9 else obstacles)
            waypoints.append((waypoint, self._clear(check)))
        # Each point is solved from its neighbour on the line, so the arm keeps the posture the line started from.
        # When a collision, not the reach, cuts that line off, the next seeds are tried, then the line from its end:
        # going down, the solver lowers the torso first and would lower the upper arm onto a drawer's front, where
        # up from the grasp it keeps the torso high.
        collided = False
        for order in (waypoints, waypoints[::-1]):
            if order is not waypoints and not collided:
                break
            end, end_clear = order[0]
            for seed in self._seeds(end):
                first = self.kinematics.solve(end, [seed], acceptable=end_clear)
                if not first.converged:
                    continue
                points = [first.positions]
                for target, clear in order[1:]:
                    solution = self.kinematics.solve(target, [points[-1]], acceptable=clear)
                    if not solution.converged:
                        collided = collided or solution.refused
                        break
                    points.append(solution.positions)
                else:
                    return points if order is waypoints else points[::-1]
                if not collided:
                    break  # out of reach along the line, not in the way of something
        return None

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
              held: np.ndarray | None = None, settings: PlannerSettings | None = None) -> MotionPlan:
        """Waypoints from ``start`` to ``goal`` by the sampling planner (:mod:`.motion`), for a motion :meth:`_path`
        found no straight way for, with the same collision check, in the planner's budget (``settings``, else
        ArmSetup.planner)."""
        settings = settings or self.setup.planner
        key = (*_plan_key(start, goal, obstacles, held), settings)
        failed = self._failed_plans.get(key)
        if failed is not None:
            return dataclasses.replace(failed, failure=f"{failed.failure}, in an earlier try from here", samples=0,
                                       seconds=0.0)
        scale = [10.0 if j == "torso_lift" else 1.0 for j in self.kinematics.joints]  # as _duration weighs them
        plan = plan_motion(start, goal, self._clear(obstacles, held), self.kinematics.lower, self.kinematics.upper,
                           weights=scale, settings=settings, check_step=PATH_CHECK_STEP)
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

    def _move(self, waypoints: Sequence[Sequence[float]], min_step: float = 0.0) -> TrajectoryResult:
        """One FollowJointTrajectory goal through ``waypoints`` (chain order), timed by the joint speed, each at
        least ``min_step`` seconds after the one before (a slow pull of a door: :mod:`.articulation`)."""
        current = self.driver.joint_positions()
        previous = [current.get(j, 0.0) for j in self.kinematics.joints]
        t = 0.0
        points = []
        for waypoint in waypoints:
            t += max(self._duration(previous, waypoint), min_step)
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
