"""The simulator protocol every backend implements (embedded MuJoCo, Habitat, AI2-THOR, a real robot).

Backends keep their engine details behind this interface so that the executor, the expert planner,
perception and the ROS 2 bridge never import MuJoCo (or Habitat) directly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable

import numpy as np

from homiebot.sim.robot_driver import NavigateResult
from homiebot.sim.scene import SceneSpec
from homiebot.types import Observation, Pose2D, SkillResult, WorldState


@runtime_checkable
class Simulator(Protocol):
    """A household world with a mobile manipulator and oracle (privileged) skills.

    All skill methods take scene instance names (already grounded: the executor resolves a planner's
    alias before calling) and return a :class:`SkillResult`; they never raise for a physical failure.
    """

    name: str

    def reset(self, scene: str | SceneSpec, seed: int = 0) -> Observation:
        """Load ``scene`` (library name or spec), randomise placements with ``seed``, return the first views."""

    def observe(self) -> Observation:
        """Render the four first-person views (RGB, depth, instance segmentation) now."""

    def state(self) -> WorldState:
        """Privileged ground truth: robot pose, held object, every room/furniture/object."""

    def scene_spec(self) -> SceneSpec:
        """The spec of the loaded scene (aliases, receptacles), after seed randomisation."""

    def go_to(self, target: str) -> SkillResult: ...

    def pick(self, obj: str) -> SkillResult: ...

    def put(self, obj: str, place: str) -> SkillResult: ...

    def open(self, target: str) -> SkillResult: ...

    def close(self, target: str) -> SkillResult: ...

    def reset_arm(self) -> None:
        """Return the arm to its stowed pose (the executor does this between tries, appendix E.1)."""

    def render_topdown(self, size: int = 512) -> np.ndarray:
        """A top-down map image (H, W, 3) uint8 with rooms, furniture, objects, the robot and its path."""

    def shutdown(self) -> None:
        """Release renderers and engine resources."""


@runtime_checkable
class SupportsHouseholdSkills(Protocol):
    """The skills ALFWorld's task types add to EMMOE's (declared in ``homiebot/skills/actions.py``): switching an
    appliance or lamp on and off, and cleaning, heating or cooling the held object at a sink, a microwave or a
    fridge. A backend without them answers those actions with a failure, never an exception."""

    def turn_on(self, target: str) -> SkillResult: ...

    def turn_off(self, target: str) -> SkillResult: ...

    def clean(self, obj: str, place: str) -> SkillResult: ...

    def heat(self, obj: str, place: str) -> SkillResult: ...

    def cool(self, obj: str, place: str) -> SkillResult: ...


@runtime_checkable
class SupportsLiquids(Protocol):
    """PARTNR's Fill and Pour (appendix A.9.1, the human's skills): fill the held container at a furniture with a
    faucet; pour the held container's water into another container. Declared apart from
    :class:`SupportsHouseholdSkills` so that a backend with those (the ROS 2 client, the text world) keeps them
    without these; a backend without them answers Fill and Pour with a failure."""

    def fill(self, obj: str, place: str) -> SkillResult: ...

    def pour(self, obj: str, place: str) -> SkillResult: ...


SimulatorFactory = Callable[..., Simulator]

_BACKENDS: dict[str, str] = {
    # name -> "module:attribute"; imported lazily so that optional engines cost nothing when unused.
    "mujoco": "homiebot.sim.mujoco.backend:MujocoSimulator",
}


def _targets() -> dict[str, str]:
    # Installed packages add simulators through the ``homiebot.simulators`` entry-point group (homiebot.plugins).
    from homiebot.plugins import SIMULATORS_GROUP, entry_point_targets

    return entry_point_targets(SIMULATORS_GROUP, _BACKENDS)


def available_backends() -> list[str]:
    return sorted(_targets())


def register_backend(name: str, target: str) -> None:
    """Register a simulator class by import path (``"pkg.module:Class"``)."""
    _BACKENDS[name] = target


def make_simulator(backend: str = "mujoco", **kwargs) -> Simulator:
    """Instantiate a simulator backend by name; an unknown name lists the known ones."""
    import importlib

    try:
        target = _targets()[backend]
    except KeyError:
        raise ValueError(f"unknown simulator backend {backend!r}; available: {', '.join(available_backends())}") from None
    module_name, attr = target.split(":")
    cls = getattr(importlib.import_module(module_name), attr)
    return cls(**kwargs)


@runtime_checkable
class SupportsAgents(Protocol):
    """A world with more than one agent (PARTNR's robot and human, "PARTNR: A Benchmark for Planning and
    Reasoning in Embodied Multi-agent Tasks", section 3): each agent's own view of the one shared world, and the
    lock-step clock. A simulator without it has the robot alone."""

    @property
    def agent_ids(self) -> tuple[int, ...]:
        """The agents of this world (0 the robot, 1 the human)."""
        ...

    def agent(self, role: int) -> Simulator:
        """The simulator from agent ``role``'s point of view: its skills move that agent, its state and views are
        that agent's."""
        ...

    def sync_clocks(self) -> float:
        """Every agent's clock moves to the latest one (a lock-step round starts); returns that time."""
        ...


# ------------------------------------------------------------------------------------------------ optional extras
# What a backend may tell beyond the Simulator protocol, for the ROS 2 bridge's clock, path, joint and robot-model
# topics (docs/ros.md, "Frames and joints", "Robot model in rviz", "Time"). Declared here rather than probed by
# name, so that a backend says what it has and the bridge reads the declaration. A backend without one gets the
# bridge's fallback: the views' time, an empty path, the base joints only, no robot model.


@runtime_checkable
class SupportsClock(Protocol):
    """The simulated clock: seconds since the reset (the skills' nominal durations), what the views are stamped
    with; the bridge's ``/clock``."""

    @property
    def sim_time(self) -> float: ...


@runtime_checkable
class SupportsHeadLook(Protocol):
    """A robot that can point a head camera: raise its torso, turn its head towards a point and take one view."""

    def look_at(self, target: tuple[float, float, float], raise_torso: bool = True) -> Observation | None:
        """Raise the torso (when ``raise_torso``), point the head camera at ``target`` (map frame, m), take its view,
        and put the torso and head back as they were; the observation holds that one view (None when nothing
        renders). The time the joints take is the simulated clock's."""


@runtime_checkable
class SupportsPath(Protocol):
    """The robot base's travelled path since the reset, as ``(x, y)`` map points (``/sim/path``)."""

    @property
    def travelled_path(self) -> list[tuple[float, float]]: ...


@runtime_checkable
class SupportsJointStates(Protocol):
    """The robot's joints above the base, by joint name (``/joint_states``): what the model holds now."""

    def joint_positions(self) -> dict[str, float]: ...


class RobotModel(Protocol):
    """A robot's description and forward kinematics (the MuJoCo backend's
    :class:`homiebot.sim.mujoco.urdf.RobotKinematics`)."""

    def urdf(self) -> str:
        """The robot's URDF text (``/robot_description``)."""
        ...

    def link_transforms(self, positions: Mapping[str, float]) -> list[tuple[str, str, np.ndarray]]:
        """``(parent, child, parent -> child 4x4)`` for the robot's links at joint ``positions`` (``/tf``)."""
        ...


@runtime_checkable
class SupportsRobotModel(Protocol):
    """A backend that describes its own robot. Only the backend knows its robot: one without this gets no robot
    model in rviz rather than a wrong one."""

    def robot_kinematics(self) -> RobotModel: ...


@runtime_checkable
class SupportsNavigateToPose(Protocol):
    """A backend that drives its base to a map pose as Nav2's ``NavigateToPose`` does, and reports where the base
    is (:class:`homiebot.sim.robot_driver.RobotDriver`'s base half): the bridge serves ``/navigate_to_pose`` with
    it, and the physical Go to needs no more of a driver."""

    def navigate_to_pose(self, goal: Pose2D) -> NavigateResult: ...

    def base_pose(self) -> Pose2D: ...
