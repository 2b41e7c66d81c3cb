"""The physical Pick on objects the world graph gives a heading and a box (``--skills physical``, under physics): a
tall box standing with its narrow side towards the robot is taken across that side, carried and put down; a bowl
wider than the open gripper is refused at once, before the arm moves.

Scenes: EMMOE-100's emmoe-010 (apartment_6: the cracker box "red_box" on the kitchen counter, the wood table) and
emmoe-084 (apartment_1: a 16 cm bowl on the brown table).
"""

from __future__ import annotations

import math

import pytest

from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.skills.physical import PhysicalSkillSet
from homiebot.tasks.suite import get_task
from homiebot.types import Action, SkillStatus


@pytest.fixture()
def sim():
    simulator = MujocoSimulator(render=False)
    yield simulator
    simulator.shutdown()


def test_a_tall_box_is_taken_across_its_narrow_side_carried_and_put_down(sim):
    task = get_task("emmoe-010")
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim)
    assert skills.run(Action.GO_TO, "oracle", "red_box").success
    world = sim.state()
    box = world.entities["red_box"]
    # The 6 cm side faces the robot (the box's x axis within 10 degrees of the line base -> box): fingers closing
    # across the robot's view, as before the graph had the heading, would come down on the 16 cm side.
    towards = math.atan2(box.position[1] - world.robot.y, box.position[0] - world.robot.x)
    assert box.half_extents == pytest.approx((0.03, 0.08, 0.105))
    assert box.yaw is not None and abs(math.sin(box.yaw - towards)) < math.sin(math.radians(10))
    picked = skills.run(Action.PICK, "oracle", "red_box")
    assert picked.success, picked.detail
    assert sim.state().held == "red_box"
    assert skills.run(Action.GO_TO, "oracle", "wood_table").success
    put = skills.run(Action.PUT, "oracle", "red_box", "wood_table")
    assert put.success, put.detail
    after = sim.state().entities["red_box"]
    assert (after.parent, after.relation, sim.state().held) == ("wood_table", "on", None)


def test_an_object_wider_than_the_gripper_is_refused_before_the_arm_moves(sim, monkeypatch):
    task = get_task("emmoe-084")
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim)
    assert skills.run(Action.GO_TO, "oracle", "bowl").success
    assert skills.manipulation.tuck_if_needed(sim.state()) is None
    goals: list[str] = []
    for name in ("follow_joint_trajectory", "gripper_command"):
        sent = getattr(skills.driver, name)
        monkeypatch.setattr(skills.driver, name, lambda *args, _name=name, _sent=sent: goals.append(_name) or _sent(*args))
    result = skills.manipulation.pick(sim.state(), "bowl")
    assert result.status is SkillStatus.EXECUTION_FAILED
    assert result.detail == ("grasp impossible: bowl is 16.0 cm wide at its narrowest, "
                             "wider than the gripper opens (10.0 cm)")
    assert goals == [], "no goal may be sent for a grasp that cannot fit"
    assert sim.state().entities["bowl"].parent == "brown_table" and sim.state().held is None


def test_the_fingers_close_on_a_thin_object_instead_of_passing_through_it(sim):
    # emmoe-064's banana, 4 cm across its narrow side: fingers driven at full force from 10 cm apart used to close
    # through it in a few physics steps ("grasp missed"); at the finger speed a Fetch's URDF allows they stop on it.
    task = get_task("emmoe-064")
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim)
    assert skills.run(Action.GO_TO, "oracle", "banana").success
    picked = skills.run(Action.PICK, "oracle", "banana")
    assert picked.success, picked.detail
    gap = sum(skills.driver.joint_positions()[j] for j in skills.manipulation.setup.gripper_joints)
    pads = gap + skills.manipulation.setup.open_width - skills.manipulation.setup.open_gap
    assert pads == pytest.approx(0.04, abs=0.006), "the pads rest on the banana's faces"
