"""The world state carries each object's own box: its half extents and heading (``EntityState.half_extents`` and
``yaw``), read here from the MuJoCo model itself (the object's geom and its free body's orientation), not from the
code that writes the state."""

from __future__ import annotations

import math

import mujoco
import numpy as np

from homiebot.sim.mujoco.geometry import wrap_angle
from homiebot.tasks.suite import get_task
from homiebot.types import EntityKind


def _model_box(compiled, data, name: str) -> tuple[int, np.ndarray, float]:
    """The object's geom type, its size (MuJoCo's: half extents; a cylinder's radius and half height) and its
    body's yaw, from the model and data."""
    body = mujoco.mj_name2id(compiled.model, mujoco.mjtObj.mjOBJ_BODY, "object/" + name)
    geom = next(g for g in range(compiled.model.ngeom) if compiled.model.geom_bodyid[g] == body)
    w, x, y, z = data.xquat[body]
    yaw = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return int(compiled.model.geom_type[geom]), np.array(compiled.model.geom_size[geom]), yaw


def test_every_object_carries_the_box_and_heading_of_its_body(headless):
    task = get_task("emmoe-010")  # a cracker box ("red_box") on a table, with other boxes, cans and fruit
    headless.reset(task.scene, seed=task.seed)
    compiled, data = headless.physics_handles()
    objects = [e for e in headless.state().entities.values() if e.kind is EntityKind.OBJECT]
    shapes = set()
    for entity in objects:
        geom_type, size, body_yaw = _model_box(compiled, data, entity.name)
        assert entity.half_extents is not None, entity.name
        if geom_type == mujoco.mjtGeom.mjGEOM_BOX:
            shapes.add("box")
            assert entity.half_extents == tuple(size)
            assert entity.yaw is not None
            assert abs(wrap_angle(entity.yaw - body_yaw)) < 1e-6, entity.name
            # The oriented box lies inside the axis-aligned one.
            hx, hy, _ = entity.half_extents
            c, s = math.cos(entity.yaw), math.sin(entity.yaw)
            for sx in (-1, 1):
                for sy in (-1, 1):
                    x = entity.position[0] + c * sx * hx - s * sy * hy
                    y = entity.position[1] + s * sx * hx + c * sy * hy
                    assert entity.bbox_min[0] - 1e-9 <= x <= entity.bbox_max[0] + 1e-9
                    assert entity.bbox_min[1] - 1e-9 <= y <= entity.bbox_max[1] + 1e-9
        else:
            # Round about z: no heading, the radius as the x half extent.
            shapes.add("round")
            assert entity.yaw is None, entity.name
            assert entity.half_extents[0] == entity.half_extents[1] == size[0]
    assert shapes == {"box", "round"}
    # Not all boxes stand axis-aligned (their yaw is drawn from the scene seed): the heading is information.
    yaws = [e.yaw for e in objects if e.yaw is not None]
    assert any(abs(math.sin(2 * y)) > 0.1 for y in yaws)
