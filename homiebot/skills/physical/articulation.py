"""Open and Close through the arm: a door turned on its hinge or a drawer slid, by the handle, with the gripper.

The skills see what :mod:`.manipulation` sees (the world graph's boxes, the base pose, the joint states) and act
only through a :class:`~homiebot.sim.robot_driver.RobotDriver`: NavigateToPose goals for the base,
FollowJointTrajectory goals planned with inverse kinematics (:mod:`.kinematics`) and GripperCommand goals.

**What the world graph does not say, and what is assumed instead.** The graph gives an articulated piece's box, its
interior and ``is_open``; it says neither whether it has a door or a drawer, nor on which side a door is hinged, nor
where its handle is. Here:

* a piece whose category or name says "drawer" has a drawer that slides straight out of its front; any other
  articulated piece a door hinged on one side of its front, as wide as the front;
* the front is the side opposite its back to the wall (:func:`.navigation.opening_side`, as Go to approaches it);
* the handle is where this scene library puts it (``homiebot/sim/mujoco/compiler.py``): a door's is upright,
  HANDLE_INSET from the door's free edge, at half the piece's height; a drawer's lies level across the middle of its
  front at DRAWER_HANDLE_HEIGHT of the piece's height. A robot with a handle detector would read these from its
  camera;
* a door's hinge side is found by trying: the gripper closes at the handle's place near one side of the front; when
  it closes on nothing (a grasp missed, read from the gripper's gap), the other side's. Once known, the skill keeps
  the side and the angle at which its hand let the door go, as a robot remembers what it did; a door it did not
  open itself is taken to stand at DOOR_NOMINAL_ANGLE (the library's doors open 1.6 rad, as navigation assumes).

**How the handle is moved.** The handle's path is a function of the joint (a door's angle: an arc about the hinge,
the hand keeping square to the door's outer face, its fingers closing across the upright handle; a drawer's slide: a
straight line out of the front, the fingers closing from above and below the level handle). A segment: choose a
base pose from which the arm reaches the handle now and as far along the path as possible, with the base's
footprint clear of the furniture, of the room's walls and of where the door or drawer will sweep in that segment;
drive there; plan the grasp (a pre-grasp 12 cm out from the handle, then straight in) and the path's waypoints with
IK; open the gripper, go in, close it on the handle, follow the waypoints in one trajectory, open the gripper, back
out and tuck. When the arm does not reach all the way, the next segment moves the base and grasps again, as a robot
opens a wide fridge door in two or three pulls (MAX_SEGMENTS). Close is the same, backwards: the door's handle (or
the drawer's, where the world graph's interior says the tray stands) held and pushed back along the path. The path's
waypoints are checked against the world graph's boxes (all but the moved piece's own, and what the arm already
comes near at the grasp) and it ends before the first one the arm would sweep into (a fruit bowl on the counter
beside a fridge); the next segment comes from another base pose. A segment that fails leaves the skill done when the
world graph already says what was asked ("part of the way", with why it went no further): it said the opposite
when the skill began, so the arm moved it. A push on a hinge side no grasp confirmed (a door found open, its side
guessed) that goes all the way while the world graph says the door did not go along is taken for the wrong side's,
and the skill starts again on the other side.

On the embedded simulator the grasp of a handle is
:class:`~homiebot.sim.mujoco.physical.FingerContactAttachment`: a weld between the gripper and the door's or
drawer's body while both fingers touch it, off when either lets go; the door turns on its hinge under physics
(damped, no spring), and where physics leaves its joint is the simulator's state (``is_open`` from half its range:
``homiebot.sim.mujoco.backend.OPEN_FRACTION``).

**Outcome.** Open succeeds when the world graph says open afterwards, Close when it says closed. Failures, in words
a planner can use, with the SkillStatus the executor maps onto EMMOE's codes: no base pose from which the arm
reaches the handle (``unreachable pose``), the gripper closed on nothing at either side (``grasp missed``), the
handle left the hand on the way (``slipped out of the gripper``), the arm stopped against something (``the arm
stopped ... blocked: ...``), the base could not get to a pose (``no path``), or the door or drawer did not get far
enough (``moved ... only to ...``).

**Failing fast.** A try that found no base pose or arm configuration for any hold, and left the world graph round the
piece, the skill's memory of the door and the base as they were, is not worth another: its result says so
(``SkillResult.retryable`` False, the executor's E1 at once), and the same request in the same situation fails at once
(:meth:`PhysicalArticulation._situation`). A hinge side a push showed wrong is not pushed again.

**The whole-body pull.** A door found open square by a wall with furniture before its free edge (apartment_5's
fridge, the oven 0.1 m beyond the edge) can be shut only by pulling that edge, and the arm takes it from one place
only, where the turning door meets the base after 0.08 rad (docs/results/physical-articulation-2026-11-30.md). Where
the driver moves the base and the arm together (``follow_whole_body_trajectory``: the base's planar joints in the
same trajectory as the arm's, under physics), a Close by the free edge whose plain pull falls short plans the base
along too (:meth:`PhysicalArticulation._whole_body_path`): every BODY_STEP of the door's arc, the smallest move of the
base that keeps it where the world graph says it fits and clear of where the door will stand next, with an arm
configuration near the last that keeps the hand on the edge, the arm clear of the graph's boxes. The edge is taken
just above the handle (BODY_EDGE_HEIGHT) from a 6 cm pre-grasp. Once the fingers have closed, the path is planned
again from where they hold the door, turned about the hinge with it. A motion stopped on the way that turned the door
counts as a segment, and the edge is taken again from where the base stands.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from homiebot.sim.robot_driver import (
    JointTrajectory,
    RobotDriver,
    TrajectoryErrorCode,
    TrajectoryPoint,
    TrajectoryResult,
)
from homiebot.skills.physical import navigation
from homiebot.skills.physical.kinematics import ArmKinematics
from homiebot.skills.physical.manipulation import ArmSetup, Obstacles, PhysicalManipulation, tool_pose
from homiebot.types import EntityKind, EntityState, Pose2D, SkillResult, SkillStatus, WorldState

logger = logging.getLogger(__name__)

#: From a door's free edge to its handle's middle (m), and the tool centre's distance out of the face when it holds a
#: handle (m): the library's handles stand 1-5 cm out of the face, and the fingers reach 2 cm past the tool centre.
HANDLE_INSET = 0.07
HANDLE_OUT = 0.03
#: A door's handle height as a fraction of the piece's, and a drawer's.
DOOR_HANDLE_HEIGHT = 0.5
DRAWER_HANDLE_HEIGHT = 0.65
#: Where a door the skill did not open itself is taken to stand (rad), and how far an Open turns one (rad).
DOOR_NOMINAL_ANGLE = 1.6
DOOR_OPEN_ANGLE = 1.45
#: How far (rad) a door pushed open swings on after the hand stops.
DOOR_COAST = 0.1
#: How far an Open pulls a drawer: this fraction of its interior's depth.
DRAWER_PULL_FRACTION = 0.85
#: A drawer's front panel's thickness (m) when the skill has not seen the drawer closed (the library's are 4 cm).
DRAWER_PANEL = 0.04
#: A Close counts as done when the hand's estimate of the joint is under this fraction of the open value.
CLOSED_FRACTION = 0.1
#: Waypoints along the handle's path: every this many rad (door) or m (drawer).
DOOR_STEP = 0.08
DRAWER_STEP = 0.04
#: The push that takes a door on from where one pull left it: the finger tips on its inner face this far from the
#: hinge (m), the tool centre PUSH_OFF off the face (the tips reach 2 cm past it), at this fraction of the piece's
#: height; it starts PUSH_LEAD (rad) behind where the hand says the door is, so as to meet it wherever it stands.
PUSH_RADIUS = 0.55
PUSH_OFF = 0.025
PUSH_HEIGHT = 0.5
PUSH_LEAD = 0.2
#: Length (m) of the pieces of a door in the arm's collision check (_Piece.leaf_boxes).
LEAF_PIECE = 0.1
#: How far (m) in from a door's free edge the tool centre takes it (the finger tips 2 cm further in).
EDGE_INSET = 0.03
#: How far (rad) to either side of the hand's estimate a missed re-grasp of a door's handle tries.
REGRASP_OFFSET = 0.08
#: How far (rad) a door pulled by its handle stands short of where the hand says when it lets go (emmoe-014's 0.9 m
#: cabinet door: the hand said 0.645 and 1.483 rad, the joint stood at 0.603 and 1.431; the arm gives under the pull).
PULL_LAG = 0.04
#: The pre-grasp's distance out from the handle along the approach (m), and the retreat's after letting go.
PREGRASP = 0.12
#: The whole-body pull (:meth:`PhysicalArticulation._whole_body_path`): waypoints every this many rad; the base's
#: moves tried between two (m, and rad of heading); how many waypoints ahead the base keeps clear of the door; the
#: largest change of an arm joint between two waypoints (rad); the base's speed (m/s) and turn rate (rad/s).
BODY_STEP = 0.05
BODY_MOVES = (0.0, 0.04, -0.04, 0.08)
BODY_TURNS = (0.0, -0.1, 0.1, -0.2, 0.2)
BODY_LOOKAHEAD = 2
BODY_JUMP = 0.5
BODY_SPEED, BODY_TURN_RATE = 0.1, 0.3
#: Where the whole-body pull takes the edge: just above the handle (the library's span 0.35-0.65 of the door's
#: height), as a fraction of the door's height, with the pre-grasp this far (m) out along the approach (apartment_5's
#: fridge by its wall: the 12 cm pre-grasp of the other holds is out of the arm's reach beyond the edge there, and
#: the low edge's meets the oven).
BODY_EDGE_HEIGHT = 0.7
BODY_PREGRASP = 0.06
#: Horizontal distance (m) from the base's centre within which the arm is tried on a waypoint.
REACH_MIN, REACH_MAX = 0.3, 0.85
#: Horizontal distance (m) from the base's centre within which a door's free edge is taken from the poses tried first.
GRASP_REACH = 0.75
#: Base poses tried per segment, and segments per skill.
POSES_TRIED = 6
MAX_SEGMENTS = 4
#: Clearance (m) of the base's footprint from what the door or drawer sweeps in a segment.
SWEEP_CLEARANCE = 0.06
#: Seconds per waypoint along the handle's path at least (a slow, steady pull).
PULL_STEP_TIME = 0.35
#: How many boxes the arm may already come near at the grasp and still have the path checked against the rest.
PATH_IGNORED = 4
#: What counts as "around" a piece for a hopeless try (m from its front's middle), and the rounding (m) of the world
#: graph's boxes when the skill tells whether anything there has changed since.
AROUND = 2.5
SITUATION_ROUNDING = 0.02
#: The same for the base's place (m) and heading (rad).
BASE_ROUNDING = 0.05
YAW_ROUNDING = 0.1


@dataclass(frozen=True)
class _Piece:
    """An articulated piece as the skill models it (module docstring), in the world frame."""

    name: str
    drawer: bool
    out: np.ndarray  # unit, horizontal: out of the front
    along: np.ndarray  # unit, horizontal: along the front (out rotated +90 degrees)
    face: np.ndarray  # the front face's middle (x, y) on the box
    width: float
    z0: float
    height: float
    depth: float  # of the interior along ``out`` (drawers), else of the box
    thick: float = 0.04  # a door's thickness: the box's front to its interior's
    #: Where the hand takes a door (module docstring): "handle"; "edge", the fingers closed across its free edge;
    #: "inner", the closed hand's finger tips pushing its inner face PUSH_RADIUS from the hinge (opening on).
    grip: str = "handle"
    #: Where the fingers take the free edge (m), when not :meth:`edge_height`'s choice (the whole-body pull).
    edge_z: float | None = None

    @property
    def push(self) -> bool:
        return self.grip in ("inner", "outer")

    def handle(self, q: float, side: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The tool's position, approach and fingers' closing axis holding the handle at joint ``q`` (pushing: the
        hand's on the door's inner face)."""
        if self.grip == "inner":
            free = side * self.along
            hinge = self.face - free * self.width / 2
            leaf = math.cos(q) * free + math.sin(q) * self.out
            normal = -math.sin(q) * free + math.cos(q) * self.out
            xy = hinge + PUSH_RADIUS * leaf - (self.thick + PUSH_OFF) * normal
            return np.array([xy[0], xy[1], self.z0 + PUSH_HEIGHT * self.height]), np.array([*normal, 0.0]), np.array([0.0, 0.0, 1.0])
        if self.grip == "outer":
            free = side * self.along
            hinge = self.face - free * self.width / 2
            leaf = math.cos(q) * free + math.sin(q) * self.out
            normal = -math.sin(q) * free + math.cos(q) * self.out
            xy = hinge + PUSH_RADIUS * leaf + PUSH_OFF * normal
            return np.array([xy[0], xy[1], self.z0 + PUSH_HEIGHT * self.height]), np.array([*(-normal), 0.0]), np.array([0.0, 0.0, 1.0])
        if self.grip == "edge":
            free = side * self.along
            hinge = self.face - free * self.width / 2
            leaf = math.cos(q) * free + math.sin(q) * self.out
            normal = -math.sin(q) * free + math.cos(q) * self.out
            xy = hinge + (self.width - EDGE_INSET) * leaf - self.thick / 2 * normal
            return np.array([xy[0], xy[1], self.edge_height()]), np.array([*(-leaf), 0.0]), np.array([*normal, 0.0])
        if self.drawer:
            xy = self.face + (q + HANDLE_OUT) * self.out
            z = self.z0 + DRAWER_HANDLE_HEIGHT * self.height
            return np.array([xy[0], xy[1], z]), np.array([*(-self.out), 0.0]), np.array([0.0, 0.0, 1.0])
        free = side * self.along  # from the hinge towards the free edge, the door closed
        hinge = self.face - free * self.width / 2
        radius = self.width - HANDLE_INSET
        leaf = math.cos(q) * free + math.sin(q) * self.out
        normal = -math.sin(q) * free + math.cos(q) * self.out  # the door's outer face
        xy = hinge + radius * leaf + HANDLE_OUT * normal
        z = self.z0 + DOOR_HANDLE_HEIGHT * self.height
        return np.array([xy[0], xy[1], z]), np.array([*(-normal), 0.0]), np.array([*leaf, 0.0])

    def leaf_boxes(self, q: float, side: int) -> tuple[tuple[str, np.ndarray, np.ndarray], ...]:
        """The door at angle ``q`` for the arm's collision check (the world graph has no door leaves): the boxes
        (world frame, axis-aligned) round LEAF_PIECE long pieces of it, which stay small at any angle; none for a
        drawer."""
        if self.drawer:
            return ()
        free = side * self.along
        hinge = self.face - free * self.width / 2
        leaf = math.cos(q) * free + math.sin(q) * self.out
        normal = -math.sin(q) * free + math.cos(q) * self.out
        cuts = np.linspace(0.0, self.width, max(2, math.ceil(self.width / LEAF_PIECE) + 1))
        boxes = []
        for r0, r1 in zip(cuts[:-1], cuts[1:], strict=True):
            corners = np.array([hinge + r * leaf - t * normal for r in (r0, r1) for t in (0.0, self.thick)])
            boxes.append((self.name + "/door", np.array([*corners.min(axis=0), self.z0]),
                          np.array([*corners.max(axis=0), self.z0 + self.height])))
        return tuple(boxes)

    def hinge(self, side: int) -> np.ndarray:
        """The hinge's place (x, y) for hinge side ``side``."""
        return self.face - side * self.along * self.width / 2

    def edge_height(self) -> float:
        """Where the fingers take a door's free edge: above or below its handle (a third to two thirds of its
        height), whichever is nearer 0.8 m."""
        if self.edge_z is not None:
            return self.edge_z
        low, high = self.z0 + 0.25 * self.height, self.z0 + 0.78 * self.height
        return low if abs(low - 0.8) <= abs(high - 0.8) else high

    def joint_from_tool(self, position: np.ndarray, side: int) -> float:
        """The joint value at which the handle is where the tool centre is (the hand's estimate)."""
        xy = np.asarray(position[:2], dtype=float)
        if self.drawer:
            return float((xy - self.face) @ self.out - HANDLE_OUT)
        free = side * self.along
        hinge = self.face - free * self.width / 2
        rel = xy - hinge
        angle = float(math.atan2(rel @ self.out, rel @ free))
        if self.grip == "inner":  # the tool stands off the inner face, at a smaller angle than the door's
            return angle + math.atan2(self.thick + PUSH_OFF, PUSH_RADIUS)
        if self.grip == "outer":  # off the outer face, at a larger angle than the door's
            return angle - math.atan2(PUSH_OFF, PUSH_RADIUS)
        if self.grip == "edge":  # the tool on the door's middle plane, inside its outer face
            return angle + math.atan2(self.thick / 2, self.width - EDGE_INSET)
        return angle

    def covers(self, q: float, side: int) -> np.ndarray:
        """Points (N x 2) on what the door or drawer covers at joint ``q`` (the base keeps clear of them): a door's
        leaf, or a drawer's tray and front out of the box."""
        if self.drawer:
            out = np.linspace(0.0, max(q, 0.0) + 0.04, 6)
            across = np.linspace(-self.width / 2, self.width / 2, 9)
            return np.array([self.face + o * self.out + a * self.along for o in out for a in across])
        free = side * self.along
        hinge = self.face - free * self.width / 2
        leaf = math.cos(q) * free + math.sin(q) * self.out
        return np.array([hinge + r * leaf for r in np.linspace(0.0, self.width, 10)])


