"""The world state carries each object's own box: its half extents and heading (``EntityState.half_extents`` and
``yaw``), read here from the MuJoCo model itself (the object's geom and its free body's orientation), not from the
code that writes the state."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
from pydantic import ValidationError

from homiebot.sim.mujoco.geometry import wrap_angle
from homiebot.sim.scene import ObjectSpec
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



def _inside(model, data, geom: int, point: np.ndarray) -> bool:
    """Whether ``point`` (world frame) lies in a box or cylinder geom."""
    local = data.geom_xmat[geom].reshape(3, 3).T @ (point - data.geom_xpos[geom])
    size = model.geom_size[geom]
    if model.geom_type[geom] == mujoco.mjtGeom.mjGEOM_BOX:
        return bool(np.all(np.abs(local) <= size))
    assert model.geom_type[geom] == mujoco.mjtGeom.mjGEOM_CYLINDER
    return bool(math.hypot(local[0], local[1]) <= size[0] and abs(local[2]) <= size[1])


def test_a_bowl_is_compiled_hollow_open_at_the_top_as_its_scene_declares(headless):
    # apartment_1's bowl (16 cm across, 5.5 cm high) is declared with a 2 cm wall: a floor disc and a ring of wall
    # boxes, all of them the bowl's (segmentation, the grasp's finger contacts), so that a finger fits inside.
    headless.reset("apartment_1", seed=0)
    compiled, data = headless.physics_handles()
    model = compiled.model
    body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "object/bowl")
    geoms = [g for g in range(model.ngeom) if model.geom_bodyid[g] == body]
    assert len(geoms) > 1 and {int(compiled.geom_instance[g]) for g in geoms} == {compiled.instance_ids["bowl"]}
    assert model.body_mass[body] == pytest.approx(0.2, abs=1e-4)
    assert headless.state().entities["bowl"].wall_thickness == 0.02
    centre = np.array(data.xpos[body])

    def solid(offset: tuple[float, float, float]) -> bool:
        return any(_inside(model, data, g, centre + np.array(offset)) for g in geoms)

    # The middle is free from the floor's top (2 cm up from the bottom, 2.75 cm below the centre) to the open top.
    for radius in (0.0, 0.03, 0.055):
        for height in (0.0, 0.02):
            assert not solid((radius, 0.0, height)) and not solid((0.0, -radius, height)), (radius, height)
    # The wall, all the way round, and the floor are solid; nothing is outside the 16 cm.
    for angle in np.linspace(0.0, 2 * math.pi, 12, endpoint=False):
        assert solid((0.07 * math.cos(angle), 0.07 * math.sin(angle), 0.02)), angle
        assert not solid((0.085 * math.cos(angle), 0.085 * math.sin(angle), 0.0)), angle
    assert solid((0.03, 0.0, -0.0275 + 0.01))


def test_only_a_cylinder_can_be_declared_hollow_and_its_wall_must_leave_a_hollow():
    with pytest.raises(ValidationError, match="open hollow cylinder, not a box"):
        ObjectSpec(name="b", category="b", shape="box", size=(0.1, 0.1, 0.1), wall_thickness=0.01, on="table")
    with pytest.raises(ValidationError, match="leaves no hollow"):
        ObjectSpec(name="b", category="b", shape="cylinder", size=(0.1, 0.1, 0.05), wall_thickness=0.03, on="table")
