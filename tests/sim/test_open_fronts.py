"""The library's kitchens leave a physical robot room to reach into an open fridge: with its door open, the base
still gets, from where the scene starts it, to a pose in front of the fridge's opening (the arm of a Fetch-class
robot reaches about 0.8 m from the base's centre, so a Pick or Put into the fridge has to stand there).

An opened door's leaf is an obstacle for the base (MujocoSimulator._door_rects). A door hinged on the side that
faces the room, with another piece less than a leaf's length in front of it, pens in the poses in front of its own
opening: the oracle skills act from 1.2 m, the physical ones cannot.
"""

from __future__ import annotations

import math

import pytest

from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.sim.scene import SceneSpec, list_scenes, load_scene
from homiebot.skills.physical.navigation import ARM_REACH, approach_poses, opening_side
from homiebot.types import Pose2D, WorldState


@pytest.fixture(scope="module")
def sim():
    simulator = MujocoSimulator(render=False)
    yield simulator
    simulator.shutdown()


def with_open(spec: SceneSpec, name: str) -> SceneSpec:
    furniture = [
        f.model_copy(update={"articulation": f.articulation.model_copy(update={"open": True})})
        if f.name == name and f.articulation is not None else f
        for f in spec.furniture
    ]
    return spec.model_copy(update={"furniture": furniture})


def front_poses(world: WorldState, name: str) -> list[Pose2D]:
    """Go to's poses for ``name`` beyond its opening's side, from which the middle of the opening is within the arm's
    reach of the base's centre."""
    entity = world.entities[name]
    side = opening_side(world, entity)
    assert side is not None, f"{name} has no front"
    (x0, y0), (x1, y1) = entity.bbox_min[:2], entity.bbox_max[:2]
    middle = [(x0, (y0 + y1) / 2), (x1, (y0 + y1) / 2), ((x0 + x1) / 2, y0), ((x0 + x1) / 2, y1)][side]
    poses = []
    for p in approach_poses(world, name):
        beyond = [x0 - p.x, p.x - x1, y0 - p.y, p.y - y1][side]
        if beyond > 0.0 and math.hypot(p.x - middle[0], p.y - middle[1]) <= ARM_REACH:
            poses.append(p)
    return poses


@pytest.mark.parametrize("scene", list_scenes())
def test_an_opened_fridge_leaves_the_base_a_way_to_its_front(sim, scene):
    spec = load_scene(scene)
    fridges = [f.name for f in spec.furniture if f.category == "fridge" and f.articulation is not None]
    if not fridges:
        pytest.skip(f"{scene} has no fridge")
    penned = []
    for name in fridges:
        sim.reset(with_open(spec, name), seed=0)
        poses = front_poses(sim.state(), name)
        answers = []
        for pose in poses:
            result = sim.navigate_to_pose(pose)
            if result.succeeded:
                break
            answers.append(result.error_msg)
        else:
            penned.append(f"{name}: {len(poses)} poses in front, none reached ({'; '.join(answers[:2])})")
    assert not penned, f"{scene}: " + " | ".join(penned)
