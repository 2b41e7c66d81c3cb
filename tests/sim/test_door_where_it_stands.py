"""The base's map takes a door where it stands: a physical Open or Close leaves a door wherever physics put it
(absorb_physics), and navigation (the occupancy grid NavigateToPose plans on, MujocoSimulator._door_rects) keeps
the base clear of the leaf there, not at the end of its range where the oracle's Open leaves it. An arm-opened
cabinet door 0.17 rad short of its stop stood in the path that the door at its stop left free
(docs/results/physical-articulation-2026-11-30.md).
"""

from __future__ import annotations

import numpy as np
import pytest

from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.types import Pose2D

SCENE, CABINET = "apartment_3", "kitchen_cabinet"


@pytest.fixture(scope="module")
def sim():
    simulator = MujocoSimulator(render=False)
    yield simulator
    simulator.shutdown()


def _door_left_at(sim: MujocoSimulator, value: float) -> None:
    """The cabinet's door where a physical Open left it: its joint in physics, absorbed as the driver does."""
    compiled, data = sim.physics_handles()
    data.qpos[compiled.articulation_qpos[CABINET]] = value
    sim.absorb_physics(sim.held_object(), 0.0, articulations=[CABINET])


def _blocked(sim: MujocoSimulator, points: np.ndarray) -> np.ndarray:
    grid = sim._grid()  # noqa: SLF001 (the map NavigateToPose plans on)
    return np.array([not grid.free[grid.cell_of(float(x), float(y))] for x, y in points])


def test_the_map_keeps_the_base_off_a_door_where_physics_left_it(sim):
    sim.reset(SCENE)
    entity = sim.state().entities[CABINET]
    lo, hi = np.array(entity.bbox_min[:2]), np.array(entity.bbox_max[:2])
    xs = np.arange(lo[0] - 1.5, hi[0] + 1.5, 0.05)
    ys = np.arange(lo[1] - 1.5, hi[1] + 1.5, 0.05)
    points = np.array([(x, y) for x in xs for y in ys])
    assert sim.go_to(CABINET).success
    assert sim.open(CABINET).success  # the oracle's Open: the door at its 1.6 rad stop
    at_stop = _blocked(sim, points)
    _door_left_at(sim, 1.2)
    assert sim.state().entities[CABINET].is_open  # past half its range
    short = _blocked(sim, points)
    # Where the door now stands, and not at its stop, the base may not go; where it no longer stands, it may.
    newly = points[short & ~at_stop]
    assert len(newly) > 0, "the map still has the door at its stop"
    assert (~short & at_stop).any()
    goal = newly[0]
    result = sim.navigate_to_pose(Pose2D(float(goal[0]), float(goal[1]), 0.0))
    assert not result.succeeded and f"the open {CABINET}" in result.error_msg


def test_a_door_left_part_open_is_in_the_base_s_way_though_the_world_graph_calls_it_closed(sim):
    sim.reset(SCENE)
    entity = sim.state().entities[CABINET]
    lo, hi = np.array(entity.bbox_min[:2]), np.array(entity.bbox_max[:2])
    points = np.array([(x, y) for x in np.arange(lo[0] - 1.5, hi[0] + 1.5, 0.05)
                       for y in np.arange(lo[1] - 1.5, hi[1] + 1.5, 0.05)])
    closed = _blocked(sim, points)
    _door_left_at(sim, 0.6)  # under half its range: closed to the world graph
    assert not sim.state().entities[CABINET].is_open
    assert (_blocked(sim, points) & ~closed).any()
