"""The physical Pick and Put move the base when no grasp or release reaches from where it stands but the oracle skill
would act (EMMOE's distance rule), through NavigateToPose goals; the arm's motions back to the tuck after a failure
and after a missed grasp are collision-checked, and planned around furniture when the straight one collides.

Scenes: EMMOE-100's emmoe-084 (apartment_1, seed 4108: a short can on the kitchen counter) and emmoe-038 (the
cracker box "red_box_2" on the TV stand in front of the TV: every straight motion between the tuck and a pre-grasp
over the box sweeps the arm through the TV's box).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from homiebot.config import FAR_THRESHOLD_M
from homiebot.executor.executor import Executor
from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.skills.physical import PhysicalSkillSet, manipulation
from homiebot.skills.physical.manipulation import Obstacles, Planning
from homiebot.skills.physical.motion import segment_clear
from homiebot.tasks.suite import get_task
from homiebot.types import Action, ErrorCode, Pose2D, SkillStatus, Subtask

#: Finer than the skills' own check spacing: a goal's segments must be clear when checked ten times as often.
FINE_STEP = manipulation.PATH_CHECK_STEP / 10


def _skills(sim: MujocoSimulator, task_id: str) -> PhysicalSkillSet:
    task = get_task(task_id)
    sim.reset(task.scene, seed=task.seed)
    return PhysicalSkillSet(sim)


def _record(skills: PhysicalSkillSet, monkeypatch: pytest.MonkeyPatch, name: str) -> list[object]:
    """The goals of the driver's ``name`` interface, recorded as they are sent."""
    sent: list[object] = []
    real = getattr(skills.driver, name)
    monkeypatch.setattr(skills.driver, name, lambda goal, *rest: sent.append(goal) or real(goal, *rest))
    return sent


def _backed_off(skills: PhysicalSkillSet, sim: MujocoSimulator, obj: str, metres: float) -> Pose2D:
    """After Go to ``obj``, drive the base ``metres`` straight back from it, still facing it."""
    assert skills.run(Action.GO_TO, "oracle", obj).success
    here = sim.state().robot
    back = Pose2D(here.x - metres * math.cos(here.yaw), here.y - metres * math.sin(here.yaw), here.yaw)
    assert sim.navigate_to_pose(back).succeeded
    return back


# ---------------------------------------------------------------------------------------------- the base


def test_a_pick_out_of_the_arms_reach_moves_the_base_closer_and_picks(sim, monkeypatch):
    skills = _skills(sim, "emmoe-084")
    start = _backed_off(skills, sim, "short_can", 0.8)
    assert sim.state().reach_distance("short_can") <= FAR_THRESHOLD_M, "the oracle's Pick would act from here"
    without_base = manipulation.PhysicalManipulation(skills.driver, skills.manipulation.kinematics,
                                                     skills.manipulation.setup)
    stays = without_base.pick(sim.state(), "short_can")
    assert stays.detail.startswith("unreachable pose"), "out of the arm's reach from where the base stands"
    assert sim.state().robot == start
    goals = _record(skills, monkeypatch, "navigate_to_pose")
    picked = skills.run(Action.PICK, "oracle", "short_can")
    assert picked.success, picked.detail
    assert sim.state().held == "short_can"
    assert goals, "the base moved through NavigateToPose goals"
    assert "moved" in picked.detail and "near short_can" in picked.detail
    assert picked.path_length > 0.3
    assert sim.state().robot.distance_to(start) > 0.3


def test_a_put_behind_the_robot_turns_the_base_to_face_the_place(sim, monkeypatch):
    skills = _skills(sim, "emmoe-084")
    assert skills.run(Action.GO_TO, "oracle", "short_can").success
    assert skills.run(Action.PICK, "oracle", "short_can").success
    # A step back (Go to stopped closer to the counter than the oracle's Put accepts), then the counter behind.
    near = sim.state().robot
    here = Pose2D(near.x - 0.2 * math.cos(near.yaw), near.y - 0.2 * math.sin(near.yaw), near.yaw + math.pi)
    assert sim.navigate_to_pose(here).succeeded
    goals = _record(skills, monkeypatch, "navigate_to_pose")
    put = skills.run(Action.PUT, "oracle", "short_can", "kitchen_counter")
    assert put.success, put.detail
    assert sim.state().entities["short_can"].parent == "kitchen_counter" and sim.state().held is None
    turned = goals[0]
    assert isinstance(turned, Pose2D)
    assert math.hypot(turned.x - here.x, turned.y - here.y) < 1e-6, "the first goal turns the base in place"
    assert put.detail.startswith("put short_can on kitchen_counter (the base first turned")
    assert "degrees to face kitchen_counter" in put.detail


