"""HomieBot's episode loop: instruction -> planner -> executor -> skills -> simulator -> feedback, written once.

One round (EMMOE appendix D's main loop and appendix E.1's executor loop):

1. build the request: the views fetched after the last round, the instruction, the world knowledge
   (:mod:`homiebot.agent.knowledge`);
2. ask the planner; parse its answer (appendix D pattern, appendix H.1 fallback);
3. an unparseable answer gets F1 format feedback; ``[End]`` ends the episode; anything else goes to the
   backend, which executes it (checks, three tries, skills, simulator) and reports feedback;
4. the feedback goes back into the session (inventory, history, conversation); the state after the round
   is read, the views fetched again (unless the episode is over), and the observers are told.

Until the planner answers ``[End]`` or ``config.max_rounds`` (20) rounds have run. With a goal the final
state is checked against it (:attr:`Trajectory.goal_satisfied`), counting as "opened" every furniture that
was open in any state the loop observed (the start and after every round), which is what ``inspected``
conditions ask.

The loop runs over an :class:`EpisodeBackend`: :class:`homiebot.agent.in_process.InProcessBackend` (the
simulator, the executor and the skills in this process; :func:`run_episode`) or the planner node's ROS 2
clients (:func:`run_over_backend`). Recording, live views and state files are
:mod:`homiebot.agent.observers`. docs/loop.md describes the design.

Decisions:

* ``seed`` is the run index on top of the task's seed: the scene is reset with ``task.seed + seed``
  (``TaskSpec.seed`` is run 0's seed), or with ``seed`` for a free-text instruction.
  :attr:`Trajectory.seed` stores the argument, so ``run_episode(..., seed=trajectory.seed)`` replays it.
* A planner or backend exception does not escape: the episode stops and :attr:`Trajectory.error` says
  where and why (a backend's ``TimeoutError`` also sets :attr:`EpisodeOutcome.timed_out`). Anything else
  that escapes (``KeyboardInterrupt``, an observer's failure such as a full disk while recording)
  propagates, and :func:`run_episode` drops the partial record.
* The views of round N are the ones the planner saw when it chose subtask N (EMMOE's
  ``subtaskN_front.png`` ...).
* A round that executed nothing (F1, End) changed nothing: its state is the one before it.

Two agents (PARTNR's robot and human, docs/collaboration.md): with a ``partner`` (:class:`AgentSlot`: the
human's planner and action list) the loop runs lock-step rounds: in every round the robot plans and acts, then
the human plans and acts on the world as the robot left it (each with its own session, views, state and world
knowledge; one shared world). An agent that answered ``[End]`` takes no more rounds; the episode ends when both
have ended or the round limit is reached. ``[Wait]`` (PARTNR's Wait tool) is a round that executes nothing. The
human's rounds are :attr:`Trajectory.partner_rounds`; observers that define ``on_partner_round`` get them. After
an agent's round that was not a navigation, the other agent's planner is told of it when it defines
``observe_partner(agent_name, subtask_text, feedback)`` (PARTNR's decentralized agents learn their partner's
non-navigation actions; a planner with ``hears_partner_navigation`` all of them), and at the start a planner
that defines ``meet_partner(agent_name, actions)`` learns the partner's action list. Without a partner nothing of this runs and the loop is the single-agent one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from numpy.typing import NDArray

from homiebot.agent.knowledge import (
    VISIBLE_MIN_PIXELS,
    KnowledgeFactory,
    PerceptionFactory,
    PerceptionHook,
    PerceptionKnowledge,
    WorldKnowledge,
    segmentation_knowledge,
)
from homiebot.agent.looks import look_target
from homiebot.agent.observers import EpisodeObserver, ObserverBase, notify_end, notify_round, notify_start
from homiebot.agent.session import PlannerSession
from homiebot.config import HISTORY_WINDOW, MAX_ROUNDS
from homiebot.executor.executor import ExecutorConfig, SkillRunner
from homiebot.executor.roles import WAIT_ACTION
from homiebot.perception.grounding import Grounder
from homiebot.planner.base import EpisodeStopRequested, Planner
from homiebot.planner.conversation import model_chat
from homiebot.sim.base import Simulator, SupportsAgents, SupportsClock
from homiebot.sim.scene import SceneSpec
from homiebot.skills.skillset import PerceivedWorld
from homiebot.tasks.goals import GoalSpec, goal_satisfied
from homiebot.tasks.suite import TaskSpec
from homiebot.types import (
    EntityKind,
    ErrorCode,
    Feedback,
    Observation,
    PlannerOutput,
    Pose2D,
    RoundRecord,
    Subtask,
    Trajectory,
    WorldState,
    casefold_words,
)

if TYPE_CHECKING:
    from homiebot.agent.recording import MotionFeed
    from homiebot.data.record import EpisodeRecorder

__all__ = [
    "VISIBLE_MIN_PIXELS", "WAIT_ACTION", "AgentSlot", "EpisodeBackend", "EpisodeConfig", "EpisodeLoop", "EpisodeOutcome", "EpisodeSetupError",
    "EpisodeSpec", "ExecutionOutcome", "PerceptionFactory", "PerceptionHook", "ProgressCallback", "open_furniture",
    "reads_observation", "run_episode", "run_over_backend",
]

log = logging.getLogger(__name__)

#: Called after every round with the round and the round limit (a progress bar, a log line).
ProgressCallback = Callable[[RoundRecord, int], None]
#: Called with (round index, instruction, output) before the subtask is executed (the graph publishes it).
OutputCallback = Callable[[int, str, PlannerOutput], None]


@dataclass(frozen=True)
class EpisodeConfig:
    """How an episode runs. Defaults are EMMOE's (20 rounds, window of 3, the paper's lists). What the executor
    checks (the action and model lists, tries, reach thresholds, the agent it serves) is its own configuration,
    held here whole rather than copied field by field; :attr:`actions` and :attr:`models` read it, since the
    planner's session offers the lists the executor accepts."""

    max_rounds: int = MAX_ROUNDS
    history_window: int = HISTORY_WINDOW
    render: bool = True  # render the four views every round (the planner's images and the record's)
    model_descriptions: Mapping[str, str] | None = None
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)

    def __post_init__(self) -> None:
        if self.max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1, got {self.max_rounds}")

    @classmethod
    def with_actions(cls, actions: Sequence[str], **fields: Any) -> EpisodeConfig:
        """EMMOE's configuration with another action list (a task's: :func:`homiebot.tasks.suite.task_actions`)."""
        return cls(executor=ExecutorConfig(actions=tuple(actions)), **fields)

    @property
    def actions(self) -> tuple[str, ...]:
        return self.executor.actions

    @property
    def models(self) -> tuple[str, ...]:
        return self.executor.models

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
        return self.executor




