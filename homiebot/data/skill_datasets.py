"""The physical skills' executions as LeRobot data sets (``homie data skills``; docs/skill-data.md).

One episode is one execution of one physical skill (:class:`~homiebot.skills.physical.PhysicalSkillSet`, the skills
of ``--skills physical``) on the embedded MuJoCo simulator, recorded at :data:`FPS` frames per second of simulated
time while the arm moves under physics, and written with LeRobot's own writer (``LeRobotDataset.create``,
``add_frame``, ``save_episode``, ``finalize``): nothing of the format is written here. Per frame:

* ``observation.images.head`` and ``observation.images.wrist``: the robot's head camera and a camera on its gripper
  (:mod:`homiebot.sim.mujoco.skill_cameras`), ``size`` x ``size`` RGB; or those of ``cameras`` only (``--cameras
  wrist``); with ``mark_target`` (``--mark-target``) each as ``observation.images.<camera>_marked`` instead, the skill's
  target tinted in the image (from the simulator's segmentation of it: skill_cameras, "The target marked"), and the
  share of frames in which the target was in view in each (``target_visible``) in the episode's metadata;
* ``observation.state``: the joints' positions, :data:`JOINTS` (torso lift, the seven arm joints, the two fingers);
* ``observation.environment_state``: which thing the skill is for, as a robot knows it before it reaches: the
  target's box (centre and size, :data:`TARGET_STATE`) in the base's frame at that frame, from where the world graph
  had it when the skill started (:func:`target_state`). A policy needs it: a scene holds many objects and ACT takes
  no task text, so without it "pick up the apple" and "pick up the can" would be the same observation. When the skill
  is served, the same box comes from the world graph the skills plan in (perception's, when perception is on);
* ``action``: the position targets the robot's controllers send at that control step, in the same order (the
  trajectory controller's interpolated setpoint for the torso and arm, the gripper controller's for the fingers):
  what a policy has to output for the driver to do what the scripted skill did;
* ``next.success`` (true on the last frame of an episode whose skill succeeded) and ``next.done`` (true on every
  episode's last frame), the layout LeRobot's own evaluation records;
* the task text, e.g. "pick up the red_box_4", "open the fridge", "go to the kitchen_counter".

Frames are taken before the physics step at every 1/FPS s of simulated time while the skill runs (the observation is
the state the action is sent from). Between physics goals the skill plans; no simulated time passes there, so the
frames are evenly spaced in simulated time. A Pick or Open that moves the base on the way (a reposition, the next pull
of a wide door; a physical Open or Close always drives to a pose by the handle first) moves it through NavigateToPose,
kinematically: the frames jump there, and the episode's metadata says so (``base_moved``, and ``base_jumps``: the
frames at which the base stood elsewhere than at the frame before).

**Go to** (base velocity actions from the head camera and a goal). The embedded robot's base is kinematic: a
NavigateToPose goal moves it along the planner's path at once, turning in place at each corner at the simulator's
TURN_SPEED and driving straight at its DRIVE_SPEED (homiebot/sim/mujoco/backend.py, ``_follow``), with no physics step.
So the physical Go to runs as it is (its goals go through a recorder of the driver), and its motion is then replayed
at FPS from the path's corners: per frame the head camera at the base's pose then, ``observation.images.goal`` (the
head camera at the goal pose: the pose reached, or the first one sent when none was), ``observation.state`` the goal
pose in the base's frame (:data:`GOAL_STATE`), and ``action`` the base's velocity to the next frame
(:data:`BASE_VELOCITY`: forward m/s, turn rad/s; zero on the last frame, at rest). No wrist camera (the arm stays
tucked). The start pose is near another piece of furniture of the scene, drawn with the seed.

**What varies, and what a seed fixes.** An episode's seed fixes everything: the EMMOE-100 task whose scene it plays in
(drawn uniformly from the suite), every object's placement on its furniture (the simulator's reset seed is the
episode's seed), the skill's target (for a Pick one of the objects the task names in a Pick of its key paths, else
any object the robot can get at; for Open / Close one of the scene's doors and drawers, put closed or open as the
skill needs), and the robot's start pose (one of the first :data:`START_POSES` poses Go to would try, shifted by up to
:data:`START_JITTER_M` and turned by up to :data:`START_JITTER_RAD`). A seed whose episode cannot start (no start pose
reached) or whose skill ends before the arm moved (under :data:`MIN_FRAMES` frames: a refusal, such as an object wider
than the gripper, or no grasp from anywhere the base went) is skipped and counted; the next seed follows. So is a
seed on which MuJoCo stops with a fatal error mid-skill (the next seed resets the simulator).

**Held-out placements** (:func:`split_of`): seeds below :data:`EVAL_SEED_BASE` are training seeds, seeds from it on
are evaluation seeds. A data set is recorded from one split's seeds (``split="train"``: from 0 up; ``"eval"``: from
EVAL_SEED_BASE up) and a seed of the other split is refused, so an evaluation placement (the reset seed that samples
it, the start pose drawn with it) never is in training data.

**Scene seeds an evaluation plays are skipped** (:func:`free_seeds`), in both splits. An episode's scene is an
EMMOE-100 task's apartment reset with the episode's seed (``sim.reset(apartment, seed)``), and every suite an
evaluation plays (EMMOE-100, the PARTNR-style suite, the MuEP-style suite, the demonstrations) resets the same seven
apartments the same way, with its task's scene seed. So on such a seed, whenever the seed's draw is that task's
apartment, the recorder's scene *is* the evaluation's: the same apartment with every object on the same spot (seed 32,
apartment_5: the scene a MuEP-style task is evaluated on; seed 220, apartment_3: another's), and a Pick recorded there
teaches the policy that evaluation episode's placement. Every seed of the reserved table
(:func:`homiebot.tasks.reserved.reserved_seeds`, runs 0-9 of every task of every suite) is skipped, whichever apartment
the seed draws: the draw decides whether a reserved seed collides, and a rule that looked at it would let collisions
through as soon as the draw, a suite's tasks or the suites changed; one seed compared with one set is the table's own
rule, asked by every other collection, and it builds no scene. With the suites as they are it costs 176 of the first
1000 training seeds (0-49, 101-149, 201-249, 301-328: the demonstrations' and the MuEP-style tasks'; EMMOE-100's
begin at 1037); no seed of the table is an evaluation-split seed (its largest is 9592, the split starts at
EVAL_SEED_BASE), so an eval split's seeds are unchanged. A skipped seed is not tried (it does not count against the
seed budget), the summary says how many were skipped, and every episode's metadata has the seed it was played on.

Per-episode metadata that LeRobot's episode table has no column for (seed, split, task id, scene, target, start pose,
the skill's status and message, EMMOE's failure code, whether the base moved) is in ``meta/homiebot_episodes.jsonl``
next to LeRobot's own files, one JSON object per episode, in episode order.

The whole data set is written into a hidden temporary folder beside ``out`` and renamed onto it at the end: an error
or an interrupt leaves no output folder. LeRobot is imported only here, and only when recording starts
(:class:`SkillDataError` when it is missing): it needs Python >= 3.12 (docs/results/lerobot-install-2026-11-29.md).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from homiebot.sim.mujoco import robot as robot_model

# The frame's definition, shared with the learned skills that serve a policy trained on these data (FPS, JOINTS: the
# state's and the action's names, TARGET_STATE and target_state: the environment state; Go to's BASE_VELOCITY,
# GOAL_STATE, goal_in_base and head_at; module docstring).
from homiebot.sim.mujoco.skill_observation import (
    BASE_VELOCITY,
    FPS,
    GO_TO_CAMERAS,
    GOAL_STATE,
    JOINTS,
    TARGET_STATE,
    SkillObservation,
    base_qpos,
    goal_in_base,
    head_at,
    physics_steps_per_frame,
    target_state,  # noqa: F401 - the recorder's name for it, kept (tests, callers)
)
from homiebot.sim.mujoco.skill_observation import ENV_STATE_KEY as ENV_STATE
from homiebot.tasks.reserved import reserved_seeds
from homiebot.types import Action, EntityKind, ErrorCode, Pose2D, SkillResult, SkillStatus, WorldState

#: The skills this recorder runs, by the name ``homie data skills --skill`` takes.
SKILLS: dict[str, Action] = {"pick": Action.PICK, "open": Action.OPEN, "close": Action.CLOSE, "go_to": Action.GO_TO}
#: Default image side (pixels).
DEFAULT_SIZE = 96
#: Seeds from this one on are evaluation seeds, below it training seeds (module docstring, "Held-out placements").
EVAL_SEED_BASE = 1_000_000
SPLITS = ("train", "eval")
#: The robot type written into the data set's metadata.
ROBOT_TYPE = "homiebot_fetch_class"
#: The file of per-episode metadata, relative to the data set's root.
EPISODES_FILE = "meta/homiebot_episodes.jsonl"
#: How many of Go to's poses, best first, a start pose is drawn from; and how far it is shifted and turned.
START_POSES = 4
START_JITTER_M = 0.05
START_JITTER_RAD = 0.2
#: An execution shorter than this many frames is no demonstration (a refusal, or a failure after a base move alone:
#: the Pick found no grasp from the new pose either): its seed is skipped.
MIN_FRAMES = 5
#: Seeds tried per episode asked for, at most (skipped seeds: module docstring), plus a constant.
SEED_BUDGET = 3
#: The suite whose tasks give the scenes and the Pick targets.
SUITE = "emmoe100"



class SkillDataError(ValueError):
    """A skill data set cannot be recorded as asked (one line for the user)."""


def split_of(seed: int) -> str:
    """The split a seed belongs to (module docstring, "Held-out placements")."""
    if seed < 0:
        raise SkillDataError(f"seeds are >= 0, not {seed}")
    return "eval" if seed >= EVAL_SEED_BASE else "train"


def seed_problem(seed: int, split: str) -> str | None:
    """Why ``seed`` cannot start ``split``'s episodes, or None."""
    if seed < 0:
        return f"seeds are >= 0, not {seed}"
    if split_of(seed) == split:
        return None
    kind = "an evaluation" if split == "train" else "a training"
    rule = f"training seeds are < {EVAL_SEED_BASE}" if split == "train" else f"evaluation seeds are >= {EVAL_SEED_BASE}"
    return f"seed {seed} is {kind} seed, not one of --split {split} ({rule})"