def test_still_out_of_reach_after_the_reposition_is_an_unreachable_pose_that_says_what_the_base_did(sim, monkeypatch):
    skills = _skills(sim, "emmoe-084")
    start = _backed_off(skills, sim, "short_can", 0.8)
    monkeypatch.setattr(manipulation, "approach_poses", lambda *args, **kwargs: [])  # nowhere to go
    result = skills.run(Action.PICK, "oracle", "short_can")
    assert result.status is SkillStatus.EXECUTION_FAILED
    assert result.detail.startswith("unreachable pose: no arm configuration reaches it to grasp short_can")
    assert result.detail.endswith("(the base first found no free pose within 2.0 m near short_can to move to)")
    assert sim.state().robot == start and sim.state().held is None


def test_the_tries_go_to_base_poses_not_tried_yet_and_stop_when_none_is_left(sim, monkeypatch):
    # A grasp that reaches from nowhere (staged), two poses near the can: the first try goes to one, the second to the
    # other, and with none left the executor stops there (E1), where it used to go back to the first.
    skills = _skills(sim, "emmoe-084")
    _backed_off(skills, sim, "short_can", 0.8)
    start = sim.state().robot
    poses = [pose for pose in manipulation.approach_poses(sim.state(), "short_can",
                                                          object_gaps=manipulation.REPOSITION_GAPS)
             if 0.05 < math.hypot(pose.x - start.x, pose.y - start.y) <= manipulation.REPOSITION_RANGE][:2]
    assert len(poses) == 2
    monkeypatch.setattr(manipulation, "approach_poses", lambda *args, **kwargs: list(poses))

    def nowhere(world, entity, outline):
        raise manipulation.Unreachable(f"unreachable pose: staged, from ({world.robot.x:.2f}, {world.robot.y:.2f})")

    monkeypatch.setattr(skills.manipulation, "_grasp_plan", nowhere)
    goals = _record(skills, monkeypatch, "navigate_to_pose")
    feedback = Executor(sim, skills=skills).execute(Subtask("Pick", "short_can"), "RT-1-X", ())
    assert (feedback.code, feedback.attempts) == (ErrorCode.E1, 2)
    assert goals == poses, "each pose once, none again"
    # A later [Pick, short_can] from there neither plans nor moves, and says why, not retryable.
    monkeypatch.setattr(skills.manipulation, "_grasp_plan", lambda *args: pytest.fail("planned again"))
    result = skills.run(Action.PICK, "oracle", "short_can")
    assert result.detail == ("unreachable pose: short_can was out of reach from here and from every pose within 2.0 m "
                             "near it in earlier tries")
    assert not result.retryable and goals == poses
    # Once the can is somewhere else, the poses are worth trying again.
    assert manipulation.PhysicalManipulation._tried_key(sim.state(), "pick", "short_can") != \
        manipulation.PhysicalManipulation._tried_key(_moved(sim.state(), "short_can", 0.05), "pick", "short_can")


def _moved(world, name: str, dx: float):
    entity = world.entities[name]
    x, y, z = entity.position
    return dataclasses.replace(world, entities={**world.entities, name: dataclasses.replace(entity, position=(x + dx, y, z))})


def test_beyond_the_oracles_distance_the_base_does_not_move(sim, monkeypatch):
    skills = _skills(sim, "emmoe-084")
    world = sim.state()
    assert world.reach_distance("short_can") > FAR_THRESHOLD_M
    goals = _record(skills, monkeypatch, "navigate_to_pose")
    result = skills.manipulation.pick(world, "short_can")
    assert result.detail.startswith("unreachable pose") and "the base first" not in result.detail
    assert goals == [] and sim.state().robot == world.robot


# ---------------------------------------------------------------------------------------------- the way back


def _goals_clear(goals: list[object], start: tuple[float, ...], obstacles: Obstacles,
                 skills: PhysicalSkillSet) -> bool:
    """Whether every segment of the trajectory goals, from ``start`` on, is clear of ``obstacles`` (fine steps)."""
    kinematics = skills.manipulation.kinematics
    previous = start
    for goal in goals:
        for point in goal.points:  # type: ignore[attr-defined]
            if not segment_clear(previous, point.positions,
                                 lambda q: obstacles.hit(kinematics.link_points(q)) is None, FINE_STEP):
                return False
            previous = point.positions
    return True


