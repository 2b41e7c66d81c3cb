"""Go to through the standard ``NavigateToPose`` interface: goal poses from the world graph, one Nav2 goal at a time.

The oracle Go to (:meth:`homiebot.sim.mujoco.backend.MujocoSimulator.go_to`) searches the simulator's own occupancy
grid for a pose near a named target. A real robot has no such call: Nav2 takes a pose. So this skill chooses the
poses itself, from what a robot knows without the simulator's internals, the world graph
(:class:`homiebot.types.WorldState`: entity boxes, rooms, the robot's pose and radius), and hands them to
:meth:`RobotDriver.navigate_to_pose <homiebot.sim.robot_driver.RobotDriver.navigate_to_pose>` in order until one is
reached.

How the goal poses are chosen (:func:`approach_poses`; docs/robots.md, "Physical skills: Go to through
NavigateToPose"):

* **Furniture**: on each side of the target's box, poses whose base edge is :data:`STANDOFF_GAP` from the box (the
  side's middle, and along a long side every :data:`SIDE_SPACING`), facing the box's centre; then a farther ring
  (:data:`FAR_GAP`) for when something the graph does not hold (a door leaf, a pulled-out drawer, a chair) takes
  the near poses. An articulated piece (fridge, drawer) is approached from its front first: the world graph has no
  front, so the side opposite the one nearest a wall of its room is taken for it (furniture with doors stands with
  its back to a wall).
* **An object**: poses around the object's own position, each on a ray from it at the first distance where the base
  edge keeps :data:`STANDOFF_GAP` from the object's box and from its receptacle's box (grown to hold the object: an
  object in a pulled-out drawer lies outside the cabinet's box), facing the object. Poses within :data:`ARM_REACH`
  of the object come first.
* **A room**: the world graph gives a room its box and centre, not its polygon. Poses on a grid over the box, kept
  :data:`WALL_CLEARANCE` inside it, the ones clear of furniture by a margin first, ranked by distance from the robot
  plus distance from the room's centre (the oracle's ranking), spread at least 0.5 m apart.

Every pose keeps the footprint (``WorldState.robot_radius``) plus :data:`CLEARANCE` off every other furniture box,
every object lying on the floor and the other agent, and inside the target's room box; an object's pose within the
arm's reach that only a neighbouring box keeps from that is still tried with :data:`TIGHT_CLEARANCE`, after the
roomy ones as near. A pose that also lies in
another room's box (an L-shaped room) is tried after the rest. Within a class, nearer the robot first.

How Nav2's answers map to EMMOE's statuses (:func:`go_to`): a goal Nav2 cannot plan to (``GOAL_OCCUPIED``,
``NO_VALID_PATH``, ``PLAN_TIMEOUT``) moves on to the next pose, at most :data:`MAX_ATTEMPTS` of them; when all
fail the skill is ``NO_PATH``. A boxed-in start (``START_OCCUPIED``) or another planning error is ``NO_PATH`` at
once. A base that stopped on the way (``FAILED_TO_MAKE_PROGRESS``, ``CONTROLLER_TIMED_OUT``, any follow error or an
abort without a code) is ``EXECUTION_FAILED``: the robot moved, and another goal would not explain that.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from homiebot.config import FAR_THRESHOLD_M, NEAR_THRESHOLD_M
from homiebot.sim.base import SupportsNavigateToPose
from homiebot.sim.robot_driver import NavErrorCode, NavigateResult
from homiebot.types import EntityKind, EntityState, Pose2D, SkillResult, SkillStatus, WorldState

logger = logging.getLogger(__name__)

#: Gap between the base footprint's edge and the target's box at a near approach pose (m). The arm of a Fetch-class
#: robot reaches about 0.8 m from the base centre, so 0.3 m of base radius plus 0.2 m leaves the arm 0.3 m over
#: the target; EMMOE's D2 check (closer than 0.1 m) stays clear of it.
STANDOFF_GAP = 0.2
#: Gap of the farther ring of furniture poses (m), tried after the near ones.
FAR_GAP = 0.55
#: Horizontal reach of the arm from the base centre (m): object poses within it are tried first.
ARM_REACH = 0.8
#: Margin beyond the footprint kept from other boxes (m): the planner's grid inflates by the radius and half a cell.
CLEARANCE = 0.05
#: The least margin (m) beyond the footprint kept from other boxes at an object's pose that CLEARANCE would refuse
#: (:func:`_object_candidates`): still more than the grid planner's own inflation (the radius and half a 5 cm cell,
#: homiebot/sim/mujoco/navigation.py), so Nav2-like planning accepts it. Such poses come after every pose with
#: CLEARANCE that is as near the object, and before those out of the arm's reach: emmoe-066's mug lies on a sofa whose
#: front stands 0.70 m from a coffee table, where a 0.6 m base fits with 5 cm on each side, but a pose on a ray
#: from the mug, 6 cm from the sofa, is 4 cm from the table; every pose with 5 cm around it was 1.1 m or more from
#: the mug, out of reach.
TIGHT_CLEARANCE = 0.03
#: Margin beyond the footprint kept from the edge of the room's box (m): half a wall (0.1 m thick in the scene
#: library) and :data:`CLEARANCE`.
WALL_CLEARANCE = 0.1
#: Spacing of extra poses along a furniture side longer than twice this (m).
SIDE_SPACING = 0.35
#: Spacing of the room poses' grid (m), and how far apart the room poses handed to Nav2 are at least.
ROOM_SPACING = 0.25
ROOM_SPREAD = 0.5
#: Free space around a room pose, beyond the footprint, that makes it preferred (m); the oracle asks the same.
ROOMY = 0.3
#: Objects lying on the floor lower than this (their box's bottom, m) are obstacles for the base.
BASE_HEIGHT = 0.4
#: Poses closer than this to a better one are dropped (m).
DISTINCT = 0.1
#: How many goals one Go to sends at most.
MAX_ATTEMPTS = 6
#: Directions of the rays around a target along which poses are sought.
RAYS = 16
#: Gaps of the rings of poses around an object (m), tried in this order.
OBJECT_GAPS = (STANDOFF_GAP, 0.45, 0.7)
#: Gaps of the rings of poses around a piece of furniture after its sides (m).
FALLBACK_GAPS = (STANDOFF_GAP, FAR_GAP, 0.9, 1.3)

#: Planning failures after which another goal may succeed.
_TRY_NEXT = frozenset({NavErrorCode.GOAL_OCCUPIED, NavErrorCode.NO_VALID_PATH, NavErrorCode.PLAN_TIMEOUT})


@dataclass(frozen=True)
class _Box:
    """An axis-aligned footprint in the map plane."""

    x0: float
    y0: float
    x1: float
    y1: float

    @classmethod
    def of(cls, entity: EntityState) -> _Box:
        return cls(entity.bbox_min[0], entity.bbox_min[1], entity.bbox_max[0], entity.bbox_max[1])

    @property
    def centre(self) -> tuple[float, float]:
        return (self.x0 + self.x1) / 2, (self.y0 + self.y1) / 2

    def union(self, other: _Box) -> _Box:
        return _Box(min(self.x0, other.x0), min(self.y0, other.y0), max(self.x1, other.x1), max(self.y1, other.y1))

    def shrunk(self, margin: float) -> _Box:
        return _Box(self.x0 + margin, self.y0 + margin, self.x1 - margin, self.y1 - margin)

    def gap(self, xy: np.ndarray) -> np.ndarray:
        """Distance from each (..., 2) point to the box (0 inside)."""
        dx = np.maximum(np.maximum(self.x0 - xy[..., 0], 0.0), xy[..., 0] - self.x1)
        dy = np.maximum(np.maximum(self.y0 - xy[..., 1], 0.0), xy[..., 1] - self.y1)
        return np.asarray(np.hypot(dx, dy))

    def inside(self, xy: np.ndarray) -> np.ndarray:
        x, y = xy[..., 0], xy[..., 1]
        return np.asarray((x >= self.x0) & (x <= self.x1) & (y >= self.y0) & (y <= self.y1))

    def edge_distance(self, xy: np.ndarray) -> np.ndarray:
        """Distance from each point inside the box to its nearest edge (negative outside)."""
        x, y = xy[..., 0], xy[..., 1]
        return np.asarray(np.minimum.reduce([x - self.x0, self.x1 - x, y - self.y0, self.y1 - y]))


@dataclass(frozen=True)
class _Candidate:
    pose: Pose2D
    rank: tuple[float, ...]  # sort key; smaller is tried first


class _Surroundings:
    """What a pose near ``target`` must keep clear of, read from the world graph."""

    def __init__(self, world: WorldState, target: str) -> None:
        self.world = world
        self.radius = world.robot_radius
        entity = world.entities[target]
        skip = {target}
        if entity.parent is not None:
            skip.add(entity.parent)  # kept clear of by construction, with a larger gap
        self.obstacles: list[_Box] = []
        for e in world.entities.values():
            if e.name in skip:
                continue
            if e.kind is EntityKind.FURNITURE or (
                e.kind is EntityKind.OBJECT and e.parent is None and not e.held and e.bbox_min[2] < BASE_HEIGHT
            ):
                self.obstacles.append(_Box.of(e))
        for agent in world.agents:  # the other agent of a two-agent world stands where it stands
            if agent.pose != world.robot:
                p = agent.pose
                self.obstacles.append(_Box(p.x - agent.radius, p.y - agent.radius, p.x + agent.radius, p.y + agent.radius))
        room = world.entities.get(entity.room) if entity.room is not None else None
        if entity.kind is EntityKind.ROOM:
            room = entity
        self.room = _Box.of(room).shrunk(self.radius + WALL_CLEARANCE) if room is not None and room.kind is EntityKind.ROOM else None
        self.swept = _swept_fronts(world, target, self.radius)
        self.other_rooms = [
            _Box.of(e).shrunk(self.radius) for e in world.entities.values() if e.kind is EntityKind.ROOM and e.name != (room.name if room else None)
        ]

    def clearance(self, xy: np.ndarray) -> np.ndarray:
        """Free distance from each point's footprint edge to the nearest obstacle box or room edge (m)."""
        free = np.full(xy.shape[:-1], np.inf)
        for box in self.obstacles:
            free = np.minimum(free, box.gap(xy) - self.radius)
        if self.room is not None:
            free = np.minimum(free, self.room.edge_distance(xy) + WALL_CLEARANCE)
        return free

    def allowed(self, xy: np.ndarray, clearance: float = CLEARANCE) -> np.ndarray:
        ok = self.clearance(xy) >= clearance
        if self.room is not None:
            ok &= self.room.inside(xy)
        return np.asarray(ok)

    def candidate(self, xy: tuple[float, float], facing: tuple[float, float], rank: tuple[float, ...],
                  clearance: float = CLEARANCE) -> _Candidate | None:
        """A pose at ``xy`` facing ``facing``, or None where the world graph says the base does not fit (``clearance``
        beyond the footprint). Poses in another room's box or where an open door probably swings are ranked after
        the rest."""
        point = np.array(xy)
        if not self.allowed(point, clearance):
            return None
        swept = any(box.gap(point) < self.radius for box in self.swept)
        return _Candidate(facing_pose(xy[0], xy[1], facing), (float(self.ambiguous(point)), float(swept), *rank))

    def ambiguous(self, xy: np.ndarray) -> np.ndarray:
        """Whether each point also lies in another room's box: maybe across a wall from the target."""
        hit = np.zeros(xy.shape[:-1], dtype=bool)
        for box in self.other_rooms:
            hit |= box.inside(xy)
        return hit