def free_seeds(first: int, split: str, skipped: list[int]) -> Iterator[int]:
    """``split``'s seeds from ``first`` up, without the scene seeds an evaluation plays (module docstring, "Scene seeds
    an evaluation plays are skipped"); each of those is appended to ``skipped`` as it is passed. Ends where the split
    does. Asks the reserved table only: no scene is built."""
    reserved = reserved_seeds()
    seed = first
    while split_of(seed) == split:
        if seed in reserved:
            skipped.append(seed)
        else:
            yield seed
        seed += 1


def seed_ranges(seeds: Sequence[int]) -> str:
    """``0-9, 12, 20-21``: sorted seeds as runs of consecutive numbers."""
    runs: list[list[int]] = []
    for seed in sorted(seeds):
        if runs and seed == runs[-1][1] + 1:
            runs[-1][1] = seed
        else:
            runs.append([seed, seed])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def first_seed_of(split: str) -> int:
    if split not in SPLITS:
        raise SkillDataError(f"unknown split {split!r}; use {' or '.join(SPLITS)}")
    return EVAL_SEED_BASE if split == "eval" else 0


def require_lerobot() -> Any:
    """LeRobot's ``LeRobotDataset``, or :class:`SkillDataError` saying how to get it."""
    try:
        from lerobot.datasets.lerobot_dataset import LeRobotDataset
    except ImportError as err:
        raise SkillDataError(
            f"recording skill data needs LeRobot (lerobot[dataset]==0.6.1, Python >= 3.12), which this Python cannot "
            f"import ({err}); see docs/skill-data.md"
        ) from None
    return LeRobotDataset


