"""Two things the world graph's boxes hid from the physical skills (EMMOE-100's emmoe-048 and emmoe-066).

* **A chair's back.** The space above a seat is left free in the arm's collision check (the object reveals the
  seat); a sofa's back is then a box of its own on the side facing the nearer wall, but a chair had none, and
  emmoe-048's planned way to the plum swung the forearm through the chair's back ("blocked: chair"). A chair is
  square and turned any way, so its back is now assumed possible on each of its four sides (a slab 6 cm deep, from
  the seat to the top, never over the object), and the arm goes in and out over the chair's top.
* **A base between a coffee table and a sofa.** emmoe-066's mug lies on a sofa whose front stands 0.70 m from a
  coffee table. A 0.6 m base fits there with 5 cm on each side, but the object rays' pose 6 cm from the sofa is
  4 cm from the table, which Go to's 5 cm clearance refused: every pose left was 1.1 m or more from the mug, out of
  a Fetch-sized arm's reach. A pose within the arm's reach is now also tried with 3 cm (more than the grid
  planner's own inflation), after the roomy ones.
"""

from __future__ import annotations

import math

import numpy as np

from homiebot.skills.physical import PhysicalSkillSet
from homiebot.skills.physical.manipulation import CHAIR_BACK_DEPTH, SEAT_BACK_PART, Obstacles
from homiebot.skills.physical.navigation import (
    ARM_REACH,
    CLEARANCE,
    TIGHT_CLEARANCE,
    approach_poses,
)
from homiebot.tasks.suite import get_task
from homiebot.types import Action, EntityKind, EntityState, Pose2D, WorldState

# apartment_6's chair (0.5 m square, 0.9 m high, its seat at 0.45 m) and emmoe-048's plum on its seat.
CHAIR = EntityState("chair", "chair", EntityKind.FURNITURE, (), (6.4, 0.9, 0.45), (6.15, 0.65, 0.0), (6.65, 1.15, 0.9),
                    room="dining_room")
PLUM = EntityState("plum", "plum", EntityKind.OBJECT, (), (6.33, 0.86, 0.475), (6.3, 0.83, 0.45), (6.35, 0.88, 0.5),
                   parent="chair", relation="on", room="dining_room")
DINING = EntityState("dining_room", "dining_room", EntityKind.ROOM, (), (7.5, 2.25, 0.0), (5.5, 0.0, 0.0),
                     (9.5, 4.5, 2.5))


def _to_base(robot: Pose2D, world_points: list[tuple[float, float, float]]) -> np.ndarray:
    c, s = np.cos(robot.yaw), np.sin(robot.yaw)
    p = np.asarray(world_points, dtype=float)
    dx, dy = p[:, 0] - robot.x, p[:, 1] - robot.y
    return np.column_stack([c * dx + s * dy, -s * dx + c * dy, p[:, 2]])


def _chair_world(robot: Pose2D, chair: EntityState = CHAIR) -> WorldState:
    return WorldState(robot, 0.3, None, {"chair": chair, "plum": PLUM, "dining_room": DINING})


def test_a_chairs_back_may_stand_on_any_side_of_its_seat():
    robot = Pose2D(6.06, 1.50, -1.18)  # where Go to put the base in emmoe-048, north-west of the chair
    obstacles = Obstacles.of(_chair_world(robot), {"plum"}, resting=PLUM)
    # Inside each side, between the seat and the top: a back may stand there (the real one is on the west side).
    edges = [(6.17, 0.9, 0.7), (6.63, 0.9, 0.7), (6.4, 0.67, 0.7), (6.4, 1.13, 0.7)]
    for point in edges:
        assert obstacles.hit(_to_base(robot, [point])) is not None, point
        # Also when the hand's last straight move leaves the chair itself out (past the plum's far side, the south
        # one, the chair's own box is solid as well).
        assert obstacles.without({"chair"}).hit(_to_base(robot, [point])) == "chair" + SEAT_BACK_PART, point
    # Before, the seat was free up to the chair's top but past the object's far side.
    assert obstacles.without({"chair/back"}).hit(_to_base(robot, edges[:1])) is None
    # Over the seat's middle and above the chair's top: free.
    assert obstacles.hit(_to_base(robot, [(6.4, 0.95, 0.7), (6.17, 0.9, 0.97)])) is None
    # The slabs are CHAIR_BACK_DEPTH deep.
    west = [b for b in obstacles.boxes if b[0] == "chair" + SEAT_BACK_PART and b[1][0] == CHAIR.bbox_min[0]
            and b[2][1] == CHAIR.bbox_max[1]]
    assert west and math.isclose(west[0][2][0] - CHAIR.bbox_min[0], CHAIR_BACK_DEPTH)


