"""The physical Pick and Put see a pulled-out drawer as it is: its front panel beyond the tray, the tray's side walls
and floor outside the piece's box (the world graph's box is the closed cabinet's, its interior where the tray is
now), each with the hand's and the arm's own margins; the inside of the tray is free to reach into from above.
Under physics: emmoe-078's bowl in apartment_5's open kitchen drawer, half under the cabinet's top, is picked by
its rim over the drawer's front and put on the kitchen counter. Before the drawer's parts were in the check, the
arm came down onto the front or a tray wall ("the arm stopped ... (blocked: kitchen_drawer)") on every try.

Scene: EMMOE-100's emmoe-078 (apartment_5: the kitchen drawer against the west wall, its front facing east, pulled
out 0.45 m; two 16 cm bowls with a 2 cm wall in it).
"""

from __future__ import annotations

import math

import numpy as np

from homiebot.skills.physical import PhysicalSkillSet
from homiebot.skills.physical.manipulation import Obstacles
from homiebot.tasks.suite import get_task
from homiebot.types import Action, EntityKind, EntityState, Pose2D, WorldState

HAND, ARM = 0.015, 0.05


def _kitchen(drawer_open: bool) -> WorldState:
    """A 4 x 3 m kitchen and a drawer as apartment_5 has it: its box (the closed cabinet) against the west wall, x
    0.05-0.65, 0.85 m tall; its interior 0.5-0.8 m high, x 0.54-1.06 when pulled out 0.45 m east (0.09-0.61
    closed). The robot 1.5 m from the wall, facing it."""
    kitchen = EntityState("kitchen", "kitchen", EntityKind.ROOM, (), (2.0, 1.5, 0.0), (0.0, 0.0, 0.0), (4.0, 3.0, 2.5))
    shift = 0.45 if drawer_open else 0.0
    drawer = EntityState("drawer", "kitchen_drawer", EntityKind.FURNITURE, (), (0.35, 1.5, 0.425), (0.05, 1.1, 0.0),
                         (0.65, 1.9, 0.85), room="kitchen", articulated=True, is_open=drawer_open,
                         interior_min=(0.09 + shift, 1.14, 0.5), interior_max=(0.61 + shift, 1.86, 0.8))
    return WorldState(Pose2D(1.5, 1.5, math.pi), 0.3, None, {"kitchen": kitchen, "drawer": drawer})


def _hit(world: WorldState, point: tuple[float, float, float], margin: float, open_into: set[str]) -> str | None:
    base = world.robot
    c, s = math.cos(base.yaw), math.sin(base.yaw)
    x, y, z = point
    local = np.array([[c * (x - base.x) + s * (y - base.y), -s * (x - base.x) + c * (y - base.y), z]])
    return Obstacles.of(world, set(), open_into).hit(local, np.array([margin]))


def test_a_pulled_out_drawer_has_its_front_tray_walls_and_floor_and_room_inside_the_tray():
    opened = _kitchen(True)
    for open_into in (set(), {"drawer"}):
        # The front panel, beyond the tray's outer face (x 1.06), as tall as the box: at half its height, and 1 cm
        # below its top, even for the hand.
        assert _hit(opened, (1.09, 1.5, 0.4), HAND, open_into) == "drawer/front"
        assert _hit(opened, (1.09, 1.5, 0.84), HAND, open_into) == "drawer/front"
        # Above it, clear of it by more than a link's margin: free.
        assert _hit(opened, (1.09, 1.5, 0.92), ARM, open_into) is None
        # The tray's south wall, at its top, outside the box (x 0.65): an elbow there is stopped.
        assert _hit(opened, (0.9, 1.145, 0.82), ARM, open_into) == "drawer/tray"
    # Inside the tray, between its walls, 3 cm above its floor: free for the hand when the arm may reach in, but
    # not for the arm's thicker links; 1 cm above the floor not even for the hand.
    assert _hit(opened, (0.9, 1.5, 0.53), HAND, {"drawer"}) is None
    assert _hit(opened, (0.9, 1.5, 0.53), ARM, {"drawer"}) == "drawer/tray_floor"
    assert _hit(opened, (0.9, 1.5, 0.51), HAND, {"drawer"}) == "drawer/tray_floor"
    # 6 cm inside the interior's side (4.5 cm from the 1.5 cm wall's inner face), half-way up the tray: free for the
    # hand; 3 cm inside, not for the arm.
    assert _hit(opened, (0.9, 1.2, 0.65), HAND, {"drawer"}) is None
    assert _hit(opened, (0.9, 1.17, 0.65), ARM, {"drawer"}) == "drawer/tray"
    # Above the tray (open at the top): free, as far as the cabinet's box (x 0.65), whose top stays solid.
    assert _hit(opened, (0.9, 1.5, 0.9), ARM, {"drawer"}) is None
    assert _hit(opened, (0.62, 1.5, 0.83), HAND, {"drawer"}) == "drawer"
    # Not reached into, the tray is solid up to its top, as a piece's box is.
    assert _hit(opened, (0.9, 1.5, 0.6), HAND, set()) == "drawer/tray"


def test_a_closed_drawer_and_an_opened_fridge_have_no_parts_outside_their_box():
    closed = _kitchen(False)
    assert _hit(closed, (0.9, 1.5, 0.6), ARM, set()) is None
    assert _hit(closed, (0.66, 1.5, 0.6), HAND, {"drawer"}) == "drawer"
    assert [name for name, _, _ in Obstacles.of(closed, set(), {"drawer"}).boxes] == ["drawer"]
    # A fridge's interior stays inside its box when it is open: no drawer's parts (its door's leaves stand beside
    # its opening instead: test_physical_interiors.py).
    fridge = EntityState("fridge", "fridge", EntityKind.FURNITURE, (), (1.4, 2.575, 0.9), (1.0, 2.2, 0.0),
                         (1.8, 2.95, 1.8), room="kitchen", articulated=True, is_open=True,
                         interior_min=(1.04, 2.24, 0.1), interior_max=(1.76, 2.91, 1.65))
    world = WorldState(closed.robot, 0.3, None, {**closed.entities, "fridge": fridge})
    names = [name for name, _, _ in Obstacles.of(world, set(), {"fridge"}).boxes]
    assert [name for name in names if not name.endswith("/door")] == ["drawer", "fridge"]


def test_a_bowl_in_the_open_drawer_is_picked_over_its_front_and_put_on_the_counter(sim):
    task = get_task("emmoe-078")
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim)
    world = sim.state()
    drawer, bowl = world.entities["kitchen_drawer"], world.entities["bowl_3"]
    assert drawer.is_open and drawer.interior_max is not None and drawer.interior_max[0] > drawer.bbox_max[0] + 0.3
    # The bowl stands at the tray's inner end, partly under the cabinet's top.
    assert (bowl.parent, bowl.relation) == ("kitchen_drawer", "in") and bowl.bbox_min[0] < drawer.bbox_max[0]
    assert skills.run(Action.GO_TO, "oracle", "bowl_3").success
    picked = skills.run(Action.PICK, "oracle", "bowl_3")
    assert picked.success, picked.detail
    assert "rim" in picked.detail and sim.state().held == "bowl_3"
    assert skills.run(Action.GO_TO, "oracle", "kitchen_counter").success
    put = skills.run(Action.PUT, "oracle", "bowl_3", "kitchen_counter")
    assert put.success, put.detail
    after = sim.state().entities["bowl_3"]
    assert (after.parent, after.relation, sim.state().held) == ("kitchen_counter", "on", None)
