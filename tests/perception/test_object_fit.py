"""Completing a seen object with its model (homiebot.perception.object_fit): the heading of a box from its seen
footprint, and the unseen part of a box or a round object placed away from the camera."""

from __future__ import annotations

import math

import numpy as np
import pytest

from homiebot.perception.object_fit import (
    ObjectCatalog,
    ObjectModel,
    SeenPoints,
    box_heading,
    fit_box,
    fit_round,
    span_from_view,
)

CRACKER = ObjectModel("cracker_box", "box", (0.06, 0.16, 0.21))
APPLE = ObjectModel("apple", "sphere", (0.075, 0.075, 0.075))
CAN = ObjectModel("tuna_fish_can", "cylinder", (0.085, 0.085, 0.035))


def _visible_box_points(centre, half, yaw, viewer, step=0.005) -> np.ndarray:
    """Points on the faces of an upright box turned ``yaw`` that face ``viewer`` (a convex body: a face is seen
    when its outward normal points towards the camera)."""
    c, s = math.cos(yaw), math.sin(yaw)
    frame = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])  # columns: the box's axes in the map
    centre, half, viewer = np.asarray(centre), np.asarray(half), np.asarray(viewer)
    out = []
    for axis in range(3):
        for sign in (-1.0, 1.0):
            normal = sign * frame[:, axis]
            face_centre = centre + sign * half[axis] * frame[:, axis]
            if float(normal @ (viewer - face_centre)) <= 0:
                continue
            a, b = [k for k in range(3) if k != axis]
            for i in np.arange(-half[a], half[a] + 1e-9, step):
                for j in np.arange(-half[b], half[b] + 1e-9, step):
                    out.append(face_centre + i * frame[:, a] + j * frame[:, b])
    return np.array(out)


