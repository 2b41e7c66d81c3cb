"""The embedded robot behind the standard interfaces, with physics: what ``--skills physical`` drives.

:class:`PhysicalDriver` implements :class:`homiebot.sim.robot_driver.RobotDriver` on a
:class:`~homiebot.sim.mujoco.backend.MujocoSimulator`: the arm follows joint trajectories and the gripper closes
through MuJoCo's position actuators under ``mj_step``, and objects are dynamic bodies. The oracle skills of the
same simulator place things kinematically (as Habitat's oracle skills do); here nothing is placed:

* **Physics switched on for the skill.** The scene is compiled for the kinematic skills: small objects, the floor
  and the arm take part in no collision (``homiebot/sim/mujoco/compiler.py``). :func:`enable_physics` gives them
  collision bits on this simulator's model (objects against furniture, floor, each other, the arm and the fingers;
  the arm against furniture and objects), so an object rests on what is under it, falls when released in the air
  and is knocked by the arm. The base's own collision bits are left alone, so the path follower still reports
  only what the base touches. The arm's links are gravity-compensated (``robot.py``), as a real arm's controller
  compensates its own weight.
* **FollowJointTrajectory.** Linear interpolation between the trajectory's points (from the joints' positions at
  the start), sent to the position actuators every physics step; a joint farther than ``path_tolerance`` from
  where it should be (an arm pressed against furniture) aborts with ``PATH_TOLERANCE_VIOLATED``, a joint not at
  its goal ``goal_time_tolerance`` after the end with ``GOAL_TOLERANCE_VIOLATED``, as ros2_control's
  JointTrajectoryController reports them.
* **GripperCommand.** The fingers move towards half the commanded gap each, their force limited to
  ``max_effort``; the goal ends when they reach it or stop moving (``stalled``: closed on something), as
  GripperActionController reports.
* **The grasp** (:class:`FingerContactAttachment`, named plainly as the helper it is): when the fingers have
  closed and *both* touch the same object, a weld between the gripper and the object is switched on at their
  relative pose at that instant; it is switched off as soon as either finger stops touching the object or the
  gripper opens. MuJoCo's soft contacts hold small light objects poorly in a two-finger grip; the weld stands
  in for friction, never for contact: without contact on both fingers nothing is held.
* **A handle's grasp** (the same :class:`FingerContactAttachment`, for doors and drawers): while a physical Open or
  Close moves a door or drawer (the driver's :attr:`PhysicalDriver.articulating`), fingers that close on that
  piece's door or drawer (its handle) with both fingers touching it switch on a weld between the gripper and the
  door's or drawer's body at their relative pose then, off again as soon as a finger lets go or the gripper opens.
  The door then turns on its hinge (and the drawer slides) only as the arm pulls or pushes it through that weld or
  through contact; its joint has the compiled damping and no spring. After each goal, where physics left that
  door's or drawer's joint is the simulator's (``MujocoSimulator.absorb_physics``: open from half its range).

* **Resting objects sleep.** While a goal runs, MuJoCo's sleeping islands are on (``mjENBL_SLEEP``; MuJoCo's
  documentation, "Computation", "Sleeping"): a free object that has been still for a few steps is taken out of
  collision detection and the solver until an awake body (the arm, the fingers, a falling object) touches it.
  A scene has 20-70 objects resting on furniture, and their contacts were most of each step's cost (emmoe-081:
  x10 real time awake, about x100 with them asleep). Everything is woken when a goal starts (the kinematic side
  may have moved anything since) and sleeping is switched off when it ends, so that the kinematic skills, the
  views and the perception compute every body as before.

* **Streamed setpoints** (:meth:`PhysicalDriver.setpoint_stream`): a closed-loop policy sends the arm's and the
  gripper's position targets once per control period instead of whole trajectories, as a client streaming
  one-point FollowJointTrajectory goals does (ros2_control's JointTrajectoryController replaces the goal in progress
  with each new one) together with GripperCommand goals. The targets are held for the period (the arm's sent to
  the position actuators as a trajectory's setpoints are, the fingers' moved towards the commanded gap at
  ``finger_speed`` as a gripper goal moves them); the grasp helper attaches as at the end of a closing gripper goal
  (both fingers on one object when the fingers commanded closer have stopped, or when the period's goal ends short of
  its gap) and lets go when the command opens the fingers. Replayed through a stream at 10 Hz, the targets the
  scripted Pick's controllers sent (as ``homie data skills`` records them) pick the object again.
  A joint farther than ``path_tolerance`` from its target at the end of a period is reported (the caller decides
  when that is a blocked arm); the stream is one goal for the simulator's state and the goal observers.

After each goal the driver writes what physics did back into the simulator's state (the arm's joints, the
held object, where every moved object came to rest: on or in the furniture under it, or free-standing), so that
the world state, the planner's feedback and the goal checks read the physical outcome.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import mujoco
import numpy as np

from homiebot.sim.mujoco import robot as robot_model
from homiebot.sim.robot_driver import (
    BaseMotion,
    GripperResult,
    JointTrajectory,
    NavigateResult,
    TrajectoryErrorCode,
    TrajectoryResult,
)
from homiebot.types import Pose2D

logger = logging.getLogger(__name__)

# Collision bits of the physical skills (MuJoCo: two geoms meet when one's contype shares a bit with the other's
# conaffinity). Bit 1 is the compiled scene's: walls and furniture have contype 1, the base conaffinity 1, so
# the base still meets nothing else.
STATIC_BIT = 1
PHYSICS_BIT = 2  # free objects, the floor and the arm's links
FINGER_BIT = 4  # the fingers and the objects they can touch
#: (contype, conaffinity) of each part: free objects meet furniture, the floor, each other, the arm and the
#: fingers; a held object meets furniture and the fingers only (not the arm it is folded against, nor other
#: objects); the arm's links meet furniture and free objects; the fingers furniture and objects.
FREE_OBJECT_BITS = (PHYSICS_BIT | FINGER_BIT, STATIC_BIT | PHYSICS_BIT)
HELD_OBJECT_BITS = (FINGER_BIT, STATIC_BIT)
FLOOR_BITS = (PHYSICS_BIT, 0)
ARM_BITS = (0, STATIC_BIT | PHYSICS_BIT)
FINGER_BITS = (0, STATIC_BIT | FINGER_BIT)
#: Friction of a free object's contacts (MuJoCo's triple: sliding, torsional in m, rolling in m) with all of them in
#: force (condim 6). MuJoCo's default contact (condim 3) has sliding friction only, so a ball or a can on its side
#: rolls without resistance: a lemon let go on a fridge's floor, barely nudged by the opening fingers, rolled out of
#: the opened fridge and on across the kitchen. Real fruit and cans are neither rigid nor perfectly round, and roll
#: against a resistance of a few millimetres times their weight (rolling resistance as a lever arm: MuJoCo's
#: documentation, "Contact" and the geom attribute ``friction``; e.g. Hibbeler, Engineering Mechanics: Statics,
#: "Rolling resistance"); torsional friction keeps a released box from spinning on its face.
OBJECT_FRICTION = (1.0, 0.005, 0.002)
OBJECT_CONDIM = 6
#: How far (m) a finger may be from an object and still count as touching it (module docstring, "The grasp").
FINGER_TOUCH_MARGIN = 0.01


@dataclass(frozen=True)
class PhysicsSettings:
    """Controller settings of the embedded robot (ros2_control's parameters of the same names)."""

    path_tolerance: float = 0.25  # rad (m for the torso): tracking error that aborts a trajectory
    goal_tolerance: float = 0.02  # rad: error at the end that counts as arrived (1.6 cm at an arm's length)
    goal_time_tolerance: float = 1.0  # s after the last point to arrive
    path_grace: float = 0.3  # s at the start while the servos catch up (no path check)
    gripper_timeout: float = 2.0  # s for a gripper goal
    gripper_stall_speed: float = 0.002  # m/s: fingers slower than this have stopped
    gripper_tolerance: float = 0.004  # m of gap
    settle_time: float = 0.8  # s of physics after a release, for the object to come to rest
    finger_force: float = 40.0  # N: the fingers' actuator force limit when max_effort is 0 (no limit asked)
    # m/s of each finger: a gripper goal moves the fingers' setpoint no faster (Fetch's fetch_description URDF limits
    # l_/r_gripper_finger_joint to 0.05 m/s). Unlimited, 40 N on a 50 g finger closed 3 cm in a few steps and
    # passed through a 4 cm box before its contact could stop it.
    finger_speed: float = 0.05


@dataclass(frozen=True)
class GoalEnd:
    """One FollowJointTrajectory or GripperCommand goal of :class:`PhysicalDriver` has ended (told to its
    ``goal_observers``, after the outcome was written back to the simulator): the moments the reaching views of
    the physical skills are taken at (:mod:`homiebot.sim.mujoco.motion_views`)."""

    kind: str  # "arm" (FollowJointTrajectory) or "gripper" (GripperCommand)
    label: str  # what happened, for a person: "arm at its goal", "gripper closed on apple_1", ...
    succeeded: bool
    closing: bool = False  # a gripper goal that closed the fingers
    released: str | None = None  # what a gripper goal let go of


@dataclass(frozen=True)
class StreamStep:
    """The end of one control period of a :class:`SetpointStream`: the joint farthest from its target and by how
    much (rad, m for the torso), what the arm, the fingers or the held object touch (a name, or None), what the
    grasp holds, and whether this period's command opened the fingers on something (``released``)."""

    worst_joint: str
    worst_error: float
    blocker: str | None
    held: str | None
    gap: float
    released: str | None = None


class SetpointStream:
    """Position targets streamed to the arm and the gripper, one control period at a time (module docstring,
    "Streamed setpoints"); made by :meth:`PhysicalDriver.setpoint_stream`."""

    def __init__(self, driver: PhysicalDriver, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        self._driver = driver
        self.model = model
        self.data = data
        self.elapsed = 0.0
        self._still = 0.0

    def send(self, positions: Mapping[str, float], gap: float, seconds: float) -> StreamStep:
        """Hold ``positions`` (the torso's and arm joints' targets, by name) and the gripper's commanded ``gap`` (m)
        for ``seconds`` of physics."""
        driver, model, data = self._driver, self.model, self.data
        s = driver.settings
        grasp = driver._grasp
        assert grasp is not None
        unknown = [j for j in positions if j not in driver.joint_names]
        if unknown:
            raise ValueError(f"joints {unknown} are not this arm's {list(driver.joint_names)}")
        joints = tuple(positions)
        desired = np.array([positions[j] for j in joints], dtype=float)
        target = float(np.clip(gap, 0.0, 2 * robot_model.FINGER_OPEN)) / 2
        start_gap = driver.gap(data)
        released = None
        if target * 2 > start_gap + s.gripper_tolerance and (grasp.held is not None or grasp.held_leaf is not None):
            released = grasp.release()  # a command that opens the fingers lets go, as a gripper goal does
            grasp.release_leaf()
        closing = target * 2 < start_gap - s.gripper_tolerance
        setpoint = driver._finger_target if driver._finger_target is not None else start_gap / 2
        dt = model.opt.timestep
        steps = max(1, round(seconds / dt))
        for _ in range(steps):
            driver._command(data, joints, desired)
            setpoint += float(np.clip(target - setpoint, -s.finger_speed * dt, s.finger_speed * dt))
            driver._finger_target = setpoint
            driver._step(model, data)
            self.elapsed += dt
            speed = max(abs(data.qvel[driver._dof[j]]) for j in robot_model.FINGER_JOINTS)
            self._still = self._still + dt if (closing and speed < s.gripper_stall_speed) else 0.0
            if self._still >= 0.1:
                # Fingers commanded closer that have stopped: the gripper goal ends stalled, its position stays in
                # force (squeezing what they stopped on), and it is a grasp if both touch one object (gripper_command).
                setpoint = target
                if grasp.held is None and grasp.held_leaf is None:
                    grasp.attach_if_gripped()
        if closing and driver.gap(data) > 2 * target + s.gripper_tolerance and grasp.held is None \
                and grasp.held_leaf is None and grasp.attach_if_gripped() is not None:
            # The period's gripper goal ends here, replaced by the next, short of its gap with both fingers on one
            # object: a grasp, as gripper_command takes one that timed out short (a can's soft contacts yield under
            # the squeeze, and the fingers creep too fast to count as stalled). Its position stays in force.
            driver._finger_target = target
        joint, off = driver._worst(data, joints, desired)
        return StreamStep(joint, off, driver._arm_blocker(model, data) if off > s.path_tolerance else None,
                          grasp.held, driver.gap(data), released)

    def body_position(self, name: str) -> np.ndarray:
        """An object's position now (the physics', mid-stream)."""
        body = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, "object/" + name)
        return np.array(self.data.xpos[body])

    @property
    def held(self) -> str | None:
        assert self._driver._grasp is not None
        return self._driver._grasp.held


class FingerContactAttachment:
    """Holds an object in the gripper only while both fingers touch it (module docstring, "The grasp")."""

    def __init__(self, model: mujoco.MjModel, data: mujoco.MjData, welds: dict[str, int], object_geoms: dict[int, str],
                 leaves: dict[str, tuple[int, int]] | None = None):
        self._model, self._data = model, data
        self._welds = welds
        self._object_geoms = object_geoms
        self._geoms_by_object: dict[str, list[int]] = {}
        for geom, name in object_geoms.items():
            self._geoms_by_object.setdefault(name, []).append(geom)
        # Door or drawer -> (its grasp weld, its moving body), and the geoms of each moving body (module docstring,
        # "A handle's grasp").
        self._leaves = dict(leaves or {})
        self._leaf_geoms = {g: name for name, (_weld, body) in self._leaves.items()
                            for g in range(model.ngeom) if model.geom_bodyid[g] == body}
        #: The door or drawer held by its handle, or None; and the ones that may be (the driver's articulating).
        self.held_leaf: str | None = None
        self.graspable_leaves: set[str] = set()
        prefix = robot_model.ROBOT_PREFIX
        self._finger_bodies = (
            mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, prefix + "finger_left_link"),
            mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, prefix + "finger_right_link"),
        )
        self._finger_geoms = tuple([g for g in range(model.ngeom) if model.geom_bodyid[g] == body] for body in self._finger_bodies)
        self._gripper_body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, prefix + "gripper_link")
        self._hand_geoms = [g for g in range(model.ngeom)
                            if model.geom_bodyid[g] in (self._gripper_body, *self._finger_bodies)]
        self._leaving: set[str] = set()
        #: Trees of the objects let go during the current goal: kept awake to its end (PhysicalDriver._step).
        self.released_trees: set[int] = set()
        self.held: str | None = None
        self.release_after = 0.1  # s without contact on a finger
        self._lost_for = 0.0

    def touched(self, geoms: dict[int, str] | None = None) -> tuple[set[str], set[str]]:
        """The objects (or the named things of ``geoms``) each finger touches now, or is within FINGER_TOUCH_MARGIN
        of (left, right): a pressed finger's contact comes and goes from one step to the next as MuJoCo's soft
        contact pushes it out."""
        model, data = self._model, self._data
        left: set[str] = set()
        right: set[str] = set()
        for finger_geoms, found in ((self._finger_geoms[0], left), (self._finger_geoms[1], right)):
            for geom, name in (self._object_geoms if geoms is None else geoms).items():
                if name in found:
                    continue
                for finger in finger_geoms:
                    if mujoco.mj_geomDistance(model, data, finger, geom, FINGER_TOUCH_MARGIN, None) < FINGER_TOUCH_MARGIN:
                        found.add(name)
                        break
        return left, right

    def attach_if_gripped(self) -> str | None:
        """Switch the weld on for the one object both fingers touch; None when there is none."""
        left, right = self.touched()
        both = sorted(left & right)
        if not both:
            return self._attach_leaf_if_gripped()
        name = both[0]
        self._attach(name)
        return name

    def _attach_leaf_if_gripped(self) -> str | None:
        """The handle's grasp: weld the one graspable door or drawer both fingers touch; None when there is none."""
        if not self.graspable_leaves or self.held_leaf is not None:
            return self.held_leaf
        geoms = {g: n for g, n in self._leaf_geoms.items() if n in self.graspable_leaves}
        left, right = self.touched(geoms)
        both = sorted(left & right)
        if not both:
            return None
        self.attach_leaf(both[0])
        return both[0]

    def attach_leaf(self, name: str) -> None:
        """Weld the gripper to the door's or drawer's body at their relative pose now (as :meth:`_attach`)."""
        data = self._data
        weld, body = self._leaves[name]
        self._weld_at(weld, body)
        data.eq_active[weld] = 1
        wake_all(data)
        self.held_leaf = name
        self._lost_for = 0.0

    def release_leaf(self) -> str | None:
        """Switch the handle's weld off."""
        name = self.held_leaf
        if name is not None:
            self._data.eq_active[self._leaves[name][0]] = 0
            wake_all(self._data)
            self.held_leaf = None
        return name

    def _weld_at(self, weld: int, body: int) -> None:
        """Set ``weld``'s relative pose to ``body``'s pose in the gripper's frame now."""
        model, data = self._model, self._data
        g_pos, g_quat = data.xpos[self._gripper_body], data.xquat[self._gripper_body]
        o_pos, o_quat = data.xpos[body], data.xquat[body]
        inv = np.zeros(4)
        mujoco.mju_negQuat(inv, g_quat)
        rel_pos = np.zeros(3)
        mujoco.mju_rotVecQuat(rel_pos, o_pos - g_pos, inv)
        rel_quat = np.zeros(4)
        mujoco.mju_mulQuat(rel_quat, inv, o_quat)
        model.eq_data[weld, 0:3] = 0.0
        model.eq_data[weld, 3:6] = rel_pos
        model.eq_data[weld, 6:10] = rel_quat
        model.eq_data[weld, 10] = 1.0

    def _attach(self, name: str) -> None:
        model, data = self._model, self._data
        weld = self._welds[name]
        body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "object/" + name)
        # The weld holds the object where it is relative to the gripper now: relpose = the object's pose in
        # the gripper's frame (MuJoCo's eq_data for a weld: anchor[3], relpos[3], relquat[4], torquescale).
        self._weld_at(weld, body)
        data.eq_active[weld] = 1
        wake_all(data)
        self._leaving.discard(name)
        for geom in self._geoms_of(name):
            set_collision_bits(model, geom, HELD_OBJECT_BITS)
        self.held = name
        self._lost_for = 0.0

    def release(self) -> str | None:
        """Switch the weld off. The object meets the arm again only once it is clear of the hand (settle), since
        while held it may overlap the palm, which it does not collide with then."""
        name = self.held
        if name is not None:
            self._data.eq_active[self._welds[name]] = 0
            # A held object counts towards sleeping like any other; let go while the still fingers touched it, it
            # slept where it was, in the air (measured). Woken here, and kept awake to the goal's end (_step).
            wake_all(self._data)
            body = mujoco.mj_name2id(self._model, mujoco.mjtObj.mjOBJ_BODY, "object/" + name)
            self.released_trees.add(int(self._model.body_treeid[body]))
            self.held = None
            self._leaving.add(name)
        return name

    def settle(self) -> None:
        """Give objects that have left the hand their free collision bits back once no part of the hand is within
        FINGER_TOUCH_MARGIN of them (called every physics step)."""
        for name in list(self._leaving):
            near = any(
                mujoco.mj_geomDistance(self._model, self._data, hand, geom, FINGER_TOUCH_MARGIN, None) < FINGER_TOUCH_MARGIN
                for geom in self._geoms_of(name) for hand in self._hand_geoms
            )
            if not near:
                for geom in self._geoms_of(name):
                    set_collision_bits(self._model, geom, FREE_OBJECT_BITS)
                wake_all(self._data)  # it meets the arm and other objects again: let them answer
                self._leaving.discard(name)

    def _geoms_of(self, name: str) -> list[int]:
        return self._geoms_by_object.get(name, [])

    def check(self) -> str | None:
        """Called every physics step while holding: releases (and returns) the object once either finger has not
        touched it for ``release_after`` seconds (a pressed finger's contact flickers from one step to the next
        as MuJoCo's soft contact pushes it out and back). A held door or drawer is let go the same way."""
        if self.held_leaf is not None and self.held is None:
            left, right = self.touched({g: n for g, n in self._leaf_geoms.items() if n == self.held_leaf})
            if self.held_leaf in left and self.held_leaf in right:
                self._lost_for = 0.0
                return None
            self._lost_for += self._model.opt.timestep
            if self._lost_for >= self.release_after:
                self.release_leaf()
            return None
        if self.held is None:
            return None
        # The held object's geoms alone (every physics step: all objects' cost a fifth of a physical episode).
        left, right = self.touched({g: self.held for g in self._geoms_of(self.held)})
        if self.held in left and self.held in right:
            self._lost_for = 0.0
            return None
        self._lost_for += self._model.opt.timestep
        if self._lost_for < self.release_after:
            return None
        return self.release()