def emmoe_code(action: Action, result: SkillResult) -> ErrorCode:
    """The EMMOE code the executor answers this one execution's outcome with once its tries are spent
    (homiebot/executor/executor.py: a refusal repeats its pre-check's code; a Put that lost the object is E2; any
    other failure is E1 after the third try)."""
    status = result.status
    if status is SkillStatus.SUCCESS:
        return ErrorCode.OK
    refusals = {
        SkillStatus.TOO_FAR: ErrorCode.D1, SkillStatus.TOO_CLOSE: ErrorCode.D2, SkillStatus.HAND_FULL: ErrorCode.L1,
        SkillStatus.HAND_EMPTY: ErrorCode.L2, SkillStatus.NOT_INTERACTIVE: ErrorCode.L4, SkillStatus.NOT_FOUND: ErrorCode.F2,
    }
    if status in refusals:
        return refusals[status]
    if status is SkillStatus.CONTAINER_CLOSED and action is Action.PUT:
        return ErrorCode.L3
    if status is SkillStatus.DROPPED:
        return ErrorCode.E2
    return ErrorCode.E1


def image_names(skill: str, cameras: Sequence[str] | None = None, mark_target: bool = False) -> tuple[str, ...]:
    """The images a ``skill`` data set holds: Go to's head and goal cameras; for the arm's skills ``cameras`` (of
    :data:`~homiebot.sim.mujoco.skill_cameras.CAMERAS`, in that order; None: all), each ``<camera>_marked`` with
    ``mark_target`` (module docstring). :class:`SkillDataError` for a choice that is not there."""
    from homiebot.sim.mujoco.skill_cameras import CAMERAS, marked

    if skill == "go_to":
        if cameras is not None or mark_target:
            raise SkillDataError("--cameras and --mark-target are the arm skills' (pick, open, close); go_to records "
                                 "the head camera and the goal image")
        return GO_TO_CAMERAS
    chosen = CAMERAS if cameras is None else tuple(cameras)
    unknown = [c for c in chosen if c not in CAMERAS]
    if unknown or not chosen or len(set(chosen)) != len(chosen):
        raise SkillDataError(f"--cameras {','.join(chosen) or '(none)'}: give one or more of {', '.join(CAMERAS)}, "
                             f"each once")
    ordered = tuple(c for c in CAMERAS if c in chosen)
    return tuple(marked(c) for c in ordered) if mark_target else ordered


def features(size: int, video: bool, skill: str = "pick",
             cameras: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """The data set's features (LeRobot's ``features`` argument): the arm's for Pick, Open and Close, the base's for
    Go to (module docstring); ``cameras``: the images' names (:func:`image_names`; None: the skill's default)."""
    visual = "video" if video else "image"
    cameras = image_names(skill) if cameras is None else tuple(cameras)
    state, action = (GOAL_STATE, BASE_VELOCITY) if skill == "go_to" else (JOINTS, JOINTS)
    spec: dict[str, dict[str, Any]] = {
        f"observation.images.{cam}": {"dtype": visual, "shape": (size, size, 3), "names": ["height", "width", "channels"]}
        for cam in cameras
    }
    spec["observation.state"] = {"dtype": "float32", "shape": (len(state),), "names": list(state)}
    if skill != "go_to":
        spec[ENV_STATE] = {"dtype": "float32", "shape": (len(TARGET_STATE),), "names": list(TARGET_STATE)}
    spec["action"] = {"dtype": "float32", "shape": (len(action),), "names": list(action)}
    spec["next.success"] = {"dtype": "bool", "shape": (1,), "names": None}
    spec["next.done"] = {"dtype": "bool", "shape": (1,), "names": None}
    return spec


# ---------------------------------------------------------------------------------------------- episodes


@dataclass(frozen=True)
class EpisodePlan:
    """What a seed fixed (module docstring)."""

    seed: int
    skill: str
    task_id: str
    scene: str
    target: str
    task_text: str
    from_task: bool  # the target is one the task names (a Pick), or the piece it opens or closes


@dataclass
class EpisodeRecord:
    """One recorded (or skipped) seed: the sidecar's row."""

    seed: int
    split: str
    skill: str
    task_id: str
    scene: str
    target: str
    task: str
    target_from_task: bool
    start_pose: tuple[float, float, float] | None = None
    status: str = ""
    detail: str = ""
    success: bool = False
    emmoe_code: str = ""
    base_moved: bool = False
    base_jumps: list[int] = field(default_factory=list)
    frames: int = 0
    #: Per marked image, the share of the frames in which some pixel is the target's (module docstring).
    target_visible: dict[str, float] = field(default_factory=dict)
    sim_seconds: float = 0.0
    wall_seconds: float = 0.0
    episode_index: int | None = None  # None: skipped
    skipped: str = ""


class _FrameRecorder:
    """A PhysicalDriver step observer: every ``every`` physics steps, one frame (the cameras, the joints, the target's
    box and the commands: :class:`~homiebot.sim.mujoco.skill_observation.SkillObservation`)."""

    def __init__(self, cameras: Any, model: Any, every: int, names: tuple[str, ...] | None = None) -> None:
        import mujoco

        from homiebot.sim.mujoco.skill_cameras import CAMERAS

        self.cameras = cameras
        self.names = CAMERAS if names is None else names  # the images of a frame (image_names)
        self.model = model
        self._marks: frozenset[int] | None = None
        #: Per marked image, the frames in which the target was in view.
        self.visible: dict[str, int] = {}
        self.observation = SkillObservation(cameras, model)
        self.every = every
        self.active = False
        self.steps = 0
        self.frames: list[dict[str, np.ndarray]] = []
        prefix = robot_model.ROBOT_PREFIX
        self._base = np.array([model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, prefix + j)]
                               for j in robot_model.BASE_JOINTS])
        self.base_jumps: list[int] = []
        self._last_base: np.ndarray | None = None
        self._target: tuple[tuple[float, float, float], tuple[float, float, float]] | None = None

    def start(self, target_box: tuple[tuple[float, float, float], tuple[float, float, float]],
              target: str | None = None) -> None:
        """Record from now on; ``target_box``: the target's box (world frame) when the skill starts; ``target``: its
        name, whose geoms a marked image tints."""
        from homiebot.sim.mujoco.skill_cameras import object_geoms, unmarked

        self.active, self.steps, self.frames, self.base_jumps, self._last_base = True, 0, [], [], None
        self._target = target_box
        marking = [n for n in self.names if unmarked(n)[1]]
        self._marks = object_geoms(self.model, target) if marking and target is not None else None
        self.visible = dict.fromkeys(marking, 0)

    def __call__(self, model: Any, data: Any) -> None:
        if not self.active:
            return
        if self.steps % self.every == 0:
            base = data.qpos[self._base].copy()
            if self._last_base is not None and (np.hypot(*(base[:2] - self._last_base[:2])) > 0.01
                                                or abs(math.remainder(base[2] - self._last_base[2], 2 * math.pi)) > 0.01):
                self.base_jumps.append(len(self.frames))
            self._last_base = base
            frame = self.observation.observe(data, self._target, self.names, self._marks)
            for name, pixels in self.cameras.target_pixels.items():
                if name in self.visible and pixels > 0:
                    self.visible[name] += 1
            if self._target is None:
                frame[ENV_STATE] = np.zeros(len(TARGET_STATE), np.float32)
            frame["action"] = self.observation.command(data)
            self.frames.append(frame)
        self.steps += 1