def facing_pose(x: float, y: float, towards: tuple[float, float]) -> Pose2D:
    """The base at (x, y) facing ``towards`` (every approach pose faces its target)."""
    return Pose2D(float(x), float(y), math.atan2(towards[1] - y, towards[0] - x))


def _front_side(entity: EntityState, room: _Box | None) -> int | None:
    """Index (west, east, south, north) of the side an articulated piece opens to. The world graph has no front, so
    the side opposite its back is taken: the back is the side nearest its room's edge (doors and drawers stand
    with their backs to a wall; in a corner, the nearer wall)."""
    if not entity.articulated or room is None:
        return None
    box = _Box.of(entity)
    back = int(np.argmin([box.x0 - room.x0, room.x1 - box.x1, box.y0 - room.y0, room.y1 - box.y1]))
    return {0: 1, 1: 0, 2: 3, 3: 2}[back]


def opening_side(world: WorldState, entity: EntityState) -> int | None:
    """Index (west, east, south, north) of the side ``entity`` (an articulated piece: a fridge, a cabinet, a drawer)
    opens to, as Go to approaches it (:func:`_front_side`), or None when it is not articulated or has no room."""
    room = world.entities.get(entity.room) if entity.room is not None else None
    if room is None or room.kind is not EntityKind.ROOM:
        return None
    return _front_side(entity, _Box.of(room))