def _turned(pose: np.ndarray, about: np.ndarray, angle: float) -> np.ndarray:
    """``pose`` (4x4, world frame) turned by ``angle`` (rad, counter-clockwise seen from above) about the upright axis
    through ``about`` (x, y)."""
    c, s = math.cos(angle), math.sin(angle)
    turn = np.eye(4)
    turn[:2, :2] = np.array([[c, -s], [s, c]])
    turn[:2, 3] = about - turn[:2, :2] @ about
    return turn @ pose


def piece_of(world: WorldState, entity: EntityState) -> _Piece | None:
    """The skill's model of ``entity`` from the world graph (module docstring), or None: not articulated, or no front."""
    front = navigation.opening_side(world, entity)
    if not entity.articulated or front is None:
        return None
    lo, hi = np.array(entity.bbox_min, dtype=float), np.array(entity.bbox_max, dtype=float)
    axis, sign = front // 2, (-1.0 if front % 2 == 0 else 1.0)
    out = np.zeros(2)
    out[axis] = sign
    along = np.array([-out[1], out[0]])
    face = (lo[:2] + hi[:2]) / 2
    face[axis] = lo[axis] if sign < 0 else hi[axis]
    width = float(hi[1 - axis] - lo[1 - axis])
    drawer = "drawer" in entity.category.lower() or "drawer" in entity.name.lower()
    depth = float(hi[axis] - lo[axis])
    if entity.interior_min is not None and entity.interior_max is not None:
        depth = float(entity.interior_max[axis] - entity.interior_min[axis])
    thick = 0.04
    if entity.interior_min is not None and entity.interior_max is not None and not drawer:
        inner = entity.interior_min[axis] if sign < 0 else entity.interior_max[axis]
        thick = float(min(max((inner - face[axis]) * -sign, 0.02), 0.1))
    return _Piece(entity.name, drawer, out, along, face, width, float(lo[2]), float(hi[2] - lo[2]), depth, thick)