def _task_node_names(keypaths: Sequence[Sequence[str]], action: str) -> set[str]:
    """The targets of ``action``'s nodes in a task's key paths ("[Pick, apple]" -> "apple")."""
    node = re.compile(rf"^\[\s*{re.escape(action)}\s*,\s*([^,\]]+?)\s*[,\]]", re.IGNORECASE)
    names = set()
    for path in keypaths:
        for text in path:
            found = node.match(text.strip())
            if found:
                names.add(found.group(1).strip().lower())
    return names


def _named_by(name: str, names: set[str]) -> bool:
    lowered = name.lower()
    return lowered in names or any(re.fullmatch(re.escape(n) + r"_\d+", lowered) for n in names)


def _reachable_objects(world: WorldState) -> list[str]:
    """Objects on or in furniture the robot can get at (not in a closed door or drawer), by name."""
    out = []
    for name, entity in sorted(world.entities.items()):
        if entity.kind is not EntityKind.OBJECT or entity.parent is None:
            continue
        parent = world.entities.get(entity.parent)
        if parent is None or parent.kind is not EntityKind.FURNITURE:
            continue
        if parent.articulated and not parent.is_open and entity.relation == "in":
            continue
        out.append(name)
    return out


def _articulated(spec: Any) -> list[str]:
    return sorted(f.name for f in spec.furniture if f.articulation is not None)


def _spec_with(spec: Any, piece: str, is_open: bool) -> Any:
    """The scene with ``piece``'s door or drawer closed or open at reset."""
    furniture = [
        f.model_copy(update={"articulation": f.articulation.model_copy(update={"open": is_open})})
        if f.name == piece and f.articulation is not None else f
        for f in spec.furniture
    ]
    return spec.model_copy(update={"furniture": furniture})