def _on_side(box: _Box, side: int, xy: tuple[float, float]) -> bool:
    """Whether ``xy`` lies beyond the given side (west, east, south, north) of ``box``."""
    x, y = xy
    return (x < box.x0, x > box.x1, y < box.y0, y > box.y1)[side]


def _swept_fronts(world: WorldState, target: str, radius: float) -> list[_Box]:
    """Where the open doors and pulled-out drawers probably are: in front of every open articulated piece but the
    target, as deep as its front is wide (a door leaf is no longer than that; a drawer's travel is shorter). The
    world graph has no door leaves, so poses there are tried after the others, not excluded."""
    boxes = []
    # The target's own door, and the door of the piece the target is in, are what the robot came for.
    own = {target, world.entities[target].parent}
    for e in world.entities.values():
        if e.name in own or not e.articulated or not e.is_open or e.room is None or e.room not in world.entities:
            continue
        front = _front_side(e, _Box.of(world.entities[e.room]).shrunk(radius))
        b = _Box.of(e)
        depth = (b.y1 - b.y0) if front in (0, 1) else (b.x1 - b.x0)
        boxes.append([
            _Box(b.x0 - depth, b.y0, b.x0, b.y1), _Box(b.x1, b.y0, b.x1 + depth, b.y1),
            _Box(b.x0, b.y0 - depth, b.x1, b.y0), _Box(b.x0, b.y1, b.x1, b.y1 + depth),
        ][front or 0])
    return boxes