@dataclass(frozen=True)
class AgentSlot:
    """The second agent of a two-agent episode: its planner, its episode configuration (its own action list:
    PARTNR's human has the state-changing skills the robot lacks; default: the robot's), id and name."""

    planner: Planner
    config: EpisodeConfig | None = None
    role: int = 1
    name: str = "human"


class EpisodeSetupError(ValueError):
    """The episode cannot start: no instruction, no scene, or a planner that cannot take this input."""


def open_furniture(state: WorldState) -> set[str]:
    """Furniture open in ``state`` (every one seen open counts as opened for ``inspected`` goals)."""
    return {n for n, e in state.entities.items() if e.kind is EntityKind.FURNITURE and e.is_open}


def reads_observation(planner: Planner) -> bool:
    """Whether ``planner``'s requests need the views' segmentation: every planner but a privileged one (which
    reads the world state), and any that declares ``needs_views``. The graph moves segmentation across the
    wire only for these."""
    return planner.needs_views or not planner.privileged


@dataclass
class ExecutionOutcome:
    """What one executed subtask reports back to the planner's side."""

    feedback: Feedback
    path_length: float
    timings: dict[str, float]
    #: The world state after the subtask, when the executor reports it (else the backend is asked).
    state_after: WorldState | None = None
    #: The subtask in simulator instance names as the executor grounded it (None: not grounded here).
    grounded: Subtask | None = None
    #: A successful Put's: where the hand let go of the object (SkillResult.released_at; None: not known).
    released_at: tuple[float, float, float] | None = None


