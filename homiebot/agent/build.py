"""One build path: a run configuration (:class:`~homiebot.config.run.RunConfig`) to the parts of an episode.

:func:`build_episode` makes the simulator, the planner, the loop's and the executor's configuration, the skill
layer (with its seeded noise), the perception hook, the record and, from the caller's ``judge``, the observer
that keeps the episode's states and judges it (the one verdict, docs/records.md). ``homie run`` and the evaluation workers build their episodes
here; a caller that keeps a simulator or a planner across episodes (an evaluation worker) hands them in, and
they are then its to close.

Checks that need no simulator or model (an unknown task, scene or planner, a planner that needs a goal given free
text) raise :class:`EpisodeBuildError` with one line before anything is made or written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from homiebot.agent.knowledge import PerceptionFactory, PerceptionHook
from homiebot.agent.loop import EpisodeConfig, EpisodeSetupError, ProgressCallback, run_episode
from homiebot.agent.observers import EpisodeObserver
from homiebot.config import PerceptionMode, SkillsMode
from homiebot.config.run import RunConfig, SimulatorConfig, SkillsConfig
from homiebot.data.record import EpisodeRecorder
from homiebot.executor.executor import ExecutorConfig, SkillRunner
from homiebot.planner.base import Planner
from homiebot.planner.registry import PlannerError, build_planner, free_text_planners, planner_class
from homiebot.sim.base import Simulator, available_backends, make_simulator
from homiebot.sim.scene import SceneSpec
from homiebot.tasks.suite import TaskError, TaskSpec, get_task, task_actions
from homiebot.types import Trajectory, WorldState

#: A skill layer per episode, seeded with the episode's scene seed (what makes noisy episodes repeatable).
SkillsFactory = Callable[[Simulator, int], SkillRunner]


class EpisodeBuildError(ValueError):
    """The configuration names what does not exist or does not fit together; one line (bad input)."""


@dataclass
class Episode:
    """An episode's parts, made by :func:`build_episode`; :meth:`run` runs it once, :meth:`close` releases what
    the build made (a simulator or planner handed in stays open)."""

    config: RunConfig
    task: TaskSpec | None
    simulator: Simulator
    planner: Planner
    loop: EpisodeConfig
    skills: SkillsFactory | None
    perception: PerceptionFactory | None
    recorder: EpisodeRecorder | None
    observers: tuple[EpisodeObserver, ...]
    owns_simulator: bool = True
    owns_planner: bool = True
    _closed: bool = field(default=False, repr=False)

    def run(self, progress: ProgressCallback | None = None) -> Trajectory:
        """Run the episode (:func:`homiebot.agent.loop.run_episode`) and return its trajectory."""
        return run_episode(
            self.simulator,
            self.planner,
            task=self.task,
            instruction=self.config.instruction,
            scene=self.config.scene,
            seed=self.config.seed,
            config=self.loop,
            recorder=self.recorder,
            progress=progress,
            skills=self.skills,
            perception=self.perception,
            observers=self.observers,
        )

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self.owns_simulator:
                self.simulator.shutdown()
        finally:
            if self.owns_planner:
                self.planner.close()


def resolve_task(config: RunConfig) -> TaskSpec | None:
    """The built-in task the configuration names (None for a free-text instruction)."""
    if config.task is None:
        if config.instruction is None:
            raise EpisodeBuildError("give either a task or a free-text instruction (with a scene)")
        return None
    try:
        return get_task(config.task)
    except TaskError as err:
        raise EpisodeBuildError(str(err)) from None


def check_episode(config: RunConfig, task: TaskSpec | None = None, planner: Planner | None = None) -> TaskSpec | None:
    """What :func:`build_episode` checks before it makes anything: the task, the scene, the simulator backend and
    that the planner is installed and takes a free-text instruction when there is no task. A ``planner`` handed in
    is checked itself and need not be installed (data collection's perturbed expert is a training planner that the
    registry does not build). Returns the task."""
    if task is None:
        task = resolve_task(config)
    backend = config.simulator.backend
    if backend == "mujoco":
        from homiebot.sim.scene import SceneError, load_scene

        try:
            load_scene(config.scene or (task.scene if task is not None else ""))
        except SceneError as err:
            raise EpisodeBuildError(str(err)) from None
    elif backend not in available_backends():
        raise EpisodeBuildError(f"unknown simulator backend {backend!r}; available: {', '.join(available_backends())}")
    if planner is not None:
        takes_free_text = planner.accepts_free_text
    else:
        try:
            takes_free_text = planner_class(config.planner.name).accepts_free_text
        except (PlannerError, ImportError) as err:
            raise EpisodeBuildError(str(err)) from None
    if task is None and not takes_free_text:
        takers = ", ".join(free_text_planners()) or "none installed"
        raise EpisodeBuildError(
            f"planner {config.planner.name!r} needs a built-in task with a goal specification (use --task ID); "
            f"planners that take a free-text instruction: {takers}"
        )
    return task


def build_simulator(config: SimulatorConfig) -> Simulator:
    """The simulator backend; MuJoCo renders only when asked (a plugin's simulator takes no options)."""
    if config.backend == "mujoco":
        return make_simulator(config.backend, render=config.render)
    return make_simulator(config.backend)


def skills_factory(config: SkillsConfig) -> SkillsFactory:
    """Oracle or physical skills (``config.mode``) with the configured noise preset, seeded per episode with its
    scene seed."""
    from homiebot.skills import SkillSet, preset_name

    preset = preset_name(str(config.noise))

    if config.mode == SkillsMode.PHYSICAL:
        from homiebot.skills.physical import PhysicalSkillSet

        def physical(sim: Simulator, scene_seed: int) -> SkillRunner:
            try:
                return PhysicalSkillSet(sim, noise=preset, seed=scene_seed)
            except TypeError as err:
                raise EpisodeBuildError(str(err)) from None

        return physical

    def skills(sim: Simulator, scene_seed: int) -> SkillRunner:
        return SkillSet(sim, noise=preset, seed=scene_seed)

    return skills


def perception_factory(config: RunConfig) -> PerceptionFactory | None:
    """The world-graph hook of :mod:`homiebot.perception` (None without perception)."""
    if config.perception.mode == PerceptionMode.OFF:
        return None
    from homiebot.perception.world_model import PerceptionConfig, WorldModel

    settings = PerceptionConfig.model_validate(
        {"builder": str(config.perception.mode), "describe_world": config.perception.describe_world}
    )

    def world_model(spec: SceneSpec | None, state: WorldState) -> PerceptionHook:
        if spec is None:
            raise EpisodeSetupError(f"perception {config.perception.mode} needs the scene's specification, "
                                    f"which the {config.simulator.backend} simulator does not give")
        return WorldModel(spec, state, config=settings)

    return world_model


def loop_config(config: RunConfig, task: TaskSpec | None) -> EpisodeConfig:
    """The loop's (and through it the executor's) configuration: EMMOE's limits, the task's action list."""
    checks = config.executor
    return EpisodeConfig(
        max_rounds=config.max_rounds,
        history_window=config.history_window,
        render=config.simulator.render,
        executor=ExecutorConfig(
            actions=task_actions(task),
            strict_models=checks.strict_models,
            max_tries=checks.max_tries,
            far_threshold_m=checks.far_threshold_m,
            near_threshold_m=checks.near_threshold_m,
        ),
    )


def build_episode(
    config: RunConfig,
    *,
    out: Path | None = None,
    task: TaskSpec | None = None,
    simulator: Simulator | None = None,
    planner: Planner | None = None,
    recorder: EpisodeRecorder | None = None,
    observers: Sequence[EpisodeObserver] = (),
    judge: Callable[[EpisodeRecorder, TaskSpec | None, Simulator], EpisodeObserver] | None = None,
) -> Episode:
    """The parts of the episode ``config`` describes.

    ``out``: the record's folder (an :class:`~homiebot.data.record.EpisodeRecorder` keeping the views when the
    simulator renders, unless ``config.recording.images`` says); or ``recorder``: one made by the caller.
    ``task``: the task's specification when the caller holds it (an evaluation's snapshot); else ``config.task``
    is looked up. ``simulator`` / ``planner``: kept across episodes by the caller, who closes them; the record
    keeps ``config.planner`` as the planner's configuration, so a planner handed in with a record must be that one
    (an evaluation's guarded planner is; a planner the registry does not build, data collection's, is described by
    its own :class:`~homiebot.config.planners.PlannerConfig` subclass, which ``homie run --config`` then refuses by
    name).
    ``observers``: told of the episode besides the record's own (a live view).
    ``judge``: makes the observer that keeps the record's states and gives its verdict (the states recorder of
    :mod:`homiebot.eval.partnr.recording`: the suites' evaluation sits above the loop, so the caller hands it in);
    a record without one keeps no states and is judged by the goal check alone.
    """
    task = check_episode(config, task, planner)
    if recorder is None and out is not None:
        images = config.recording.images if config.recording.images is not None else config.simulator.render
        recorder = EpisodeRecorder(out, images=images, video=config.recording.video and config.simulator.render)
    if recorder is not None:
        recorder.run = config.dump()  # the record's summary keeps the setting it ran with (homie run --config)
    owns_planner = planner is None
    if planner is None:
        try:
            planner = build_planner(config.planner)
        except PlannerError as err:
            raise EpisodeBuildError(str(err)) from None
    owns_simulator = simulator is None
    try:
        simulator = simulator if simulator is not None else build_simulator(config.simulator)
    except BaseException:
        if owns_planner:
            planner.close()
        raise
    watchers = list(observers)
    if recorder is not None and judge is not None:
        watchers.append(judge(recorder, task, simulator))
    return Episode(
        config=config,
        task=task,
        simulator=simulator,
        planner=planner,
        loop=loop_config(config, task),
        skills=skills_factory(config.skills),
        perception=perception_factory(config),
        recorder=recorder,
        observers=tuple(watchers),
        owns_simulator=owns_simulator,
        owns_planner=owns_planner,
    )