def _ray_poses(centre: tuple[float, float], keep_clear: list[_Box], needed: float) -> list[tuple[float, float]]:
    """On :data:`RAYS` rays from ``centre``, the nearest point whose distance to every box is at least ``needed``."""
    distances = np.arange(0.0, FAR_THRESHOLD_M + 1.5, 0.01)
    points = []
    for angle in np.linspace(0.0, 2 * math.pi, RAYS, endpoint=False):
        ray = np.stack([centre[0] + distances * math.cos(angle), centre[1] + distances * math.sin(angle)], axis=-1)
        clear = np.ones(len(distances), dtype=bool)
        for box in keep_clear:
            clear &= box.gap(ray) >= needed
        if clear.any():
            x, y = ray[int(np.argmax(clear))]
            points.append((float(x), float(y)))
    return points


def _furniture_candidates(world: WorldState, target: str, around: _Surroundings) -> list[_Candidate]:
    entity = world.entities[target]
    box = _Box.of(entity)
    centre = box.centre
    robot = (world.robot.x, world.robot.y)
    front = _front_side(entity, around.room)
    # (outward normal, the side's fixed coordinate, its extent along the other axis)
    sides = [
        ((-1.0, 0.0), box.x0, (box.y0, box.y1)),
        ((1.0, 0.0), box.x1, (box.y0, box.y1)),
        ((0.0, -1.0), box.y0, (box.x0, box.x1)),
        ((0.0, 1.0), box.y1, (box.x0, box.x1)),
    ]
    candidates = []
    for index, ((nx, ny), fixed, (lo, hi)) in enumerate(sides):
        middle, half = (lo + hi) / 2, (hi - lo) / 2
        offsets = [0.0]
        k = 1
        while k * SIDE_SPACING <= half - 0.15:
            offsets += [k * SIDE_SPACING, -k * SIDE_SPACING]
            k += 1
        for ring, gap in enumerate((STANDOFF_GAP, FAR_GAP)):
            for offset in offsets if ring == 0 else [0.0]:
                distance = around.radius + gap
                along = middle + offset
                x = fixed + nx * distance if nx else along
                y = fixed + ny * distance if ny else along
                side = 0 if front is None or index == front else 1
                # Square to a side: the front first if there is one, near before far, the middle first.
                candidates.append(around.candidate((x, y), centre, (side, ring, abs(offset), math.dist((x, y), robot))))
    # Then anywhere around it, farther and farther (a piece in a corner, or hemmed in by others).
    for ring, gap in enumerate(FALLBACK_GAPS):
        for xy in _ray_poses(centre, [box], around.radius + gap):
            candidates.append(around.candidate(xy, centre, (2, ring, 0.0, math.dist(xy, robot))))
    return [c for c in candidates if c is not None]


