"""Where a two-finger gripper can take an object, from the world graph's box of it: the grasp candidates of the
physical Pick, in the robot's base frame, before any inverse kinematics.

A parallel gripper closes along one horizontal direction (the tool's y axis); what lies between its fingers along
that direction must be narrower than the fingers open, with some room on either side, or the open fingers come
down on the object. So the candidates close across the object's narrow side: for a box of known heading
(``EntityState.yaw``, ``half_extents``) the top-down grasp closes along its shorter axis first, then along the
longer one if that fits too, and the tilted and level approaches come in from the headings that put the fingers
on its long faces (within :data:`MAX_HEADING_TURN` of the direction from the base). An object round about z (a
can, a fruit) is as wide every way, and the grasps close across it as seen from the base. Candidates are ranked by
how they fit: with :data:`FIT_CLEARANCE` on each side first, then those no wider than the opening; wider ones are
left out. An object wider than the opening at its narrowest cannot be grasped across at all (:func:`too_wide`).

The grasp point also keeps the palm off the object: the tool centre is moved back along the approach until the
palm (``palm_depth`` behind it) clears the object's far side, so a tall box is held near its top rather than at
its centre with the palm pressed into it; and from above, the finger tips stay clear of what it stands on.

Without the object's own box (the graph carries only the axis-aligned bbox, e.g. from images or over a message
that lacks it), the width between the fingers is unknown: the grasps close across the object as seen from the
base, none is ranked or left out, and none is refused.

**By the rim.** An open hollow object too wide to take across (a bowl: ``EntityState.wall_thickness``, declared in
the scene) is taken by its rim, as a person or a parallel gripper takes a bowl: from straight above, the fingers
straddling the wall (one inside, one outside), closing across it along the radius, opened only a little wider than
the wall (:func:`rim_candidates`). The wall must be thicker than the closed fingers still hold and thinner than they
open, and the fingers must reach far enough down it without touching the floor inside; else the object cannot be
grasped (:func:`impossible`). Only from above: a bowl held by its rim and put down from above stands upright again,
which a tilted approach would not give (the Put of :mod:`.manipulation` releases such an object from above only,
:func:`held_by_rim`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from homiebot.types import EntityState, Pose2D

#: Room (m) wanted between each open finger and the object for a grasp that fits: the hand's position error after a
#: straight-line descent (IK tolerance, tracking) is below a centimetre.
FIT_CLEARANCE = 0.01
#: Least room (m) on each side for a grasp to be tried at all: none. Pads opened exactly as wide as the object still
#: come down around it (soft contacts, a nudge): the 10 cm master chef can in the 10 cm opening was picked in
#: emmoe-005, 009 and 036 of the measured run (docs/results/physical-skills-2026-11-28.md).
MIN_CLEARANCE = 0.0
#: Rounding allowance (m) when a width is compared with the opening.
WIDTH_TOLERANCE = 1e-6
#: Room (m) between the palm and the object's far side along the approach.
PALM_MARGIN = 0.01
#: Height of the finger tips above what a grasped object stands on (m): tips pressed on a counter cannot slide shut.
FINGER_CLEARANCE = 0.01
#: Room (m) between the finger tips and the object at the shortest pre-grasp (:attr:`GraspCandidate.clear_distance`).
PREGRASP_MARGIN = 0.02
#: How far (degrees) a tilted or level approach may turn from the direction base -> object to close across the
#: object's narrow side: farther, and the arm reaches around the object rather than towards it.
MAX_HEADING_TURN = 45.0
#: Headings closer than this (degrees) are one.
SAME_HEADING = 5.0
#: Turns (degrees) of the fingers' closing direction from the usual one (across as seen from the base) of the extra
#: top-down grasps of a round object, tried after every other grasp.
ROUND_TURNS = (90.0, 45.0, -45.0)
#: How far (m) the tool centre goes below a rim at most: the pads then hold the top of the wall.
RIM_DEPTH = 0.02
#: Least length (m) of finger along the wall below the rim for a rim grasp: less, and the wall slips out.
RIM_MIN_OVERLAP = 0.015
#: Room (m) between each open pad and the wall for a rim grasp: the pads open no wider (the outer one stays off what
#: stands around the object, a drawer's side, and the inner one off the far wall), and the hand's position error
#: after the descent is below a centimetre.
RIM_ROOM = 0.015
#: Where on the rim the grasps go, in degrees around the object from the point nearest the base, in order.
RIM_ANGLES = (0.0, 45.0, -45.0, 90.0, -90.0, 135.0, -135.0, 180.0)


@dataclass(frozen=True)
class Outline:
    """An object's box as a grasp sees it, in the base frame: its centre, its half extents (x along ``axis``), and
    ``axis`` (unit, horizontal) for a box of known heading, None for one round about z or of unknown shape;
    ``known``: whether the half extents are the object's own (else the bbox's, and widths are unknown)."""

    centre: np.ndarray
    half: tuple[float, float, float]
    axis: np.ndarray | None
    known: bool
    #: An open hollow round object's wall (and floor) thickness (m): it may be taken by its rim; None: solid.
    wall: float | None = None

    @staticmethod
    def of(entity: EntityState, base: Pose2D) -> Outline:
        """``entity``'s outline seen from ``base`` (the world graph's box, its own when it has one)."""
        c, s = math.cos(base.yaw), math.sin(base.yaw)
        dx, dy = entity.position[0] - base.x, entity.position[1] - base.y
        centre = np.array([c * dx + s * dy, -s * dx + c * dy, entity.position[2]])
        if entity.half_extents is None:
            lo, hi = np.asarray(entity.bbox_min, dtype=float), np.asarray(entity.bbox_max, dtype=float)
            radius = float(min(hi[0] - lo[0], hi[1] - lo[1])) / 2
            return Outline(centre, (radius, radius, float(hi[2] - lo[2]) / 2), None, known=False)
        hx, hy, hz = (float(v) for v in entity.half_extents)
        if entity.yaw is None:
            return Outline(centre, (hx, hx, hz), None, known=True, wall=entity.wall_thickness)
        heading = entity.yaw - base.yaw
        return Outline(centre, (hx, hy, hz), np.array([math.cos(heading), math.sin(heading), 0.0]), known=True)

    @property
    def bottom(self) -> float:
        return float(self.centre[2]) - self.half[2]

    def width(self, direction: np.ndarray) -> float:
        """The object's extent along a horizontal unit ``direction``: what lies between fingers closing along it."""
        if self.axis is None:
            return 2 * self.half[0]
        across = np.array([-self.axis[1], self.axis[0], 0.0])
        return 2 * (self.half[0] * abs(float(direction @ self.axis)) + self.half[1] * abs(float(direction @ across)))

    def narrowest(self) -> float:
        """The least width over all horizontal directions."""
        return 2 * min(self.half[0], self.half[1]) if self.axis is not None else 2 * self.half[0]

    def sample_points(self) -> np.ndarray:
        """Points of the object's box (27: corners, edge middles, face centres and the centre; base frame), for
        a collision check of the object once it is in the hand. A round object is sampled as its square box."""
        axis = self.axis if self.axis is not None else np.array([1.0, 0.0, 0.0])
        frame = np.column_stack([axis, [-axis[1], axis[0], 0.0], [0.0, 0.0, 1.0]])
        steps = np.array([[i, j, k] for i in (-1, 0, 1) for j in (-1, 0, 1) for k in (-1, 0, 1)], dtype=float)
        return self.centre + (steps * np.asarray(self.half)) @ frame.T

    def reach(self, direction: np.ndarray) -> float:
        """How far the object extends from its centre against a unit ``direction`` (its support along it)."""
        horizontal = float(math.hypot(direction[0], direction[1]))
        if self.axis is None:
            side = self.half[0] * horizontal
        else:
            across = np.array([-self.axis[1], self.axis[0], 0.0])
            side = self.half[0] * abs(float(direction @ self.axis)) + self.half[1] * abs(float(direction @ across))
        return side + self.half[2] * abs(float(direction[2]))


