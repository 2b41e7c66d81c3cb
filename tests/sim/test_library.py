"""Every library scene works with the simulator: it loads, every target is reachable, every object can be
picked and put back, every interactive door or drawer opens (the scenes are data; this is their check)."""

from __future__ import annotations

import pytest

from homiebot.sim.mujoco.backend import MAX_REACH, MIN_REACH
from homiebot.sim.scene import list_scenes


@pytest.mark.parametrize("scene", list_scenes())
def test_library_scene_is_fully_usable(headless, scene):
    headless.reset(scene, seed=1)
    spec = headless.scene_spec()
    for room in spec.rooms:
        result = headless.go_to(room.name)
        assert result.success, (room.name, result.detail)
        assert headless.state().robot_room == room.name
    for furniture in spec.furniture:
        result = headless.go_to(furniture.name)
        assert result.success, (furniture.name, result.detail)
        assert MIN_REACH <= headless.state().reach_distance(furniture.name) < MAX_REACH
        if furniture.articulation is not None and furniture.interactive:
            assert headless.open(furniture.name).success, furniture.name
    for obj in spec.objects:
        assert headless.go_to(obj.name).success, obj.name
        assert MIN_REACH <= headless.state().reach_distance(obj.name) < MAX_REACH
        result = headless.pick(obj.name)
        assert result.success, (obj.name, result.detail)
        home = obj.parent
        if home is None:
            headless.drop_held()  # a free-standing object: let it fall where the robot stands
            continue
        assert headless.go_to(home).success, home
        result = headless.put(obj.name, home)
        assert result.success, (obj.name, home, result.detail)