def _object_candidates(world: WorldState, target: str, around: _Surroundings, arm_reach: float,
                       gaps: Sequence[float] = OBJECT_GAPS) -> list[_Candidate]:
    entity = world.entities[target]
    own = _Box.of(entity)
    keep_clear = [own]
    parent = world.entities.get(entity.parent) if entity.parent is not None else None
    if parent is not None:
        keep_clear.append(_Box.of(parent).union(own))
    centre = (entity.position[0], entity.position[1])
    robot = (world.robot.x, world.robot.y)
    # An object inside a piece with a door or drawer is reached through its front: poses there come first.
    front = _front_side(parent, around.room) if parent is not None and entity.relation == "in" else None
    parent_box = _Box.of(parent) if parent is not None else None
    candidates = []
    for ring, gap in enumerate(gaps):
        for xy in _ray_poses(centre, keep_clear, around.radius + gap):
            reach = float(own.gap(np.array(xy))) - around.radius
            # Within EMMOE's reach band with a margin: a near ring hugging the receptacle can put an object at its
            # edge closer than D2's 0.1 m, which the Pick would then refuse.
            if reach > FAR_THRESHOLD_M - 0.1 or reach < NEAR_THRESHOLD_M + 0.02:
                continue
            to_object = math.dist(xy, centre)
            within = to_object <= arm_reach
            through_front = front is None or parent_box is None or _on_side(parent_box, front, xy)
            rank = (float(not through_front), ring, float(not within), 0.0, math.dist(xy, robot) if within else to_object)
            found = around.candidate(xy, centre, rank)
            if found is None and within:
                # Hemmed in by another box within CLEARANCE: a tight pose, after the roomy ones as near the object.
                found = around.candidate(xy, centre, (*rank[:3], 1.0, *rank[4:]), TIGHT_CLEARANCE)
            candidates.append(found)
    return [c for c in candidates if c is not None]


def _room_candidates(world: WorldState, target: str, around: _Surroundings) -> list[_Candidate]:
    entity = world.entities[target]
    area = around.room
    if area is None or area.x1 < area.x0 or area.y1 < area.y0:
        return []
    xs = np.arange(area.x0, area.x1 + 1e-9, ROOM_SPACING)
    ys = np.arange(area.y0, area.y1 + 1e-9, ROOM_SPACING)
    gx, gy = np.meshgrid(xs, ys)
    points = np.stack([gx.ravel(), gy.ravel()], axis=-1)
    points = points[around.allowed(points)]
    if points.size == 0:
        return []
    centre = np.array(entity.position[:2])
    robot = np.array([world.robot.x, world.robot.y])
    roomy = around.clearance(points) >= ROOMY
    score = np.hypot(*(points - robot).T) + np.hypot(*(points - centre).T)
    ambiguous = around.ambiguous(points)
    order = np.lexsort((score, ~roomy, ambiguous))
    kept: list[_Candidate] = []
    for i in order:
        x, y = float(points[i, 0]), float(points[i, 1])
        if any(math.hypot(c.pose.x - x, c.pose.y - y) < ROOM_SPREAD for c in kept):
            continue
        heading = math.atan2(y - world.robot.y, x - world.robot.x) if math.hypot(x - world.robot.x, y - world.robot.y) > 1e-6 else world.robot.yaw
        kept.append(_Candidate(Pose2D(x, y, heading), (float(len(kept)),)))
    return kept


#: Where an opened hinged door's leaf may stand beside its piece's opening (m): DOOR_LEAF outside the piece's side
#: and DOOR_LEAF_INSIDE in front of the opening. The scene library's leaves are 4-7.5 cm thick, centred on the
#: hinge's line (the thickest reaches 0.75 cm past DOOR_LEAF_INSIDE, within the arm's and the hand's margins), and
#: open 1.6 rad, a little past square, so their free edge leans a few centimetres out. The world graph has
#: no leaves and no hinge side: :func:`front_poses` and the arm's collision check (manipulation.Obstacles.of) keep
#: clear of both sides.
DOOR_LEAF = 0.07
DOOR_LEAF_INSIDE = 0.03
#: Spacing (m) of the poses along an opened piece's front (:func:`front_poses`): finer than Go to's rays, which may
#: leave the pose nearest the object between two rays (22.5 degrees apart) when an open door pens in the floor.
FRONT_STEP = 0.02
#: How far (m) to either side of the object those poses go along the front.
FRONT_SPAN = 0.6