class SkillEpisodes:
    """Plans, sets up and runs one skill's episodes on one simulator (no LeRobot here: the writer is the caller's)."""

    def __init__(self, skill: str, size: int = DEFAULT_SIZE, images: tuple[str, ...] | None = None) -> None:
        """``images``: the arm skills' image names (:func:`image_names`; None: both cameras, plain)."""
        if skill not in SKILLS:
            raise SkillDataError(f"unknown skill {skill!r}; use one of {', '.join(SKILLS)}")
        self.images = image_names(skill) if images is None else images
        from homiebot.sim.mujoco.backend import MujocoSimulator
        from homiebot.tasks.suite import load_suite

        self.skill = skill
        self.action = SKILLS[skill]
        self.size = size
        self.tasks = list(load_suite(SUITE).tasks)
        # No first-person views: the recorder renders its own small cameras.
        self.sim = MujocoSimulator(render=False)
        self._cameras: Any = None
        self._model: Any = None
        self._recorder: _FrameRecorder | None = None

    def close(self) -> None:
        if self._cameras is not None:
            self._cameras.close()
            self._cameras = None
        self.sim.shutdown()

    # -------------------------------------------------------------- one seed

    def plan(self, seed: int) -> tuple[EpisodePlan, Any]:
        """The episode ``seed`` fixes and the scene to reset to (module docstring); the simulator is reset to it."""
        from homiebot.sim.scene import load_scene

        rng = np.random.default_rng([seed, 20261130])
        task = self.tasks[int(rng.integers(len(self.tasks)))]
        spec = load_scene(task.scene)
        if self.action is Action.GO_TO:
            self.sim.reset(spec, seed=seed)
            world = self.sim.state()
            reachable = set(_reachable_objects(world))
            places = [n for n, e in sorted(world.entities.items())
                      if e.kind is EntityKind.FURNITURE or (e.kind is EntityKind.OBJECT and n in reachable)]
            named = [n for n in places if _named_by(n, _task_node_names(task.keypaths, "Go to"))]
            pool = named or [n for n in places if world.entities[n].kind is EntityKind.FURNITURE]
            target = pool[int(rng.integers(len(pool)))]
            return EpisodePlan(seed, self.skill, task.id, task.scene, target, f"go to the {target}", bool(named)), spec
        if self.action is Action.PICK:
            self.sim.reset(spec, seed=seed)
            world = self.sim.state()
            candidates = _reachable_objects(world)
            named = [n for n in candidates if _named_by(n, _task_node_names(task.keypaths, "Pick"))]
            pool = named or candidates
            if not pool:
                raise EpisodeSkipped(f"no object the robot can get at in {task.scene}")
            target = pool[int(rng.integers(len(pool)))]
            text = f"pick up the {target}"
            return EpisodePlan(seed, self.skill, task.id, task.scene, target, text, bool(named)), spec
        pieces = _articulated(spec)
        if not pieces:
            raise EpisodeSkipped(f"no door or drawer in {task.scene}")
        in_task = [p for p in pieces if any(f"{p}]" in node for path in task.keypaths for node in path)]
        pool = in_task or pieces
        target = pool[int(rng.integers(len(pool)))]
        opening = self.action is Action.OPEN
        spec = _spec_with(spec, target, is_open=not opening)
        self.sim.reset(spec, seed=seed)
        text = f"{'open' if opening else 'close'} the {target}"
        return EpisodePlan(seed, self.skill, task.id, task.scene, target, text, bool(in_task)), spec

    def _start_pose(self, skills: Any, plan: EpisodePlan, rng: np.random.Generator) -> Pose2D:
        """Tuck the arm where the robot starts, then drive to a start pose near the target (module docstring)."""
        from homiebot.skills.physical import navigation
        from homiebot.skills.physical.skillset import MANIPULATION_GAPS

        skills.reset_arm()
        world = self.sim.state()
        near = plan.target
        if self.action is Action.GO_TO:  # Go to starts near some other furniture of the scene
            others = [n for n, e in sorted(world.entities.items()) if e.kind is EntityKind.FURNITURE and n != plan.target]
            near = others[int(rng.integers(len(others)))]
        poses = navigation.approach_poses(world, near, object_gaps=MANIPULATION_GAPS)
        if not poses:
            raise EpisodeSkipped(f"no pose near {near}")
        first = int(rng.integers(min(START_POSES, len(poses))))
        pose = poses[first]
        shift = rng.uniform(-START_JITTER_M, START_JITTER_M, 2)
        turn = float(rng.uniform(-START_JITTER_RAD, START_JITTER_RAD))
        jittered = Pose2D(pose.x + float(shift[0]), pose.y + float(shift[1]), pose.yaw + turn)
        for goal in (jittered, pose, *[p for i, p in enumerate(poses[:START_POSES]) if i != first]):
            if skills.driver.navigate_to_pose(goal).succeeded:
                return skills.driver.base_pose()
        raise EpisodeSkipped(f"the base reached none of the start poses near {near}")

    def _bind_cameras(self, skills: Any) -> _FrameRecorder:
        compiled, _ = self.sim.physics_handles()
        self._bind_cameras_model(compiled.model)  # a new scene is a new model
        assert self._recorder is not None
        skills.driver.step_observers[:] = [self._recorder]
        return self._recorder

    def run(self, seed: int) -> tuple[EpisodeRecord, list[dict[str, np.ndarray]]]:
        """Run ``seed``'s episode: its record and its frames (none when skipped: ``record.skipped`` says why)."""
        from homiebot.skills.physical import PhysicalSkillSet

        started = time.perf_counter()
        split = split_of(seed)
        try:
            plan, _spec = self.plan(seed)
        except EpisodeSkipped as skip:
            return EpisodeRecord(seed, split, self.skill, "", "", "", "", False, skipped=str(skip)), []
        record = EpisodeRecord(seed, split, self.skill, plan.task_id, plan.scene, plan.target, plan.task_text,
                               plan.from_task)
        articulation = "physical" if self.action in (Action.OPEN, Action.CLOSE) else None
        skills = PhysicalSkillSet(self.sim, seed=seed, articulation=articulation)
        rng = np.random.default_rng([seed, 20261130, 1])
        try:
            start = self._start_pose(skills, plan, rng)
        except EpisodeSkipped as skip:
            record.skipped = str(skip)
            return record, []
        record.start_pose = (round(start.x, 4), round(start.y, 4), round(start.yaw, 4))
        if self.action is Action.GO_TO:
            return self._go_to(skills, plan, record, started)
        recorder = self._bind_cameras(skills)
        sim_start = self.sim.sim_time
        box = self.sim.state().entities[plan.target]
        recorder.start((box.bbox_min, box.bbox_max), plan.target)
        try:
            result = skills.run(self.action, "oracle", plan.target)
        except mujoco.FatalError as err:  # the simulator gave up mid-skill: this seed is lost, the next resets it
            record.skipped = f"the simulator stopped: {err}"
            return record, []
        finally:
            recorder.active = False
            skills.driver.step_observers[:] = []
        end = skills.driver.base_pose()
        record.base_moved = math.hypot(end.x - start.x, end.y - start.y) > 0.01 or abs(
            math.remainder(end.yaw - start.yaw, 2 * math.pi)) > 0.01
        record.status = result.status.value
        record.detail = result.detail
        record.success = result.success and self._holds(plan)
        record.emmoe_code = emmoe_code(self.action, result).value
        record.frames = len(recorder.frames)
        record.target_visible = {n: round(k / max(1, len(recorder.frames)), 3) for n, k in recorder.visible.items()}
        record.base_jumps = list(recorder.base_jumps)
        record.sim_seconds = round(self.sim.sim_time - sim_start, 3)
        record.wall_seconds = round(time.perf_counter() - started, 3)
        if len(recorder.frames) < MIN_FRAMES:
            record.skipped = f"the skill ended before the arm moved: {result.status.value}: {result.detail}"
        return record, recorder.frames

    def _go_to(self, skills: Any, plan: EpisodePlan, record: EpisodeRecord,
               started: float) -> tuple[EpisodeRecord, list[dict[str, np.ndarray]]]:
        """Go to: the skill's NavigateToPose goals recorded as they are sent, the base's motion replayed at FPS
        (module docstring, "Go to")."""
        navigator = _RecordingNavigator(skills.driver, self.sim)
        driver, skills.driver = skills.driver, navigator  # the skill sends its goals through the recorder
        sim_start = self.sim.sim_time
        try:
            result = skills.run(Action.GO_TO, "oracle", plan.target)
        except mujoco.FatalError as err:
            record.skipped = f"the simulator stopped: {err}"
            return record, []
        finally:
            skills.driver = driver
        record.status = result.status.value
        record.detail = result.detail
        record.success = result.success
        record.emmoe_code = emmoe_code(Action.GO_TO, result).value
        record.sim_seconds = round(self.sim.sim_time - sim_start, 3)
        goal = (navigator.motions[-1][2] if result.success and navigator.motions
                else navigator.goals[0] if navigator.goals else None)
        frames = self._replay(navigator.motions, goal) if goal is not None else []
        end = skills.driver.base_pose()
        start = Pose2D(*record.start_pose) if record.start_pose else end
        record.base_moved = math.hypot(end.x - start.x, end.y - start.y) > 0.01
        record.frames = len(frames)
        record.wall_seconds = round(time.perf_counter() - started, 3)
        if len(frames) < MIN_FRAMES:
            record.skipped = f"the base hardly moved: {result.status.value}: {result.detail}"
        return record, frames

    def _replay(self, motions: list[tuple[Pose2D, list[tuple[float, float]], Pose2D, bool]],
                goal: Pose2D) -> list[dict[str, np.ndarray]]:
        """The base's motion at FPS: the head camera, the goal's pose in the base's frame, and the velocity to the next
        frame; a last frame at the end, at rest (module docstring, "Go to")."""
        import mujoco

        from homiebot.sim.mujoco.backend import DRIVE_SPEED, TURN_SPEED

        compiled, data = self.sim.physics_handles()
        model = compiled.model
        self._bind_cameras_model(model)
        cameras = self._cameras
        base = base_qpos(model)
        path = _motion_path(motions)
        if not path:
            return []
        durations = [abs(turn) / TURN_SPEED + length / DRIVE_SPEED for _, length, turn in path]
        total = float(sum(durations))
        saved = data.qpos.copy()

        def view(pose: Pose2D) -> np.ndarray:
            return head_at(cameras, model, data, base, pose)

        frames: list[dict[str, np.ndarray]] = []
        try:
            goal_image = view(goal)
            times = [k / FPS for k in range(int(math.floor(total * FPS)) + 1)]
            if total - times[-1] > 1e-6:
                times.append(total)
            for i, t in enumerate(times):
                pose = _pose_at(path, durations, t)
                following = _pose_at(path, durations, times[i + 1]) if i + 1 < len(times) else pose
                dt = (times[i + 1] - t) if i + 1 < len(times) else 1.0 / FPS
                ahead = np.array([following.x - pose.x, following.y - pose.y])
                velocity = (float(ahead @ (math.cos(pose.yaw), math.sin(pose.yaw))) / dt,
                            math.remainder(following.yaw - pose.yaw, 2 * math.pi) / dt)
                frames.append({
                    "observation.images.head": view(pose),
                    "observation.images.goal": goal_image,
                    "observation.state": np.array(goal_in_base(pose, goal), dtype=np.float32),
                    "action": np.array(velocity, dtype=np.float32),
                })
        finally:
            data.qpos[:] = saved
            mujoco.mj_forward(model, data)
        return frames

    def _bind_cameras_model(self, model: Any) -> None:
        from homiebot.sim.mujoco.skill_cameras import SkillCameras

        if model is not self._model:
            if self._cameras is not None:
                self._cameras.close()
            self._cameras = SkillCameras(model, self.size)
            self._model = model
            self._recorder = _FrameRecorder(self._cameras, model, physics_steps_per_frame(model),
                                            None if self.skill == "go_to" else self.images)

    def _holds(self, plan: EpisodePlan) -> bool:
        """The outcome as the world says it (the skill's own verdict is checked against it)."""
        world = self.sim.state()
        if self.action is Action.PICK:
            return world.held == plan.target
        piece = world.entities[plan.target]
        return bool(piece.is_open) == (self.action is Action.OPEN)


