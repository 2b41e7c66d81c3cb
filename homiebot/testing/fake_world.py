"""FakeWorld: a state-only stand-in for a simulator, for unit tests of the executor, session and expert
(shipped in the package so tests in every folder and the benchmarks import it without path edits).

Why a fake when MuJoCo exists: the executor's checks must be tested against exact states (a robot 5 cm
from a table for D2, a skill that fails exactly twice for the retry logic, a put that drops the object
for E2), and the 10,000-output fuzz test must run in seconds. The end-to-end tests use the real MuJoCo
backend (``tests/agent/test_episode_mujoco.py``).

Kinematics: ``go_to`` puts the robot ``standoff`` metres from the target's footprint, ``pick``/``put``
move objects between the hand and receptacles, ``open``/``close`` flip doors. Skills refuse what the real
one refuses (closed container, hand full/empty) and can be told to fail: ``fail_queue`` holds statuses (or whole
results) returned (and consumed) by the next attempts of any skill.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import replace

import numpy as np

from homiebot.types import (
    CameraView,
    EntityKind,
    EntityState,
    Observation,
    Pose2D,
    SkillResult,
    SkillStatus,
    WorldState,
)


def room(name: str, x0: float, y0: float, x1: float, y1: float, aliases: tuple[str, ...] = ()) -> EntityState:
    return EntityState(
        name=name,
        category=name,
        kind=EntityKind.ROOM,
        aliases=aliases,
        position=((x0 + x1) / 2, (y0 + y1) / 2, 0.0),
        bbox_min=(x0, y0, 0.0),
        bbox_max=(x1, y1, 2.5),
    )


def furniture(
    name: str,
    x: float,
    y: float,
    size: float = 0.8,
    *,
    category: str | None = None,
    aliases: tuple[str, ...] = (),
    room_name: str | None = None,
    openable: bool = False,
    is_open: bool = False,
) -> EntityState:
    h = size / 2
    return EntityState(
        name=name,
        category=category or name,
        kind=EntityKind.FURNITURE,
        aliases=aliases,
        position=(x, y, 0.0),
        bbox_min=(x - h, y - h, 0.0),
        bbox_max=(x + h, y + h, 1.0),
        room=room_name,
        articulated=openable,
        interactive=openable,
        is_open=is_open if openable else None,
    )


def obj(name: str, parent: str, relation: str, at: EntityState, *, category: str | None = None,
        aliases: tuple[str, ...] = ()) -> EntityState:
    x, y = at.position[0], at.position[1]
    return EntityState(
        name=name,
        category=category or name,
        kind=EntityKind.OBJECT,
        aliases=aliases,
        position=(x, y, 0.9),
        bbox_min=(x - 0.04, y - 0.04, 0.85),
        bbox_max=(x + 0.04, y + 0.04, 0.95),
        parent=parent,
        relation=relation,
    )


def kitchen_world() -> dict[str, EntityState]:
    """Case-1 world: green_can on brown_table, closed fridge, a drawer, a non-interactive sofa."""
    kitchen = room("kitchen", 0, 0, 6, 6)
    living = room("living_room", 6, 0, 12, 6, aliases=("living room",))
    table = furniture("brown_table", 2, 2, category="table", aliases=("table",), room_name="kitchen")
    fridge = furniture("fridge", 5, 5, category="refrigerator", aliases=("refrigerator",), room_name="kitchen",
                       openable=True)
    drawer = furniture("kitchen_drawer", 1, 5, 0.6, category="drawer", aliases=("drawer",), room_name="kitchen",
                       openable=True)
    counter = furniture("kitchen_counter", 4, 1, category="counter", room_name="kitchen")
    sofa = furniture("blue_sofa", 9, 3, 1.2, category="sofa", aliases=("sofa",), room_name="living_room")
    entities = [kitchen, living, table, fridge, drawer, counter, sofa]
    entities.append(obj("green_can", "brown_table", "on", table, category="can"))
    entities.append(obj("short_can", "kitchen_counter", "on", counter, category="master_chef_can",
                        aliases=("can",)))
    entities.append(obj("apple", "blue_sofa", "on", sofa))
    return {e.name: e for e in entities}


class FakeWorld:
    """Implements the :class:`homiebot.sim.base.Simulator` protocol over a dict of entities."""

    name = "fake"

    def __init__(self, entities: dict[str, EntityState] | None = None, robot: Pose2D = Pose2D(3.0, 3.0, 0.0),
                 standoff: float = 0.5, image_size: int = 16) -> None:
        self._initial = dict(entities or kitchen_world())
        self._robot0 = robot
        self.standoff = standoff
        self.image_size = image_size
        self.fail_queue: deque[SkillStatus | SkillResult] = deque()
        self.reset_arm_calls = 0
        self.skill_calls: list[tuple[str, tuple[str, ...]]] = []
        self.reset("fake")

    # -------------------------------------------------------------------------------- protocol

    def reset(self, scene, seed: int = 0) -> Observation:
        self.entities = dict(self._initial)
        self.robot = self._robot0
        self.held: str | None = None
        return self.observe()

    def observe(self) -> Observation:
        s = self.image_size
        views = {
            v: CameraView(v, np.zeros((s, s, 3), np.uint8), np.zeros((s, s), np.float32), np.zeros((s, s), np.int32),
                          s, s, s / 2, s / 2, np.eye(4))
            for v in ("front", "left", "back", "right")
        }
        return Observation(views=views, instance_names={}, robot_pose=self.robot, held_object=self.held)

    def state(self) -> WorldState:
        robot_room = None
        for e in self.entities.values():
            if e.kind is EntityKind.ROOM and e.bbox_min[0] <= self.robot.x <= e.bbox_max[0] and \
                    e.bbox_min[1] <= self.robot.y <= e.bbox_max[1]:
                robot_room = e.name
        return WorldState(robot=self.robot, robot_radius=0.3, held=self.held, entities=dict(self.entities),
                          scene="fake", robot_room=robot_room)

    def scene_spec(self):
        return None

    def reset_arm(self) -> None:
        self.reset_arm_calls += 1

    def render_topdown(self, size: int = 512) -> np.ndarray:
        return np.zeros((size, size, 3), np.uint8)

    def shutdown(self) -> None:
        pass

    # -------------------------------------------------------------------------------- skills

    def _injected(self) -> SkillResult | None:
        if self.fail_queue:
            failure = self.fail_queue.popleft()
            return failure if isinstance(failure, SkillResult) else SkillResult(failure, "injected")
        return None

    def place_robot_near(self, name: str, gap: float) -> None:
        """Put the robot so that its footprint is ``gap`` metres from ``name``'s box (on the -x side)."""
        e = self.entities[name]
        y = (e.bbox_min[1] + e.bbox_max[1]) / 2
        self.robot = Pose2D(e.bbox_min[0] - gap - 0.3, y, 0.0)

    def go_to(self, target: str) -> SkillResult:
        self.skill_calls.append(("go_to", (target,)))
        injected = self._injected()
        if injected:
            return injected
        e = self.entities[target]
        start = self.robot
        if e.kind is EntityKind.ROOM:
            self.robot = Pose2D(e.position[0], e.position[1], 0.0)
        else:
            self.place_robot_near(target, self.standoff)
        if self.held:
            self._move_held()
        return SkillResult(SkillStatus.SUCCESS, path_length=math.hypot(self.robot.x - start.x, self.robot.y - start.y))

    def _move_held(self) -> None:
        held = self.held
        if held is None:
            return
        e = self.entities[held]
        x, y = self.robot.x, self.robot.y
        self.entities[held] = replace(e, position=(x, y, 0.9), bbox_min=(x - 0.04, y - 0.04, 0.85),
                                           bbox_max=(x + 0.04, y + 0.04, 0.95))

    def pick(self, obj_name: str) -> SkillResult:
        self.skill_calls.append(("pick", (obj_name,)))
        injected = self._injected()
        if injected:
            return injected
        e = self.entities[obj_name]
        if e.kind is not EntityKind.OBJECT:
            return SkillResult(SkillStatus.NOT_INTERACTIVE)
        if self.held is not None:
            return SkillResult(SkillStatus.HAND_FULL)
        parent = self.entities.get(e.parent) if e.parent else None
        if parent is not None and parent.articulated and not parent.is_open:
            return SkillResult(SkillStatus.CONTAINER_CLOSED)
        self.entities[obj_name] = replace(e, parent=None, relation=None, held=True)
        self.held = obj_name
        self._move_held()
        return SkillResult(SkillStatus.SUCCESS)

    def put(self, obj_name: str, place: str) -> SkillResult:
        self.skill_calls.append(("put", (obj_name, place)))
        injected = self._injected()
        if injected:
            if injected.status is SkillStatus.DROPPED and self.held:
                self.entities[self.held] = replace(self.entities[self.held], held=False)
                self.held = None
            return injected
        if self.held is None or self.held != obj_name:
            return SkillResult(SkillStatus.HAND_EMPTY)
        p = self.entities[place]
        if p.articulated and not p.is_open:
            return SkillResult(SkillStatus.CONTAINER_CLOSED)
        relation = "in" if p.articulated else "on"
        x, y = p.position[0], p.position[1]
        self.entities[obj_name] = replace(self.entities[obj_name], parent=place, relation=relation, held=False,
                                          position=(x, y, 0.9), bbox_min=(x - 0.04, y - 0.04, 0.85),
                                          bbox_max=(x + 0.04, y + 0.04, 0.95))
        self.held = None
        return SkillResult(SkillStatus.SUCCESS)

    def _articulate(self, target: str, is_open: bool) -> SkillResult:
        injected = self._injected()
        if injected:
            return injected
        e = self.entities[target]
        if not e.interactive:
            return SkillResult(SkillStatus.NOT_INTERACTIVE)
        self.entities[target] = replace(e, is_open=is_open)
        return SkillResult(SkillStatus.SUCCESS)

    def open(self, target: str) -> SkillResult:
        self.skill_calls.append(("open", (target,)))
        return self._articulate(target, True)

    def close(self, target: str) -> SkillResult:
        self.skill_calls.append(("close", (target,)))
        return self._articulate(target, False)