def _visible_sphere_points(centre, radius, viewer, n=2000) -> np.ndarray:
    rng = np.random.default_rng(0)
    d = rng.normal(size=(n, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    points = np.asarray(centre) + radius * d
    return points[np.einsum("ij,ij->i", d, np.asarray(viewer) - points) > 0]


def _yaw_error(a: float, b: float) -> float:
    """Degrees between two box headings (a box is the same turned half round)."""
    return abs(math.degrees(math.remainder(a - b, math.pi)))


@pytest.mark.parametrize("yaw", [0.0, 0.4, -0.9, 2.45])
def test_a_box_seen_from_one_side_gets_its_model_size_heading_and_hidden_far_side(yaw):
    centre, half = (2.3, 7.45, 1.005), (0.03, 0.08, 0.105)
    viewer = (1.6, 7.0, 1.1)  # the head camera about a metre away, a little above the box's top
    points = _visible_box_points(centre, half, yaw, viewer)
    fit = fit_box(SeenPoints(points, viewer), CRACKER)
    assert fit is not None
    assert _yaw_error(fit.yaw, yaw) < 1.0
    assert fit.half_extents == (0.03, 0.08, 0.105)
    assert math.dist(fit.centre, centre) < 0.005


def test_a_box_seen_face_on_keeps_the_face_as_its_width_and_extends_away_from_the_camera():
    centre, half, yaw = (0.0, 1.0, 0.5), (0.03, 0.08, 0.105), 0.0
    viewer = (0.0, 0.0, 0.55)  # below the box's top, straight in front of its narrow face
    points = _visible_box_points(centre, half, yaw, viewer)
    # the camera at -y sees only the face square to y: 6 cm wide (the box's x side), no depth
    assert np.ptp(points[:, 1]) < 1e-9 and np.ptp(points[:, 0]) == pytest.approx(0.06)
    fit = fit_box(SeenPoints(points, viewer), CRACKER)
    assert fit is not None and _yaw_error(fit.yaw, yaw) < 1.0
    assert fit.centre[1] == pytest.approx(1.0, abs=0.002)  # the 16 cm side runs away from the camera, not towards it


def test_the_heading_of_an_l_is_its_corner_not_its_diagonal():
    """Two sides of a 6 x 16 cm box (a camera below its top): the minimum-area rectangle of such an L is as small
    along the diagonal as along the sides; the closeness search finds the sides."""
    for a in (0.0, 0.3, 0.7, 1.2):
        c, s = math.cos(a), math.sin(a)
        long_side = np.column_stack((np.linspace(0, 0.16, 12), np.zeros(12)))
        short_side = np.column_stack((np.zeros(5), np.linspace(0, 0.06, 5)))
        local = np.concatenate((long_side, short_side))
        xy = local @ np.array([[c, s], [-s, c]])
        assert _yaw_error(box_heading(xy), a) % 90 < 0.6 or _yaw_error(box_heading(xy), a) > 89.4
        assert _yaw_error(box_heading(xy, (0.06, 0.16)), a) % 90 < 0.6 or _yaw_error(box_heading(xy, (0.06, 0.16)), a) > 89.4
    segment = np.array([[math.cos(0.3), math.sin(0.3)]]) * np.linspace(0, 0.1, 20)[:, None]
    assert box_heading(segment) == pytest.approx(0.3, abs=math.radians(0.1))


def test_span_from_view():
    assert span_from_view(1.0, 1.02, 0.16, 0.0) == pytest.approx((1.0, 1.16))  # the camera before: away from it
    assert span_from_view(1.0, 1.02, 0.16, 2.0) == pytest.approx((0.86, 1.02))  # the camera beyond
    assert span_from_view(1.0, 1.06, 0.06, 1.03) == pytest.approx((1.0, 1.06))  # seen whole
    assert span_from_view(1.0, 1.04, 0.06, 1.02) == pytest.approx((0.99, 1.05))  # level with it: centred


def test_a_fruit_is_centred_behind_its_visible_cap():
    centre, viewer = np.array([1.817, 8.725, 0.938]), np.array([1.0, 8.2, 1.1])
    points = _visible_sphere_points(centre, 0.0375, viewer)
    mean = points.mean(axis=0)
    assert math.dist(mean[:2], centre[:2]) > 0.012  # what a centroid gives: the near cap, 1-2 cm short
    fit = fit_round(SeenPoints(points, tuple(viewer)), APPLE)
    assert fit is not None and fit.yaw is None and fit.half_extents == (0.0375,) * 3
    assert math.dist(fit.centre, centre) < 0.004


def test_a_short_can_gets_its_full_size():
    centre, viewer = np.array([0.5, 0.5, 0.9175]), np.array([0.0, -0.5, 1.1])
    rng = np.random.default_rng(2)
    angles = rng.uniform(0, math.tau, 3000)
    side = np.column_stack((centre[0] + 0.0425 * np.cos(angles), centre[1] + 0.0425 * np.sin(angles),
                            rng.uniform(0.9, 0.935, 3000)))
    side = side[(side[:, :2] - centre[:2]) @ (viewer[:2] - centre[:2]) > 0]
    r = 0.0425 * np.sqrt(rng.uniform(0, 1, 2000))
    top = np.column_stack((centre[0] + r * np.cos(angles[:2000]), centre[1] + r * np.sin(angles[:2000]),
                           np.full(2000, 0.935)))
    fit = fit_round(SeenPoints(np.concatenate((side, top)), tuple(viewer)), CAN)
    assert fit is not None and fit.half_extents == pytest.approx((0.0425, 0.0425, 0.0175))
    assert math.dist(fit.centre, centre) < 0.005


def test_the_catalog_resolves_a_class_with_two_models_by_the_seen_size():
    small, large = ObjectModel("apple", "sphere", (0.075,) * 3), ObjectModel("apple", "sphere", (0.08,) * 3)
    catalog = ObjectCatalog([small, large, small, CRACKER])
    assert catalog.model_for("apple", (0.079, 0.08, 0.08)) == large
    assert catalog.model_for("apple", (0.07, 0.074, 0.074)) == small
    assert catalog.model_for("cracker_box") == CRACKER and catalog.model_for("dragon") is None


def test_too_few_points_are_not_fitted():
    assert fit_box(SeenPoints(np.zeros((3, 3)), (1.0, 0.0, 1.0)), CRACKER) is None
    assert fit_round(SeenPoints(np.zeros((2, 3)), (1.0, 0.0, 1.0)), APPLE) is None


BOWL = ObjectModel("bowl", "cylinder", (0.16, 0.16, 0.055), wall_thickness=0.005)


def test_span_from_view_with_its_near_end_hidden():
    assert span_from_view(1.0, 1.08, 0.16, 0.0, near_hidden=True) == pytest.approx((0.92, 1.08))  # back from the far end
    assert span_from_view(1.0, 1.08, 0.16, 2.0, near_hidden=True) == pytest.approx((1.0, 1.16))
    assert span_from_view(1.0, 1.04, 0.06, 1.02, near_hidden=True) == pytest.approx((0.99, 1.05))  # level: centred


def test_a_bowl_whose_near_part_a_wall_hides_is_placed_back_from_its_far_rim():
    """A bowl in a sink's basin seen from above over the front wall (emmoe-049): the wall hides the bowl's near
    part, the seen points start where the wall's edge crosses the bowl. Anchored at that edge as if it were the
    bowl's near side, the bowl came out 11 cm too far; with the edge known as hidden, back from the far rim."""
    centre, viewer = np.array([1.0, 0.0, 0.6875]), np.array([0.0, 0.0, 1.45])
    rng = np.random.default_rng(4)
    angles = rng.uniform(0, math.tau, 4000)
    r = 0.08 * np.sqrt(rng.uniform(0, 1, 4000))
    top = np.column_stack((centre[0] + r * np.cos(angles), centre[1] + r * np.sin(angles), np.full(4000, 0.715)))
    edge = 1.0  # the wall's edge seen on the bowl: nothing nearer than x = 1.0 shows
    seen = top[top[:, 0] >= edge]
    hidden = seen[seen[:, 0] < edge + 0.005]  # the seen points the wall borders from below
    before = fit_round(SeenPoints(seen, tuple(viewer)), BOWL)
    assert before is not None and before.centre[0] - centre[0] > 0.07  # the old anchoring: far off
    fit = fit_round(SeenPoints(seen, tuple(viewer), hidden), BOWL)
    assert fit is not None and math.dist(fit.centre[:2], centre[:2]) < 0.005
    # hidden points away from the near end (at the sides, farther back) leave the near end as it was
    side = seen[(np.abs(seen[:, 1]) > 0.07) & (seen[:, 0] > edge + 0.02)]
    assert len(side)
    unchanged = fit_round(SeenPoints(seen, tuple(viewer), side), BOWL)
    assert unchanged is not None and unchanged.centre == pytest.approx(before.centre)


def test_a_box_whose_near_part_is_hidden_runs_back_from_its_far_face():
    centre, viewer = np.array([1.2, 0.3, 0.55]), np.array([0.2, 0.3, 1.45])
    points = _visible_box_points(centre, (0.03, 0.08, 0.105), 0.0, viewer)
    seen = points[points[:, 0] >= 1.2]  # a drawer's front panel hides the near half of the box's top
    hidden = seen[seen[:, 0] < 1.205]
    fit = fit_box(SeenPoints(seen, tuple(viewer), hidden), CRACKER)
    assert fit is not None and math.dist(fit.centre[:2], centre[:2]) < 0.006
