"""Back-projection, voxel sets, boxes and floor plans on hand-made depth images."""

from __future__ import annotations

import math

import numpy as np
import pytest
from perception_synth import SynthBox, optical_pose, render_view

from homiebot.perception.geometry import (
    Box3,
    FloorPlan,
    backproject,
    box_iou,
    overlap_ratio,
    voxel_centers,
    voxel_keys,
)
from homiebot.types import CameraView


def flat_wall_view(distance: float = 2.0, size: int = 64) -> CameraView:
    """A camera at the origin looking along +x at a wall of constant optical depth (a hand-made depth image)."""
    f = size / 2.0
    depth = np.full((size, size), distance, dtype=np.float32)
    seg = np.zeros((size, size), dtype=np.int32)
    seg[16:48, 16:48] = 7  # a square "object" painted on the wall
    return CameraView("front", np.zeros((size, size, 3), np.uint8), depth, seg, f, f, (size - 1) / 2, (size - 1) / 2,
                      optical_pose((0.0, 0.0, 1.0), yaw=0.0))


def test_backprojection_of_a_flat_wall_lands_on_the_plane():
    view = flat_wall_view()
    points, seg, border = backproject(view)
    assert points.shape == (64 * 64, 3) and seg.shape == (64 * 64,)
    np.testing.assert_allclose(points[:, 0], 2.0, atol=1e-5)  # optical z = map x
    # 90 degree field of view: the wall spans +-2 m sideways and vertically around the camera height.
    assert points[:, 1].min() == pytest.approx(-2.0, abs=0.07) and points[:, 1].max() == pytest.approx(2.0, abs=0.07)
    assert points[:, 2].min() == pytest.approx(-1.0, abs=0.07) and points[:, 2].max() == pytest.approx(3.0, abs=0.07)
    # image right is map -y (looking along +x), image down is map -z
    first_row = points[:64]
    assert first_row[0, 1] > first_row[-1, 1] and first_row[0, 2] > points[-1, 2]
    square = points[seg == 7]
    assert len(square) == 32 * 32
    np.testing.assert_allclose(square.mean(axis=0), (2.0, 0.0, 1.0), atol=0.05)
    assert not border.any()


def test_stride_depth_limits_and_border_flags():
    view = flat_wall_view()
    view.depth[:, :8] = 0.0  # no return
    view.depth[:, 8:16] = 20.0  # beyond the range
    points, _, border = backproject(view, stride=2, max_depth=8.0, border=1)
    assert len(points) == 32 * 24  # half the rows, columns 16..63 every other
    # border cells of the 32 x 32 grid that survive: rows 0 and 31 (24 valid each) and the last column (32), less
    # the two corners counted twice; the first column has no valid depth
    assert border.sum() == 24 + 24 + 32 - 2


def test_backprojection_of_a_rendered_box_recovers_its_visible_faces():
    box = SynthBox(3, "crate", (1.8, -0.3, 0.0), (2.4, 0.3, 0.6))
    view = render_view([box], optical_pose((0.0, 0.0, 1.1), 0.0, math.radians(15)), size=128)
    points, seg, _ = backproject(view)
    crate = points[seg == 3]
    assert len(crate) > 400
    # every back-projected pixel lies on the box surface
    assert np.all(crate >= np.array(box.min) - 1e-3) and np.all(crate <= np.array(box.max) + 1e-3)
    on_front = np.isclose(crate[:, 0], 1.8, atol=1e-3)
    on_top = np.isclose(crate[:, 2], 0.6, atol=1e-3)
    assert np.all(on_front | on_top) and on_front.any() and on_top.any()


def test_voxel_keys_round_trip_and_overlap():
    rng = np.random.default_rng(0)
    points = rng.uniform(-3, 3, size=(2000, 3))
    keys = voxel_keys(points, 0.05)
    assert np.all(np.diff(keys) > 0)  # sorted, unique
    centres = voxel_centers(keys, 0.05)
    assert np.abs(voxel_keys(centres, 0.05) - keys).max() == 0
    # every point lies in the voxel of its key
    nearest = voxel_centers(voxel_keys(points[:1], 0.05), 0.05)[0]
    assert np.all(np.abs(points[0] - nearest) <= 0.025 + 1e-9)
    a = voxel_keys(np.array([[0, 0, 0], [0.1, 0, 0], [0.2, 0, 0]]), 0.05)
    b = voxel_keys(np.array([[0.1, 0, 0], [0.2, 0, 0], [0.3, 0, 0], [0.4, 0, 0]]), 0.05)
    assert overlap_ratio(a, b) == pytest.approx(2 / 3)
    assert overlap_ratio(a, np.empty(0, np.int64)) == 0.0


def test_boxes():
    a = Box3((0, 0, 0), (1, 1, 1))
    b = Box3((0.5, 0, 0), (1.5, 1, 1))
    assert box_iou(a, b) == pytest.approx(0.5 / 1.5)
    assert box_iou(a, Box3((2, 2, 2), (3, 3, 3))) == 0.0
    assert Box3.of_points(np.array([[0, 1, 2], [1, 0, 3]])).center == (0.5, 0.5, 2.5)


def test_floor_plan_assigns_points_and_falls_back_to_the_nearest_edge():
    plan = FloorPlan({"kitchen": [(0, 0), (4, 0), (4, 4), (0, 4)], "hall": [(4, 0), (8, 0), (8, 4), (4, 4)],
                      "attic": [(0, 0), (8, 0), (8, 4), (0, 4)]}, {"attic": 1})
    assert plan.room_at(1, 1) == "kitchen"
    assert plan.room_at(6, 1) == "hall"
    assert plan.room_at(3.9, 4.05) == "kitchen"  # just outside: a wall's thickness away
    assert plan.room_at(6, 1, level=1) == "attic"
    assert plan.room_at(6, 1, level=2) is None