class _Failed(Exception):
    def __init__(self, status: SkillStatus, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail
        self.moved = False  # whether an earlier segment of the same skill moved the door or drawer


class PhysicalArticulation:
    """Open and Close on a :class:`RobotDriver` (module docstring).

    Args:
        driver: the robot's interfaces; ``driver.articulating`` (the embedded simulator's) is told which piece moves.
        kinematics, setup: the arm's IK and setup (:mod:`.manipulation`).
        world: reads the world graph now.
        manipulation: Pick's and Put's skills on the same arm, for their checked motions (the tuck, and the way from
            it to the pre-grasp around the world graph's boxes).
    """

    def __init__(self, driver: RobotDriver, kinematics: ArmKinematics, setup: ArmSetup,
                 world: Callable[[], WorldState], manipulation: PhysicalManipulation) -> None:
        self.driver = driver
        self.kinematics = kinematics
        self.setup = setup
        self.world = world
        self.manipulation = manipulation
        self._tuck_checked = manipulation.tuck_if_needed
        self._tuck = kinematics.vector(setup.tuck)
        # The arm's way from where it was to the pre-grasp (_reach), to go back the same way.
        self._approach: list[tuple[float, ...]] = []
        # piece -> (hinge side, angle) where the skill's hand last let its door go (module docstring).
        self._memory: dict[str, tuple[int, float]] = {}
        self._leaf: tuple[tuple[str, np.ndarray, np.ndarray], ...] = ()  # _reach's extra boxes
        self._moving: _Piece | None = None
        self._slipped = False  # whether the last pull's gripper closed on nothing at its end
        self._carried = False  # whether the last segment was a whole-body pull
        # drawer -> its front panel's thickness, read from the world graph while it was closed.
        self._panels: dict[str, float] = {}
        # door -> hinge sides a push showed wrong (it went all the way along that side's arc and the world graph
        # said the door did not go along); kept across tries, as the hinge does not move.
        self._not_hinged: dict[str, set[int]] = {}
        # (piece, opening) -> (the situation, the failure) of a try that found no base pose or arm configuration
        # and left everything as it was (_situation): the same request in the same situation fails at once.
        self._hopeless: dict[tuple[str, bool], tuple[tuple[object, ...], str]] = {}

    # ------------------------------------------------------------------ skills

    def open(self, target: str) -> SkillResult:
        return self._articulate(target, True)

    def close(self, target: str) -> SkillResult:
        return self._articulate(target, False)

    def _articulate(self, target: str, opening: bool) -> SkillResult:
        world = self.world()
        entity = world.entities.get(target)
        verb = "open" if opening else "close"
        if entity is None or entity.kind is not EntityKind.FURNITURE or not entity.articulated:
            return SkillResult(SkillStatus.NOT_INTERACTIVE, f"{target} has no door or drawer to {verb}")
        if bool(entity.is_open) == opening:
            return SkillResult(SkillStatus.SUCCESS, f"the {target} is already {'open' if opening else 'closed'}")
        piece = piece_of(world, entity)
        if piece is None:
            return SkillResult(SkillStatus.EXECUTION_FAILED, f"cannot tell which side of {target} opens")
        if piece.drawer and opening and entity.interior_min is not None and entity.interior_max is not None:
            axis = int(np.argmax(np.abs(piece.out)))
            inner = entity.interior_max[axis] if piece.out[axis] > 0 else entity.interior_min[axis]
            self._panels[target] = max(0.0, float((piece.face[axis] - inner) * piece.out[axis]))
        situation = self._situation(world, piece)
        known = self._hopeless.get((target, opening))
        if known is not None and known[0] == situation:
            # Fail fast: the last try found no base pose or arm configuration, and nothing it depends on has
            # changed since (the planner may ask again round after round: emmoe-020's fridge, 13 minutes).
            return SkillResult(SkillStatus.EXECUTION_FAILED, f"{verb} {target} failed: {known[1]} (as the last try "
                               "found; nothing around it has changed since)", retryable=False)
        moving = getattr(self.driver, "articulating", None)
        if isinstance(moving, set):
            moving.add(target)
        travelled = 0.0
        try:
            travelled = self._pull(piece, opening, entity)
        except _Failed as failure:
            self._tuck_back()
            after = self.world()
            if bool(after.entities[target].is_open) == opening:
                # Far enough for the world graph, not as far as planned: done, and the planner is told how far. The
                # graph said the opposite when the skill began, so the arm moved it, in this segment or an earlier
                # one (a first push stopped by something at 0.38 rad has shut a fridge door as far as the graph's
                # half-range threshold tells).
                return SkillResult(SkillStatus.SUCCESS, f"{'opened' if opening else 'closed'} {target} with the gripper, "
                                   f"part of the way ({failure.detail})", travelled)
            if failure.detail.startswith("unreachable pose") and self._situation(after, piece) == situation:
                # No base pose or arm configuration for any hold tried, and the try moved nothing the skill goes by:
                # the search is deterministic in what it reads, so another try finds the same. Not retried (the
                # executor's E1 at once), and remembered until something around the piece changes.
                self._hopeless[(target, opening)] = (situation, failure.detail)
                return SkillResult(failure.status, f"{verb} {target} failed: {failure.detail}", retryable=False)
            return SkillResult(failure.status, f"{verb} {target} failed: {failure.detail}")
        finally:
            if isinstance(moving, set):
                moving.discard(target)
        now = self.world().entities[target]
        if bool(now.is_open) != opening:
            self._memory.pop(target, None)  # perhaps the wrong hinge side: the next try finds it again
            return SkillResult(SkillStatus.EXECUTION_FAILED,
                               f"{verb} {target} failed: the hand went along the {'drawer' if piece.drawer else 'door'}'s "
                               f"path, but the world graph says it is still {'closed' if opening else 'open'} (it was not "
                               "where the skill took it to be, or it came loose)", travelled)
        return SkillResult(SkillStatus.SUCCESS, f"{'opened' if opening else 'closed'} {target} with the gripper", travelled)

    # ------------------------------------------------------------------ the handle's path

    def _pull(self, piece: _Piece, opening: bool, entity: EntityState) -> float:
        """Hold the handle and move it along its path to the goal, in segments (module docstring)."""
        self._carried = False
        if piece.drawer:
            pulled = DRAWER_PULL_FRACTION * piece.depth
            start, goal = (0.0, pulled) if opening else (self._drawer_out(piece, entity), 0.0)
            step = DRAWER_STEP
            sides = [1]
        else:
            remembered = self._memory.get(piece.name)
            start = (remembered[1] if remembered else DOOR_NOMINAL_ANGLE) if not opening else 0.0
            goal, step = (DOOR_OPEN_ANGLE if opening else 0.0), DOOR_STEP
            shown = self._not_hinged.get(piece.name, set())
            sides = [remembered[0]] if remembered else [s for s in self._sides_likely_first(piece, entity)
                                                         if s not in shown]
            # A side is known once a grasp closed on the door's handle or edge there (or the skill remembers it);
            # until then a push that moved nothing is taken for the wrong side's (below).
            confirmed = remembered is not None
            if not opening:
                # Shut by its free edge, held between the fingers: the handle of a door opened square faces the
                # side it is hinged on, often a wall.
                piece = dataclasses.replace(piece, grip="edge")
        done_at = goal - 0.05 * abs(goal - start) if opening else start * CLOSED_FRACTION
        first_piece, first_start = piece, start
        wrong: set[int] = set()  # hinge sides a push showed to be wrong in this try
        last_grip = ""  # how the hand held the door in the last segment carried out
        q = start
        travelled = 0.0
        for segment in range(MAX_SEGMENTS):
            plan = None
            missed = []
            other: _Failed | None = None
            # A door the hand let go of stands a few centimetres off where the hand says (the arm gives under the
            # pull, the door swings on a little): a missed re-grasp tries either side of it.
            # So may a door the skill did not let go of (its angle nominal).
            guesses = [q] if piece.drawer or piece.push or (q == start and piece.grip != "edge") \
                else [q, q + REGRASP_OFFSET, q - REGRASP_OFFSET]
            hypotheses = [(piece, side, guess) for side in sides for guess in guesses]
            if not opening and piece.grip == "edge":
                # Where no arm configuration takes the edge (another door open beside it), the closed hand pushes
                # the door's outer face instead.
                outer = dataclasses.replace(piece, grip="outer")
                hypotheses += [(outer, side, min(q, DOOR_NOMINAL_ANGLE) + PUSH_LEAD) for side in sides]
            if opening and piece.grip == "inner" and confirmed:
                # Where the closed hand finds no way in behind the door (a low cabinet's, pulled to 0.6-0.9 rad: the
                # wedge between its door and its front faces away from every base pose), the handle, which the door
                # turns towards the room as it opens, is taken again where the hand left it and pulled on. A door
                # pulled by its handle stands PULL_LAG short of where the hand says.
                door = self._memory.get(piece.name, (0, q + PUSH_LEAD))[1] - (PULL_LAG if last_grip == "handle" else 0.0)
                handle = dataclasses.replace(piece, grip="handle")
                hypotheses += [(handle, side, guess) for side in sides
                               for guess in (door, door + REGRASP_OFFSET, door - REGRASP_OFFSET)]
            missed_sides: set[int] = set()
            for variant, side, guess in hypotheses:
                if variant.grip == "outer" and side in missed_sides and not confirmed:
                    # The fingers closed on nothing where this side's door would have its edge: the door does not
                    # hang there, and a push along that side's arc would move air (apartment_7's fridge: the hand
                    # "closed" it from 1.6 to 0.95 rad on the side its grasps had missed, the door still at 1.6).
                    continue
                try:
                    # (A door pulled on by its handle again goes to DOOR_OPEN_ANGLE like a push. Towards 1.52 rad,
                    # emmoe-014's cabinet door stood at 1.51 and its base still met it on the way to the Put, and
                    # emmoe-032's cabinet door found no pose for its Close any more; towards 1.55 the hand lost the
                    # handle at 1.35.)
                    plan = self._segment(variant, guess, goal, step, side)
                except _Failed as failure:
                    # Another hypothesis (the other hinge side, another angle) may still work.
                    failure.moved = segment > 0
                    if "grasp missed" in failure.detail:
                        missed.append(failure.detail)
                        missed_sides.add(side)
                    else:
                        other = failure
                    continue
                sides = [side]
                piece = variant
                break
            if plan is None:
                if other is not None:
                    raise other
                failed = _Failed(SkillStatus.EXECUTION_FAILED, "; ".join(dict.fromkeys(missed)) or "grasp missed")
                failed.moved = segment > 0
                raise failed
            reached, moved = plan
            travelled += moved
            last_grip = piece.grip
            if not piece.drawer:
                # A door pushed open swings on a little once the hand stops (measured: from 1.45 to 1.54-1.56 rad).
                at = min(reached + DOOR_COAST, DOOR_NOMINAL_ANGLE) if piece.grip == "inner" else reached
                self._memory[piece.name] = (sides[0], at)
            logger.info("%s: handle moved from %.2f to %.2f (goal %.2f)", piece.name, q, reached, goal)
            if not piece.drawer and not piece.push:
                confirmed = True  # the fingers closed on the handle or the edge on this side
            if (opening and reached >= done_at) or (not opening and reached <= done_at):
                done = bool(self.world().entities[piece.name].is_open) == opening
                if done or piece.drawer or confirmed or wrong:
                    return travelled  # the world graph tells whether the door or drawer went along (_articulate)
                # The hand went all the way along a push on a side no grasp confirmed and the world graph says the
                # door did not go along (apartments 5 and 6: a fridge found open at reset, pushed on the side hinged
                # by its wall): the door hangs the other way. Start again there.
                wrong.add(sides[0])
                self._memory.pop(piece.name, None)
                # Kept for later tries (a wrong side's push costs a drive and a slow sweep of the arm each time), unless
                # both sides have been shown wrong: then something else was off, and both are tried again later.
                both = self._not_hinged.setdefault(piece.name, set()) | {sides[0]}
                self._not_hinged[piece.name] = both if len(both) < 2 else set()
                logger.info("%s: the push on side %d moved nothing the world graph sees; trying the other side",
                            piece.name, sides[0])
                sides = [s for s in (1, -1) if s not in wrong]
                piece, start, q = first_piece, first_start, first_start
                continue
            if self._slipped:
                failed = _Failed(SkillStatus.EXECUTION_FAILED,
                                 f"the handle slipped out of the gripper while moving the {'drawer' if piece.drawer else 'door'}")
                failed.moved = True
                raise failed
            if abs(reached - q) < 0.5 * step:
                unit = "m" if piece.drawer else "rad"
                raise _Failed(SkillStatus.EXECUTION_FAILED,
                              f"the {'drawer' if piece.drawer else 'door'} moved only to {reached:.2f} {unit} "
                              f"(wanted {goal:.2f}): blocked, or the arm reaches no further from any pose")
            q = reached
            if self._carried:
                # The whole-body pull stopped short: its edge is taken again where the hand let it go (the door stays
                # where the hand leaves it: no spring), from where the base now stands.
                start = q
            elif not piece.drawer and not piece.push:
                # On from here by pushing the door's inner face (opening) or its outer face (closing) with the closed
                # hand (module docstring): no handle or edge to find again where the door may have swung on.
                piece = dataclasses.replace(piece, grip="inner" if opening else "outer")
                q = max(0.0, reached - PUSH_LEAD) if opening else min(reached + PUSH_LEAD, DOOR_NOMINAL_ANGLE)
                start = q
        return travelled

    def _drawer_out(self, piece: _Piece, entity: EntityState) -> float:
        """How far (m) the drawer stands out, from the world graph's interior (it moves with the tray): its outer
        face out of the box's front, plus the front panel's thickness (remembered from the drawer closed, else
        DRAWER_PANEL)."""
        if entity.interior_min is None or entity.interior_max is None:
            return DRAWER_PULL_FRACTION * piece.depth
        axis = int(np.argmax(np.abs(piece.out)))
        inner = entity.interior_max[axis] if piece.out[axis] > 0 else entity.interior_min[axis]
        panel = self._panels.get(piece.name, DRAWER_PANEL)
        return max(0.0, float((inner - piece.face[axis]) * piece.out[axis]) + panel)

    def _situation(self, world: WorldState, piece: _Piece) -> tuple[object, ...]:
        """What a try's search for base poses and arm configurations reads, for telling whether a failed one would
        fail again: the world graph's boxes and open states within AROUND of the piece's front (rounded to
        SITUATION_ROUNDING), what the hand holds, where the skill remembers the door (its hinge side and angle), and
        where the base stands (BASE_ROUNDING, YAW_ROUNDING: it orders the base poses tried and the hinge sides). A
        try that moved the base or the door is not the same situation at its end, so it stays worth another (at
        0cd735d emmoe-001's fridge Close found no pose twice and closed the door on the executor's third try). Left
        out: the hinge sides a push showed wrong (a later try only skips what would again push air)."""
        boxes = []
        for entity in world.entities.values():
            lo, hi = np.array(entity.bbox_min[:2], dtype=float), np.array(entity.bbox_max[:2], dtype=float)
            if np.linalg.norm(np.maximum(np.maximum(lo - piece.face, piece.face - hi), 0.0)) > AROUND:
                continue
            corners = np.round(np.array([*entity.bbox_min, *entity.bbox_max], dtype=float) / SITUATION_ROUNDING)
            boxes.append((entity.name, tuple(int(v) for v in corners), entity.is_open))
        remembered = self._memory.get(piece.name)
        base = self.driver.base_pose()
        return (tuple(sorted(boxes, key=lambda b: b[0])), world.held,
                None if remembered is None else (remembered[0], round(remembered[1], 2)),
                (round(base.x / BASE_ROUNDING), round(base.y / BASE_ROUNDING), round(base.yaw / YAW_ROUNDING)))

    @staticmethod
    def _door_at(piece: _Piece, q: float) -> float:
        """Where the door stands when the hand's path starts at ``q`` (a push starts PUSH_LEAD off it)."""
        if piece.grip == "inner":
            return q + PUSH_LEAD
        if piece.grip == "outer":
            return q - PUSH_LEAD
        return q

    def _sides_likely_first(self, piece: _Piece, entity: EntityState) -> list[int]:
        """The hinge sides to try (``side``: the free edge towards ``side * along``), likelier first: a door is taken
        to hang on the side of its front with less room beside it (nearer its room's wall or other furniture), as a
        door is hung so that it opens away from the corner; even, on the side farther from the robot."""
        world = self.world()
        around = navigation._Surroundings(world, piece.name)  # noqa: SLF001 (the package's own helper)
        base = self.driver.base_pose()
        here = np.array([base.x, base.y])

        def room(side: int) -> float:
            # Free room beside the front's end at that side's hinge: the clearance of points 0.1-0.5 m beyond it.
            hinge = piece.face - side * piece.along * piece.width / 2
            points = np.array([hinge - side * piece.along * d + piece.out * 0.3 for d in (0.1, 0.3, 0.5)])
            return float(np.min(around.clearance(points)))

        def far(side: int) -> float:
            return -float(np.linalg.norm(piece.face - side * piece.along * piece.width / 2 - here))

        del entity
        return sorted((1, -1), key=lambda side: (round(room(side), 1), far(side)))

    def _segment(self, piece: _Piece, q: float, goal: float, step: float, side: int) -> tuple[float, float]:
        """One grasp and pull from one base pose; returns (the joint where the hand let go, base travel)."""
        world = self.world()
        targets = self._path(piece, q, goal, step)
        candidates = self._base_poses(world, piece, targets, side)
        if not candidates:
            raise _Failed(SkillStatus.EXECUTION_FAILED,
                          f"unreachable pose: no base pose clear of the {'drawer' if piece.drawer else 'door'} reaches "
                          f"its handle at {q:.2f}")
        travelled = 0.0
        last_failure = None
        body = piece.grip == "edge" and hasattr(self.driver, "follow_whole_body_trajectory")
        # The whole-body pull is tried from every pose (it costs IK alone until one is found): the poses from which
        # it goes on are those nearest the door, ranked last for a plain pull, which they take least far.
        for index, (pose, count) in enumerate(candidates if body else candidates[:POSES_TRIED]):
            plan = self._plan(piece, targets[:count], side, pose) if index < POSES_TRIED else None
            carried: list[tuple[Pose2D, tuple[float, ...]]] = []
            held = piece
            if body and (plan is None or len(plan[2]) < len(targets) - 1):
                # The door's free edge held while the base moves too (module docstring, "The whole-body pull"): from
                # the one place where the arm takes a fridge's edge by a wall, the door meets the base after 0.08 rad.
                high = dataclasses.replace(piece, edge_z=piece.z0 + BODY_EDGE_HEIGHT * piece.height)
                grasped = self._grasp_plan(high, targets[0], side, pose, BODY_PREGRASP)
                if grasped is not None:
                    carried = self._whole_body_path(high, targets, side, pose, grasped[1])
                    # Taken where it turns the door on by a waypoint of the plain pull's (DOOR_STEP) or more.
                    plain = targets[len(plan[2])] if plan is not None else targets[0]
                    body_end = self._path(piece, targets[0], targets[-1], BODY_STEP)[len(carried)]
                    if carried and abs(body_end - targets[0]) >= abs(plain - targets[0]) + DOOR_STEP - 1e-9:
                        plan = (grasped[0], grasped[1], [])
                        held = high
                    else:
                        carried = []
            if plan is None:
                last_failure = "unreachable pose: no arm configuration reaches the handle from the poses tried"
                continue
            stuck = self._tuck_checked(self.world())
            if stuck is not None:
                raise _Failed(SkillStatus.EXECUTION_FAILED, f"{stuck}, before moving the base")
            base = self.driver.base_pose()
            if math.hypot(pose.x - base.x, pose.y - base.y) > 0.02 or abs(pose.yaw - base.yaw) > 0.02:
                result = self.driver.navigate_to_pose(pose)
                travelled += result.distance_travelled
                if not result.succeeded:
                    last_failure = f"no path for the base to a pose by the handle ({result.error_msg})"
                    continue
            pregrasp, grasp, path = plan
            self._leaf = piece.leaf_boxes(self._door_at(piece, q), side)
            self._moving = piece
            self._carried = bool(carried)
            try:
                if carried:
                    return self._execute_whole_body(held, side, pregrasp, grasp, carried, targets), travelled
                return self._execute(piece, side, pregrasp, grasp, path), travelled
            finally:
                self._leaf = ()
                self._moving = None
        raise _Failed(SkillStatus.NO_PATH if last_failure and last_failure.startswith("no path") else SkillStatus.EXECUTION_FAILED,
                      last_failure or "unreachable pose")

    @staticmethod
    def _path(piece: _Piece, q: float, goal: float, step: float) -> list[float]:
        n = max(1, math.ceil(abs(goal - q) / step - 1e-9))
        return [float(v) for v in np.linspace(q, goal, n + 1)]

    def _base_poses(self, world: WorldState, piece: _Piece, targets: Sequence[float],
                    side: int) -> list[tuple[Pose2D, int]]:
        """Base poses (facing the reached part of the path) with how many of ``targets`` each reaches by distance,
        most first, then nearest the base; the footprint clear of the graph's boxes and of the sweep."""
        around = navigation._Surroundings(world, piece.name)  # noqa: SLF001 (the package's own helper)
        radius = world.robot_radius
        handles = np.array([piece.handle(q, side)[0][:2] for q in targets])
        centre = handles.mean(axis=0)
        span = 1.6
        xs = np.arange(centre[0] - span, centre[0] + span + 1e-9, 0.1)
        ys = np.arange(centre[1] - span, centre[1] + span + 1e-9, 0.1)
        grid = np.array([(x, y) for x in xs for y in ys])
        ok = around.allowed(grid)
        entity = world.entities[piece.name]
        lo, hi = np.array(entity.bbox_min[:2]), np.array(entity.bbox_max[:2])
        gap = np.linalg.norm(np.maximum(np.maximum(lo - grid, grid - hi), 0.0), axis=1)
        ok &= gap >= radius + navigation.CLEARANCE
        grid = grid[ok]
        if len(grid) == 0:
            return []
        # Target i counts when the arm may reach it (by distance) and the door or drawer has kept clear of the base
        # at every target up to it.
        reach = np.zeros((len(grid), len(targets)), dtype=bool)
        for i, q in enumerate(targets):
            covered = piece.covers(q, side)
            clear = np.min(np.linalg.norm(grid[:, None, :] - covered[None, :, :], axis=2), axis=1) >= radius + SWEEP_CLEARANCE
            distance = np.linalg.norm(grid - handles[i], axis=1)
            reach[:, i] = clear & (distance >= REACH_MIN) & (distance <= REACH_MAX)
        count = np.argmin(np.hstack([reach, np.zeros((len(grid), 1), dtype=bool)]), axis=1)
        base = self.driver.base_pose()
        # Poses whose grasp (the first target) lies within GRASP_REACH first: one that reaches the most of the path
        # by distance has the grasp at the edge of REACH_MAX, where no arm configuration takes a door's low free
        # edge (apartments 5-7's fridges, found open: every pose tried stood 0.8 m from the edge).
        # Only for the free edge: the handle's grasps were found from the old order (first by count), and the new
        # one left apartment_7's fridge Open without a reachable handle.
        far = (np.linalg.norm(grid - handles[0], axis=1) > GRASP_REACH) if piece.grip == "edge" else np.zeros(len(grid), bool)
        order = np.lexsort((np.hypot(grid[:, 0] - base.x, grid[:, 1] - base.y), -count, far))
        poses = []
        approach = piece.handle(targets[0], side)[1]
        for i in order:
            if count[i] == 0:
                break
            reached = handles[: count[i]].mean(axis=0)
            facing = navigation.facing_pose(grid[i, 0], grid[i, 1], (reached[0], reached[1]))
            poses.append((facing, int(count[i])))
            # Also square to the hand's approach at the first target (a door's edge is taken from beyond it, along
            # the door: facing the path's middle leaves the hand pointing sideways, out of the arm's reach).
            along = Pose2D(facing.x, facing.y, math.atan2(approach[1], approach[0]))
            if abs(math.remainder(along.yaw - facing.yaw, 2 * math.pi)) > 0.3:
                poses.append((along, int(count[i])))
        return poses

    # ------------------------------------------------------------------ arm

    def _plan(self, piece: _Piece, targets: Sequence[float], side: int,
              base: Pose2D) -> tuple[tuple[float, ...], tuple[float, ...], list[tuple[float, ...]]] | None:
        """IK for the pre-grasp, the grasp and the waypoints from ``base``; the path is cut where IK stops reaching;
        None when the grasp itself is out of reach."""
        grasped = self._grasp_plan(piece, targets[0], side, base)
        if grasped is None:
            return None
        pregrasp, grasp = grasped
        path: list[tuple[float, ...]] = []
        previous = np.asarray(grasp)
        # Checked for the door's free edge and the pushes (where the arm sweeps wide of the door: apartment_7's
        # fruit bowl); a handle's pull is not, as before (the check emptied apartment_7's fridge Open).
        along = self._path_obstacles(piece, base, grasp) if piece.grip != "handle" else None
        for q in targets[1:]:
            p, a, c = piece.handle(q, side)
            solution = self.kinematics.solve(self._in_base(base, tool_pose(p, a, c)), [previous])
            if not solution.converged or np.max(np.abs(np.asarray(solution.positions) - previous)) > 0.8:
                break
            if along is not None and not self.manipulation._segment_clear(tuple(previous), solution.positions,  # noqa: SLF001
                                                                          along):
                # The arm would sweep into something the world graph has (emmoe-051's fruit bowl beside the fridge,
                # which stopped the arm mid-push): the path ends before it, and the next segment comes from another
                # base pose.
                logger.debug("%s: the path stops at %.2f, before the arm meets %s", piece.name, q,
                             self.manipulation._arm_hit(along, solution.positions))  # noqa: SLF001
                break
            path.append(solution.positions)
            previous = np.asarray(solution.positions)
        if not path:
            return None
        return pregrasp, grasp, path

    def _grasp_plan(self, piece: _Piece, q: float, side: int, base: Pose2D,
                    back: float = PREGRASP) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
        """IK for the pre-grasp (``back`` out along the approach) and the grasp at joint ``q`` from ``base``; None
        when either is out of reach."""
        position, approach, across = piece.handle(q, side)
        grasp_pose = self._in_base(base, tool_pose(position, approach, across))
        seeds = self._seeds(grasp_pose)
        grasp = self.kinematics.solve(grasp_pose, seeds)
        if not grasp.converged:
            return None
        pre = self._in_base(base, tool_pose(position - back * approach, approach, across))
        # The pre-grasp clear of the world graph's boxes and of the door (seen from that base pose), so that the
        # arm's checked motion can get there.
        seen = self._obstacles(piece, piece.leaf_boxes(self._door_at(piece, q), side), base)
        clear = self.manipulation._clear(seen)  # noqa: SLF001 (the package's own)
        pregrasp = self.kinematics.solve(pre, [np.asarray(grasp.positions), *seeds], acceptable=clear)
        if not pregrasp.converged:
            return None
        return pregrasp.positions, grasp.positions

    # ------------------------------------------------------------------ the whole-body pull

    def _whole_body_path(self, piece: _Piece, targets: Sequence[float], side: int, base: Pose2D,
                         grasp: Sequence[float], held: np.ndarray | None = None) -> list[tuple[Pose2D, tuple[float, ...]]]:
        """Base poses and arm configurations that keep the hand on the door's free edge along ``targets`` (the
        first is the grasp's, from ``base``) at BODY_STEP, the base moving by as little as it can (BODY_MOVES,
        BODY_TURNS) to stay where the world graph says it fits and clear of where the door will be BODY_LOOKAHEAD
        waypoints on; the arm clear of the world graph's boxes but the door's own piece. Greedy: it ends at the first
        waypoint with no such pose (empty when that is the first).

        ``held``: the tool's pose (world frame, 4x4) holding the door at ``targets[0]``; the hand's path is then that
        pose turned about the hinge (the grasp, welded where the fingers closed, turns with the door exactly so),
        else the model's edge (:meth:`_Piece.handle`)."""
        world = self.world()
        around = navigation._Surroundings(world, piece.name)  # noqa: SLF001 (the package's own helper)
        radius = world.robot_radius
        entity = world.entities[piece.name]
        lo, hi = np.array(entity.bbox_min[:2]), np.array(entity.bbox_max[:2])
        leaves = [(a[:2], b[:2]) for _name, a, b in self._other_leaves(world, piece)]
        start, goal = targets[0], targets[-1]
        angles = self._path(piece, start, goal, BODY_STEP)
        along = self._path_obstacles(piece, base, grasp)

        def fits(pose: Pose2D, qs: Sequence[float]) -> bool:
            xy = np.array([pose.x, pose.y])
            if not around.allowed(xy[None, :])[0]:
                return False
            if np.linalg.norm(np.maximum(np.maximum(lo - xy, xy - hi), 0.0)) < radius + navigation.CLEARANCE:
                return False
            if any(np.linalg.norm(np.maximum(np.maximum(a - xy, xy - b), 0.0)) < radius + navigation.CLEARANCE
                   for a, b in leaves):
                return False
            return all(np.min(np.linalg.norm(piece.covers(v, side) - xy, axis=1)) >= radius + SWEEP_CLEARANCE for v in qs)

        path: list[tuple[Pose2D, tuple[float, ...]]] = []
        here, previous = base, np.asarray(grasp)
        for k, angle in enumerate(angles[1:], 1):
            ahead = angles[k: k + BODY_LOOKAHEAD + 1]
            moves = sorted(((dx, dy, dyaw) for dx in BODY_MOVES for dy in BODY_MOVES for dyaw in BODY_TURNS),
                           key=lambda m: math.hypot(m[0], m[1]) + 0.2 * abs(m[2]))
            if held is None:
                target = tool_pose(*piece.handle(angle, side))
            else:
                target = _turned(held, piece.hinge(side), -side * (angle - start))
            found = None
            for dx, dy, dyaw in moves:
                pose = Pose2D(here.x + dx, here.y + dy, here.yaw + dyaw)
                if not fits(pose, ahead):
                    continue
                solution = self.kinematics.solve(self._in_base(pose, target), [previous])
                if not solution.converged or np.max(np.abs(np.asarray(solution.positions) - previous)) > BODY_JUMP:
                    continue
                if self.manipulation._arm_hit(dataclasses.replace(along, base=pose), solution.positions) is not None:  # noqa: SLF001
                    continue
                found = (pose, solution.positions)
                break
            if found is None:
                logger.debug("%s: the whole-body pull stops at %.2f (no base pose and arm configuration on)",
                             piece.name, angle)
                break
            path.append(found)
            here, previous = found[0], np.asarray(found[1])
        return path

    def _execute_whole_body(self, piece: _Piece, side: int, pregrasp: Sequence[float], grasp: Sequence[float],
                            path: Sequence[tuple[Pose2D, tuple[float, ...]]], targets: Sequence[float]) -> float:
        """Grasp the door's free edge, move the base and the arm along ``path`` (planned for ``targets``) in one
        whole-body trajectory, let go, back out and tuck; returns the hand's estimate of the joint. A motion stopped
        on the way (a path tolerance broken) that turned the door by DOOR_STEP or more counts as a segment: the next
        one takes the edge again from there."""
        self.driver.gripper_command(self.setup.open_gap, self.setup.max_effort)
        self._reach(pregrasp, f"reaching for the {piece.name}'s door edge")
        self._expect(self._move(self._line(pregrasp, grasp)), f"reaching for the {piece.name}'s door edge")
        closed = self.driver.gripper_command(self.setup.closed_gap, self.setup.max_effort)
        if closed.position <= self.setup.closed_gap + 0.004:
            self._back_out(pregrasp)
            raise _Failed(SkillStatus.EXECUTION_FAILED, "grasp missed: the gripper closed on nothing where the door's edge was expected")
        start = self.driver.base_pose()
        # Re-planned from where the fingers closed (a little off the planned grasp: the arm's tracking, the door's
        # play), the hand's path turned about the hinge with the door, so that the weld does not strain against it.
        to_base = self._in_base(start, np.eye(4))
        held = np.linalg.inv(to_base) @ self.kinematics.forward(self._current())
        again = self._whole_body_path(piece, targets, side, start, self._current(), held=held)
        if len(again) >= len(path) // 2:
            path = again
        previous_base = np.array([start.x, start.y, start.yaw])
        previous_arm: Sequence[float] = self._current()
        t = 0.0
        points = []
        for pose, q in path:
            here = np.array([pose.x, pose.y, pose.yaw])
            step = max(float(np.hypot(*(here[:2] - previous_base[:2]))) / BODY_SPEED,
                       abs(here[2] - previous_base[2]) / BODY_TURN_RATE,
                       self.manipulation._duration(previous_arm, q), PULL_STEP_TIME)  # noqa: SLF001
            t += step
            points.append(TrajectoryPoint((*(float(v) for v in here), *(float(v) for v in q)), t))
            previous_base, previous_arm = here, q
        names = ("base_x", "base_y", "base_yaw", *self.kinematics.joints)
        result = self.driver.follow_whole_body_trajectory(JointTrajectory(names, tuple(points)))  # type: ignore[attr-defined]
        q_hand = piece.joint_from_tool(self._tool_world(), side)
        self._leaf = piece.leaf_boxes(q_hand, side)
        logger.info("%s: pulled by its edge with the base along (%s); the hand says %.3f, the base at (%.2f, %.2f)",
                    piece.name, result.error_string or "ok", q_hand, self.driver.base_pose().x, self.driver.base_pose().y)
        still = self.driver.gripper_command(self.setup.closed_gap, self.setup.max_effort)
        slipped = still.position <= self.setup.closed_gap + 0.004
        self.driver.gripper_command(self.setup.open_gap, self.setup.max_effort)
        self._approach = []  # the way in was from where the base stood before
        self._back_out(None)
        if not result.succeeded and result.error_code is not TrajectoryErrorCode.GOAL_TOLERANCE_VIOLATED \
                and abs(q_hand - targets[0]) < DOOR_STEP:
            raise _Failed(SkillStatus.EXECUTION_FAILED,
                          f"the arm and base stopped while moving the door (at {q_hand:.2f}): {result.error_string}")
        self._slipped = slipped
        return q_hand

    def _execute(self, piece: _Piece, side: int, pregrasp: Sequence[float], grasp: Sequence[float],
                 path: Sequence[Sequence[float]]) -> float:
        """Grasp, pull along ``path``, let go, back out and tuck; returns the hand's estimate of the joint."""
        what = "drawer" if piece.drawer else "door"
        if piece.push:
            return self._push(piece, side, pregrasp, grasp, path)
        self.driver.gripper_command(self.setup.open_gap, self.setup.max_effort)
        self._reach(pregrasp, f"reaching for the {piece.name}'s handle")
        self._expect(self._move(self._line(pregrasp, grasp)), f"reaching for the {piece.name}'s handle")
        closed = self.driver.gripper_command(self.setup.closed_gap, self.setup.max_effort)
        logger.debug("%s: the gripper closed to %.3f m at the handle (side %d)", piece.name, closed.position, side)
        if closed.position <= self.setup.closed_gap + 0.004:
            self._back_out(pregrasp)
            raise _Failed(SkillStatus.EXECUTION_FAILED,
                          f"grasp missed: the gripper closed on nothing where the {what}'s handle was expected")
        result = self._move(list(path), slow=True)
        q_hand = piece.joint_from_tool(self._tool_world(), side)
        self._leaf = piece.leaf_boxes(q_hand, side)  # the door where the hand left it, for the way back
        logger.debug("%s: pulled (%s); the hand says %.3f", piece.name, result.error_string or "ok", q_hand)
        still = self.driver.gripper_command(self.setup.closed_gap, self.setup.max_effort)
        slipped = still.position <= self.setup.closed_gap + 0.004
        self.driver.gripper_command(self.setup.open_gap, self.setup.max_effort)
        self._back_out(None)
        if not result.succeeded and result.error_code is not TrajectoryErrorCode.GOAL_TOLERANCE_VIOLATED:
            raise _Failed(SkillStatus.EXECUTION_FAILED,
                          f"the arm stopped while moving the {what} (at {q_hand:.2f}): {result.error_string}")
        # Short of the last waypoint at the end (the door or drawer against its stop): where the hand got is the
        # outcome, which the caller weighs.
        self._slipped = slipped
        return q_hand

    def _push(self, piece: _Piece, side: int, pregrasp: Sequence[float], start: Sequence[float],
              path: Sequence[Sequence[float]]) -> float:
        """The closed hand beside the door and along its arc, pushing it on; returns the hand's estimate."""
        self.driver.gripper_command(self.setup.closed_gap, self.setup.max_effort)
        self._reach(pregrasp, f"reaching in behind the {piece.name}'s door")
        self._expect(self._move(self._line(pregrasp, start)), f"reaching in behind the {piece.name}'s door")
        result = self._move(list(path), slow=True)
        q_hand = piece.joint_from_tool(self._tool_world(), side)
        self._leaf = piece.leaf_boxes(q_hand, side)  # the door where the hand left it, for the way back
        self._slipped = False
        self._back_out(None)
        if not result.succeeded and result.error_code is not TrajectoryErrorCode.GOAL_TOLERANCE_VIOLATED:
            raise _Failed(SkillStatus.EXECUTION_FAILED,
                          f"the arm stopped while pushing the door (at {q_hand:.2f}): {result.error_string}")
        return q_hand

    def _back_out(self, via: Sequence[float] | None) -> None:
        """Straight back along the approach, then the way the arm came to the handle, backwards, when it came from
        near here (else the checked tuck)."""
        current = self._current()
        pose = self.kinematics.forward(current)
        for distance in (PREGRASP, PREGRASP / 2):  # as far as the arm reaches straight back
            back = pose.copy()
            back[:3, 3] -= distance * pose[:3, 0]
            solution = self.kinematics.solve(back, [current])
            if solution.converged:
                self._move(self._line(current, solution.positions))
                break
        else:
            if via is not None:
                self._move([via])
        came = self._approach
        self._approach = []
        back_way = [tuple(self._current()), *came[-2::-1]]
        obstacles = self._obstacles(self._moving, self._leaf)
        clear = all(self.manipulation._segment_clear(a, b, obstacles)  # noqa: SLF001 (the package's own)
                    for a, b in zip(back_way[1:-1], back_way[2:], strict=False))
        if len(came) > 1 and clear and np.max(np.abs(np.asarray(self._current()) - np.asarray(came[-1]))) < 0.35:
            # (Its first segment, from where the hand let go, is not checked: the hand starts beside the door.)
            result = self._move(came[-2::-1])
            if not result.succeeded:
                logger.info("%s: the way back from the handle was blocked: %s", "articulation", result.error_string)
        self._tuck_back()

    def _tuck_back(self) -> None:
        """Back to the tuck by a motion clear of the world graph's boxes and of the door (the sampling planner with
        the budget Pick uses inside a fridge: over a drawer just pulled out the default one found no way); when none
        is found the arm stays and Pick's checked tuck says why."""
        if self.manipulation._tucked():  # noqa: SLF001 (the package's own)
            return
        obstacles = self._obstacles(self._moving, self._leaf)
        start, tuck = self._current(), tuple(self._tuck)
        waypoints = self.manipulation._path(start, tuck, obstacles)  # noqa: SLF001
        if waypoints is None:
            plan = self.manipulation._plan(start, tuck, obstacles, settings=self.setup.interior_planner)  # noqa: SLF001
            waypoints = list(plan.waypoints) if plan.found and plan.waypoints else None
        if waypoints is not None and self._move(waypoints).succeeded:
            return
        stuck = self._tuck_checked(self.world())
        if stuck is not None:
            logger.info("after %s: %s", "articulation", stuck)

    # ------------------------------------------------------------------ helpers

    def _obstacles(self, piece: _Piece | None, leaf: tuple[tuple[str, np.ndarray, np.ndarray], ...],
                   base: Pose2D | None = None) -> Obstacles:
        """The world graph's boxes (seen from ``base``, default where the base is), the door being moved where the
        skill believes it stands (``leaf``), and where the leaf of every other opened door may stand (either side of
        its opening: navigation.door_leaf_slabs; emmoe-020's oven stands open beside its fridge)."""
        world = self.world()
        obstacles = Obstacles.of(world, set())
        extra = list(leaf) + self._other_leaves(world, piece)
        return dataclasses.replace(obstacles, base=base or obstacles.base, boxes=obstacles.boxes + tuple(extra))

    @staticmethod
    def _other_leaves(world: WorldState, piece: _Piece | None) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """Where the leaf of every opened door but ``piece``'s may stand (navigation.door_leaf_slabs)."""
        extra = []
        for other in world.entities.values():
            if other.kind is not EntityKind.FURNITURE or not other.articulated or not other.is_open:
                continue
            if piece is not None and other.name == piece.name:
                continue
            model = piece_of(world, other)
            front = navigation.opening_side(world, other)
            if model is None or model.drawer or front is None:
                continue
            extra += [(other.name + "/door", lo, hi) for lo, hi in navigation.door_leaf_slabs(other, front)]
        return extra

    def _path_obstacles(self, piece: _Piece, base: Pose2D, grasp: Sequence[float]) -> Obstacles:
        """What the arm must keep clear of along the handle's path, seen from ``base``: the world graph's boxes but
        the moved piece's own (the hand works at its front) and whatever the arm already comes near at the grasp
        (a neighbouring counter within the margin of a handle by the piece's side: the path starts there by
        design); walls likewise. The leaves of other opened doors are left out: where they stand is a guess
        (:meth:`_obstacles`), and physics stops the arm if one is there."""
        world = self.world()
        ignore = {piece.name}
        obstacles = dataclasses.replace(Obstacles.of(world, ignore), base=base)
        for _ in range(PATH_IGNORED):
            touched = self.manipulation._arm_hit(obstacles, grasp)  # noqa: SLF001 (the package's own)
            if touched is None:
                break
            if touched in world.entities:
                ignore.add(touched)
                obstacles = dataclasses.replace(Obstacles.of(world, ignore), base=base, rooms=obstacles.rooms)
            else:  # a wall, or a part of a piece (a drawer's front): the walls stay out of the check
                ignore.add(touched.split("/")[0])
                obstacles = dataclasses.replace(Obstacles.of(world, ignore), base=base, rooms=())
        return obstacles

    def _reach(self, goal: Sequence[float], doing: str) -> None:
        """From where the arm is to ``goal`` by a motion clear of the world graph's boxes (Pick's planner), and of
        the door where the skill believes it stands (:meth:`_Piece.leaf_box`)."""
        obstacles = self._obstacles(self._moving, self._leaf)
        start = self._current()
        waypoints = self.manipulation._path(start, goal, obstacles)  # noqa: SLF001 (the package's own)
        if waypoints is None:
            plan = self.manipulation._plan(start, goal, obstacles, settings=self.setup.interior_planner)  # noqa: SLF001
            if not plan.found or not plan.waypoints:
                raise _Failed(SkillStatus.EXECUTION_FAILED,
                              f"the arm stays out: no motion clear of the furniture found while {doing} ({plan.failure})")
            waypoints = list(plan.waypoints)
        self._approach = [tuple(start), *[tuple(w) for w in waypoints]]
        result = self._move(waypoints)
        if result.error_code is not TrajectoryErrorCode.GOAL_TOLERANCE_VIOLATED:  # a few cm short: the line in follows
            self._expect(result, doing)

    def _tool_world(self) -> np.ndarray:
        pose = self.kinematics.forward(self._current())
        base = self.driver.base_pose()
        c, s = math.cos(base.yaw), math.sin(base.yaw)
        p = pose[:3, 3]
        return np.array([base.x + c * p[0] - s * p[1], base.y + s * p[0] + c * p[1], p[2]])

    def _line(self, a: Sequence[float], b: Sequence[float]) -> list[tuple[float, ...]]:
        """A straight tool-space approach as three IK steps (joint-space interpolation between close IK poses)."""
        start, end = self.kinematics.forward(a), self.kinematics.forward(b)
        points: list[tuple[float, ...]] = []
        previous = np.asarray(a)
        for t in (1 / 3, 2 / 3):
            pose = end.copy()
            pose[:3, 3] = start[:3, 3] + t * (end[:3, 3] - start[:3, 3])
            solution = self.kinematics.solve(pose, [previous])
            if solution.converged:
                points.append(solution.positions)
                previous = np.asarray(solution.positions)
        points.append(tuple(float(v) for v in b))
        return points

    @staticmethod
    def _in_base(base: Pose2D, pose: np.ndarray) -> np.ndarray:
        c, s = math.cos(base.yaw), math.sin(base.yaw)
        to_base = np.eye(4)
        to_base[:3, :3] = np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])
        to_base[:3, 3] = to_base[:3, :3] @ np.array([-base.x, -base.y, 0.0])
        return to_base @ pose

    # The arm's motion primitives are the Pick's and Put's (same driver, kinematics and setup).
    def _seeds(self, target: np.ndarray) -> list[np.ndarray]:
        return self.manipulation._seeds(target)  # noqa: SLF001 (the package's own)

    def _current(self) -> tuple[float, ...]:
        return self.manipulation._current()  # noqa: SLF001 (the package's own)

    def _move(self, waypoints: Sequence[Sequence[float]], slow: bool = False) -> TrajectoryResult:
        return self.manipulation._move(waypoints, min_step=PULL_STEP_TIME if slow else 0.0)  # noqa: SLF001

    def _expect(self, result: TrajectoryResult, doing: str) -> None:
        if not result.succeeded:
            self._tuck_back()
            raise _Failed(SkillStatus.EXECUTION_FAILED, f"the arm stopped while {doing}: {result.error_string}")