def set_collision_bits(model: mujoco.MjModel, geom: int, bits: tuple[int, int]) -> None:
    model.geom_contype[geom], model.geom_conaffinity[geom] = bits
    # MuJoCo's broad phase filters by the union of a body's geoms' bits (compiled once): keep it current.
    body = model.geom_bodyid[geom]
    mine = [g for g in range(model.ngeom) if model.geom_bodyid[g] == body]
    model.body_contype[body] = int(np.bitwise_or.reduce(model.geom_contype[mine]))
    model.body_conaffinity[body] = int(np.bitwise_or.reduce(model.geom_conaffinity[mine]))


#: ``tree_asleep`` of a tree just woken: awake for MuJoCo's minimum awake time (mjMINAWAKE steps), counting up to -1
#: while it is still, and asleep after that.
FULLY_AWAKE = -(mujoco.mjMINAWAKE + 1)
#: The speed (m/s or rad/s) that wakes a sleeping tree: any non-zero speed does (below).
WAKE_NUDGE = 1e-12


def wake_all(data: mujoco.MjData) -> None:
    """Wake every tree for at least MuJoCo's minimum awake time (module docstring, "Resting objects sleep").

    A sleeping tree is woken through MuJoCo's own check for a change made by the user (engine_sleep.c, mj_wake: a
    sleeping tree with any speed wakes with its whole island at the next step, and the arrays derived from the
    sleep state are recomputed). Writing a sleeping tree's ``tree_asleep`` directly left those arrays saying
    asleep, and a contact with it then stopped the step (MuJoCo 4.0, "mj_nc: contact involves sleeping geom":
    a sponge let go in emmoe-028's sleeping drawer). An awake tree's countdown starts again.
    """
    model = data.model
    asleep = data.tree_asleep >= 0
    data.qvel[model.tree_dofadr[asleep]] = WAKE_NUDGE
    awake = ~asleep
    data.tree_asleep[awake] = np.minimum(data.tree_asleep[awake], FULLY_AWAKE)