@dataclass(frozen=True)
class GraspCandidate:
    """One grasp, base frame: the tool's approach (its x axis, unit), the fingers' closing direction (its y axis,
    unit, horizontal), the tool centre at the grasp, the object's width between the fingers (None: unknown), and
    ``clear_distance``: the shortest way back along the approach (m) at which the finger tips are clear of the
    object, the least a pre-grasp may stand off."""

    kind: str
    approach: np.ndarray
    closing: np.ndarray
    position: np.ndarray
    width: float | None
    clear_distance: float
    #: How far apart (m) the pads open for this grasp; None: as wide as they go.
    pad_gap: float | None = None


def too_wide(outline: Outline, opening: float) -> bool:
    """Whether no grasp across the object fits: it is wider at its narrowest than the open fingers less the least
    room."""
    return outline.known and outline.narrowest() > opening - 2 * MIN_CLEARANCE + WIDTH_TOLERANCE


def held_by_rim(outline: Outline, opening: float) -> bool:
    """Whether the object is one the Pick takes by its rim (module docstring): open and hollow, too wide across."""
    return outline.wall is not None and too_wide(outline, opening)


def _rim_depth(outline: Outline, finger_reach: float) -> float:
    """How far below the rim the tool centre goes: at most RIM_DEPTH, the finger tips FINGER_CLEARANCE above the
    floor inside (as thick as the wall)."""
    assert outline.wall is not None
    inside = 2 * outline.half[2] - outline.wall  # from the rim down to the floor inside
    return min(RIM_DEPTH, inside - FINGER_CLEARANCE - finger_reach)