class _RecordingNavigator:
    """The physical driver, with every NavigateToPose goal and the motion it caused noted (Go to's recording)."""

    def __init__(self, driver: Any, sim: Any) -> None:
        self._driver = driver
        self._sim = sim
        self.goals: list[Pose2D] = []
        #: (start pose, the path's corners passed, end pose, reached) per goal that moved the base.
        self.motions: list[tuple[Pose2D, list[tuple[float, float]], Pose2D, bool]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._driver, name)

    def navigate_to_pose(self, goal: Pose2D) -> Any:
        start = self._driver.base_pose()
        corners = len(self._sim.travelled_path)
        result = self._driver.navigate_to_pose(goal)
        self.goals.append(goal)
        end = self._driver.base_pose()
        if math.hypot(end.x - start.x, end.y - start.y) > 1e-6 or abs(math.remainder(end.yaw - start.yaw, 2 * math.pi)) > 1e-6:
            self.motions.append((start, list(self._sim.travelled_path[corners:]), end, bool(result.succeeded)))
        return result


def _motion_path(motions: list[tuple[Pose2D, list[tuple[float, float]], Pose2D, bool]]
                 ) -> list[tuple[Pose2D, float, float]]:
    """The base's motion as the simulator's follower drives it (homiebot/sim/mujoco/backend.py, ``_follow``): at each
    corner it turns in place to the next segment's heading, then drives straight; a reached goal ends with a turn to
    its heading. Pieces of (pose before, distance driven, turn made first)."""
    pieces: list[tuple[Pose2D, float, float]] = []
    for start, corners, end, reached in motions:
        x, y, yaw = start.x, start.y, start.yaw
        points = list(corners)
        if not points or math.hypot(points[-1][0] - end.x, points[-1][1] - end.y) > 1e-6:
            points.append((end.x, end.y))  # a goal stopped short of its next corner
        for px, py in points:
            length = math.hypot(px - x, py - y)
            if length < 1e-6:
                continue
            heading = math.atan2(py - y, px - x)
            pieces.append((Pose2D(x, y, yaw), length, math.remainder(heading - yaw, 2 * math.pi)))
            x, y, yaw = px, py, heading
        if reached:
            turn = math.remainder(end.yaw - yaw, 2 * math.pi)
            if abs(turn) > 1e-6:
                pieces.append((Pose2D(x, y, yaw), 0.0, turn))
    return pieces


