"""The physical Pick and Put reach low inside a fridge or cabinet through its opened front: the interior opens
through the front face of an opened piece (its frame, top and floor stay solid), the hand is checked as its own
box with a smaller margin than the arm's thick links, and the target is in the check of the arm's way to the
pre-grasp. Under physics: emmoe-001's green can, 0.14 m high on the fridge's floor, is picked, put on the kitchen
counter, and put back into the fridge.

Scene: EMMOE-100's emmoe-001 (apartment_1: the fridge against the kitchen's north wall, its interior from 0.1 to
1.65 m; "green_can", a 10 x 5.5 cm box, on its floor).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from homiebot.sim.mujoco import robot as robot_model
from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.sim.scene import load_scene
from homiebot.skills.physical import PhysicalSkillSet
from homiebot.skills.physical.manipulation import Obstacles, sim_arm_setup
from homiebot.skills.physical.navigation import opening_side
from homiebot.tasks.suite import get_task, load_suite
from homiebot.types import Action, EntityKind, EntityState, Pose2D, WorldState


@pytest.fixture()
def sim():
    simulator = MujocoSimulator(render=False)
    yield simulator
    simulator.shutdown()


def _kitchen(fridge_open: bool) -> WorldState:
    """A 4 x 3 m kitchen, a fridge with its back to the north wall (its front faces south, -y), the robot 1 m in
    front of it facing it (+y)."""
    kitchen = EntityState("kitchen", "kitchen", EntityKind.ROOM, (), (2.0, 1.5, 0.0), (0.0, 0.0, 0.0), (4.0, 3.0, 2.5))
    fridge = EntityState("fridge", "fridge", EntityKind.FURNITURE, (), (1.4, 2.575, 0.9), (1.0, 2.2, 0.0),
                         (1.8, 2.95, 1.8), room="kitchen", articulated=True, is_open=fridge_open,
                         interior_min=(1.04, 2.24, 0.1), interior_max=(1.76, 2.91, 1.65))
    return WorldState(Pose2D(1.4, 1.2, math.pi / 2), 0.3, None, {"kitchen": kitchen, "fridge": fridge})


def _in_robot_frame(world: WorldState, *points: tuple[float, float, float]) -> np.ndarray:
    base = world.robot
    c, s = math.cos(base.yaw), math.sin(base.yaw)
    return np.array([[c * (x - base.x) + s * (y - base.y), -s * (x - base.x) + c * (y - base.y), z] for x, y, z in points])


def test_an_opened_fridge_is_entered_through_its_front_and_its_frame_top_and_floor_stay_solid():
    opened, closed = _kitchen(True), _kitchen(False)
    # In the front face's plane (the fridge's box, outside its interior), half-way up, in the middle of the opening.
    doorway = _in_robot_frame(opened, (1.4, 2.22, 0.8))
    assert Obstacles.of(opened, set(), {"fridge"}).hit(doorway) is None
    # Closed, or open but not the one the arm reaches into: the front is solid, as before.
    assert Obstacles.of(closed, set(), {"fridge"}).hit(doorway) == "fridge"
    assert Obstacles.of(opened, set()).hit(doorway) == "fridge"
    # The frame's side, the floor and the top of the opened fridge are still in the way.
    for point in ((1.02, 2.22, 0.8), (1.4, 2.5, 0.07), (1.4, 2.22, 1.72)):
        assert Obstacles.of(opened, set(), {"fridge"}).hit(_in_robot_frame(opened, point)) == "fridge", point


def test_the_side_taken_for_the_front_is_the_compiled_front_of_every_articulated_piece_in_the_library(sim):
    # The world graph has no front; the compiled scene's door or drawer is on the piece's local -y side.
    checked = 0
    for scene in sorted({task.scene for task in load_suite().tasks}):
        spec = load_scene(scene)
        sim.reset(scene, seed=0)
        world = sim.state()
        for furniture in spec.furniture:
            if furniture.articulation is None:
                continue
            dx, dy = math.sin(furniture.pose.yaw), -math.cos(furniture.pose.yaw)
            front = (0 if dx < 0 else 1) if abs(dx) > abs(dy) else (2 if dy < 0 else 3)
            assert opening_side(world, world.entities[furniture.name]) == front, (scene, furniture.name)
            checked += 1
    assert checked >= 20


def test_each_point_may_keep_its_own_margin():
    world = _kitchen(True)
    obstacles = Obstacles.of(world, set(), {"fridge"})
    # 3 cm above the fridge's inside floor (0.1 m): within the arm's 5 cm margin, outside the hand's 1.5 cm.
    above_the_floor = _in_robot_frame(world, (1.4, 2.5, 0.13))
    assert obstacles.hit(above_the_floor) == "fridge"
    assert obstacles.hit(above_the_floor, np.array([0.015])) is None
    assert obstacles.hit(np.vstack([above_the_floor, above_the_floor]), np.array([0.015, 0.05])) == "fridge"


def test_the_hand_outline_is_the_simulated_palm_and_open_fingers():
    setup = sim_arm_setup()
    outline = np.array(setup.hand_outline)
    # The grip site is 0.09 m along the gripper link; the palm box reaches 0.03 m behind the link's origin, the
    # fingers' tips finger_reach past the grip site, the open pads' outer faces FINGER_OPEN + offset + half out.
    pad_out = robot_model.FINGER_OPEN + robot_model.FINGER_PAD_OFFSET + robot_model.FINGER_PAD_HALF_THICKNESS
    assert outline.min(axis=0) == pytest.approx((-0.12, -pad_out, -0.025))
    assert outline.max(axis=0) == pytest.approx((setup.finger_reach, pad_out, 0.025))
    assert set(setup.hand_links) == {"gripper_link", "finger_left_link", "finger_right_link"}


def test_a_can_low_in_the_fridge_is_picked_put_on_the_counter_and_put_back(sim):
    task = get_task("emmoe-001")
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim)
    can = sim.state().entities["green_can"]
    assert (can.parent, can.relation) == ("fridge", "in") and can.position[2] < 0.15
    for action, *target in ((Action.GO_TO, "fridge"), (Action.OPEN, "fridge"), (Action.GO_TO, "green_can")):
        assert skills.run(action, "oracle", *target).success
    picked = skills.run(Action.PICK, "oracle", "green_can")
    assert picked.success, picked.detail
    # Held by the fingers: both touch it (the grasp helper lets go as soon as either does not).
    left, right = skills.driver._grasp.touched()
    assert "green_can" in left and "green_can" in right
    assert sim.state().held == "green_can"
    assert skills.run(Action.GO_TO, "oracle", "kitchen_counter").success
    put = skills.run(Action.PUT, "oracle", "green_can", "kitchen_counter")
    assert put.success, put.detail
    after = sim.state().entities["green_can"]
    assert (after.parent, after.relation, sim.state().held) == ("kitchen_counter", "on", None)
    # And back onto the fridge's floor, released through its front.
    assert skills.run(Action.PICK, "oracle", "green_can").success
    assert skills.run(Action.GO_TO, "oracle", "fridge").success
    back = skills.run(Action.PUT, "oracle", "green_can", "fridge")
    assert back.success, back.detail
    inside = sim.state().entities["green_can"]
    assert (inside.parent, inside.relation, sim.state().held) == ("fridge", "in", None)