def enable_physics(model: mujoco.MjModel, geom_instance: np.ndarray, object_ids: set[int], room_ids: set[int]) -> None:
    """Give objects, the floor and the arm collision bits on this model (module docstring). Idempotent."""
    prefix = robot_model.ROBOT_PREFIX
    arm_root = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, prefix + "shoulder_pan_link")
    arm_bodies = {arm_root}
    for body in range(model.nbody):  # bodies are numbered parents first
        if model.body_parentid[body] in arm_bodies:
            arm_bodies.add(body)
    fingers = {mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, prefix + name)
               for name in ("finger_left_link", "finger_right_link")}
    for geom in range(model.ngeom):
        body = int(model.geom_bodyid[geom])
        instance = int(geom_instance[geom])
        if instance in object_ids and body != 0:
            bits = FREE_OBJECT_BITS
            model.geom_condim[geom] = OBJECT_CONDIM
            model.geom_friction[geom] = OBJECT_FRICTION
        elif instance in room_ids and body == 0:
            bits = FLOOR_BITS
        elif body in fingers:
            bits = FINGER_BITS
        elif body in arm_bodies:
            bits = ARM_BITS
        else:
            continue
        set_collision_bits(model, geom, bits)
    # Stiff grasp welds (time constant two physics steps, critically damped): a held object follows the hand.
    for eq in range(model.neq):
        if model.eq_type[eq] == mujoco.mjtEq.mjEQ_WELD:
            model.eq_solref[eq] = (2 * model.opt.timestep, 1.0)