def _pose_at(pieces: list[tuple[Pose2D, float, float]], durations: list[float], t: float) -> Pose2D:
    """Where the base is ``t`` s into the motion (turning at TURN_SPEED, then driving at DRIVE_SPEED)."""
    from homiebot.sim.mujoco.backend import DRIVE_SPEED, TURN_SPEED

    if not pieces:
        raise ValueError("no motion")
    for (pose, length, turn), duration in zip(pieces, durations, strict=True):
        if t <= duration + 1e-9:
            turning = abs(turn) / TURN_SPEED
            if t <= turning:
                return Pose2D(pose.x, pose.y, pose.yaw + math.copysign(t * TURN_SPEED, turn))
            heading = pose.yaw + turn
            d = min((t - turning) * DRIVE_SPEED, length)
            return Pose2D(pose.x + d * math.cos(heading), pose.y + d * math.sin(heading), heading)
        t -= duration
    pose, length, turn = pieces[-1]
    heading = pose.yaw + turn
    return Pose2D(pose.x + length * math.cos(heading), pose.y + length * math.sin(heading), heading)


class EpisodeSkipped(Exception):
    """This seed's episode cannot start (module docstring): the recorder skips the seed, and so do the benchmarks that
    set up its episodes (benchmarks/bench_learned_pick.py, bench_learned_goto.py)."""


# ---------------------------------------------------------------------------------------------- the data set


@dataclass
class Summary:
    skill: str
    split: str
    out: str
    episodes: list[EpisodeRecord] = field(default_factory=list)
    skipped: list[EpisodeRecord] = field(default_factory=list)
    #: The scene seeds passed over because an evaluation plays them (:func:`free_seeds`): never run.
    reserved: list[int] = field(default_factory=list)
    seconds: float = 0.0
    bytes: int = 0
    video: bool = False

    def lines(self) -> list[str]:
        done = self.episodes
        ok = sum(r.success for r in done)
        frames = sum(r.frames for r in done)
        rate = 60.0 * len(done) / self.seconds if self.seconds else 0.0
        lines = [
            f"{len(done)} {self.skill} episodes ({self.split} seeds {done[0].seed}..{done[-1].seed}) in {self.out}: "
            f"{ok} succeeded ({100.0 * ok / len(done):.1f} %), {len(done) - ok} failed (marked), {frames} frames"
            if done else f"no {self.skill} episode recorded",
            f"{self.seconds:.1f} s ({rate:.2f} episodes/min), {self.bytes / 1e6:.2f} MB "
            f"({self.bytes / 1e6 / max(len(done), 1):.3f} MB per episode, {'video' if self.video else 'PNG images'})",
        ]
        ran = [r for r in self.skipped if r.status]  # the skill ran and ended before the arm moved: a failure too
        if ran:
            lines.append(f"the scripted skill succeeded on {ok} of {len(done) + len(ran)} seeds it ran on "
                         f"({100.0 * ok / (len(done) + len(ran)):.1f} %; {len(ran)} ended before the arm moved, not recorded)")
        seen: dict[str, list[float]] = {}
        for r in done:
            for name, share in r.target_visible.items():
                seen.setdefault(name, []).append(share * r.frames)
        if seen and frames:
            lines.append("the target in view: " + ", ".join(
                f"{name} in {100.0 * sum(v) / frames:.1f} % of the frames" for name, v in seen.items()))
        codes: dict[str, int] = {}
        for r in done:
            if not r.success:
                codes[r.emmoe_code] = codes.get(r.emmoe_code, 0) + 1
        if codes:
            lines.append("failures by EMMOE code: " + ", ".join(f"{c} {n}" for c, n in sorted(codes.items())))
        if self.skipped:
            lines.append(f"{len(self.skipped)} seeds skipped: " + "; ".join(f"{r.seed}: {r.skipped}" for r in self.skipped[:5]))
        table = reserved_seeds()
        suites = sorted({name for seed in self.reserved for name in table.get(seed, ())})
        lines.append(f"{len(self.reserved)} reserved scene seeds skipped (an evaluation plays them"
                     + (f": {', '.join(suites)}; seeds {seed_ranges(self.reserved)})" if self.reserved else ")"))
        return lines