class EpisodeBackend(Protocol):
    """What the loop needs from the world: the simulator and the executor, in this process or over a wire.

    A call that gets no answer in time raises ``TimeoutError``; the episode then stops, marked timed out.
    """

    def reset(self, scene: str, seed: int) -> tuple[WorldState, SceneSpec | None]:
        """Load ``scene`` with ``seed``; return the first state and the scene spec (or None)."""

    def render(self, agent: int = 0) -> Sequence[NDArray[Any]]:
        """The four RGB views now, in the planner's order."""

    def observe(self, agent: int = 0) -> Observation:
        """The four views now with their instance segmentation and instance names (depth may be empty)."""

    def state(self, agent: int = 0) -> WorldState:
        """The privileged world state now."""

    def execute(self, subtask: Subtask, model: str, inventory: tuple[str, ...], round_index: int,
                agent: int = 0) -> ExecutionOutcome:
        """Execute one subtask against the current world state.

        In a two-agent episode the loop calls ``execute``, ``state``, ``observe`` and ``render`` with the keyword
        ``agent=`` (0 robot, 1 human), and ``begin_round()`` before each lock-step round; a single-agent episode
        never passes ``agent`` and never calls ``begin_round``."""

    def begin_round(self) -> None:
        """A lock-step round of a two-agent episode starts (the agents' clocks are synced); a backend of one
        agent does nothing."""


@runtime_checkable
class LooksInto(Protocol):
    """A backend whose robot can point its head camera (:class:`homiebot.sim.base.SupportsHeadLook`): the loop
    looks into the container a Go to or an Open reached (:mod:`homiebot.agent.looks`) when the episode perceives.
    A backend whose perception runs elsewhere (the ROS graph's perception node, which fuses the head camera itself)
    says so with a true ``perception_looks`` attribute: the loop then looks with a knowledge that does not perceive,
    and ``look_at`` answers None once perception has the view."""

    def look_at(self, target: tuple[float, float, float], raise_torso: bool = True) -> Observation | None:
        """The head camera's view of ``target`` (map frame), the torso raised first when asked; None when the robot
        cannot take it."""


@dataclass(frozen=True)
class EpisodeSpec:
    """Which episode to run: the instruction, the scene and its seed, and the task it belongs to (if any)."""

    instruction: str
    scene: str
    scene_seed: int
    task_id: str | None = None
    goal: GoalSpec | None = None
    run_seed: int = 0  # Trajectory.seed: the run index on top of the task's seed
    evaluation: Mapping[str, object] | None = None  # the task's PARTNR evaluation function (JSON), for privileged planners


@dataclass
class EpisodeOutcome:
    trajectory: Trajectory
    timed_out: bool = False


