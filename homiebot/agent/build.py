"""One build path: a run configuration (:class:`~homiebot.config.run.RunConfig`) to the parts of an episode.

:func:`build_episode` makes the simulator, the planner, the loop's and the executor's configuration, the skill
layer (with its seeded noise), the perception hook, the record and, from the caller's ``judge``, the observer
that keeps the episode's states and judges it (the one verdict, docs/records.md). Every episode is built here:
``homie run``, the evaluation workers, PARTNR's scored episodes, data collection and DAgger, the collaboration
evaluation's pair and single episodes, ``homie play`` and the ROS 2 planner node's graph episodes. A caller that
keeps a simulator or a planner across episodes (an evaluation worker) hands them in, and they are then its to
close.

**Two agents.** A configuration with a ``partner`` (PARTNR's human in lock-step rounds) is a pair: the build
gives each agent its executor settings from its role (:mod:`homiebot.executor.roles`: the robot without the
human-only actions, both with Wait), makes the simulator with the human in it (``simulator.human``) and runs the
loop with the partner's slot. The pair's *planners* come from the caller, typed (``planner`` and ``partner``,
both :class:`~homiebot.planner.base.Planner`), and are not built here from the configuration: a pair's planners
answer for each other (one centralized brain behind both agents, PARTNR's expert restricted to its share of the
task, a person at the keyboard) and are made in :mod:`homiebot.multiagent.pair` and :mod:`homiebot.play`, which
sit above the loop; the loop's layer may not import them (docs/architecture.md, "Layers"), and building them
here by name would put the pair's logic under the loop. So the configuration names the pair (its ``partner``
section, for the record and for a reader), the caller makes its planners, and everything else of the episode is
made here, one way for one agent and two.

**Two wirings.** With ``backend`` (the ROS 2 planner node's clients of the sim bridge and the executor node) the
episode runs the same loop over that backend instead of a simulator in this process; the simulator, the skills
and perception are then the graph's, and only the planner, the loop's configuration and the record are made here.

Checks that need no simulator or model (an unknown task, scene or planner, a planner that needs a goal given free
text, a pair without its planners) raise :class:`EpisodeBuildError` with one line before anything is made or
written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from homiebot.agent.knowledge import PerceptionFactory, PerceptionHook
from homiebot.agent.loop import (
    AgentSlot,
    EpisodeBackend,
    EpisodeConfig,
    EpisodeOutcome,
    EpisodeSetupError,
    OutputCallback,
    ProgressCallback,
    run_episode,
    run_over_backend,
)
from homiebot.agent.observers import EpisodeObserver
from homiebot.config import ArticulationMode, PerceptionMode, SkillsMode
from homiebot.config.run import RunConfig, SimulatorConfig, SkillsConfig
from homiebot.data.record import EpisodeRecorder
from homiebot.executor.executor import ExecutorConfig, SkillRunner
from homiebot.executor.roles import AGENT_NAMES, role_executor
from homiebot.planner.base import Planner
from homiebot.planner.registry import PlannerError, build_planner, free_text_planners, planner_class
from homiebot.sim.base import Simulator, available_backends, make_simulator
from homiebot.sim.scene import SceneSpec
from homiebot.tasks.suite import TaskError, TaskSpec, get_task, task_actions

if TYPE_CHECKING:
    from homiebot.skills.learned_skill import LearnedSkill
from homiebot.types import Trajectory, WorldState

#: A skill layer per episode, seeded with the episode's scene seed (what makes noisy episodes repeatable).
SkillsFactory = Callable[[Simulator, int], SkillRunner]
#: Makes the observer that keeps a record's states and gives its verdict: from the record, the task and the
#: simulator (None over a graph backend).
Judge = Callable[[EpisodeRecorder, TaskSpec | None, Simulator | None], EpisodeObserver]


class EpisodeBuildError(ValueError):
    """The configuration names what does not exist or does not fit together; one line (bad input)."""


@dataclass
class Episode:
    """An episode's parts, made by :func:`build_episode`; :meth:`run` runs it once, :meth:`close` releases what
    the build made (a simulator or planner handed in stays open). ``simulator`` is None when the episode runs over
    another wiring's ``backend``; ``partner`` is a pair's second agent."""

    config: RunConfig
    task: TaskSpec | None
    simulator: Simulator | None
    planner: Planner
    loop: EpisodeConfig
    skills: SkillsFactory | None
    perception: PerceptionFactory | None
    recorder: EpisodeRecorder | None
    observers: tuple[EpisodeObserver, ...]
    first_observers: tuple[EpisodeObserver, ...] = ()
    partner: AgentSlot | None = None
    backend: EpisodeBackend | None = None
    owns_simulator: bool = True
    owns_planner: bool = True
    _closed: bool = field(default=False, repr=False)

    def run(self, progress: ProgressCallback | None = None) -> Trajectory:
        """Run the episode and return its trajectory."""
        return self.run_outcome(progress).trajectory

    def run_outcome(self, progress: ProgressCallback | None = None, *, on_output: OutputCallback | None = None,
                    always_observe: bool = False) -> EpisodeOutcome:
        """Run the episode: in this process (:func:`homiebot.agent.loop.run_episode`) or over the ``backend``
        (:func:`homiebot.agent.loop.run_over_backend`; ``on_output`` is told of every answer as it comes, and
        ``always_observe`` fetches the views every round whatever the planner reads, as a live view needs)."""
        task = self.task
        if self.backend is not None:
            return run_over_backend(
                self.backend,
                self.planner,
                task=task,
                instruction=self.config.instruction,
                scene=self.config.scene,
                seed=self.config.seed,
                config=self.loop,
                recorder=self.recorder,
                progress=progress,
                observers=self.observers,
                first_observers=self.first_observers,
                partner=self.partner,
                on_output=on_output,
                always_observe=always_observe,
            )
        if on_output is not None:
            raise ValueError("on_output is told of a graph episode's answers (build_episode(backend=...))")
        assert self.simulator is not None  # made by the build whenever there is no backend
        trajectory = run_episode(
            self.simulator,
            self.planner,
            task=task,
            instruction=self.config.instruction,
            scene=self.config.scene,
            seed=self.config.seed,
            config=self.loop,
            recorder=self.recorder,
            progress=progress,
            skills=self.skills,
            perception=self.perception,
            observers=self.observers,
            partner=self.partner,
            first_observers=self.first_observers,
        )
        return EpisodeOutcome(trajectory)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self.owns_simulator and self.simulator is not None:
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
    check_learned_skills(config.skills)
    return task


def check_learned_skills(config: SkillsConfig) -> None:
    """Refuse learned skill models that cannot serve (homiebot/skills/learned_skill.py), before any episode runs."""
    if not config.models:
        return
    from homiebot.skills.learned_skill import LearnedSkillError, check_skill_models

    try:
        check_skill_models(config.models)
    except LearnedSkillError as err:
        raise EpisodeBuildError(str(err)) from None


def build_simulator(config: SimulatorConfig) -> Simulator:
    """The simulator backend; MuJoCo renders only when asked and has PARTNR's human in the scene when asked (a
    plugin's simulator takes no options, and has no human)."""
    if config.backend == "mujoco":
        return make_simulator(config.backend, render=config.render, **({"human": True} if config.human else {}))
    if config.human:
        raise EpisodeBuildError(f"simulator.human: the {config.backend} simulator has no human partner")
    return make_simulator(config.backend)