class PhysicalDriver:
    """:class:`~homiebot.sim.robot_driver.RobotDriver` on the embedded simulator, with physics (module docstring).

    Bound to one simulator; :meth:`attach` re-reads its compiled scene after every reset (a new scene is a new
    model). The simulator's kinematic skills stay usable on the same world between physical goals.
    """

    def __init__(self, sim, settings: PhysicsSettings | None = None) -> None:
        self._sim = sim
        self.settings = settings or PhysicsSettings()
        self._model: mujoco.MjModel | None = None
        self._grasp: FingerContactAttachment | None = None
        self._finger_target: float | None = None  # each finger's position of the last gripper goal (m)
        #: The doors and drawers a physical Open or Close is moving (module docstring, "A handle's grasp"): only
        #: these may be held by a handle, and their joints are handed back to the simulator after each goal.
        self.articulating: set[str] = set()
        #: Told of every arm or gripper goal once it has ended and its outcome is the simulator's (:class:`GoalEnd`):
        #: the reaching views (the simulator's ``motion_views``, when on, are told after these). An observer must
        #: not change the simulator's data.
        self.goal_observers: list[Callable[[GoalEnd], None]] = []
        # Physics steps taken and the wall time spent in them (benchmarks/bench_physical_skills.py: real-time factor).
        self.physics_steps = 0
        self.physics_wall_s = 0.0
        #: Called with ``(model, data)`` before every physics step, once that step's commands are in ``data.ctrl``
        #: (what the controllers send: the arm's and torso's position targets, the fingers'): a recorder of the skills'
        #: executions (homiebot/data/skill_datasets.py) reads the joints, the commands and the cameras there. An
        #: observer must not change ``data``.
        self.step_observers: list[Callable[[mujoco.MjModel, mujoco.MjData], None]] = []

    @contextmanager
    def every_handle_holdable(self) -> Iterator[None]:
        """For the goals run inside: every interactive door and drawer of the scene may be held by its handle and
        moves under physics (:attr:`articulating` widened, then narrowed back), as a robot's gripper closes on
        whatever handle it meets. The in-process Open and Close name the piece they move; a skill through the ROS
        graph's standard interfaces cannot (sim_bridge's trajectory and gripper servers)."""
        before = set(self.articulating)
        self.articulating.update(f.name for f in self._sim.scene_spec().furniture
                                 if f.articulation is not None and f.interactive)
        try:
            yield
        finally:
            self.articulating.intersection_update(before)

    # ------------------------------------------------------------------ set-up

    def _bind(self) -> tuple[mujoco.MjModel, mujoco.MjData]:
        compiled, data = self._sim.physics_handles()
        model = compiled.model
        if model is not self._model:
            self._finger_target = None
            names = {v: k for k, v in compiled.instance_ids.items()}
            objects = set(compiled.object_qpos)
            object_ids = {i for i, n in names.items() if n in objects}
            room_ids = {compiled.instance_ids[r] for r in self._sim.room_names()}
            enable_physics(model, compiled.geom_instance, object_ids, room_ids)
            object_geoms = {g: names[int(compiled.geom_instance[g])] for g in range(model.ngeom)
                            if int(compiled.geom_instance[g]) in object_ids and model.geom_bodyid[g] != 0}
            self._grasp = FingerContactAttachment(model, data, compiled.grasp_welds, object_geoms,
                                                  compiled.articulation_welds)
            self._model = model
            self._actuators = {
                mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, int(model.actuator_trnid[i, 0])).removeprefix(
                    robot_model.ROBOT_PREFIX): i
                for i in range(model.nu)
            }
            base = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, robot_model.ROBOT_PREFIX + "base")
            self._robot_geoms = {g for g in range(model.ngeom) if model.body_rootid[model.geom_bodyid[g]] == base}
            self._names = {v: k for k, v in compiled.instance_ids.items()}
            self._qpos = dict(compiled.robot_qpos)
            self._joint_indices: dict[tuple[str, ...], tuple[np.ndarray, np.ndarray]] = {}
            self._dof = {j: int(model.jnt_dofadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, robot_model.ROBOT_PREFIX + j)])
                         for j in self._qpos}
        assert self._grasp is not None
        model.opt.enableflags |= int(mujoco.mjtEnableBit.mjENBL_SLEEP)
        wake_all(data)  # the kinematic side may have moved anything since the last goal
        held = self._sim.held_object()
        # Re-anchor the weld at the object's pose now: the kinematic side may have moved the base since (the weld's
        # relative pose is unchanged then) or snapped or dropped the object (an oracle skill, a reset).
        self._grasp.release()
        if held is not None:
            self._grasp._attach(held)
        self._grasp.graspable_leaves = set(self.articulating)
        leaf = self._grasp.release_leaf()
        if leaf is not None and leaf in self.articulating:
            # Re-anchored at the pose now, if both fingers still touch it (the simulator wrote the joints back).
            left, right = self._grasp.touched({g: n for g, n in self._grasp._leaf_geoms.items() if n == leaf})
            if leaf in left and leaf in right:
                self._grasp.attach_leaf(leaf)
        return model, data

    @property
    def joint_names(self) -> tuple[str, ...]:
        """The joints a trajectory may name: the torso lift and the arm (Fetch's ``arm_with_torso_controller``);
        the base is navigation's."""
        return ("torso_lift", *robot_model.ARM_JOINTS)

    # ------------------------------------------------------------------ RobotDriver

    def joint_positions(self) -> dict[str, float]:
        return self._sim.joint_positions()

    def base_pose(self) -> Pose2D:
        return self._sim.state().robot

    def navigate_to_pose(self, goal: Pose2D) -> NavigateResult:
        return self._sim.navigate_to_pose(goal)

    def compute_path_to_pose(self, goal: Pose2D) -> NavigateResult:
        """Nav2's ComputePathToPose: whether NavigateToPose would find a path to ``goal`` (nothing moves)."""
        return self._sim.compute_path_to_pose(goal)

    def base_velocity(self, linear_x: float, angular_z: float, seconds: float,
                      tolerated: str | None = None) -> BaseMotion:
        """``/cmd_vel`` held for ``seconds`` (:class:`~homiebot.sim.robot_driver.SupportsBaseVelocity`): the base is
        kinematic here, as under NavigateToPose (no physics step; the arm stays tucked)."""
        return self._sim.base_velocity(linear_x, angular_z, seconds, tolerated)

    def base_contact(self) -> str | None:
        return self._sim.base_contact()

    def follow_joint_trajectory(self, trajectory: JointTrajectory) -> TrajectoryResult:
        return self._follow_trajectory(trajectory, self.joint_names)

    @property
    def whole_body_joint_names(self) -> tuple[str, ...]:
        """The joints a whole-body trajectory may name (:meth:`follow_whole_body_trajectory`): the base's planar
        joints, then :attr:`joint_names`."""
        return (*robot_model.BASE_JOINTS, *self.joint_names)

    def follow_whole_body_trajectory(self, trajectory: JointTrajectory) -> TrajectoryResult:
        """FollowJointTrajectory over the base's planar joints as well (``base_x``, ``base_y``: the map frame, m;
        ``base_yaw``, rad), with the torso and the arm: the base and the arm moved together, as MoveIt plans a
        mobile manipulator's base as a planar joint beside its arm (moveit.picknik.ai, "Planning for
        differential-drive mobile base and an arm") and a whole-body controller follows it. Under physics like the
        arm's trajectories: the base's servos track the path, what the hand holds (a door by its edge) goes along
        only as physics lets it, and a base that meets something breaks the path tolerance, which says what blocked
        it. Where physics leaves the base is the simulator's base pose afterwards."""
        return self._follow_trajectory(trajectory, self.whole_body_joint_names)

    def _follow_trajectory(self, trajectory: JointTrajectory, allowed: tuple[str, ...]) -> TrajectoryResult:
        unknown = [j for j in trajectory.joint_names if j not in allowed]
        if unknown or len(set(trajectory.joint_names)) != len(trajectory.joint_names):
            return TrajectoryResult(TrajectoryErrorCode.INVALID_JOINTS,
                                    f"joints {unknown or trajectory.joint_names} are not this arm's {list(allowed)}")
        times = [p.time_from_start for p in trajectory.points]
        if not trajectory.points or any(len(p.positions) != len(trajectory.joint_names) for p in trajectory.points) \
                or any(b <= a for a, b in zip([0.0, *times], times, strict=False)):
            return TrajectoryResult(TrajectoryErrorCode.INVALID_GOAL,
                                    "a trajectory needs points with one position per joint at increasing times after 0")
        model, data = self._bind()
        s = self.settings
        joints = trajectory.joint_names
        start = np.array([data.qpos[self._qpos[j]] for j in joints])
        knots_t = np.array([0.0, *times])
        knots_q = np.vstack([start, *[np.asarray(p.positions, dtype=float) for p in trajectory.points]])
        base = [i for i, j in enumerate(joints) if j in robot_model.BASE_JOINTS]
        if "base_yaw" in joints:
            # The heading the short way round from where the base stands (its hinge joint is unbounded).
            knots_q[:, joints.index("base_yaw")] = np.unwrap(knots_q[:, joints.index("base_yaw")])
        dt = model.opt.timestep
        steps = math.ceil(trajectory.duration / dt)
        # Where every joint should be at every step, sampled once (per step and joint it cost 1 s of a 3 s episode).
        times_k = np.minimum(np.arange(1, steps + 1) * dt, trajectory.duration)
        path = np.column_stack([np.interp(times_k, knots_t, knots_q[:, i]) for i in range(len(joints))])
        result = TrajectoryResult(TrajectoryErrorCode.SUCCESSFUL)
        elapsed = 0.0
        for k in range(1, steps + 1):
            t = float(times_k[k - 1])
            desired = path[k - 1]
            self._command(data, joints, desired)
            self._step(model, data)
            elapsed = t
            if t > s.path_grace:
                joint, off = self._worst(data, joints, desired)
                if off > s.path_tolerance:
                    result = TrajectoryResult(
                        TrajectoryErrorCode.PATH_TOLERANCE_VIOLATED,
                        f"{joint} was {off:.2f} from its path at t={t:.2f} s "
                        f"(blocked: {self._arm_blocker(model, data) or 'unknown'})")
                    break
        if result.succeeded:
            goal = knots_q[-1]
            settle_steps = math.ceil(s.goal_time_tolerance / dt)
            for _ in range(settle_steps):
                error = self._tracking_error(data, joints, goal)
                if np.max(np.abs(error)) <= s.goal_tolerance:
                    break
                self._command(data, joints, goal)
                self._step(model, data)
                elapsed += dt
            joint, off = self._worst(data, joints, goal)
            if off > s.goal_tolerance:
                result = TrajectoryResult(
                    TrajectoryErrorCode.GOAL_TOLERANCE_VIOLATED,
                    f"{joint} ended {off:.3f} from its goal "
                    f"(blocked: {self._arm_blocker(model, data) or 'unknown'})")
        else:
            self._hold(data)  # stop where it is, as a controller does on abort
        if base:
            self._sim.adopt_physics_base()
        self._finish(elapsed)
        self._goal_ended(GoalEnd("arm", "arm at its goal" if result.succeeded else f"arm stopped: {result.error_string}",
                                 result.succeeded))
        return result

    def gripper_command(self, position: float, max_effort: float) -> GripperResult:
        model, data = self._bind()
        s = self.settings
        target = float(np.clip(position, 0.0, 2 * robot_model.FINGER_OPEN)) / 2
        force = max_effort if max_effort > 0 else s.finger_force
        fingers = robot_model.FINGER_JOINTS
        for j in fingers:
            act = self._actuators[j]
            model.actuator_forcelimited[act] = 1
            model.actuator_forcerange[act] = (-force, force)
        assert self._grasp is not None
        start_gap = self.gap(data)
        closing = target * 2 < start_gap - s.gripper_tolerance
        opening = not closing  # a goal that does not close further lets go (a wide object keeps the fingers apart)
        released = self._grasp.release() if opening else None
        if opening:
            self._grasp.release_leaf()
        dt = model.opt.timestep
        setpoint = start_gap / 2
        still = 0.0
        elapsed = 0.0
        stalled = False
        while elapsed < s.gripper_timeout:
            setpoint += float(np.clip(target - setpoint, -s.finger_speed * dt, s.finger_speed * dt))
            self._finger_target = setpoint
            self._step(model, data)
            elapsed += dt
            if abs(self.gap(data) - 2 * target) <= s.gripper_tolerance:
                break
            speed = max(abs(data.qvel[self._dof[j]]) for j in fingers)
            still = still + dt if speed < s.gripper_stall_speed else 0.0
            if still >= 0.1:
                stalled = True
                break
        self._finger_target = target  # the goal's position stays in force (squeezing what the fingers stopped on)
        short = self.gap(data) > 2 * target + s.gripper_tolerance
        if closing and (stalled or short) and self._grasp.held is None and self._grasp.held_leaf is None:
            # Fingers that stopped short of the commanded gap on an object both touch: a grasp. Also when the goal
            # timed out short of it with the fingers still creeping (a can squeezed between the pads, its soft
            # contacts yielding more than 2 mm/s): they press on it all the same, and without the weld the can
            # came along pinched but colliding with the arm as a free object, and jammed the arm's tuck
            # (emmoe-081).
            self._grasp.attach_if_gripped()
        effort = float(max(abs(data.actuator_force[self._actuators[j]]) for j in fingers))
        gap = self.gap(data)
        if released is not None:
            self._settle(model, data)  # let what left the hand come to rest before anyone reads where it is
            elapsed += s.settle_time
        self._finish(elapsed)
        if closing:
            held = self._grasp.held or self._grasp.held_leaf
            label = f"gripper closed on {held}" if held is not None else f"gripper closed to {100 * gap:.1f} cm, holding nothing"
        else:
            label = f"gripper opened, let go of {released}" if released is not None else "gripper opened"
        self._goal_ended(GoalEnd("gripper", label, stalled or abs(gap - 2 * target) <= s.gripper_tolerance,
                                 closing=closing, released=released))
        return GripperResult(position=gap, effort=effort, stalled=stalled,
                             reached_goal=abs(gap - 2 * target) <= s.gripper_tolerance)

    @contextmanager
    def setpoint_stream(self, label: str = "streamed setpoints") -> Iterator[SetpointStream]:
        """Stream position targets (module docstring, "Streamed setpoints"): one goal from entry to exit, at whose
        end what physics did is written back to the simulator and the goal observers are told (``label``)."""
        model, data = self._bind()
        s = self.settings
        for j in robot_model.FINGER_JOINTS:
            act = self._actuators[j]
            model.actuator_forcelimited[act] = 1
            model.actuator_forcerange[act] = (-s.finger_force, s.finger_force)
        stream = SetpointStream(self, model, data)
        try:
            yield stream
        finally:
            self._finish(stream.elapsed)
            self._goal_ended(GoalEnd("arm", label, True))

    # ------------------------------------------------------------------ what the skills may also read

    def held(self) -> str | None:
        """The object the grasp holds (both fingers on it), or None."""
        self._bind()
        assert self._grasp is not None
        return self._grasp.held

    def held_leaf(self) -> str | None:
        """The door or drawer held by its handle (both fingers on it; module docstring), or None."""
        self._bind()
        assert self._grasp is not None
        return self._grasp.held_leaf

    def touching(self) -> str | None:
        """What the arm, the fingers or the object they hold touch now (a furniture's or object's name), or None: the
        simulator's contacts, which a robot does not observe (tests compare wirings up to the first touch with it)."""
        return self._arm_blocker(*self._bind())

    def articulation_joint(self, name: str) -> float:
        """The door's hinge angle (rad) or the drawer's slide (m) of ``name`` now: what a joint encoder on it would
        read (the skills themselves read the world graph and their own arm; tests and benchmarks read this)."""
        compiled, data = self._sim.physics_handles()
        return float(data.qpos[compiled.articulation_qpos[name]])

    def gap(self, data: mujoco.MjData | None = None) -> float:
        data = data if data is not None else self._bind()[1]
        return float(sum(data.qpos[self._qpos[j]] for j in robot_model.FINGER_JOINTS))

    # ------------------------------------------------------------------ internals

    def _command(self, data: mujoco.MjData, joints: tuple[str, ...], desired: np.ndarray) -> None:
        if len(joints) != len(desired):
            raise ValueError(f"{len(desired)} positions for the {len(joints)} joints {joints}")
        data.ctrl[self._indices(joints)[0]] = desired

    def _tracking_error(self, data: mujoco.MjData, joints: tuple[str, ...], desired: np.ndarray) -> np.ndarray:
        return data.qpos[self._indices(joints)[1]] - desired

    def _indices(self, joints: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        """The actuators and the qpos addresses of ``joints`` (in their order), kept per joint tuple: a trajectory
        writes its setpoints and reads its joints every physics step."""
        indices = self._joint_indices.get(joints)
        if indices is None:
            indices = (np.array([self._actuators[j] for j in joints], dtype=int),
                       np.array([self._qpos[j] for j in joints], dtype=int))
            self._joint_indices[joints] = indices
        return indices

    def _worst(self, data: mujoco.MjData, joints: tuple[str, ...], desired: np.ndarray) -> tuple[str, float]:
        """The joint farthest from ``desired`` and by how much."""
        error = np.abs(self._tracking_error(data, joints, desired))
        worst = int(np.argmax(error))
        return joints[worst], float(error[worst])

    def _hold(self, data: mujoco.MjData) -> None:
        for joint, act in self._actuators.items():
            if joint not in robot_model.FINGER_JOINTS:
                data.ctrl[act] = data.qpos[self._qpos[joint]]

    def _step(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        if self._finger_target is not None:
            # The last GripperCommand goal stays in force (a gripper controller keeps squeezing what it closed on).
            for j in robot_model.FINGER_JOINTS:
                data.ctrl[self._actuators[j]] = self._finger_target
        assert self._grasp is not None
        for tree in self._grasp.released_trees:
            # An object let go leaves still fingers with no speed of its own, and would fall asleep in the air.
            if data.tree_asleep[tree] >= 0:
                wake_all(data)  # at this step, with its island
            else:
                data.tree_asleep[tree] = FULLY_AWAKE
        for observe in self.step_observers:
            observe(model, data)
        started = time.perf_counter()
        mujoco.mj_step(model, data)
        self.physics_wall_s += time.perf_counter() - started
        self.physics_steps += 1
        assert self._grasp is not None
        self._grasp.settle()
        dropped = self._grasp.check()
        if dropped is not None:
            logger.debug("the fingers lost %s", dropped)

    def _settle(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        for _ in range(math.ceil(self.settings.settle_time / model.opt.timestep)):
            self._step(model, data)

    def _arm_blocker(self, model: mujoco.MjModel, data: mujoco.MjData) -> str | None:
        """What the arm, the fingers or the object they hold touch now (a furniture's or object's name), for the
        failure message; what the held object touches is named as such ("kitchen_drawer, touched by the held
        red_box_4": emmoe-024's arm stopped short with a box pressed on a drawer's front, reported as unknown)."""
        held = self._grasp.held if self._grasp is not None else None
        compiled, _ = self._sim.physics_handles()
        held_geoms = set(self._grasp._geoms_of(held)) if self._grasp is not None and held is not None else set()
        carried = None
        for i in range(data.ncon):
            contact = data.contact[i]
            g1, g2 = int(contact.geom1), int(contact.geom2)
            for mine, other in ((g1, g2), (g2, g1)):
                if other in self._robot_geoms or other in held_geoms:
                    continue
                name = self._names.get(int(compiled.geom_instance[other]))
                if name is None or name == held:
                    continue
                if mine in self._robot_geoms:
                    return name
                if mine in held_geoms and carried is None:
                    carried = f"{name}, touched by the held {held}"
        return carried

    def _goal_ended(self, event: GoalEnd) -> None:
        """Tell the goal observers, then the simulator's reaching views when they are on (:class:`GoalEnd`)."""
        for observe in self.goal_observers:
            observe(event)
        views = self._sim.motion_views  # MujocoSimulator's, None while they are off
        if views is not None:
            views.goal_ended(event)

    def _finish(self, seconds: float) -> None:
        """Write what physics did back into the simulator's state and advance its clock."""
        assert self._grasp is not None
        assert self._model is not None
        # Sleeping only inside a goal: with it on, MuJoCo's kinematics skips sleeping bodies, and the kinematic
        # side moves objects by their qpos between goals.
        self._model.opt.enableflags &= ~int(mujoco.mjtEnableBit.mjENBL_SLEEP)
        self._grasp.released_trees.clear()
        data = self._sim.physics_handles()[1]
        wake_all(data)
        mujoco.mj_forward(self._model, data)  # sleeping off: every tree awake, the derived arrays with them
        moving = set(self.articulating) | ({self._grasp.held_leaf} if self._grasp.held_leaf else set())
        if moving:
            self._sim.absorb_physics(self._grasp.held, seconds, articulations=sorted(moving))
        else:
            self._sim.absorb_physics(self._grasp.held, seconds)