class _BackendTimeout(Exception):
    """Internal: a backend call timed out (carries the original error out of the round)."""

    def __init__(self, error: TimeoutError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass
class _EpisodeView:
    """What every agent's round shares: the world as the loop last read it (state, views, the planner-side
    world knowledge) and what the episode has seen so far (furniture seen open)."""

    scene: SceneSpec | None
    knowledge: WorldKnowledge
    state: WorldState
    images: Sequence[NDArray[Any]]
    observation: Observation | None
    opened: set[str]


class EpisodeLoop:
    """The one episode loop (module docstring). One agent takes the rounds today; the round body
    (:meth:`_round`) takes the planner and the session as arguments and shares only the world view, so a
    second agent with its own planner and session can take rounds in the same loop (docs/loop.md)."""

    def __init__(
        self,
        backend: EpisodeBackend,
        planner: Planner,
        spec: EpisodeSpec,
        config: EpisodeConfig | None = None,
        *,
        knowledge: KnowledgeFactory = segmentation_knowledge,
        observers: Sequence[EpisodeObserver] = (),
        on_output: OutputCallback | None = None,
        always_observe: bool = False,
        partner: AgentSlot | None = None,
        partner_knowledge: KnowledgeFactory | None = None,
    ) -> None:
        """``always_observe``: fetch the views with their segmentation for every planner (in-process they are
        rendered together anyway); otherwise only for planners that read it (:func:`reads_observation`).
        ``partner``: a second agent taking lock-step rounds (module docstring). ``partner_knowledge``: builds the
        partner's own knowledge (its own world graph, fed by its own views; default: ``knowledge``)."""
        self.backend = backend
        self.planner = planner
        self.spec = spec
        self.config = config or EpisodeConfig()
        self.knowledge_factory = knowledge
        self.partner_knowledge = partner_knowledge or knowledge
        self.observers = tuple(observers)
        self.on_output = on_output
        self.observes = always_observe or reads_observation(planner)
        self.partner = partner
        self._partner_observes = partner is not None and (always_observe or reads_observation(partner.planner))
        self._last_state: WorldState | None = None  # for the final observers' call after a timeout
        self.trajectory = Trajectory(
            task_id=spec.task_id, instruction=spec.instruction, scene=spec.scene, seed=spec.run_seed,
            planner=planner.name,
        )
        if partner is not None:
            self.trajectory.partner_planner = partner.planner.name

    def run(self) -> EpisodeOutcome:
        started = time.perf_counter()
        outcome = EpisodeOutcome(self.trajectory)
        final: WorldState | None = None
        try:
            final = self._run()
        except _BackendTimeout as timeout:
            log.error("episode stopped: %s", timeout.error)
            self.trajectory.error = f"timeout: {timeout.error}"
            outcome.timed_out = True
            final = self._last_state
        self.trajectory.wall_time_s = time.perf_counter() - started
        notify_end(self.observers, self.trajectory, final)
        return outcome

    # ------------------------------------------------------------------------------------ steps

    def _call(self, what: Callable[..., Any], *args: Any) -> Any:
        """A backend call; a timeout leaves the episode at once (the other side is gone or stuck)."""
        try:
            return what(*args)
        except TimeoutError as err:
            raise _BackendTimeout(err) from err

    def _look(self, agent: int | None = None) -> tuple[Sequence[NDArray[Any]], Observation | None]:
        """The views now: the observation with its segmentation, or RGB only (see ``always_observe``).
        ``agent``: whose views, in a two-agent episode."""
        if not self.config.render:
            return [], None
        if agent is None:
            if self.observes:
                observation: Observation = self._call(self.backend.observe)
                return observation.images(), observation
            return self._call(self.backend.render), None
        observes = self.observes if agent == 0 else self._partner_observes
        if observes:
            seen: Observation = self._call(lambda: self.backend.observe(agent=agent))
            return seen.images(), seen
        return self._call(lambda: self.backend.render(agent=agent)), None

    def _run(self) -> WorldState | None:
        config, trajectory, spec, planner = self.config, self.trajectory, self.spec, self.planner
        try:
            initial, scene_spec = self._call(self.backend.reset, spec.scene, spec.scene_seed)
            images, observation = self._look()
        except _BackendTimeout:
            raise
        except Exception as err:
            log.exception("simulator reset failed")
            trajectory.error = f"simulator reset failed for scene {spec.scene!r}: {err}"
            return None
        self._last_state = initial
        knowledge = self.knowledge_factory(scene_spec, initial)
        if observation is not None:
            knowledge.see(observation, initial)
        notify_start(self.observers, trajectory, initial, observation)
        world = _EpisodeView(scene_spec, knowledge, initial, images, observation, open_furniture(initial))
        session = config.new_session(spec.instruction, planner)
        planner.reset(spec.instruction, seed=spec.scene_seed)
        if self.partner is None:
            while not session.done and self._round(planner, session, world):
                pass
        else:
            self._lock_step(session, world, scene_spec, initial)
        trajectory.ended = session.ended
        trajectory.opened = sorted(world.opened)
        trajectory.system_prompt = session.system_prompt
        # conversation.json: the chat the planner's model was given when it asked one, else appendix D's log.
        calls = [call for record in trajectory.rounds for call in record.model_calls]
        trajectory.conversation = model_chat(calls) if calls else session.conversation.to_paper_json()
        if spec.goal is not None and trajectory.error is None:
            trajectory.goal_satisfied = goal_satisfied(spec.goal, initial, world.state, world.opened)
        return world.state

    def _lock_step(self, session: PlannerSession, robot_world: _EpisodeView, scene_spec: SceneSpec | None,
                   initial: WorldState) -> None:
        """Two agents in lock-step rounds (module docstring): the robot, then the partner, each on the world as
        it is when its turn comes; until both have ended or the round limit is reached."""
        partner = self.partner
        assert partner is not None
        partner_config = partner.config or self.config
        partner_session = partner_config.new_session(self.spec.instruction, partner.planner)
        partner.planner.reset(self.spec.instruction, seed=self.spec.scene_seed)
        partner_state = self._call(lambda: self.backend.state(agent=partner.role))
        partner_world = _EpisodeView(scene_spec, self.partner_knowledge(scene_spec, partner_state), partner_state,
                                     [], None, robot_world.opened)
        turns = [(0, self.planner, session, robot_world), (partner.role, partner.planner, partner_session, partner_world)]
        # A planner that plans for its partner too (centralized control) learns the partner's action list.
        for planner, other, other_config in ((self.planner, partner.name, partner_config),
                                             (partner.planner, "robot", self.config)):
            planner.meet_partner(other, other_config.actions)
        first = True
        while not (session.done and partner_session.done):
            self._call(self.backend.begin_round)
            for role, planner, agent_session, world in turns:
                if agent_session.done:
                    continue
                if not first or role != 0:
                    # The other agent acted since this one last looked: read its state and views again.
                    world.state = self._call(lambda r=role: self.backend.state(agent=r))
                    world.images, world.observation = self._look(role)
                    if world.observation is not None:
                        world.knowledge.see(world.observation, world.state)
                first = False
                record = self._round(planner, agent_session, world, agent=role)
                if record is None:
                    return
                self._tell_partner(role, record, turns)

    def _tell_partner(self, role: int, record: RoundRecord, turns: Sequence[tuple[int, Planner, PlannerSession,
                      _EpisodeView]]) -> None:
        """PARTNR's decentralized agents learn the partner's non-navigation actions (and their outcome)."""
        subtask = record.output.subtask
        if subtask is None or subtask.is_end:
            return
        navigation = casefold_words(subtask.action) in ("go to", "wait")
        name = self.partner.name if self.partner is not None and role == self.partner.role else "robot"
        for other, planner, _, _ in turns:
            # A centralized planner's facet sees everything (PARTNR: "complete information about both agent's
            # states"); a decentralized agent the partner's non-navigation actions.
            if other != role and (not navigation or planner.hears_partner_navigation):
                planner.observe_partner(name, record.subtask_text, record.feedback)

    def _round(self, planner: Planner, session: PlannerSession, world: _EpisodeView,
               agent: int | None = None) -> Any:
        """One round of ``planner`` with its ``session`` over the shared ``world``; False (None in a two-agent
        episode) when an infrastructure failure stopped the episode (:attr:`Trajectory.error` says why), else
        True (the round's record in a two-agent episode). Everything agent-specific comes from the arguments:
        ``agent`` is the id of the agent taking it in a two-agent episode (None: the single-agent loop)."""
        stopped = None if agent is not None else False
        config, trajectory, spec, knowledge = self.config, self.trajectory, self.spec, world.knowledge
        round_start = time.perf_counter()
        timings: dict[str, float] = {}
        state, observation = world.state, world.observation
        request = session.make_request(
            world.images,
            world_state=state,
            goal=spec.goal,
            grounded_targets=knowledge.grounded_targets(),
            perceived_names=knowledge.perceived_names(state) if planner.privileged else None,
            evaluation=spec.evaluation,
            scene=world.scene,
            observation=observation,
        )
        description = knowledge.world_description()
        if description is not None:
            request.world_description = description
        t0 = time.perf_counter()
        try:
            raw = planner.plan(request)
        except EpisodeStopRequested as stop:
            log.info("planner %r stopped the episode in round %d: %s", planner.name, session.round_index, stop)
            trajectory.stopped = str(stop)
            return stopped
        except Exception as err:
            log.exception("planner failed")
            trajectory.error = f"planner {planner.name!r} failed in round {session.round_index}: {err}"
            return stopped
        timings["plan_s"] = time.perf_counter() - t0
        output = session.parse(raw, planner.answer_format)
        if self.on_output is not None and agent in (None, 0):
            self.on_output(session.round_index, request.instruction, output)
        inventory_before = session.inventory
        path_length = 0.0
        executed: ExecutionOutcome | None = None
        if output.subtask is None:
            feedback = session.format_feedback(output)
        elif output.subtask.is_end or (agent is not None and casefold_words(output.subtask.action) == "wait"):
            feedback = session.end_feedback()  # End, or a partner's Wait: nothing to execute
        else:
            subtask = output.subtask
            try:
                if agent is None:
                    executed = self._call(self.backend.execute, subtask, output.model, session.inventory,
                                          session.round_index)
                else:
                    executed = self._call(lambda: self.backend.execute(
                        subtask, output.model, session.inventory, session.round_index, agent=agent))
            except _BackendTimeout:
                raise
            except Exception as err:
                log.exception("executor failed")
                trajectory.error = f"execution of {subtask.text()} failed in round {session.round_index}: {err}"
                return stopped
            assert executed is not None
            feedback, path_length = executed.feedback, executed.path_length
            timings.update(executed.timings)
        # A round records its grounding only where the planner's names are perception's own (a world graph):
        # otherwise they are the simulator's and the subtask says it already.
        speaks_perception = knowledge.perceives or bool(getattr(knowledge, "perception_names", False))
        grounded = executed.grounded if executed is not None and speaks_perception else None
        record = self._append_round(session, request.instruction, output, feedback, inventory_before,
                                    path_length, timings, grounded, agent)
        record.world_description = request.world_description  # an input of the round, for the record
        record.model_calls = tuple(request.model_calls)  # what the planner sent its model, exactly
        try:
            if executed is not None:
                if executed.state_after is not None:
                    state = executed.state_after
                elif agent is None:
                    state = self._call(self.backend.state)
                else:
                    state = self._call(lambda: self.backend.state(agent=agent))
                world.state = state
                if agent in (None, 0):
                    self._last_state = state
                if feedback.success and executed.grounded is not None:
                    knowledge.after_success(executed.grounded, state, executed.released_at)
            world.opened |= open_furniture(state)
            if config.render and not session.done and agent is None:
                t0 = time.perf_counter()
                world.images, world.observation = self._look()
                timings["render_s"] = time.perf_counter() - t0
                if world.observation is not None:
                    t0 = time.perf_counter()
                    knowledge.see(world.observation, state)
                    if knowledge.perceives:
                        timings["perceive_s"] = time.perf_counter() - t0
                looks = knowledge.perceives or bool(getattr(self.backend, "perception_looks", False))
                if looks and executed is not None and feedback.success and executed.grounded is not None:
                    self._look_into(executed.grounded, state, world.scene, knowledge, timings)
        except _BackendTimeout:
            raise
        except Exception as err:
            log.exception("simulator failed")
            trajectory.error = f"simulator failed after round {record.index}: {err}"
            return stopped
        timings["round_s"] = time.perf_counter() - round_start
        if agent in (None, 0):
            notify_round(self.observers, record, observation, state)
        else:
            for observer in self.observers:
                observer.on_partner_round(record, observation, state)
        return True if agent is None else record

    def _look_into(self, grounded: Subtask, state: WorldState, scene: SceneSpec | None, knowledge: WorldKnowledge,
                   timings: dict[str, float]) -> None:
        """After a Go to or an Open that reached an open container, the head camera's look into it, fused
        (:mod:`homiebot.agent.looks`); timed as ``look_s``. Nothing when the backend's robot has no head to point."""
        target = look_target(grounded, state, scene)
        if target is None or not isinstance(self.backend, LooksInto):
            return
        t0 = time.perf_counter()
        seen = self._call(self.backend.look_at, target.point, target.raise_torso)
        if seen is not None:
            knowledge.glance(seen, state)
        timings["look_s"] = time.perf_counter() - t0

    def _append_round(self, session: PlannerSession, instruction: str, output: PlannerOutput, feedback: Feedback,
                      inventory_before: tuple[str, ...], path_length: float, timings: dict[str, float],
                      grounded: Subtask | None, agent: int | None = None) -> RoundRecord:
        """Record a finished round in the session and the trajectory (the partner's in its own list)."""
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
            agent=agent or 0,
        )
        if agent:
            self.trajectory.partner_rounds.append(record)
            return record
        self.trajectory.rounds.append(record)
        self.trajectory.path_length += path_length
        if feedback.code is not ErrorCode.OK:
            log.info("round %d %s -> %s %s", record.index, record.subtask_text, feedback.code.value, feedback.message)
        return record