def test_a_chairs_back_never_covers_the_object_and_a_stool_has_none():
    against = EntityState("plum", "plum", EntityKind.OBJECT, (), (6.2, 0.9, 0.475), (6.175, 0.875, 0.45),
                          (6.225, 0.925, 0.5), parent="chair", relation="on", room="dining_room")
    robot = Pose2D(6.4, 1.7, -math.pi / 2)
    world = WorldState(robot, 0.3, None, {"chair": CHAIR, "plum": against, "dining_room": DINING})
    obstacles = Obstacles.of(world, {"plum"}, resting=against)
    for _, lo, hi in (b for b in obstacles.boxes if b[0] == "chair" + SEAT_BACK_PART):
        assert not (np.all(lo < np.array(against.bbox_max)) and np.all(hi > np.array(against.bbox_min)))
    stool = EntityState("chair", "bar stool", EntityKind.FURNITURE, (), (6.4, 0.9, 0.25), (6.15, 0.65, 0.0),
                        (6.65, 1.15, 0.5), room="dining_room")
    low = EntityState("plum", "plum", EntityKind.OBJECT, (), (6.33, 0.86, 0.525), (6.3, 0.83, 0.5),
                      (6.35, 0.88, 0.55), parent="chair", relation="on", room="dining_room")
    flat = Obstacles.of(WorldState(robot, 0.3, None, {"chair": stool, "plum": low, "dining_room": DINING}), {"plum"},
                        resting=low)
    assert not any(b[0].endswith(SEAT_BACK_PART) for b in flat.boxes)


def test_emmoe_048s_plum_and_can_on_the_chair_are_picked_without_the_arm_stopping_on_its_back(sim):
    task = get_task("emmoe-048")
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim)
    for obj in ("plum", "red_can"):  # the expert's order
        assert skills.run(Action.GO_TO, "oracle", obj).success
        details = []
        for _ in range(3):  # the executor's tries; each may move the base once
            picked = skills.run(Action.PICK, "oracle", obj)
            details.append(picked.detail)
            if picked.success:
                break
        assert picked.success, details
        assert not any("blocked: chair" in d for d in details), details  # was: "shoulder_lift ended 0.178 ..."
        assert sim.state().held == obj
        assert skills.run(Action.GO_TO, "oracle", "wood_table").success
        assert skills.run(Action.PUT, "oracle", obj, "wood_table").success


def test_a_pose_between_a_coffee_table_and_the_sofa_is_tried_for_an_object_on_the_sofa(sim):
    task = get_task("emmoe-066")
    sim.reset(task.scene, seed=task.seed)
    world = sim.state()
    mug, table, sofa = (world.entities[n] for n in ("mug", "brown_table", "sofa"))
    assert sofa.bbox_min[0] - table.bbox_max[0] < 2 * (world.robot_radius + CLEARANCE)  # the gap: 0.70 m
    poses = approach_poses(world, "mug", object_gaps=(0.06, 0.2, 0.45, 0.7))
    first = poses[0]
    assert math.hypot(first.x - mug.position[0], first.y - mug.position[1]) <= ARM_REACH
    assert table.bbox_max[0] + world.robot_radius + TIGHT_CLEARANCE <= first.x <= sofa.bbox_min[0] - world.robot_radius
    # The base gets there, and the arm takes the mug from there.
    skills = PhysicalSkillSet(sim)
    assert skills.run(Action.GO_TO, "oracle", "mug").success
    picked = skills.run(Action.PICK, "oracle", "mug")
    assert picked.success, picked.detail
    assert "the base first" not in picked.detail  # no reposition needed


def test_a_tight_pose_is_only_for_a_gap_the_base_fits_and_after_the_roomy_ones():
    # emmoe-066's 0.70 m gap: a pose 6 cm from the sofa leaves 4 cm to the table; in a 0.68 m one it would leave 2 cm,
    # less than TIGHT_CLEARANCE, and is refused.
    for gap, fits in ((0.70, True), (0.68, False)):
        sofa = EntityState("sofa", "sofa", EntityKind.FURNITURE, (), (4.3, 3.2, 0.4), (3.85, 2.15, 0.0),
                           (4.75, 4.25, 0.8), room="living_room")
        table = EntityState("table", "table", EntityKind.FURNITURE, (), (2.8, 3.2, 0.2), (2.45, 2.6, 0.0),
                            (3.85 - gap, 3.8, 0.45), room="living_room")
        cup = EntityState("cup", "mug", EntityKind.OBJECT, (), (4.08, 3.2, 0.5), (4.04, 3.16, 0.45), (4.12, 3.24, 0.55),
                          parent="sofa", relation="on", room="living_room")
        room = EntityState("living_room", "living_room", EntityKind.ROOM, (), (3.25, 2.5, 0.0), (0.0, 0.0, 0.0),
                           (6.5, 5.0, 2.5))
        world = WorldState(Pose2D(1.0, 3.2, 0.0), 0.3, None,
                           {"sofa": sofa, "table": table, "cup": cup, "living_room": room})
        poses = approach_poses(world, "cup", object_gaps=(0.06,))
        between = [p for p in poses if table.bbox_max[0] < p.x < sofa.bbox_min[0]
                   and table.bbox_min[1] <= p.y <= table.bbox_max[1]]
        assert bool(between) is fits, (gap, poses)
        for p in between:
            assert p.x - table.bbox_max[0] - 0.3 >= TIGHT_CLEARANCE - 1e-9
            assert math.hypot(p.x - cup.position[0], p.y - cup.position[1]) <= ARM_REACH
    # With room for 5 cm on each side, the roomy pose comes and no tight one is needed.
    roomy = [p for p in approach_poses(world.__class__(world.robot, 0.3, None, {
        "sofa": sofa, "cup": cup, "living_room": room}), "cup", object_gaps=(0.06,))]
    assert roomy and math.isclose(roomy[0].x, sofa.bbox_min[0] - 0.36, abs_tol=0.011)
