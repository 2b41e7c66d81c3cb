"""The physical Pick and Put reach low inside a fridge or cabinet through its opened front: the interior opens
through the front face of an opened piece (its frame, top and floor stay solid), the hand is checked as its own
box with a smaller margin than the arm's thick links, and the target is in the check of the arm's way to the
pre-grasp. Under physics: emmoe-001's green can, 0.14 m high on the fridge's floor, is picked, put on the kitchen
counter, and put back into the fridge.

Scene: EMMOE-100's emmoe-001 (apartment_1: the fridge against the kitchen's north wall, its interior from 0.1 to
1.65 m; "green_can", a 10 x 5.5 cm box, on its floor).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from homiebot.sim.mujoco import robot as robot_model
from homiebot.sim.mujoco.urdf import robot_urdf
from homiebot.sim.scene import load_scene
from homiebot.skills.physical import ArmKinematics, PhysicalSkillSet
from homiebot.skills.physical.manipulation import Obstacles, PhysicalManipulation, Unreachable, sim_arm_setup
from homiebot.skills.physical.motion import segment_clear
from homiebot.skills.physical.navigation import front_poses, opening_side
from homiebot.tasks.suite import get_task, load_suite
from homiebot.types import Action, EntityKind, EntityState, Pose2D, WorldState


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


# A cabinet 1.1 m tall with its door opened, its floor 0.1 m up, the base 0.2 m from its front (emmoe-032's study:
# the white cabinet, the robot holding a 3.5 x 11 x 9 cm pudding box in the tuck). Straight joint-space motions from
# the tuck sweep the unfolding arm through the cabinet's top; the way in goes round it, clear of the door's leaf.
def _study() -> WorldState:
    study = EntityState("study", "study", EntityKind.ROOM, (), (6.75, 7.0, 0.0), (4.5, 5.0, 0.0), (9.0, 9.0, 2.5))
    cabinet = EntityState("white_cabinet", "cabinet", EntityKind.FURNITURE, (), (8.725, 7.5, 0.55), (8.5, 7.05, 0.0),
                          (8.95, 7.95, 1.1), room="study", articulated=True, is_open=True,
                          interior_min=(8.54, 7.09, 0.1), interior_max=(8.91, 7.91, 1.0))
    box = EntityState("pudding_box", "pudding_box", EntityKind.OBJECT, (), (8.2016, 7.5, 1.055), (8.1439, 7.4423, 1.01),
                      (8.2593, 7.5577, 1.1), room="study", held=True, half_extents=(0.0175, 0.055, 0.045),
                      yaw=-1.5819)
    return WorldState(Pose2D(8.0, 7.5, 0.0), 0.3, "pudding_box",
                      {e.name: e for e in (study, cabinet, box)}, robot_room="study")


class _TuckedArm:
    """A driver that only says where the arm is (the tuck): the plans below send nothing."""

    def __init__(self, setup) -> None:
        self._joints = dict(setup.tuck)

    def joint_positions(self) -> dict[str, float]:
        return dict(self._joints)


def _planner(setup) -> PhysicalManipulation:
    return PhysicalManipulation(_TuckedArm(setup), ArmKinematics(robot_urdf(), setup.chain, setup.tip_link,
                                                                 setup.tcp_offset), setup)


def test_an_opened_door_leaf_stands_on_either_side_of_the_opening_of_the_piece_reached_into():
    world = _study()
    obstacles = Obstacles.of(world, set(), {"white_cabinet"})

    def hit(x: float, y: float, z: float) -> str | None:
        return obstacles.hit(_in_robot_frame(world, (x, y, z)), np.array([0.0]))

    # The cabinet opens to the west (x = 8.5); its 0.9 m front is 0.9 m wide, so is its one leaf, on either side.
    for y in (7.02, 7.98):
        assert hit(8.1, y, 0.5) == "white_cabinet/door"
        assert hit(7.65, y, 1.05) == "white_cabinet/door"
    # The corridor in front of the opening is free, and so is the floor past the leaf's length and above its top.
    assert hit(8.1, 7.5, 0.5) is None
    assert hit(7.55, 7.02, 0.5) is None
    assert hit(8.1, 7.02, 1.15) is None
    # A base standing where one leaf would be tells that the door is hinged on the other side.
    beside = dataclasses.replace(world, robot=Pose2D(8.0, 7.9, 0.0))
    with_base = Obstacles.of(beside, set(), {"white_cabinet"})
    assert with_base.hit(_in_robot_frame(beside, (8.1, 7.98, 0.5)), np.array([0.0])) is None
    assert with_base.hit(_in_robot_frame(beside, (8.1, 7.02, 0.5)), np.array([0.0])) == "white_cabinet/door"
    # A piece the arm does not reach into, or a closed one, keeps its box as before and gets no leaves.
    assert Obstacles.of(world, set()).hit(_in_robot_frame(world, (8.1, 7.02, 0.5))) is None
    closed = dataclasses.replace(world, entities={**world.entities, "white_cabinet": dataclasses.replace(
        world.entities["white_cabinet"], is_open=False)})
    assert Obstacles.of(closed, set(), {"white_cabinet"}).hit(_in_robot_frame(closed, (8.1, 7.02, 0.5))) is None


def test_a_low_cabinet_is_reached_with_the_interior_budget_and_every_motion_is_clear():
    setup = sim_arm_setup()
    world = _study()

    def plan(manipulation: PhysicalManipulation):
        return manipulation._release_plan(world, world.entities["pudding_box"], world.entities["white_cabinet"])

    # With the open counter's budget for every motion, the search runs out before it finds the way in.
    with pytest.raises(Unreachable, match="no collision-free arm motion"):
        plan(_planner(dataclasses.replace(setup, interior_planner=setup.planner)))
    manipulation = _planner(setup)
    found = plan(manipulation)
    # Every segment of the way in keeps the arm's 5 cm and the hand's 1.5 cm from the cabinet and both places its
    # leaf may stand, checked finer than the planner checks it: the margins are what they are everywhere else.
    obstacles = Obstacles.of(world, {"pudding_box"}, {"white_cabinet"})
    clear = manipulation._clear(obstacles, manipulation._held_points(world))
    there = [tuple(manipulation.kinematics.vector(setup.tuck)), *found.reach]
    assert len(there) > 2  # a planned path, not one straight motion
    assert all(segment_clear(a, b, clear, 0.02) for a, b in zip(there, there[1:]))
    # Low in the cabinet: the torso down and the held box's bottom 2 cm over the cabinet's floor.
    end = found.lower[-1]
    assert end[0] < 0.1
    assert manipulation.kinematics.forward(end)[2, 3] < 0.3


def test_the_poses_in_front_of_an_opened_fridge_come_in_line_with_the_object_as_near_as_the_base_fits():
    world = _kitchen(True)
    can = EntityState("can", "can", EntityKind.OBJECT, (), (1.4, 2.6, 0.17), (1.35, 2.55, 0.1), (1.45, 2.65, 0.24),
                      room="kitchen", parent="fridge", relation="in")
    world.entities["can"] = can
    poses = front_poses(world, "can", 0.06)
    # Square to the front (the fridge's front face at y = 2.2), the base's edge 6 cm from it, facing the can, nearest
    # the can first.
    first = poses[0]
    assert (first.x, first.y) == pytest.approx((1.4, 2.2 - 0.36))
    assert first.yaw == pytest.approx(math.pi / 2)
    assert all(p.y == pytest.approx(2.2 - 0.36) for p in poses)
    distances = [math.dist((p.x, p.y), (1.4, 2.6)) for p in poses]
    assert distances == sorted(distances)
    # Clear of where the door's leaf may stand on either side of the opening (the fridge spans x 1.0-1.8): the base
    # keeps 5 cm from 3 cm in front of each side.
    assert all(1.0 + 0.03 + 0.3 + 0.05 - 1e-9 <= p.x <= 1.8 - 0.03 - 0.3 - 0.05 + 1e-9 for p in poses)
    # A can near the fridge's side: the nearest pose the base fits in, within the 2 cm the poses are apart.
    world.entities["can"] = dataclasses.replace(can, position=(1.15, 2.6, 0.17), bbox_min=(1.1, 2.55, 0.1),
                                                bbox_max=(1.2, 2.65, 0.24))
    assert 1.38 - 1e-9 <= front_poses(world, "can", 0.06)[0].x <= 1.40
    # Not for a closed fridge, an object on top of it, or a pulled-out drawer (its tray stands where the poses would).
    world.entities["fridge"] = dataclasses.replace(world.entities["fridge"], is_open=False)
    assert front_poses(world, "can", 0.06) == []
    world.entities["fridge"] = dataclasses.replace(world.entities["fridge"], is_open=True,
                                                   interior_min=(1.04, 1.7, 0.1), interior_max=(1.76, 2.6, 0.8))
    assert front_poses(world, "can", 0.06) == []
    world.entities["fridge"] = dataclasses.replace(_kitchen(True).entities["fridge"])
    assert front_poses(world, "can", 0.06) != []
    world.entities["can"] = dataclasses.replace(can, relation="on")
    assert front_poses(world, "can", 0.06) == []