class _Progress(ObserverBase):
    """A :data:`ProgressCallback` as an observer."""

    def __init__(self, callback: ProgressCallback, limit: int) -> None:
        self.callback = callback
        self.limit = limit

    def on_round(self, record: RoundRecord, seen: Observation | None, state: WorldState) -> None:
        self.callback(record, self.limit)


#: The record's file of the world graph after every round, when the episode ran with perception (one JSON
#: object per line: ``{"round": n, "graph": <the graph's JSON export>}``).
WORLD_GRAPHS_FILE = "world_graphs.jsonl"


class _WorldGraphFile(ObserverBase):
    """Appends the perception hook's world graph after every round to the record (what the planner is told
    about the world, and what the executor grounds against, round by round)."""

    def __init__(self, recorder: EpisodeRecorder, hooks: list[PerceptionHook]) -> None:
        self.recorder = recorder
        self.hooks = hooks  # filled with the episode's hook when the loop builds its knowledge

    def on_round(self, record: RoundRecord, seen: Observation | None, state: WorldState) -> None:
        graph = self.hooks[0].world_graph_json() if self.hooks else None
        if graph is not None:
            self.recorder.add_file(WORLD_GRAPHS_FILE, f'{{"round": {record.index}, "graph": {graph}}}\n', append=True)