def impossible(outline: Outline, name: str, opening: float, least_width: float, finger_reach: float) -> str | None:
    """Why no grasp can take the object, known before the arm moves (EMMOE's words for it: "grasp impossible"), or
    None when some grasp may. ``least_width``: the narrowest the closed fingers still hold (their pads' gap closed,
    plus what a hold needs); ``finger_reach`` as for :func:`grasp_candidates`."""
    if not too_wide(outline, opening):
        return None
    wide = (f"grasp impossible: {name} is {outline.narrowest() * 100:.1f} cm wide at its narrowest, "
            f"wider than the gripper opens ({opening * 100:.1f} cm)")
    if outline.wall is None:
        return wide
    if outline.wall < least_width - WIDTH_TOLERANCE:
        return (f"{wide}, and its rim is {outline.wall * 100:.1f} cm thick, thinner than the closed fingers hold "
                f"({least_width * 100:.1f} cm)")
    if outline.wall > opening - 2 * FIT_CLEARANCE + WIDTH_TOLERANCE:
        return f"{wide}, and its rim is {outline.wall * 100:.1f} cm thick, too thick to take between the fingers"
    if _rim_depth(outline, finger_reach) + finger_reach < RIM_MIN_OVERLAP - WIDTH_TOLERANCE:
        return f"{wide}, and it is too shallow to take by the rim ({2 * outline.half[2] * 100:.1f} cm high)"
    return None


def rim_candidates(outline: Outline, finger_reach: float) -> list[GraspCandidate]:
    """Grasps of an open hollow round object by its rim (module docstring), from straight above with the fingers
    closing across the wall along the radius: at the point of the rim nearest the base first, then around it
    (RIM_ANGLES). The tool centre is on the wall's middle, ``_rim_depth`` below the rim."""
    assert outline.wall is not None
    radius, wall = outline.half[0], outline.wall
    depth = _rim_depth(outline, finger_reach)
    rim = float(outline.centre[2]) + outline.half[2]
    towards_base = _unit(np.array([-outline.centre[0], -outline.centre[1], 0.0]))
    legacy = _closing(-towards_base)
    down = np.array([0.0, 0.0, -1.0])
    candidates = []
    for degrees in RIM_ANGLES:
        a = math.radians(degrees)
        c, s = math.cos(a), math.sin(a)
        outward = np.array([c * towards_base[0] - s * towards_base[1], s * towards_base[0] + c * towards_base[1], 0.0])
        point = outline.centre + (radius - wall / 2) * outward
        point[2] = rim - depth
        closing = outward if float(outward @ legacy) >= 0 else -outward
        candidates.append(GraspCandidate("rim", down, closing, point, wall, depth + finger_reach + PREGRASP_MARGIN,
                                         pad_gap=wall + 2 * RIM_ROOM))
    return candidates


def _unit(v: np.ndarray) -> np.ndarray:
    return v / max(float(np.linalg.norm(v)), 1e-9)


def _tilted(heading: np.ndarray, degrees: float) -> np.ndarray:
    """The direction ``degrees`` below the horizontal ``heading`` (towards the floor)."""
    a = math.radians(degrees)
    return np.array([heading[0] * math.cos(a), heading[1] * math.cos(a), -math.sin(a)])


def _closing(heading: np.ndarray) -> np.ndarray:
    """The fingers' closing direction for an approach from ``heading``: horizontal, square to it (z x heading)."""
    return np.array([-heading[1], heading[0], 0.0])


def _angle(a: np.ndarray, b: np.ndarray) -> float:
    return math.degrees(math.acos(max(-1.0, min(1.0, float(a @ b)))))


