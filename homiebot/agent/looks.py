"""Looking into a container, or at a furniture's top, on arrival: where the head camera points after a Go to, an
Open or a Put.

The four first-person views come from fixed cameras 1.10 m high, tilted 15 degrees down
(:mod:`homiebot.sim.mujoco.robot`). From there a sink's basin and a pulled-out drawer's tray are hidden behind their
front walls: after the oracle's Go to the sink in emmoe-049, not one pixel of the bowl or the sponge 1.1 m away
(docs/results/physical-perception-2026-11-30.md). A Fetch looks into such a container the way a person leans over
it: it raises its torso (0.386 m of travel: the head camera goes from 1.10 to 1.49 m) and tilts its head towards the
container's inside (:meth:`homiebot.sim.mujoco.backend.MujocoSimulator.look_at`). The loop does that after a
successful Go to or Open whose target is a furniture with an interior that is open (a sink's basin, an open drawer,
fridge or cabinet), and after a Go to any other furniture but a closed one, at its top surface: a sofa reached from
behind hides its seat behind the backrest (emmoe-072's peach). After a successful Put it takes the same look at the
place the object was put on or in: the graph's update from the action alone sets the object on the middle of the
place (:mod:`homiebot.perception.actions`), and this view, when it shows the object, is how the graph learns where
it came to rest. It may not show it: emmoe-089's sponge, released against a sink's front wall, stayed hidden from
the raised head too. It fuses the objects of that one view (:meth:`homiebot.agent.knowledge.WorldKnowledge.glance`).

Where to look comes from the map, as the furniture does for the skills (docs/perception.md, "What the skills read"):
the interior box the semantic map annotates (``EntityState.interior_min`` / ``interior_max``), whether the robot left
it open, the furniture's box and, with the scene's map, its surfaces' heights; never where an object is.

Through the ROS 2 graph the same look is a robot's joint goals (:func:`look_motion`): the torso up, the head
pointed, and both back, each a ``control_msgs/FollowJointTrajectory`` goal to the torso and head controllers a
Fetch has (docs/ros.md, "Looks through the graph"); the perception node fuses the head camera's image.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple

from homiebot.sim.mujoco import robot as robot_model
from homiebot.sim.robot_driver import JointTrajectory, TrajectoryPoint
from homiebot.sim.scene import SceneSpec
from homiebot.types import Action, EntityKind, Pose2D, Subtask, WorldState

#: The subtasks after which the robot stands at a furniture it may look into.
LOOK_AFTER = (Action.GO_TO, Action.OPEN, Action.PUT)
#: Something of a furniture's own rising this much (m) above the surface looked at (a sofa's backrest) may hide it
#: from the head camera with the torso down.
RISES_ABOVE = 0.1


class Look(NamedTuple):
    """Where the head camera points (map frame, m) and whether the torso goes up first: into a container over its
    walls (a sink's basin, a drawer's tray), or at a surface something of the furniture's own rises above (a sofa's
    seat behind its backrest). Through a door that opened the front (a fridge, a cabinet) and at a bare surface the
    head turns with the torso down: 2 x 3.9 s of torso travel saved, at Fetch's 0.1 m/s."""

    point: tuple[float, float, float]
    raise_torso: bool


