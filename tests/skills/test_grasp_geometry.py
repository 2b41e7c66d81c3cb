"""The physical Pick's grasp candidates (``homiebot.skills.physical.grasp``), geometry only: which way the fingers
close on an object of known heading, how the candidates are ranked by how they fit the open gripper, where the tool
centre goes so that the palm clears a tall object, and which objects no grasp fits.

The opening and the hand's sizes are the embedded robot's (``sim_arm_setup``): the pads 10 cm apart open.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from homiebot.skills.physical import sim_arm_setup
from homiebot.skills.physical.grasp import (
    FIT_CLEARANCE,
    MIN_CLEARANCE,
    PALM_MARGIN,
    ROUND_TURNS,
    GraspCandidate,
    Outline,
    grasp_candidates,
    held_by_rim,
    impossible,
    too_wide,
)
from homiebot.skills.physical.manipulation import TILTS
from homiebot.types import EntityKind, EntityState, Pose2D

SETUP = sim_arm_setup()
OPENING = SETUP.open_width


def _object(half: tuple[float, float, float] | None, yaw: float | None, at: tuple[float, float] = (1.0, 2.0),
            bottom: float = 0.9, wall: float | None = None) -> EntityState:
    """An object standing on a counter at ``bottom``; its bbox holds its box at any heading (as the simulator's)."""
    hx, hy, hz = half if half is not None else (0.05, 0.05, 0.05)
    radius = math.hypot(hx, hy) if yaw is not None else hx
    centre = (at[0], at[1], bottom + hz)
    return EntityState("thing", "thing", EntityKind.OBJECT, (), centre,
                       (at[0] - radius, at[1] - radius, bottom), (at[0] + radius, at[1] + radius, bottom + 2 * hz),
                       parent="counter", relation="on", half_extents=half, yaw=yaw, wall_thickness=wall)


def _candidates(entity: EntityState, base: Pose2D) -> list[GraspCandidate]:
    return grasp_candidates(Outline.of(entity, base), OPENING, SETUP.palm_depth, SETUP.finger_reach, TILTS)


def _axis_in_base(yaw: float, base: Pose2D) -> np.ndarray:
    return np.array([math.cos(yaw - base.yaw), math.sin(yaw - base.yaw), 0.0])


# A cracker box (6 x 16 x 21 cm), at headings that put its narrow side towards the base, across it, and between.
BASE = Pose2D(0.3, 2.1, 0.2)


@pytest.mark.parametrize("yaw", [0.2, 0.2 + math.pi / 2, 0.9, -1.3, 2.8])
def test_a_yawed_box_is_grasped_across_its_narrow_side(yaw):
    box = _object((0.03, 0.08, 0.105), yaw)
    candidates = _candidates(box, BASE)
    assert candidates, "a 6 cm wide box fits the gripper"
    narrow = _axis_in_base(yaw, BASE)  # the box's x axis, its 6 cm side
    first = candidates[0]
    assert first.kind == "top-down"
    assert abs(float(first.closing @ narrow)) == pytest.approx(1.0, abs=1e-9)
    assert first.width == pytest.approx(0.06)
    for c in candidates:
        assert c.closing[2] == 0.0 and np.linalg.norm(c.closing) == pytest.approx(1.0)
        assert abs(float(c.closing @ c.approach)) < 1e-9  # the fingers close square to the approach
        # Every grasp tried has the fingers around the box, not on it: the 16 cm side never comes between them.
        assert c.width is not None and c.width <= OPENING - 2 * MIN_CLEARANCE + 1e-6


def test_the_tilted_and_level_grasps_turn_to_close_across_the_narrow_side_when_it_is_near():
    # The box's long side points 30 degrees off the line from the base: the level approach along it comes in from
    # 30 degrees to the side, with the fingers on the long faces.
    base = Pose2D(0.0, 0.0, 0.0)
    box = _object((0.03, 0.08, 0.105), math.radians(120.0), at=(0.7, 0.0))
    sides = [c for c in _candidates(box, base) if c.kind == "side"]
    assert sides and all(c.width == pytest.approx(0.06) for c in sides)
    heading = math.degrees(math.atan2(sides[0].approach[1], sides[0].approach[0]))
    assert abs(heading) == pytest.approx(30.0, abs=1e-6)


def test_grasps_with_room_to_spare_come_before_tight_ones():
    # A sugar box, 4 x 9 cm: across its 4 cm side with room, across its 9 cm side only just (half a centimetre each
    # side in the 10 cm opening).
    box = _object((0.02, 0.045, 0.0875), 0.4)
    widths = [c.width for c in _candidates(box, BASE)]
    assert widths[0] == pytest.approx(0.04)
    assert any(w == pytest.approx(0.09) for w in widths), "the tight grasp is still tried"
    roomy = [w <= OPENING - 2 * FIT_CLEARANCE for w in widths]
    assert roomy == sorted(roomy, reverse=True), f"a tight grasp ranked before a roomy one: {widths}"


def test_the_palm_clears_a_tall_object_and_a_short_one_is_held_as_before():
    tall = _object((0.03, 0.08, 0.105), 0.0)
    top = 0.9 + 0.21
    points = Outline.of(tall, BASE).sample_points()
    for c in _candidates(tall, BASE):
        # The palm's face, palm_depth back along the approach, is clear of every point of the box.
        palm = c.position - SETUP.palm_depth * c.approach
        assert np.all((points - palm) @ c.approach >= PALM_MARGIN - 1e-9), c.kind
    down = _candidates(tall, BASE)[0]
    assert down.position[2] == pytest.approx(top - SETUP.palm_depth + PALM_MARGIN)
    # The pre-grasp stand-off that clears the box: the finger tips above its top.
    assert down.position[2] + down.clear_distance - SETUP.finger_reach > top
    # A tuna can (8.5 x 3.5 cm) is lower than the palm: held at its centre, raised so the finger tips clear the counter.
    can = _object((0.0425, 0.0425, 0.0175), None)
    centre = Outline.of(can, BASE).centre
    for c in _candidates(can, BASE):
        expected = centre.copy()
        if c.kind != "side":
            expected[2] = max(centre[2], 0.9 + SETUP.finger_reach + 0.01)
        assert c.position == pytest.approx(expected), c.kind


def test_a_round_object_is_grasped_across_as_seen_from_the_base():
    base = Pose2D(0.0, 0.0, 0.0)
    can = _object((0.0425, 0.0425, 0.0175), None, at=(0.0, 0.7))  # straight to the left of the base
    candidates = _candidates(can, base)
    # Then, after every other grasp, from above with the fingers closing other ways (an object by a wall).
    assert [c.kind for c in candidates] == ["top-down", *(f"{a} degrees down" for a in TILTS), "side",
                                            *("top-down" for _ in ROUND_TURNS)]
    for c in candidates[: -len(ROUND_TURNS)]:
        assert c.closing == pytest.approx(np.array([-1.0, 0.0, 0.0]))
    for c in candidates:
        assert c.width == pytest.approx(0.085)


@pytest.mark.parametrize(("name", "half", "yaw", "impossible"), [
    ("bowl", (0.08, 0.08, 0.0275), None, True),
    ("box wider than the opening both ways", (0.055, 0.06, 0.05), 0.3, True),
    ("master chef can, as wide as the opening", (0.05, 0.05, 0.07), None, False),
    ("tuna can", (0.0425, 0.0425, 0.0175), None, False),
    ("cracker box", (0.03, 0.08, 0.105), 0.7, False),
])
def test_an_object_wider_than_the_opening_on_every_side_is_too_wide(name, half, yaw, impossible):
    outline = Outline.of(_object(half, yaw), BASE)
    assert too_wide(outline, OPENING) is impossible, name
    if impossible:
        assert _candidates(_object(half, yaw), BASE) == []


def test_without_the_objects_own_box_nothing_is_ranked_or_refused():
    # A world graph with the axis-aligned box alone (from images, or a message without the fields): 16 cm across.
    unknown = dataclasses.replace(_object(None, None), bbox_min=(0.92, 1.92, 0.9), bbox_max=(1.08, 2.08, 1.0))
    outline = Outline.of(unknown, BASE)
    assert not outline.known and not too_wide(outline, OPENING)
    candidates = _candidates(unknown, BASE)
    assert [c.width for c in candidates] == [None] * len(candidates)
    assert candidates[0].kind == "top-down"


# The scenes' bowl: 16 cm across, 5.5 cm high, its wall and floor 2 cm thick, on a counter 0.9 m high.
BOWL = (0.08, 0.08, 0.0275)


def test_a_bowl_too_wide_to_take_across_is_taken_by_its_rim_from_above():
    bowl = _object(BOWL, None, wall=0.02)
    outline = Outline.of(bowl, BASE)
    assert too_wide(outline, OPENING) and held_by_rim(outline, OPENING)
    assert impossible(outline, "bowl", OPENING, SETUP.least_width, SETUP.finger_reach) is None
    candidates = _candidates(bowl, BASE)
    assert candidates and {c.kind for c in candidates} == {"rim"}
    centre = outline.centre
    rim = centre[2] + BOWL[2]
    towards_base = -centre[:2] / np.linalg.norm(centre[:2])
    for c in candidates:
        assert np.allclose(c.approach, (0.0, 0.0, -1.0)), "from straight above"
        radial = c.position[:2] - centre[:2]
        # The tool centre on the wall's middle, the fingers closing across the wall (along the radius).
        assert np.linalg.norm(radial) == pytest.approx(0.08 - 0.01)
        assert abs(float(c.closing[:2] @ radial)) == pytest.approx(np.linalg.norm(radial))
        assert c.closing[2] == 0.0 and c.width == 0.02
        # Below the rim, the finger tips above the floor inside (2 cm thick) and the palm above the rim.
        tips = c.position[2] - SETUP.finger_reach
        assert tips >= bowl.bbox_min[2] + 0.02 + 0.01 - 1e-9 and c.position[2] < rim
        assert c.position[2] + SETUP.palm_depth > rim
        assert c.clear_distance == pytest.approx(rim - tips + 0.02)
    # The nearest point of the rim first, the far side last.
    first, last = candidates[0].position[:2] - centre[:2], candidates[-1].position[:2] - centre[:2]
    assert float(first @ towards_base) == pytest.approx(0.07)
    assert float(last @ towards_base) == pytest.approx(-0.07)


@pytest.mark.parametrize(("wall", "half", "reason"), [
    (None, BOWL, "wider than the gripper opens (10.0 cm)"),
    (0.008, BOWL, "its rim is 0.8 cm thick, thinner than the closed fingers hold (1.4 cm)"),
    (0.09, (0.2, 0.2, 0.2), "its rim is 9.0 cm thick, too thick to take between the fingers"),
    (0.02, (0.08, 0.08, 0.02), "too shallow to take by the rim (4.0 cm high)"),
])
def test_a_wide_object_without_a_rim_the_fingers_can_hold_cannot_be_grasped(wall, half, reason):
    outline = Outline.of(_object(half, None, wall=wall), BASE)
    refused = impossible(outline, "bowl", OPENING, SETUP.least_width, SETUP.finger_reach)
    assert refused is not None and refused.startswith("grasp impossible: bowl is ") and refused.endswith(reason)


def test_an_open_object_that_fits_across_is_taken_across_not_by_its_rim():
    mug = _object((0.04, 0.04, 0.05), None, wall=0.005)  # an 8 cm mug: open and hollow, but it fits
    outline = Outline.of(mug, BASE)
    assert not held_by_rim(outline, OPENING)
    assert "rim" not in {c.kind for c in _candidates(mug, BASE)}
