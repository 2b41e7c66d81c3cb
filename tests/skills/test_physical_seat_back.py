"""A sofa's back stays in the physical Pick's collision check whichever side the robot reaches from.

The world graph gives a sofa's axis-aligned box (the seat and the back together) and not its heading. Above an
object resting on the seat, the check used to leave everything free but what stands 5 cm past the object's far
side. Where Go to put the base behind the sofa, its back stood between the base and the object, and the arm stopped
on the back's top (EMMOE-100: emmoe-028, 072, 079, 093 and 095, "blocked: sofa"). The back is now a box of its own,
on the long side facing the nearer edge of the sofa's room.

Scene of the physical test: emmoe-028 (apartment_2; the sponge on the blue sofa, whose back faces the living room's
east wall; Go to the sponge puts the base behind that back).
"""

from __future__ import annotations

import numpy as np

from homiebot.skills.physical import PhysicalSkillSet
from homiebot.skills.physical.manipulation import SEAT_BACK_PART, Obstacles
from homiebot.tasks.suite import get_task
from homiebot.types import Action, EntityKind, EntityState, Pose2D, WorldState

# apartment_2's sofa, 2.1 x 0.9 m, 0.8 m high, along y, its back towards the wall at x = 6; the sponge on its seat.
SOFA = EntityState("sofa", "sofa", EntityKind.FURNITURE, (), (4.6, 3.0, 0.4), (4.15, 1.95, 0.0), (5.05, 4.05, 0.8),
                   room="living_room")
SPONGE = EntityState("sponge", "sponge", EntityKind.OBJECT, (), (4.65, 3.66, 0.47), (4.6, 3.6, 0.45),
                     (4.7, 3.72, 0.49), parent="sofa", relation="on", room="living_room")
ROOM = EntityState("living_room", "living_room", EntityKind.ROOM, (), (3.0, 2.5, 0.0), (0.0, 0.0, 0.0),
                   (6.0, 5.0, 2.5))


def _to_base(robot: Pose2D, world_points: list[tuple[float, float, float]]) -> np.ndarray:
    c, s = np.cos(robot.yaw), np.sin(robot.yaw)
    p = np.asarray(world_points, dtype=float)
    dx, dy = p[:, 0] - robot.x, p[:, 1] - robot.y
    return np.column_stack([c * dx + s * dy, -s * dx + c * dy, p[:, 2]])


def _world(robot: Pose2D, room: bool = True) -> WorldState:
    entities = {"sofa": SOFA, "sponge": SPONGE}
    if room:
        entities["living_room"] = ROOM
    return WorldState(robot, 0.3, None, entities)


def test_from_behind_the_sofa_its_back_is_solid_between_the_base_and_the_object():
    behind = Pose2D(5.42, 3.65, np.pi)  # where Go to put the base in emmoe-028, facing -x
    obstacles = Obstacles.of(_world(behind), {"sponge"}, resting=SPONGE)
    # Just above the back's top (0.8 m) and inside its 22 cm: solid; the arm stopped there.
    top = _to_base(behind, [(4.95, 3.65, 0.82)])
    assert obstacles.hit(top) == "sofa" + SEAT_BACK_PART
    # Kept when the hand's last straight move leaves the seat itself out.
    assert obstacles.without({"sofa"}).hit(top) == "sofa" + SEAT_BACK_PART
    # Above the seat in front of the back, over the object: free.
    assert obstacles.hit(_to_base(behind, [(4.68, 3.66, 0.65), (4.72, 3.5, 0.6)])) is None
    # Without a room to tell the sides apart the check is as before: everything above the seat towards the robot
    # is free, the back's top too.
    assert Obstacles.of(_world(behind, room=False), {"sponge"}, resting=SPONGE).hit(top) is None


def test_from_the_front_the_space_over_the_seat_is_free_and_the_back_solid():
    front = Pose2D(3.8, 3.65, 0.0)
    obstacles = Obstacles.of(_world(front), {"sponge"}, resting=SPONGE)
    assert obstacles.hit(_to_base(front, [(4.2, 3.66, 0.6), (4.65, 3.66, 0.62)])) is None
    assert obstacles.hit(_to_base(front, [(4.9, 3.66, 0.7)])) is not None


def test_the_back_never_covers_the_object_on_the_seat():
    against = EntityState("sponge", "sponge", EntityKind.OBJECT, (), (4.93, 3.66, 0.47), (4.88, 3.6, 0.45),
                          (4.98, 3.72, 0.49), parent="sofa", relation="on", room="living_room")
    world = WorldState(Pose2D(3.8, 3.65, 0.0), 0.3, None, {"sofa": SOFA, "sponge": against, "living_room": ROOM})
    obstacles = Obstacles.of(world, {"sponge"}, resting=against)
    back = [b for b in obstacles.boxes if b[0] == "sofa" + SEAT_BACK_PART]
    assert len(back) == 1 and back[0][1][0] >= 4.98 + 0.01 - 1e-9


def test_emmoe_028s_sponge_on_the_sofa_is_picked_without_the_arm_stopping_on_the_back(sim):
    task = get_task("emmoe-028")
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim)
    assert skills.run(Action.GO_TO, "oracle", "sponge").success
    assert sim.state().entities["sponge"].parent == "sofa"
    details = []
    for _ in range(3):  # the executor's tries; each may move the base once
        picked = skills.run(Action.PICK, "oracle", "sponge")
        details.append(picked.detail)
        if picked.success:
            break
    assert picked.success, details
    assert not any("blocked: sofa" in d for d in details), details  # was: "elbow_flex ended 0.090 ... (blocked: sofa)"
    assert sim.state().held == "sponge"