def _perceived_world(hook: PerceptionHook, sim: Simulator | None = None) -> PerceivedWorld:
    """The skills' world through ``hook``: its geometry where it keeps some, the simulator's state otherwise.

    With ``sim``, and a hook that asks for it (``looks_again`` and ``look``: the image-built graph), the skills'
    every read of the world after the robot moved or time passed, with the hand empty, is preceded by a fresh look:
    the objects in the four views from where the robot stands now are fused first. A skill reads the world again
    after the base turned to face or moved closer to its target and before each try, so the grasp is planned from
    the nearest view, and an object a failed try nudged is seen where it lies now (a real robot's look before it
    reaches; a stale graph kept the arm closing on the place an apple had rolled from). Not with something in the
    hand: the graph learns what the hand took only when the Pick has succeeded."""
    looked: list[tuple[float, Pose2D] | None] = [None]
    looks = getattr(hook, "look", None) if bool(getattr(hook, "looks_again", False)) else None
    look = sim is not None and looks is not None and isinstance(sim, SupportsClock)

    def world(state: WorldState) -> WorldState:
        if look and state.held is None:
            assert sim is not None and looks is not None
            now = (cast(SupportsClock, sim).sim_time, state.robot)
            if now != looked[0] and now[0] != getattr(hook, "observed_at", None):
                looks(sim.observe())
            looked[0] = now
        return hook.perceived_state(state) or state

    return world


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
    partner: AgentSlot | None = None,
    first_observers: Sequence[EpisodeObserver] = (),
) -> Trajectory:
    """Run one episode in this process and return its trajectory (and write its record when ``recorder`` is
    given).

    ``skills``: a skill runner, or a factory ``(sim, scene_seed) -> runner`` (for seeded execution noise);
    default: a noiseless :class:`homiebot.skills.SkillSet` over ``sim``.
    ``perception``: a factory of a :class:`PerceptionHook`; with it the executor grounds through perception
    (F2 for what it does not know), every request carries its grounded names and (when the hook declares
    ``describes_world``) its world description, and it fuses every rendered view.
    ``observers``: told of the start, every round and the end (:mod:`homiebot.agent.observers`).
    ``partner``: a second agent (PARTNR's human) taking lock-step rounds; ``sim`` must have it
    (``MujocoSimulator(human=True)``).
    ``first_observers``: told before the record's own observer (one that ends before the record is written and adds
    a file to it: ``homie play``'s ``play.json``).
    """
    from homiebot.agent.in_process import InProcessBackend
    from homiebot.agent.recording import RecordingObserver

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

    agent_configs = {}
    if partner is not None:
        if not isinstance(sim, SupportsAgents) or partner.role not in sim.agent_ids:
            raise EpisodeSetupError(
                f"the {sim.name} simulator has no agent {partner.role}: create it with a human partner (human=True)"
            )
        agent_configs[partner.role] = (partner.config or config).executor_config()
    backend = InProcessBackend(sim, config.executor_config(), skills=skills, grounder=grounder,
                               agent_configs=agent_configs)
    knowledge: KnowledgeFactory = segmentation_knowledge
    partner_knowledge: KnowledgeFactory | None = None
    hooks: list[PerceptionHook] = []
    if perception is not None and partner is None:
        def knowledge(scene_spec: SceneSpec | None, initial: WorldState) -> WorldKnowledge:
            # The executor grounds through the same world graph the planner is told about.
            hooks[:] = [perception(scene_spec, initial)]
            perceived = PerceptionKnowledge(hooks[0])
            backend.ground_with(perceived.grounder())
            backend.plan_skills_in(_perceived_world(hooks[0], sim))
            return perceived
    elif perception is not None:
        # Two agents: one world graph each (PARTNR's decentralized agents), fed by that agent's own views, told
        # of that agent's own actions; each agent's executor grounds through its own graph. The record keeps
        # the robot's graph.
        from homiebot.agent.agent_graphs import agent_knowledge

        assert partner is not None
        knowledge = agent_knowledge(perception, backend, 0, "robot", partner.name, hooks)
        partner_knowledge = agent_knowledge(perception, backend, partner.role, partner.name, "robot")

    watchers = list(observers)
    recording = None
    motion = _motion_feed(sim) if recorder is not None and recorder.images else None
    if recorder is not None:
        recording = RecordingObserver(recorder, scene_seed=scene_seed, config=config, topdown=sim.render_topdown,
                                      motion=motion)
        watchers.insert(0, recording)
        if perception is not None:
            watchers.insert(1, _WorldGraphFile(recorder, hooks))
    if progress is not None:
        watchers.append(_Progress(progress, config.max_rounds))
    watchers[:0] = first_observers
    spec = EpisodeSpec(instruction, scene, scene_seed, task.id if task is not None else None,
                       task.goal if task is not None else None, seed,
                       task.evaluation if task is not None else None)
    loop = EpisodeLoop(backend, planner, spec, config, knowledge=knowledge, observers=watchers, always_observe=True,
                       partner=partner, partner_knowledge=partner_knowledge)
    if recording is not None:
        recording.begin(loop.trajectory)
    try:
        return loop.run().trajectory
    except BaseException:
        # Interrupted, or a failure outside the planner/backend calls (e.g. the disk filled up while
        # recording): drop the partial record and let the caller see the exception.
        if recording is not None:
            recording.abort()
        raise
    finally:
        if motion is not None:
            sim.record_motion_views(False)  # type: ignore[attr-defined]  # _motion_feed checked it