def _out_over_the_box(sim: MujocoSimulator, skills: PhysicalSkillSet) -> tuple[float, ...]:
    """emmoe-038: the arm out at the pre-grasp over the cracker box (reached by the planned motion around the TV)."""
    assert skills.run(Action.GO_TO, "oracle", "red_box_2").success
    world = sim.state()
    entity = world.entities["red_box_2"]
    grasp = skills.manipulation._grasp_plan(world, entity, manipulation.Outline.of(entity, world.robot))
    assert skills.manipulation._move(grasp.reach).succeeded
    return skills.manipulation._current()


def test_the_tuck_after_a_failure_goes_around_what_the_straight_motion_sweeps_through(sim, monkeypatch):
    skills = _skills(sim, "emmoe-038")
    out = _out_over_the_box(sim, skills)
    obstacles = Obstacles.of(sim.state(), set())
    tuck = tuple(skills.manipulation._tuck)
    clear = skills.manipulation._clear(obstacles)
    assert not segment_clear(out, tuck, clear), "the straight motion back sweeps the arm through the TV"
    # A failure once the arm is out: the skill goes back to the tuck before it reports.

    def stopped(*args: object) -> None:
        raise Planning(SkillStatus.EXECUTION_FAILED, "the arm stopped while reaching for red_box_2: (staged)")

    monkeypatch.setattr(skills.manipulation, "_grasp_plan", stopped)
    goals = _record(skills, monkeypatch, "follow_joint_trajectory")
    result = skills.manipulation.pick(sim.state(), "red_box_2")
    assert result.detail == "the arm stopped while reaching for red_box_2: (staged)"
    assert goals, "the arm went back"
    assert len(goals[-1].points) > 1, "through the planned waypoints, not straight"  # type: ignore[attr-defined]
    assert _goals_clear(goals, out, obstacles, skills)
    assert skills.manipulation._tucked()


def test_no_clear_way_back_leaves_the_arm_where_it_is_and_says_so(sim, monkeypatch):
    skills = _skills(sim, "emmoe-038")
    out = _out_over_the_box(sim, skills)
    monkeypatch.setattr(skills.manipulation, "setup", dataclasses.replace(
        skills.manipulation.setup, planner=dataclasses.replace(skills.manipulation.setup.planner, time_budget=1e-9)))
    goals = _record(skills, monkeypatch, "follow_joint_trajectory")
    stuck = skills.manipulation.tuck_if_needed(sim.state())
    assert stuck is not None and stuck.startswith("the arm stays out: no collision-free motion back to the tuck")
    assert "ran out of seconds" in stuck
    assert goals == [] and np.allclose(skills.manipulation._current(), out, atol=0.02)
    # The next skill says why it cannot start.
    refused = skills.run(Action.GO_TO, "oracle", "red_box_2")
    assert refused.status is SkillStatus.EXECUTION_FAILED and refused.detail.startswith("the arm stays out")


def test_after_a_missed_grasp_the_arm_is_back_at_the_tuck_through_checked_motions(sim, monkeypatch):
    skills = _skills(sim, "emmoe-084")
    assert skills.run(Action.GO_TO, "oracle", "short_can").success
    world = sim.state()
    can = world.entities["short_can"]
    # The map says the can is 12 cm to the side of where it is: the fingers close on air.
    shift = np.array([-math.sin(world.robot.yaw), math.cos(world.robot.yaw), 0.0]) * 0.12
    moved = dataclasses.replace(can, position=tuple(np.add(can.position, shift)),
                                bbox_min=tuple(np.add(can.bbox_min, shift)), bbox_max=tuple(np.add(can.bbox_max, shift)))
    stale = dataclasses.replace(world, entities={**world.entities, "short_can": moved})
    start = skills.manipulation._current()
    goals = _record(skills, monkeypatch, "follow_joint_trajectory")
    result = skills.manipulation.pick(stale, "short_can")
    assert result.detail.startswith("grasp missed")
    assert skills.manipulation._tucked(), "the arm is back at the tuck, not left at the pre-grasp"
    # From the pre-grasp on (the line in and out is the grasp's own, checked without the can), every motion clears
    # the graph's boxes.
    back = [g for g in goals if g.points[-1].positions == pytest.approx(start, abs=1e-6)]  # type: ignore[attr-defined]
    assert back
    pregrasp = goals[goals.index(back[-1]) - 1].points[-1].positions  # type: ignore[attr-defined]
    assert _goals_clear([back[-1]], pregrasp, Obstacles.of(sim.state(), set()), skills)