def resolved_skills(config: SkillsConfig) -> SkillsConfig:
    """``config`` with the physical skills' Open/Close setting as the skill set will use it: the given one, or the
    skill set's default (``homiebot.skills.physical.skillset.ARTICULATION``, read now) when none was given. The
    record and ``eval.json`` keep this, so that a run started before the default changed is told apart from one
    after (docs/results/physical-articulation-2026-11-30.md). The oracle skills have no such setting."""
    if config.mode != SkillsMode.PHYSICAL or config.articulation is not None:
        return config
    from homiebot.skills.physical import skillset

    return config.model_copy(update={"articulation": ArticulationMode(skillset.ARTICULATION)})


def skills_factory(config: SkillsConfig) -> SkillsFactory:
    """Oracle or physical skills (``config.mode``) with the configured noise preset, seeded per episode with its
    scene seed."""
    from homiebot.skills import SkillSet, preset_name

    preset = preset_name(str(config.noise))

    if config.mode == SkillsMode.PHYSICAL:
        from homiebot.skills.physical import PhysicalSkillSet

        # Learned policies in model slots (--skill-model): loaded once, for every episode this factory makes.
        learned: dict[str, LearnedSkill] = {}

        def physical(sim: Simulator, scene_seed: int) -> SkillRunner:
            if config.models and not learned:
                from homiebot.skills.learned import SkillPolicyError
                from homiebot.skills.learned_skill import LearnedSkillError, load_learned_skills

                try:
                    learned.update(load_learned_skills(config.models))
                except (LearnedSkillError, SkillPolicyError) as err:
                    raise EpisodeBuildError(str(err)) from None
            try:
                return PhysicalSkillSet(sim, noise=preset, seed=scene_seed, learned=learned,
                                        articulation=config.articulation.value if config.articulation else None)
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