def _motion_feed(sim: Simulator) -> MotionFeed | None:
    """The physical skills' reaching views of ``sim`` switched on for a record that keeps images (a simulator that
    has them and renders: homiebot/sim/mujoco/motion_views.py), or None."""
    from homiebot.agent.recording import MotionFeed

    switch = getattr(sim, "record_motion_views", None)
    views = switch(True) if switch is not None else None
    if views is None:
        return None
    views.take()  # nothing from before the episode
    return MotionFeed(views.take, lambda: float(getattr(sim, "sim_time", 0.0)))


def run_over_backend(
    backend: EpisodeBackend,
    planner: Planner,
    *,
    task: TaskSpec | None = None,
    instruction: str | None = None,
    scene: str | None = None,
    seed: int = 0,
    config: EpisodeConfig | None = None,
    recorder: EpisodeRecorder | None = None,
    progress: ProgressCallback | None = None,
    observers: Sequence[EpisodeObserver] = (),
    first_observers: Sequence[EpisodeObserver] = (),
    partner: AgentSlot | None = None,
    on_output: OutputCallback | None = None,
    always_observe: bool = False,
) -> EpisodeOutcome:
    """Run one episode over ``backend`` (the ROS 2 planner node's clients of the sim bridge and the executor node):
    :func:`run_episode`'s episode on the other wiring. The simulator, the skills and perception are the backend's;
    the record has no top-down view (the graph serves none) and fetches the views every round when it keeps them
    (``always_observe`` otherwise: a live view). A backend call that times out ends the episode with
    :attr:`EpisodeOutcome.timed_out` set."""
    from homiebot.agent.recording import RecordingObserver

    config = config or EpisodeConfig()
    instruction = instruction or (task.instruction if task is not None else None)
    scene = scene or (task.scene if task is not None else None)
    if not instruction or not scene:
        raise EpisodeSetupError("no instruction or scene: give a task, or an instruction and a scene")
    scene_seed = (task.seed if task is not None else 0) + seed
    watchers = list(first_observers)
    recording = None
    if recorder is not None:
        # The physical skills' reaching views, when the backend brings them (the ROS 2 planner node's, from the
        # bridge's topics) and the record keeps images.
        feed = getattr(backend, "motion_feed", None)
        motion = feed() if feed is not None and recorder.images else None
        recording = RecordingObserver(recorder, scene_seed=scene_seed, config=config, motion=motion)
        watchers.append(recording)
        always_observe = always_observe or recorder.images
    watchers.extend(observers)
    if progress is not None:
        watchers.append(_Progress(progress, config.max_rounds))
    spec = EpisodeSpec(instruction, scene, scene_seed, task.id if task is not None else None,
                       task.goal if task is not None else None, seed,
                       task.evaluation if task is not None else None)
    # A backend whose perception runs elsewhere may bring the knowledge that speaks for it (the ROS 2 planner node's
    # perception names: homiebot.ros.perceived_names); else the views' segmentation.
    knowledge = getattr(backend, "knowledge_factory", None) or segmentation_knowledge
    loop = EpisodeLoop(backend, planner, spec, config, knowledge=knowledge, observers=watchers, on_output=on_output,
                       always_observe=always_observe, partner=partner)
    if recording is not None:
        recording.begin(loop.trajectory)
    try:
        return loop.run()
    except BaseException:
        if recording is not None:
            recording.abort()  # no half-written record
        raise