def check_out(out: Path) -> Path:
    """Refuse an output that exists and is not an empty folder (one line, before any work)."""
    out = Path(out).expanduser().absolute()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SkillDataError(f"output {out} exists and is not an empty folder; choose another --out")
    return out


def record_skill_dataset(
    skill: str,
    episodes: int,
    out: str | Path,
    split: str = "train",
    first_seed: int | None = None,
    size: int = DEFAULT_SIZE,
    video: bool = False,
    progress: Callable[[EpisodeRecord], None] | None = None,
    cameras: Sequence[str] | None = None,
    mark_target: bool = False,
) -> Summary:
    """Record ``episodes`` episodes of ``skill`` from ``split``'s seeds (from ``first_seed``, default the split's
    first; the seeds an evaluation plays passed over: :func:`free_seeds`) into a new LeRobot data set at ``out``
    (module docstring). ``video``: MP4 (LeRobot's default, AV1) instead of PNG images in the parquet files.
    ``progress`` is called with each seed's record (skipped ones too; not with the reserved seeds passed over, which
    the summary lists). ``cameras`` and ``mark_target``: the arm skills' images (:func:`image_names`)."""
    if skill not in SKILLS:
        raise SkillDataError(f"unknown skill {skill!r}; use one of {', '.join(SKILLS)}")
    images = image_names(skill, cameras, mark_target)
    if episodes <= 0:
        raise SkillDataError(f"--count must be positive, not {episodes}")
    if size <= 0 or size > 256:
        raise SkillDataError(f"--size must be in 1..256, not {size}")
    seed = first_seed_of(split) if first_seed is None else first_seed
    problem = seed_problem(seed, split)
    if problem is not None:
        raise SkillDataError(problem)
    target = check_out(Path(out))
    LeRobotDataset = require_lerobot()
    from lerobot.utils.utils import SuppressProgressBars  # datasets' bar for every episode's parquet

    started = time.perf_counter()
    made = target.parent  # the outermost folder this call creates, removed again if it fails
    while not made.parent.exists():
        made = made.parent
    made = made if not made.exists() else target.parent
    created = not made.exists()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    root = staging / "dataset"
    summary = Summary(skill, split, str(target), video=video)
    chatty = logging.getLogger("lerobot")  # its video settings are logged at INFO even for PNG images
    level = chatty.level
    chatty.setLevel(max(level, logging.WARNING))
    try:
        with SuppressProgressBars():
            _record(LeRobotDataset, summary, root, skill, episodes, split, seed, size, video, progress, images)
        if target.exists():
            target.rmdir()  # empty (check_out)
        os.replace(root, target)
    except BaseException:
        if created:
            shutil.rmtree(made, ignore_errors=True)
        raise
    finally:
        chatty.setLevel(level)
        shutil.rmtree(staging, ignore_errors=True)
    summary.seconds = time.perf_counter() - started
    summary.bytes = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    return summary


def _record(LeRobotDataset: Any, summary: Summary, root: Path, skill: str, episodes: int, split: str, seed: int,
            size: int, video: bool, progress: Callable[[EpisodeRecord], None] | None,
            names: tuple[str, ...] | None = None) -> None:
    # video_backend: how this handle would decode; PyAV, which LeRobot also encodes with (torchcodec, its other
    # choice, needs an FFmpeg this Debian does not have, and its probe prints a traceback).
    names = image_names(skill) if names is None else names
    dataset = LeRobotDataset.create(repo_id=f"homiebot/{skill}", fps=FPS, features=features(size, video, skill, names),
                                    root=root, robot_type=ROBOT_TYPE, use_videos=video, video_backend="pyav")
    runner = SkillEpisodes(skill, size, names)
    try:
        budget = SEED_BUDGET * episodes + 10
        tried = 0
        # The reserved seeds are passed over here, untried: they do not count against the budget.
        seeds = free_seeds(seed, split, summary.reserved)
        while len(summary.episodes) < episodes:
            if tried >= budget:
                raise SkillDataError(f"only {len(summary.episodes)} of {episodes} episodes after {tried} seeds; "
                                     f"skipped: {summary.skipped[-1].skipped if summary.skipped else '?'}")
            played = next(seeds, None)
            if played is None:
                raise SkillDataError(f"the {split} seeds ran out (they end at {EVAL_SEED_BASE - 1})")
            record, frames = runner.run(played)
            tried += 1
            if record.skipped:
                summary.skipped.append(record)
            else:
                record.episode_index = len(summary.episodes)
                _write_episode(dataset, record, frames)
                summary.episodes.append(record)
            if progress is not None:
                progress(record)
    finally:
        runner.close()
    dataset.finalize()
    images = root / "images"  # LeRobot's scratch folder for PNG frames before they go into the parquet files
    if images.is_dir() and not any(p.is_file() for p in images.rglob("*")):
        shutil.rmtree(images)
    (root / EPISODES_FILE).write_text("".join(json.dumps(asdict(r)) + "\n" for r in summary.episodes))


def _write_episode(dataset: Any, record: EpisodeRecord, frames: list[dict[str, np.ndarray]]) -> None:
    last = len(frames) - 1
    for i, frame in enumerate(frames):
        dataset.add_frame({
            **frame,
            "next.success": np.array([record.success and i == last]),
            "next.done": np.array([i == last]),
            "task": record.task,
        })
    dataset.save_episode(parallel_encoding=False)
