"""Open and Close through the arm (``PhysicalSkillSet(articulation="physical")``, homiebot/skills/physical/articulation.py):
the gripper closes on the handle, the arm pulls or pushes it along the door's arc or the drawer's line under physics,
and where the joint ends is the simulator's state (is_open from half its range). Nothing is written kinematically: a
drawer pulled by the arm stops short of its end, a door where the arm left it.

Scenes: EMMOE-100's emmoe-005 (apartment_6: a 0.8 m kitchen drawer that slides 0.45 m out) and emmoe-001
(apartment_2: a 0.8 m fridge door hinged on its left, 1.6 rad).
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from homiebot.skills.physical import PhysicalSkillSet, articulation
from homiebot.skills.physical.skillset import ARTICULATION
from homiebot.tasks.suite import get_task
from homiebot.types import Action, EntityKind, SkillStatus


def _at(sim, task_id: str, piece: str) -> PhysicalSkillSet:
    task = get_task(task_id)
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim, articulation="physical")
    assert skills.run(Action.GO_TO, "oracle", piece).success
    return skills


def test_the_default_is_the_arm_and_an_unknown_setting_is_refused(sim):
    task = get_task("emmoe-005")
    sim.reset(task.scene, seed=task.seed)
    assert ARTICULATION == "physical"
    assert PhysicalSkillSet(sim).articulation_mode == "physical"
    assert PhysicalSkillSet(sim, articulation="oracle").articulation_mode == "oracle"
    with pytest.raises(ValueError, match="articulation"):
        PhysicalSkillSet(sim, articulation="teleport")


def test_a_drawer_is_pulled_open_and_pushed_shut_by_its_handle(sim):
    skills = _at(sim, "emmoe-005", "kitchen_drawer")
    assert skills.driver.articulation_joint("kitchen_drawer") == 0.0
    opened = skills.run(Action.OPEN, "oracle", "kitchen_drawer")
    assert opened.success, opened.detail
    assert "with the gripper" in opened.detail
    slide = skills.driver.articulation_joint("kitchen_drawer")
    # Pulled by the arm towards 85 % of the interior's depth (0.52 m): 0.44 m, at most to the slide's 0.45 m end
    # (from the base pose whose grasp is nearest, the pull ends at the stop).
    assert 0.35 < slide < 0.4505
    state = sim.state().entities["kitchen_drawer"]
    assert state.is_open
    # The world graph's interior rides the tray out as far as it went.
    assert skills.driver.held_leaf() is None  # let go once done
    closed = skills.run(Action.CLOSE, "oracle", "kitchen_drawer")
    assert closed.success, closed.detail
    assert skills.driver.articulation_joint("kitchen_drawer") < 0.03
    assert not sim.state().entities["kitchen_drawer"].is_open


def test_a_fridge_door_is_pulled_round_its_hinge_and_closed_again(sim, monkeypatch):
    # One pull from one base pose (the first segment): the door turns about 1 rad, past half its range, so the
    # world graph says open and the skill is done.
    monkeypatch.setattr(articulation, "MAX_SEGMENTS", 1)
    skills = _at(sim, "emmoe-001", "fridge")
    opened = skills.run(Action.OPEN, "oracle", "fridge")
    assert opened.success, opened.detail
    angle = skills.driver.articulation_joint("fridge")
    assert 0.8 < angle < 1.55
    assert sim.state().entities["fridge"].is_open
    # The hinge side (the door's free edge towards +x: hinged on the left, by the wall) was tried first, as the side
    # with less room beside the front, and kept.
    assert skills.articulation._memory["fridge"][0] == 1
    # Shut by its free edge, then pushed by its outer face the rest of the way (as many segments as it takes).
    monkeypatch.setattr(articulation, "MAX_SEGMENTS", 4)
    closed = skills.run(Action.CLOSE, "oracle", "fridge")
    assert closed.success, closed.detail
    assert skills.driver.articulation_joint("fridge") < 0.16
    assert not sim.state().entities["fridge"].is_open


def test_a_handle_not_where_it_is_expected_is_a_grasp_missed_and_nothing_moves(sim, monkeypatch):
    # The skill looks for the drawer's handle a third of the way up its front, where the front is bare: the gripper
    # closes on nothing, which the gripper's gap tells.
    monkeypatch.setattr(articulation, "DRAWER_HANDLE_HEIGHT", 0.3)
    skills = _at(sim, "emmoe-005", "kitchen_drawer")
    result = skills.run(Action.OPEN, "oracle", "kitchen_drawer")
    assert result.status is SkillStatus.EXECUTION_FAILED
    assert "grasp missed" in result.detail
    assert skills.driver.articulation_joint("kitchen_drawer") < 0.02
    assert not sim.state().entities["kitchen_drawer"].is_open


def test_what_lies_in_a_drawer_rides_out_with_its_tray(sim):
    # emmoe-021's bowl_2 lies in apartment_4's kitchen drawer. Pulled out by the arm, the tray carries it: the world
    # graph has it in the drawer, moved as far as the tray. (The simulator once stored it relative to the tray before
    # the pull, and wrote it a second tray's length out; and while the cabinet's floor was level with the tray's, it
    # held the bowl back until the tray's back wall pushed it, 8 cm short: tests/sim/test_drawer_tray.py.)
    skills = _at(sim, "emmoe-021", "kitchen_drawer")
    before = sim.state().entities["bowl_2"].position
    assert skills.run(Action.OPEN, "oracle", "kitchen_drawer").success
    slide = skills.driver.articulation_joint("kitchen_drawer")
    bowl = sim.state().entities["bowl_2"]
    assert (bowl.parent, bowl.relation) == ("kitchen_drawer", "in")
    moved = math.dist(before[:2], bowl.position[:2])
    assert abs(moved - slide) < 0.02, (moved, slide)


def test_the_handle_path_stops_before_a_box_the_arm_would_sweep_into(sim, monkeypatch):
    # apartment_7's fridge: the push that shut its door swept the arm into the fruit bowl on the counter beside it
    # ("the arm stopped while pushing the door ... blocked: fruit_bowl"). The path is now checked against the world
    # graph's boxes (all but the fridge's own) and ends before the first waypoint that would meet one. Here a small
    # box stands where the hand would be half-way along emmoe-001's fridge door's closing arc, held by its free edge.
    task = get_task("emmoe-001")
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim, articulation="physical")
    art = skills.articulation
    world = art.world()
    model = articulation.piece_of(world, world.entities["fridge"])
    assert model is not None
    piece = dataclasses.replace(model, grip="edge")
    targets = art._path(piece, articulation.DOOR_NOMINAL_ANGLE, 0.0, articulation.DOOR_STEP)
    planned = None
    for pose, count in art._base_poses(world, piece, targets, 1)[: articulation.POSES_TRIED]:
        planned = art._plan(piece, targets[:count], 1, pose)
        if planned is not None and len(planned[2]) >= 6:
            break
    assert planned is not None and len(planned[2]) >= 6
    path = planned[2]
    k = len(path) // 2
    tool = art.kinematics.forward(path[k])[:3, 3]
    c, s = math.cos(pose.yaw), math.sin(pose.yaw)
    at = (pose.x + c * tool[0] - s * tool[1], pose.y + s * tool[0] + c * tool[1], float(tool[2]))
    template = next(e for e in world.entities.values() if e.kind is EntityKind.OBJECT)
    box = dataclasses.replace(template, name="test_box", position=at, parent=None, relation=None, held=False,
                              bbox_min=tuple(v - 0.03 for v in at), bbox_max=tuple(v + 0.03 for v in at))
    cluttered = dataclasses.replace(world, entities={**world.entities, "test_box": box})
    monkeypatch.setattr(art, "world", lambda: cluttered)
    again = art._plan(piece, targets[:count], 1, pose)
    assert again is None or len(again[2]) <= k, (len(path), k, None if again is None else len(again[2]))


def _refusing_edges(monkeypatch, refuse):
    """Sides tried wrong first ([-1, 1]: emmoe-001's fridge hangs on side 1), a record of the (grip, side) of every
    segment the arm carries out, and "unreachable" for an edge grip on a side while ``refuse(side, executed)`` (as
    in apartments 5-7, where no base pose took the free edge of a door opened square)."""
    monkeypatch.setattr(articulation.PhysicalArticulation, "_sides_likely_first", lambda self, piece, entity: [-1, 1])
    executed: list[tuple[str, int]] = []
    segment, execute = articulation.PhysicalArticulation._segment, articulation.PhysicalArticulation._execute

    def refused(self, piece, q, goal, step, side):
        if piece.grip == "edge" and refuse(side, executed):
            raise articulation._Failed(SkillStatus.EXECUTION_FAILED, "unreachable pose: (refused by the test)")
        return segment(self, piece, q, goal, step, side)

    def recorded(self, piece, side, *rest):
        executed.append((piece.grip, side))
        return execute(self, piece, side, *rest)

    monkeypatch.setattr(articulation.PhysicalArticulation, "_segment", refused)
    monkeypatch.setattr(articulation.PhysicalArticulation, "_execute", recorded)
    return executed


def test_no_push_on_a_side_whose_grasps_closed_on_nothing(sim, monkeypatch):
    # apartment_7's fridge, found open: the edge's grasps on the wrong side closed on nothing, the right side's edge
    # was out of reach, and the closed hand then pushed along the wrong side's arc, through air ("closed" it from 1.6
    # to 0.95 rad by the hand's estimate; the door stayed at 1.6). A side whose grasps missed gets no push now. The
    # segments are stubbed with those outcomes (the arm does not move): which pushes are tried is the point.
    monkeypatch.setattr(articulation.PhysicalArticulation, "_sides_likely_first", lambda self, piece, entity: [1, -1])
    tried: list[tuple[str, int]] = []

    def stub(self, piece, q, goal, step, side):
        tried.append((piece.grip, side))
        if piece.grip == "edge":
            detail = "grasp missed: the gripper closed on nothing" if side == -1 else "unreachable pose: (stub)"
            raise articulation._Failed(SkillStatus.EXECUTION_FAILED, detail)
        raise articulation._Failed(SkillStatus.EXECUTION_FAILED, "unreachable pose: (stub)")

    skills = _at(sim, "emmoe-001", "fridge")
    assert sim.open("fridge").success
    monkeypatch.setattr(articulation.PhysicalArticulation, "_segment", stub)
    assert not skills.run(Action.CLOSE, "oracle", "fridge").success
    assert ("edge", -1) in tried and ("outer", 1) in tried
    assert ("outer", -1) not in tried, tried


def test_a_push_that_moves_nothing_is_taken_for_the_wrong_hinge_side(sim, monkeypatch):
    # A door found open (apartments 5 and 6 at reset; here emmoe-001's fridge, opened by the oracle) with the hinge
    # side guessed wrong and no edge taken on it: the hand pushes along that side's arc, says "closed", and the world
    # graph says still open (emulated here: that push reports the hand at 0 and moves nothing). The skill now starts
    # again on the other side (where it takes the edge) instead of failing.
    executed = _refusing_edges(monkeypatch, lambda side, executed: not executed)
    segment = articulation.PhysicalArticulation._segment

    def through_air(self, piece, q, goal, step, side):
        if piece.grip == "outer" and side == -1:
            executed.append(("outer", -1))
            return 0.0, 0.0  # the hand went all the way along that arc, and met nothing
        return segment(self, piece, q, goal, step, side)

    monkeypatch.setattr(articulation.PhysicalArticulation, "_segment", through_air)
    skills = _at(sim, "emmoe-001", "fridge")
    assert sim.open("fridge").success
    closed = skills.run(Action.CLOSE, "oracle", "fridge")
    assert executed[0] == ("outer", -1), executed
    assert closed.success, closed.detail
    assert not sim.state().entities["fridge"].is_open
    assert skills.articulation._memory["fridge"][0] == 1


def test_a_close_stopped_on_the_way_is_done_when_the_world_graph_says_closed(sim, monkeypatch):
    # The first push stops against something (the arm's tolerance) after the door or drawer already went past the
    # world graph's half-range threshold: the skill is done, "part of the way", not a failure to try again.
    skills = _at(sim, "emmoe-005", "kitchen_drawer")
    assert sim.open("kitchen_drawer").success

    def stopped(piece, opening, entity):
        assert sim.close("kitchen_drawer").success  # as far as the arm got
        raise articulation._Failed(SkillStatus.EXECUTION_FAILED, "the arm stopped while pushing the drawer (at 0.10)")

    monkeypatch.setattr(skills.articulation, "_pull", stopped)
    closed = skills.run(Action.CLOSE, "oracle", "kitchen_drawer")
    assert closed.success, closed.detail
    assert "part of the way" in closed.detail


def test_the_base_poses_tried_first_have_the_grasp_within_reach(sim):
    # apartment_7's fridge found open, shut by its free edge (low, 0.45 m up): the poses that reach most of the arc
    # by distance stood 0.8 m from the edge, where no arm configuration takes it, and were all the skill tried. Those
    # whose grasp lies within GRASP_REACH now come first (here one place, at two headings).
    task = get_task("emmoe-051")
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim, articulation="physical")
    art = skills.articulation
    world = art.world()
    piece = dataclasses.replace(articulation.piece_of(world, world.entities["fridge"]), grip="edge")
    targets = art._path(piece, articulation.DOOR_NOMINAL_ANGLE, 0.0, articulation.DOOR_STEP)
    poses = art._base_poses(world, piece, targets, 1)
    edge = piece.handle(targets[0], 1)[0]
    first = [math.hypot(p.x - edge[0], p.y - edge[1]) for p, _count in poses[: articulation.POSES_TRIED]]
    assert first and first[0] <= articulation.GRASP_REACH + 1e-9, first  # before: 0.80 m


def _stubbed_segments(monkeypatch, outcome):
    """Every segment the skill would carry out answered by ``outcome(grip, side)`` (a (reached, travel) pair, or a
    _Failed raised); returns the record of (grip, side) asked for. The arm and the base do not move."""
    asked: list[tuple[str, int]] = []

    def stub(self, piece, q, goal, step, side):
        asked.append((piece.grip, side))
        return outcome(piece.grip, side)

    monkeypatch.setattr(articulation.PhysicalArticulation, "_segment", stub)
    return asked


def _unreachable(grip, side):
    raise articulation._Failed(SkillStatus.EXECUTION_FAILED, "unreachable pose: (stub)")


def test_a_close_no_pose_reaches_fails_at_once_and_is_not_retried_until_something_changes(sim, monkeypatch):
    # apartment_5's fridge, found open square by its wall: no base pose or arm configuration takes its free edge, and
    # the expert asks for the Close round after round; each round ran the executor's three tries of the whole search
    # (about 50 s each on a loaded machine), 20 rounds. A try that found nothing and changed nothing is now not retried
    # (SkillResult.retryable False: the executor's E1 at once), and the same request in the same situation fails at
    # once; once something around the door changes, the search runs again.
    skills = _at(sim, "emmoe-001", "fridge")
    assert sim.open("fridge").success
    asked = _stubbed_segments(monkeypatch, _unreachable)
    first = skills.run(Action.CLOSE, "oracle", "fridge")
    assert first.status is SkillStatus.EXECUTION_FAILED and "unreachable pose" in first.detail
    assert not first.retryable
    searched = len(asked)
    assert searched > 0
    again = skills.run(Action.CLOSE, "oracle", "fridge")
    assert not again.success and not again.retryable
    assert "nothing around it has changed" in again.detail
    assert len(asked) == searched  # no search this time
    # The base elsewhere (it orders the poses tried): the skill searches again.
    here = skills.driver.base_pose()
    moved = dataclasses.replace(here, x=here.x + 0.3)
    with monkeypatch.context() as elsewhere:
        elsewhere.setattr(skills.driver, "base_pose", lambda: moved)
        skills.run(Action.CLOSE, "oracle", "fridge")
    assert len(asked) == 2 * searched
    # Something near the fridge moved (a box put down 1 m in front of it): the skill searches again.
    art = skills.articulation
    world = art.world()
    face = articulation.piece_of(world, world.entities["fridge"]).face
    template = next(e for e in world.entities.values() if e.kind is EntityKind.OBJECT)
    at = (float(face[0]), float(face[1]) - 1.0, 0.4)
    box = dataclasses.replace(template, name="test_box", position=at, parent=None, relation=None, held=False,
                              bbox_min=tuple(v - 0.05 for v in at), bbox_max=tuple(v + 0.05 for v in at))
    real = art.world
    monkeypatch.setattr(art, "world", lambda: dataclasses.replace(real(), entities={**real().entities, "test_box": box}))
    skills.run(Action.CLOSE, "oracle", "fridge")
    assert len(asked) == 3 * searched


def test_a_hinge_side_a_push_showed_wrong_is_not_pushed_again(sim, monkeypatch):
    # A door found open, its hinge side guessed wrong (-1 here; emmoe-001's fridge hangs on side 1): the closed hand
    # sweeps along that side's arc through air (a drive and a slow sweep of the arm), the world graph says still open,
    # and the skill turns to the other side, where nothing reaches the door either. A later try (after something
    # changed) skipped nothing: it pushed air on side -1 again. The side is now remembered as not the hinge's.
    monkeypatch.setattr(articulation.PhysicalArticulation, "_sides_likely_first", lambda self, piece, entity: [-1, 1])

    def outcome(grip, side):
        if grip == "outer" and side == -1:
            return 0.0, 0.0  # all the way along that arc, meeting nothing
        return _unreachable(grip, side)

    asked = _stubbed_segments(monkeypatch, outcome)
    skills = _at(sim, "emmoe-001", "fridge")
    assert sim.open("fridge").success
    first = skills.run(Action.CLOSE, "oracle", "fridge")
    assert not first.success
    assert asked.count(("outer", -1)) == 1
    vars(skills.articulation).get("_hopeless", {}).clear()  # as after a change around the fridge
    second = skills.run(Action.CLOSE, "oracle", "fridge")
    assert not second.success
    assert asked.count(("outer", -1)) == 1, asked
    assert ("edge", 1) in asked[asked.index(("outer", -1)) + 1:]


def test_a_low_cabinet_door_pulled_part_way_is_taken_by_its_handle_again_and_opened(sim):
    # emmoe-014's 0.9 m kitchen cabinet: one pull by the handle turns the door to about 0.6 rad (short of the world
    # graph's half range), and the closed hand finds no way in behind the door to push it on (the wedge between the door
    # and the cabinet's front faces away from every base pose): the Open failed every try. The handle, turned towards
    # the room now, is taken again where the door stands and pulled on.
    skills = _at(sim, "emmoe-014", "kitchen_cabinet")
    opened = skills.run(Action.OPEN, "oracle", "kitchen_cabinet")
    assert opened.success, opened.detail
    assert skills.driver.articulation_joint("kitchen_cabinet") > 1.35
    assert sim.state().entities["kitchen_cabinet"].is_open