def door_leaf_slabs(piece: EntityState, front: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """Where the leaf of ``piece``'s opened hinged door may stand (world-frame boxes, lo and hi corners), one slab on
    each side of the opening, since the world graph says neither that there is a leaf nor on which side it hangs:
    DOOR_LEAF outside the piece's side and DOOR_LEAF_INSIDE in front of the opening, reaching out from the ``front``
    face (an index of :func:`_front_side`: 0/1 the low/high x face, 2/3 the low/high y face) as far as the opening
    is wide (one leaf covers the front), and as tall as the piece. Used by :func:`front_poses` (the base keeps clear)
    and by the arm's collision check (manipulation)."""
    lo, hi = np.array(piece.bbox_min, dtype=float), np.array(piece.bbox_max, dtype=float)
    axis, across = front // 2, 1 - front // 2
    face = lo[axis] if front % 2 == 0 else hi[axis]
    outwards = -1.0 if front % 2 == 0 else 1.0
    width = hi[across] - lo[across]
    slabs = []
    for side, out in ((lo[across], -1.0), (hi[across], 1.0)):
        leaf_lo, leaf_hi = lo.copy(), hi.copy()
        leaf_lo[axis], leaf_hi[axis] = sorted((face, face + outwards * width))
        leaf_lo[across], leaf_hi[across] = sorted((side - out * DOOR_LEAF_INSIDE, side + out * DOOR_LEAF))
        slabs.append((leaf_lo, leaf_hi))
    return tuple(slabs)


def front_poses(world: WorldState, target: str, gap: float, step: float = FRONT_STEP) -> list[Pose2D]:
    """For an object inside an opened piece with a door or drawer (a fridge, a cabinet): base poses square in front
    of its opening, the base's edge ``gap`` from the piece's front face, every ``step`` along it, where the world graph
    says the base fits, facing the object, nearest the object first. An arm reaching low and deep into a fridge spends
    its whole reach (a Fetch-sized arm reaches about 0.8 m from the base's centre at 0.14 m high), so the pose in
    line with the object, or as near as what stands beside the front allows, is the one that may reach it. Empty for
    any other target."""
    entity = world.entities.get(target)
    if entity is None or entity.kind is not EntityKind.OBJECT or entity.relation != "in" or entity.parent is None:
        return []
    parent = world.entities.get(entity.parent)
    if parent is None or not parent.articulated or not parent.is_open or parent.interior_min is None:
        return []
    if parent.interior_max is None or any(parent.interior_min[i] < parent.bbox_min[i] - 0.01
                                          or parent.interior_max[i] > parent.bbox_max[i] + 0.01 for i in (0, 1)):
        return []  # a pulled-out drawer: its tray stands in front of the box, where these poses would be
    around = _Surroundings(world, target)
    front = _front_side(parent, around.room)
    if front is None:
        return []
    box, own = _Box.of(parent), _Box.of(entity)
    centre = (entity.position[0], entity.position[1])
    distance = around.radius + gap
    along = np.arange(-FRONT_SPAN, FRONT_SPAN + step / 2, step)
    if front in (0, 1):
        xs = np.full(len(along), box.x0 - distance if front == 0 else box.x1 + distance)
        points = np.stack([xs, centre[1] + along], axis=-1)
    else:
        ys = np.full(len(along), box.y0 - distance if front == 2 else box.y1 + distance)
        points = np.stack([centre[0] + along, ys], axis=-1)
    # Within EMMOE's reach band (as for Go to's object poses), where the base fits, clear of where the door's leaf
    # may stand on either side of the opening.
    reach = own.gap(points) - around.radius
    keep = around.allowed(points) & (reach <= FAR_THRESHOLD_M - 0.1) & (reach >= NEAR_THRESHOLD_M + 0.02)
    for leaf_lo, leaf_hi in door_leaf_slabs(parent, front):
        leaf = _Box(float(leaf_lo[0]), float(leaf_lo[1]), float(leaf_hi[0]), float(leaf_hi[1]))
        keep &= leaf.gap(points) - around.radius >= CLEARANCE
    chosen = sorted((tuple(float(v) for v in xy) for xy in points[keep]), key=lambda xy: math.dist(xy, centre))
    return [facing_pose(x, y, centre) for x, y in chosen]


def approach_poses(world: WorldState, target: str, arm_reach: float = ARM_REACH,
                   object_gaps: Sequence[float] = OBJECT_GAPS) -> list[Pose2D]:
    """Goal poses for Go to ``target``, best first, from the world graph alone (module docstring).

    Raises:
        KeyError: ``target`` is not in ``world.entities``.
    """
    if target not in world.entities:
        raise KeyError(f"{target} is not in the world graph")
    entity = world.entities[target]
    around = _Surroundings(world, target)
    if entity.kind is EntityKind.ROOM:
        candidates = _room_candidates(world, target, around)
    elif entity.kind is EntityKind.FURNITURE:
        candidates = _furniture_candidates(world, target, around)
    else:
        candidates = _object_candidates(world, target, around, arm_reach, object_gaps)
    poses: list[Pose2D] = []
    for candidate in sorted(candidates, key=lambda c: c.rank):
        if all(candidate.pose.distance_to(p) >= DISTINCT for p in poses):  # rings and rays meet at corners
            poses.append(candidate.pose)
    return poses


def _code_words(code: NavErrorCode) -> str:
    return f"{code.name.lower().replace('_', ' ')} (nav2 error {int(code)})"


def _summary(failures: Iterable[NavigateResult]) -> str:
    counts: dict[NavErrorCode, int] = {}
    for failure in failures:
        counts[failure.error_code] = counts.get(failure.error_code, 0) + 1
    parts = [f"{_code_words(code)} at {n} candidate pose{'s' if n > 1 else ''}" for code, n in counts.items()]
    return ", ".join(parts)


def go_to(driver: SupportsNavigateToPose, world: WorldState, target: str, max_attempts: int = MAX_ATTEMPTS,
          object_gaps: Sequence[float] = OBJECT_GAPS) -> SkillResult:
    """EMMOE's Go to on a robot that serves ``NavigateToPose``: the poses of :func:`approach_poses`, one goal each,
    until one is reached (module docstring for the statuses). ``world`` is the world graph when the skill starts.

    On success a furniture's or an object's reach distance (``WorldState.reach_distance``, EMMOE's D1/D2 measure)
    from where the base stopped is in the detail; the standoff keeps it within [0.1, 2] m.
    """
    entity = world.entities.get(target)
    if entity is None:
        return SkillResult(SkillStatus.NOT_FOUND, f"{target} is not in the world graph")
    if entity.kind is EntityKind.OBJECT and world.held == target:
        return SkillResult(SkillStatus.SUCCESS, f"already holding {target}")
    if entity.kind is EntityKind.ROOM and world.robot_room == target:
        return SkillResult(SkillStatus.SUCCESS, f"already in {target}")
    poses = approach_poses(world, target, object_gaps=object_gaps)
    if not poses:
        return SkillResult(
            SkillStatus.NO_PATH, f"no free pose near {target} in the world graph: every pose around it overlaps furniture or a wall"
        )
    failures: list[NavigateResult] = []
    travelled = 0.0
    for pose in poses[:max_attempts]:
        result = driver.navigate_to_pose(pose)
        travelled += result.distance_travelled
        if result.succeeded:
            break
        failures.append(result)
        logger.debug("go to %s: goal (%.2f, %.2f) failed: %s", target, pose.x, pose.y, result.error_msg)
        if result.error_code in _TRY_NEXT:
            continue
        words = _code_words(result.error_code) if result.error_code is not NavErrorCode.NONE else "aborted without an error code"
        planning = 200 <= int(result.error_code) < 300
        status = SkillStatus.NO_PATH if planning else SkillStatus.EXECUTION_FAILED
        return SkillResult(status, f"the base could not reach a pose near {target}: {words}: {result.error_msg}", travelled)
    else:
        last = failures[-1].error_msg if failures else ""
        return SkillResult(
            SkillStatus.NO_PATH,
            f"no collision-free path to a pose near {target}: {_summary(failures)} (last: {last})",
            travelled,
        )
    if entity.kind is EntityKind.ROOM:
        return SkillResult(SkillStatus.SUCCESS, f"reached {target}", travelled)
    reach = replace(world, robot=driver.base_pose()).reach_distance(target)
    if not NEAR_THRESHOLD_M <= reach <= FAR_THRESHOLD_M:
        logger.warning("go to %s: the base stopped %.2f m from it, outside EMMOE's reach band", target, reach)
    return SkillResult(SkillStatus.SUCCESS, f"reached {target} ({reach:.2f} m away)", travelled)