def look_target(grounded: Subtask, state: WorldState, scene: SceneSpec | None = None) -> Look | None:
    """The point the head camera aims at after ``grounded`` (simulator instance names) succeeded (module docstring):
    the centre of the target furniture's interior (a Put's: its place's) when it has one and it is open (articulated
    ones) or open-topped (a sink); else, after a Go to or a Put, the centre of its top surface (the highest of the
    map's surfaces, else its box's top); None for a closed container, an object, a room, or another action."""
    action = Action.parse(grounded.action)
    name = grounded.place if action is Action.PUT else grounded.target
    if action not in LOOK_AFTER or name is None:
        return None
    furniture = state.entities.get(name)
    if furniture is None or furniture.kind is not EntityKind.FURNITURE:
        return None
    if furniture.articulated and not furniture.is_open:
        return None
    spec = next((f for f in scene.furniture if f.name == name), None) if scene is not None else None
    if furniture.interior_min is not None and furniture.interior_max is not None:
        low, high = furniture.interior_min, furniture.interior_max
        door = spec is not None and spec.articulation is not None and spec.articulation.kind == "hinged"
        return Look(((low[0] + high[0]) / 2, (low[1] + high[1]) / 2, (low[2] + high[2]) / 2), not door)
    if action is Action.OPEN:
        return None
    low, high = furniture.bbox_min, furniture.bbox_max
    if spec is None or not spec.surfaces:
        return Look(((low[0] + high[0]) / 2, (low[1] + high[1]) / 2, high[2]), False)
    top = max(spec.surfaces, key=lambda surface: surface.height)
    local = (0.0, 0.0) if top.min is None or top.max is None else (
        (top.min[0] + top.max[0]) / 2, (top.min[1] + top.max[1]) / 2)
    c, s = math.cos(spec.pose.yaw), math.sin(spec.pose.yaw)
    point = (spec.pose.x + c * local[0] - s * local[1], spec.pose.y + s * local[0] + c * local[1], top.height)
    return Look(point, high[2] > top.height + RISES_ABOVE)


#: The joints a look moves, by the simulator robot's names (``/joint_states``, homiebot/config/robots/sim.yaml): the
#: torso controller's one joint and the head controller's two (Fetch: ``torso_lift_joint``, ``head_pan_joint``,
#: ``head_tilt_joint``; docs/robots.md).
TORSO_JOINT = "torso_lift"
HEAD_JOINTS = ("head_pan", "head_tilt")


class LookMotion(NamedTuple):
    """A look as joint goals, in the order they are sent: the torso up (None: it stays), the head pointed, the head
    back, the torso back (None when it did not move)."""

    torso: JointTrajectory | None
    head: JointTrajectory
    head_back: JointTrajectory
    torso_back: JointTrajectory | None

    def goals(self) -> tuple[tuple[str, JointTrajectory], ...]:
        """(controller, trajectory) in sending order; controller ``torso`` or ``head``."""
        out = (("torso", self.torso), ("head", self.head), ("head", self.head_back), ("torso", self.torso_back))
        return tuple((controller, t) for controller, t in out if t is not None)


def _move(joints: tuple[str, ...], start: tuple[float, ...], end: tuple[float, ...], speed: float) -> JointTrajectory:
    """One point at ``end``, reached after the largest joint's travel at ``speed`` (Fetch's URDF velocity limit)."""
    seconds = max(abs(b - a) for a, b in zip(start, end, strict=True)) / speed
    return JointTrajectory(joints, (TrajectoryPoint(tuple(float(v) for v in end), seconds),))


def look_motion(look: Look, base: Pose2D, joints: Mapping[str, float]) -> LookMotion:
    """The joint goals that take ``look`` with the simulator's robot standing at ``base`` with ``joints`` (its
    ``/joint_states``): the torso to the top of its travel first when the look asks for it, then the head's pan and
    tilt that point its camera at the look's point from that torso height (:func:`robot.head_angles`, what
    ``MujocoSimulator.look_at`` does in one process), then the head and the torso back where they were.

    Raises:
        KeyError: ``joints`` lacks the torso or a head joint."""
    torso_before = float(joints[TORSO_JOINT])
    head_before = tuple(float(joints[j]) for j in HEAD_JOINTS)
    torso = robot_model.TORSO_RANGE[1] if look.raise_torso else torso_before
    pan, tilt = robot_model.head_angles((base.x, base.y, base.yaw), torso, look.point)
    up = _move((TORSO_JOINT,), (torso_before,), (torso,), robot_model.TORSO_SPEED) if look.raise_torso else None
    down = _move((TORSO_JOINT,), (torso,), (torso_before,), robot_model.TORSO_SPEED) if look.raise_torso else None
    return LookMotion(up, _move(HEAD_JOINTS, head_before, (pan, tilt), robot_model.HEAD_SPEED),
                      _move(HEAD_JOINTS, (pan, tilt), head_before, robot_model.HEAD_SPEED), down)