def grasp_candidates(outline: Outline, opening: float, palm_depth: float, finger_reach: float,
                     tilts: tuple[float, ...]) -> list[GraspCandidate]:
    """The grasps to try, best first (module docstring): top-down, then tilted ``tilts`` degrees down, then level;
    the ones with room to spare before the tight ones, the ones wider than the opening left out. An object taken by
    its rim (:func:`held_by_rim`) has the rim grasps alone.

    ``opening``: the distance between the open fingers (m); ``palm_depth``: from the tool centre back to the palm
    along the approach; ``finger_reach``: how far the finger tips reach beyond the tool centre.
    """
    if held_by_rim(outline, opening):
        return rim_candidates(outline, finger_reach)
    base_heading = _unit(np.array([outline.centre[0], outline.centre[1], 0.0]))
    # Closing directions: across the object as seen from the base, or along each axis of a box (narrow first).
    legacy = _closing(base_heading)
    if outline.axis is None:
        closings = [legacy]
    else:
        axes = [outline.axis, np.array([-outline.axis[1], outline.axis[0], 0.0])]
        axes.sort(key=outline.width)
        # Of the two signs of a direction, the one nearer the legacy one (the wrist turns less).
        closings = [axis if float(axis @ legacy) >= 0 else -axis for axis in axes]

    def headings() -> list[np.ndarray]:
        """Approach headings for the tilted and level grasps: from the base, and square to each closing axis
        within MAX_HEADING_TURN of it, nearest first."""
        found = [base_heading]
        for closing in closings:
            heading = np.array([closing[1], -closing[0], 0.0])  # _closing(heading) == closing
            if float(heading @ base_heading) < 0:
                heading = -heading
            if _angle(heading, base_heading) <= MAX_HEADING_TURN and all(_angle(heading, h) > SAME_HEADING for h in found):
                found.append(heading)
        return sorted(found, key=lambda h: _angle(h, base_heading))

    def candidate(kind: str, approach: np.ndarray, closing: np.ndarray, from_above: bool) -> GraspCandidate:
        # Back along the approach until the palm clears the object's far side.
        shift = max(0.0, outline.reach(approach) - palm_depth + PALM_MARGIN)
        point = outline.centre - shift * approach
        if from_above:
            # The finger tips reach past the tool centre: stop short of what the object stands on.
            point[2] = max(point[2], outline.bottom + finger_reach + FINGER_CLEARANCE)
        # How far the object extends from the grasp point back along the approach, then the tips' reach.
        near_side = outline.reach(approach) - float((outline.centre - point) @ approach)
        clear = max(0.0, near_side) + finger_reach + PREGRASP_MARGIN
        return GraspCandidate(kind, approach, closing, point, _width(outline, closing), clear)

    candidates: list[GraspCandidate] = []
    down = np.array([0.0, 0.0, -1.0])
    for closing in closings:
        candidates.append(candidate("top-down", down, closing, True))
    for angle in tilts:
        for heading in headings():
            candidates.append(candidate(f"{angle} degrees down", _tilted(heading, angle), _closing(heading), True))
    for heading in headings():
        candidates.append(candidate("side", heading, _closing(heading), False))
    if outline.axis is None and outline.known:
        # A round object is as wide every way: last, from above with the fingers closing along other directions
        # (square to the usual one, then half-way), for one standing by a wall, where the hand must lie along it
        # (emmoe-035's mug 1 cm from the sink's wall: the palm across the usual direction reached into the wall).
        for degrees in ROUND_TURNS:
            a = math.radians(degrees)
            turned = np.array([legacy[0] * math.cos(a) - legacy[1] * math.sin(a),
                               legacy[0] * math.sin(a) + legacy[1] * math.cos(a), 0.0])
            candidates.append(candidate("top-down", down, turned, True))

    def fit(candidate: GraspCandidate) -> int:
        """0: room to spare (or unknown), 1: tight, 2: wider than the opening allows."""
        if candidate.width is None or candidate.width <= opening - 2 * FIT_CLEARANCE:
            return 0
        return 1 if candidate.width <= opening - 2 * MIN_CLEARANCE + WIDTH_TOLERANCE else 2

    ranked = sorted(enumerate(candidates), key=lambda item: (fit(item[1]), item[0]))  # stable within a fit
    return [c for _, c in ranked if fit(c) < 2]


def _width(outline: Outline, closing: np.ndarray) -> float | None:
    return outline.width(closing) if outline.known else None
