"""HomieBot's episode loop in the core: instruction -> planner -> executor -> skills -> simulator -> feedback.

One round (EMMOE appendix D's main loop and appendix E.1's executor loop, in one process):

1. render the four first-person views (when ``config.render``) and build the instruction;
2. ask the planner; parse its answer (appendix D pattern, appendix H.1 fallback);
3. an unparseable answer gets F1 format feedback; ``[End]`` ends the episode; anything else goes to the
   :class:`~homiebot.executor.executor.Executor` (checks, three tries, skills, simulator);
4. the feedback goes back into the session (inventory, history, conversation).

Until the planner answers ``[End]`` or ``config.max_rounds`` (20) rounds have run. With a task the final
state is checked against its goal (:attr:`Trajectory.goal_satisfied`), counting as "opened" every
furniture that was open in any state the loop observed (the start and after every round), which is what
``inspected`` conditions ask.

Decisions:

* ``seed`` is the run index on top of the task's seed: the scene is reset with ``task.seed + seed``
  (``TaskSpec.seed`` is run 0's seed), or with ``seed`` for a free-text instruction.
  :attr:`Trajectory.seed` stores the argument, so ``run_episode(..., seed=trajectory.seed)`` replays it.
* A planner or simulator exception does not escape: the episode stops, :attr:`Trajectory.error` says
  where and why, and the record (if any) is still written with that error. Anything else that escapes
  (``KeyboardInterrupt``, a recording failure) aborts the record (nothing half-written is left) and
  propagates.
* The images of round N are the views the planner saw when it chose subtask N (EMMOE's
  ``subtaskN_front.png`` ...).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from homiebot.agent.observers import EpisodeObserver, notify_end, notify_round, notify_start
from homiebot.agent.session import PlannerSession
from homiebot.eval.goals import goal_satisfied
from homiebot.eval.tasks import TaskSpec
from homiebot.executor.executor import Executor, ExecutorConfig, SkillRunner
from homiebot.perception.grounding import Grounder
from homiebot.planner.base import Planner
from homiebot.sim.base import Simulator
from homiebot.sim.scene import SceneSpec
from homiebot.skills import SkillSet
from homiebot.types import (
    EMMOE_ACTIONS,
    EMMOE_MODELS,
    EntityKind,
    ErrorCode,
    Feedback,
    Observation,
    PlannerOutput,
    RoundRecord,
    Subtask,
    Trajectory,
    WorldState,
)

if TYPE_CHECKING:
    from homiebot.data.record import EpisodeRecorder

log = logging.getLogger(__name__)

#: Pixels an instance needs in one view to count as seen (the random baseline uses the same bar).
VISIBLE_MIN_PIXELS = 20

#: Called after every round with the round and the round limit (a progress bar, a log line).
ProgressCallback = Callable[[RoundRecord, int], None]


@runtime_checkable
class PerceptionHook(Protocol):
    """What the loop needs from perception (``homiebot.perception.world_model.WorldModel`` fits): fuse each
    observation, update after successful actions, describe the world, list the grounded names, ground."""

    def observe(self, observation: Observation, state: WorldState) -> Any: ...

    def record_action(self, action: Any, target: str | None, place: str | None = None,
                      state: WorldState | None = None) -> Any: ...

    def describe(self) -> str: ...

    def observed_targets(self) -> tuple[str, ...]: ...

    def grounder(self) -> Grounder: ...


#: Builds the episode's perception after the reset: ``(scene spec, initial state) -> hook``.
PerceptionFactory = Callable[[SceneSpec, WorldState], PerceptionHook]


@dataclass(frozen=True)
class EpisodeConfig:
    """How an episode runs. Defaults are EMMOE's (20 rounds, window of 3, the paper's lists)."""

    max_rounds: int = 20
    history_window: int = 3
    render: bool = True  # render the four views every round (the planner's images and the record's)
    actions: tuple[str, ...] = EMMOE_ACTIONS
    models: tuple[str, ...] = EMMOE_MODELS
    model_descriptions: Mapping[str, str] | None = None
    strict_models: bool = False  # see homiebot.executor.executor (model must serve the action)
    max_tries: int = 3
    far_threshold_m: float = 2.0
    near_threshold_m: float = 0.1
    extras: Mapping[str, Any] = field(default_factory=dict)  # passed to every PlanRequest

    def __post_init__(self) -> None:
        if self.max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1, got {self.max_rounds}")

    def new_session(self, instruction: str, planner: Planner) -> PlannerSession:
        """The HLP session of one episode with this configuration (shared by both wirings)."""
        return PlannerSession(
            instruction,
            planner,
            actions=self.actions,
            models=self.models,
            model_descriptions=dict(self.model_descriptions) if self.model_descriptions else None,
            max_rounds=self.max_rounds,
            history_window=self.history_window,
        )

    def executor_config(self) -> ExecutorConfig:
        return ExecutorConfig(
            actions=self.actions,
            models=self.models,
            max_tries=self.max_tries,
            far_threshold_m=self.far_threshold_m,
            near_threshold_m=self.near_threshold_m,
            strict_models=self.strict_models,
        )


class EpisodeSetupError(ValueError):
    """The episode cannot start: no instruction, no scene, or a planner that cannot take this input."""


def open_furniture(state: WorldState) -> set[str]:
    """Furniture open in ``state`` (every one seen open counts as opened for ``inspected`` goals)."""
    return {n for n, e in state.entities.items() if e.kind is EntityKind.FURNITURE and e.is_open}


def append_round(
    trajectory: Trajectory,
    session: PlannerSession,
    instruction: str,
    output: PlannerOutput,
    feedback: Feedback,
    inventory_before: tuple[str, ...],
    path_length: float,
    timings: dict[str, float],
    grounded: Subtask | None = None,
) -> RoundRecord:
    """Record a finished round in the session and the trajectory (shared by both wirings)."""
    session.record(output, feedback)
    record = RoundRecord(
        index=session.round,
        instruction=instruction,
        output=output,
        feedback=feedback,
        inventory_before=inventory_before,
        path_length=path_length,
        timings=timings,
        grounded=grounded,
    )
    trajectory.rounds.append(record)
    trajectory.path_length += path_length
    if feedback.code is not ErrorCode.OK:
        log.info("round %d %s -> %s %s", record.index, record.subtask_text, feedback.code.value, feedback.message)
    return record


def run_episode(
    sim: Simulator,
    planner: Planner,
    *,
    task: TaskSpec | None = None,
    instruction: str | None = None,
    scene: str | None = None,
    seed: int = 0,
    config: EpisodeConfig | None = None,
    recorder: EpisodeRecorder | None = None,
    progress: ProgressCallback | None = None,
    grounder: Grounder | None = None,
    skills: SkillRunner | Callable[[Simulator, int], SkillRunner] | None = None,
    perception: PerceptionFactory | None = None,
    observers: Sequence[EpisodeObserver] = (),
) -> Trajectory:
    """Run one episode and return its trajectory (and write its record when ``recorder`` is given).

    ``skills``: a skill runner, or a factory ``(sim, scene_seed) -> runner`` (for seeded execution noise);
    default: a noiseless :class:`homiebot.skills.SkillSet` over ``sim``.
    ``perception``: a factory of a :class:`PerceptionHook`; with it the executor grounds through perception
    (F2 for what it does not know), every request carries its grounded names and (unless its config says
    ``describe_world=False``) its world description, and it observes every rendered round.
    """
    config = config or EpisodeConfig()
    if task is not None:
        instruction = instruction or task.instruction
        scene = scene or task.scene
        scene_seed = task.seed + seed
    else:
        scene_seed = seed
    if not instruction:
        raise EpisodeSetupError("no instruction: give a task or an instruction")
    if not scene:
        raise EpisodeSetupError("no scene: give a task or a scene name")
    if task is None and not planner.accepts_free_text:
        raise EpisodeSetupError(f"planner {planner.name!r} needs a task with a goal specification, not free text")

    started = time.perf_counter()
    trajectory = Trajectory(
        task_id=task.id if task is not None else None,
        instruction=instruction,
        scene=scene,
        seed=seed,
        planner=planner.name,
    )
    if recorder is not None:
        recorder.start(trajectory, scene_seed=scene_seed, config=config)
    try:
        _run(sim, planner, task, instruction, scene, scene_seed, config, recorder, progress, grounder, skills,
             perception, trajectory, observers)
    except BaseException:
        # Interrupted, or a failure outside the planner/simulator calls (e.g. the disk filled up while
        # recording): drop the partial record and let the caller see the exception.
        if recorder is not None:
            recorder.abort()
        raise
    trajectory.wall_time_s = time.perf_counter() - started
    if recorder is not None:
        topdown = None
        try:
            topdown = sim.render_topdown()
        except Exception as err:  # a missing map must not lose the episode
            log.warning("top-down map not rendered: %s", err)
        recorder.finish(trajectory, topdown=topdown)
    return trajectory


def _run(
    sim: Simulator,
    planner: Planner,
    task: TaskSpec | None,
    instruction: str,
    scene: str,
    scene_seed: int,
    config: EpisodeConfig,
    recorder: EpisodeRecorder | None,
    progress: ProgressCallback | None,
    grounder: Grounder | None,
    skills: SkillRunner | Callable[[Simulator, int], SkillRunner] | None,
    perception: PerceptionFactory | None,
    trajectory: Trajectory,
    observers: Sequence[EpisodeObserver],
) -> None:
    try:
        observation: Observation | None = sim.reset(scene, seed=scene_seed)
        initial = sim.state()
        scene_spec = sim.scene_spec()
    except Exception as err:
        log.exception("simulator reset failed")
        trajectory.error = f"simulator reset failed for scene {scene!r}: {err}"
        notify_end(observers, trajectory, None)
        return
    if not config.render:
        observation = None
    notify_start(observers, trajectory, initial, observation)
    world_model = perception(scene_spec, initial) if perception is not None else None
    describe_world = bool(getattr(getattr(world_model, "config", None), "describe_world", True))
    # Optional (WorldModel has it): the names perception knows instances by, for a privileged planner to speak.
    perceived_names = getattr(world_model, "perceived_names", None) if getattr(planner, "privileged", False) else None
    if world_model is not None:
        grounder = world_model.grounder()
        if observation is not None:
            world_model.observe(observation, initial)
    opened = open_furniture(initial)
    if skills is None:
        # The skill layer, noiseless: model names are checked against the skills that serve them.
        skills = SkillSet(sim, noise=None, seed=scene_seed)
    elif callable(skills) and not isinstance(skills, SkillRunner):
        skills = skills(sim, scene_seed)
    executor = Executor(sim, grounder=grounder, config=config.executor_config(), skills=skills)  # type: ignore[arg-type]
    session = config.new_session(instruction, planner)
    planner.reset(instruction, seed=scene_seed)
    # Extras every planner receives: the round limit, the scene spec (object kinds for baselines such as the
    # random planner; the expert's receptacle facts) and the current observation (its segmentation tells a
    # baseline what is visible). Model backends build their prompts from the request's text and images only.
    extras: dict[str, Any] = {"max_rounds": config.max_rounds, **config.extras, "scene": scene_spec}
    goal = task.goal if task is not None else None

    state = initial
    # Without a perception hook, the names grounded so far are the instances the views' segmentation has
    # shown (privileged panoptic perception): what constrained decoding lets a planner name.
    seen: set[str] = set()
    while not session.done:
        if world_model is None and observation is not None:
            seen.update(observation.visible_instances(VISIBLE_MIN_PIXELS))
        round_start = time.perf_counter()
        timings: dict[str, float] = {}
        images = observation.images() if observation is not None else []
        request = session.make_request(
            images,
            world_state=state,
            goal=goal,
            grounded_targets=world_model.observed_targets() if world_model is not None else tuple(sorted(seen)),
            perceived_names=perceived_names(state) if perceived_names is not None else None,
            extras={**extras, "observation": observation},
        )
        if world_model is not None and describe_world:
            request.world_description = world_model.describe()
        t0 = time.perf_counter()
        try:
            raw = planner.plan(request)
        except Exception as err:
            log.exception("planner failed")
            trajectory.error = f"planner {planner.name!r} failed in round {session.round_index}: {err}"
            break
        timings["plan_s"] = time.perf_counter() - t0
        output = session.parse(raw)
        inventory_before = session.inventory
        path_length = 0.0
        report = None
        if output.subtask is None:
            feedback: Feedback = session.format_feedback(output)
        elif output.subtask.is_end:
            feedback = session.end_feedback()
        else:
            try:
                # ``state`` is current: nothing acted on the world since it was taken after the last round.
                report = executor.execute_detailed(output.subtask, output.model, session.inventory, state)
            except Exception as err:
                log.exception("executor failed")
                trajectory.error = f"execution of {output.subtask.text()} failed in round {session.round_index}: {err}"
                break
            feedback = report.feedback
            path_length = report.path_length
            timings.update(report.timings)
        grounded = None
        if world_model is not None and report is not None and report.target is not None and output.subtask is not None:
            grounded = Subtask(output.subtask.action, report.target, report.place)
        record = append_round(
            trajectory, session, request.instruction, output, feedback, inventory_before, path_length, timings,
            grounded,
        )
        if recorder is not None:
            t0 = time.perf_counter()
            recorder.add_round(record, observation)
            timings["record_s"] = time.perf_counter() - t0
        seen_views = observation
        try:
            state = sim.state()
            opened |= open_furniture(state)
            if world_model is not None and report is not None and feedback.success:
                world_model.record_action(report.action, report.target, report.place, state)
            if config.render and not session.done:
                t0 = time.perf_counter()
                observation = sim.observe()
                timings["render_s"] = time.perf_counter() - t0
                if world_model is not None:
                    t0 = time.perf_counter()
                    world_model.observe(observation, state)
                    timings["perceive_s"] = time.perf_counter() - t0
        except Exception as err:
            log.exception("simulator failed")
            trajectory.error = f"simulator failed after round {record.index}: {err}"
            break
        timings["round_s"] = time.perf_counter() - round_start
        notify_round(observers, record, seen_views, state)
        if progress is not None:
            progress(record, config.max_rounds)
    trajectory.ended = session.ended
    if task is not None and trajectory.error is None:
        trajectory.goal_satisfied = goal_satisfied(task.goal, initial, state, opened)
    notify_end(observers, trajectory, state)
    if recorder is not None:
        recorder.note(opened=sorted(opened), conversation=session.conversation.to_paper_json(),
                      system_prompt=session.system_prompt)