def agent_loop_configs(config: RunConfig, task: TaskSpec | None) -> tuple[EpisodeConfig, EpisodeConfig | None]:
    """The robot's loop configuration and, in a pair, the partner's: each agent's executor from its role
    (:func:`homiebot.executor.roles.role_executor`); without a partner, :func:`loop_config` and None."""
    base = loop_config(config, task)
    if config.partner is None:
        return base, None
    robot, human = AGENT_NAMES
    return (replace(base, executor=role_executor(robot, base.executor)),
            replace(base, executor=role_executor(human, base.executor)))


def build_episode(
    config: RunConfig,
    *,
    out: Path | None = None,
    task: TaskSpec | None = None,
    simulator: Simulator | None = None,
    planner: Planner | None = None,
    partner: Planner | None = None,
    backend: EpisodeBackend | None = None,
    recorder: EpisodeRecorder | None = None,
    observers: Sequence[EpisodeObserver] = (),
    first_observers: Sequence[EpisodeObserver] = (),
    judge: Judge | None = None,
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
    ``partner``: the partner's planner of a pair (``config.partner``; module docstring), made by the caller, who
    then hands in the robot's ``planner`` too; the build closes neither.
    ``backend``: run over another wiring (the ROS 2 graph's clients; module docstring) instead of a simulator.
    ``observers``: told of the episode besides the record's own (a live view); ``first_observers``: told before
    the record's own (one that adds a file to the record as the episode ends: ``homie play``'s ``play.json``).
    ``judge``: makes the observer that keeps the record's states and gives its verdict (the states recorder of
    :mod:`homiebot.eval.partnr.recording`: the suites' evaluation sits above the loop, so the caller hands it in);
    a record without one keeps no states and is judged by the goal check alone.
    """
    if config.partner is not None and (planner is None or partner is None):
        raise EpisodeBuildError("a two-agent run's planners are made by its caller (homiebot.multiagent.pair); "
                                "build_episode takes them as planner= and partner=")
    if partner is not None and config.partner is None:
        raise EpisodeBuildError("a partner planner needs the run configuration's partner section")
    if backend is not None and simulator is not None:
        raise EpisodeBuildError("an episode runs over a backend or a simulator, not both")
    if backend is not None and config.perception.mode != PerceptionMode.OFF:
        raise EpisodeBuildError(f"perception {config.perception.mode} runs in this process; over a graph backend "
                                "the graph's perception node serves it")
    task = check_episode(config, task, planner)
    if backend is None:
        # The skill set is made here: the record keeps the Open/Close setting it runs with (the graph's bridge
        # makes its own).
        config = config.model_copy(update={"skills": resolved_skills(config.skills)})
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
    owns_simulator = simulator is None and backend is None
    try:
        if simulator is None and backend is None:
            simulator = build_simulator(config.simulator)
    except BaseException:
        if owns_planner:
            planner.close()
        raise
    watchers = list(observers)
    if recorder is not None and judge is not None:
        watchers.append(judge(recorder, task, simulator))
    robot_loop, partner_loop = agent_loop_configs(config, task)
    slot = None if partner is None else AgentSlot(planner=partner, config=partner_loop, role=1, name=AGENT_NAMES[1])
    return Episode(
        config=config,
        task=task,
        simulator=simulator,
        planner=planner,
        loop=robot_loop,
        skills=skills_factory(config.skills),
        perception=perception_factory(config),
        recorder=recorder,
        observers=tuple(watchers),
        first_observers=tuple(first_observers),
        partner=slot,
        backend=backend,
        owns_simulator=owns_simulator,
        owns_planner=owns_planner,
    )

