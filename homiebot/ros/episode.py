"""The planner node's episode: the core's loop with the simulator and the executor on the other side of a wire.

:func:`homiebot.agent.loop.run_episode` owns the simulator and an in-process
:class:`~homiebot.executor.executor.Executor`. In the ROS 2 graph the planner node owns neither: it resets,
renders and reads the simulator through the sim bridge's services and sends subtasks to the executor node's
action. :class:`GraphEpisode` is that loop written against an :class:`EpisodeBackend` (the planner node's
ROS clients implement it), and it keeps ``run_episode``'s order of calls exactly, so the same task and seed
give the same subtasks and feedback in both wirings (``tests/ros/test_ros_support.py`` and
``tests/ros/test_ros_graph.py`` check it):

reset -> state -> planner.reset -> per round: request (images of the last render, state after the last
round) -> plan -> parse -> F1 / End / execute -> record -> state -> render (unless done) -> after the loop:
goal check against the final state, counting every furniture seen open in any observed state as "opened".

What a request carries, as in-process (``run_episode``'s "extras every planner receives"):

* ``extras["max_rounds"]``, the config's extras, and ``extras["scene"]``: the scene spec from the reset
  response, for every planner (the expert's receptacle facts, the random baseline's object kinds);
* ``world_state`` and ``goal`` for privileged planners only (the session decides);
* ``extras["observation"]`` (the four views with their instance segmentation) and ``grounded_targets`` (the
  instances the views' segmentation has shown so far, at least ``VISIBLE_MIN_PIXELS`` pixels in one view):
  for every planner that is not privileged, or that declares ``needs_views`` (the random baseline reads
  what is visible from them; constrained decoding writes targets from them). For these planners the views
  are fetched with segmentation (:meth:`EpisodeBackend.observe`). A privileged planner (the expert) reads
  the world state instead: it gets RGB only, ``extras["observation"]`` is None and ``grounded_targets`` is
  empty, so its rounds move no segmentation across the wire. The in-process loop computes both for every
  planner; the expert ignores them, so its answers are the same.
* Not in the graph: a perception hook (``run_episode(perception=...)``: world description, grounding through
  the world model). The graph's perception node serves ``ResolveTarget`` to the executor instead.

The state after a round is the one the execution reported (the graph's executor returns it with its
result, saving a round trip); the backend is asked only when the execution reported none. A round that
executed nothing (an F1 answer, End) changed nothing, so its state is the one before it.

Nothing here imports rclpy; the backend's calls raise ``TimeoutError`` when the other side does not answer
in time, which ends the episode with :attr:`EpisodeOutcome.timed_out` set and the reason in
:attr:`Trajectory.error`, instead of hanging.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from homiebot.agent.observers import EpisodeObserver, notify_end, notify_round, notify_start
from homiebot.agent.loop import VISIBLE_MIN_PIXELS, EpisodeConfig, append_round, open_furniture
from homiebot.eval.goals import GoalSpec, goal_satisfied
from homiebot.planner.base import Planner
from homiebot.types import (
    ErrorCode,
    Feedback,
    Observation,
    PlannerOutput,
    RoundRecord,
    Subtask,
    Trajectory,
    WorldState,
)

log = logging.getLogger(__name__)


class EpisodeBackend(Protocol):
    """What the planner side needs from the rest of the graph."""

    def reset(self, scene: str, seed: int) -> tuple[WorldState, Any]:
        """Load ``scene`` with ``seed``; return the first state and the scene spec (or None)."""

    def render(self) -> Sequence[np.ndarray]:
        """The four RGB views now, in the planner's order."""

    def observe(self) -> Observation:
        """The four views now with their instance segmentation and instance names (depth may be left empty):
        for planners that read the observation (:func:`reads_observation`)."""

    def state(self) -> WorldState:
        """The privileged world state now."""

    def execute(self, subtask: Subtask, model: str, inventory: tuple[str, ...], round_index: int) -> "ExecutionOutcome":
        """Execute one subtask against the current world state."""


@dataclass
class ExecutionOutcome:
    """What one executed subtask reports back to the planner's side."""

    feedback: Feedback
    path_length: float
    timings: dict[str, float]
    #: The world state after the subtask, when the executor reports it (else the backend is asked).
    state_after: WorldState | None = None


def reads_observation(planner: Planner) -> bool:
    """Whether the graph fetches the views' segmentation for ``planner`` (see the module docstring): every
    planner but a privileged one, and any that declares ``needs_views``."""
    return bool(getattr(planner, "needs_views", False)) or not bool(getattr(planner, "privileged", False))


@dataclass
class EpisodeOutcome:
    trajectory: Trajectory
    timed_out: bool = False


#: Called with (round index, instruction, output) before the subtask is executed.
OutputCallback = Callable[[int, str, PlannerOutput], None]
#: Called after every round with the round and the running trajectory.
RoundCallback = Callable[[RoundRecord, Trajectory], None]


class GraphEpisode:
    """One episode driven from the planner's side of the graph (see the module docstring)."""

    def __init__(
        self,
        backend: EpisodeBackend,
        planner: Planner,
        *,
        instruction: str,
        scene: str,
        scene_seed: int,
        task_id: str | None = None,
        goal: GoalSpec | None = None,
        run_seed: int = 0,
        config: EpisodeConfig | None = None,
        on_output: OutputCallback | None = None,
        on_round: RoundCallback | None = None,
        observers: Sequence[EpisodeObserver] = (),
    ) -> None:
        self.backend = backend
        self.planner = planner
        self.instruction = instruction
        self.scene = scene
        self.scene_seed = scene_seed
        self.goal = goal
        self.config = config or EpisodeConfig()
        self.on_output = on_output
        self.on_round = on_round
        self.observers = tuple(observers)
        self.trajectory = Trajectory(
            task_id=task_id, instruction=instruction, scene=scene, seed=run_seed, planner=planner.name
        )

    def run(self) -> EpisodeOutcome:
        started = time.perf_counter()
        outcome = EpisodeOutcome(self.trajectory)
        try:
            self._run()
        except TimeoutError as err:
            log.error("episode stopped: %s", err)
            self.trajectory.error = f"timeout: {err}"
            outcome.timed_out = True
        self.trajectory.wall_time_s = time.perf_counter() - started
        return outcome

    def _run(self) -> None:
        config, trajectory, backend, planner = self.config, self.trajectory, self.backend, self.planner
        observes = reads_observation(planner)

        def look() -> tuple[Sequence[np.ndarray], Observation | None]:
            """The views now: RGB only, or the observation with its segmentation for planners that read it."""
            if not config.render:
                return [], None
            if observes:
                observation = backend.observe()
                return observation.images(), observation
            return backend.render(), None

        try:
            initial, scene_spec = backend.reset(self.scene, self.scene_seed)
            images, observation = look()
        except TimeoutError:
            raise
        except Exception as err:
            log.exception("simulator reset failed")
            trajectory.error = f"simulator reset failed for scene {self.scene!r}: {err}"
            notify_end(self.observers, trajectory, None)
            return
        notify_start(self.observers, trajectory, initial, observation)
        opened = open_furniture(initial)
        session = config.new_session(self.instruction, planner)
        planner.reset(self.instruction, seed=self.scene_seed)
        # As in-process: every planner gets the round limit and the scene spec; the observation as above.
        extras: dict[str, Any] = {"max_rounds": config.max_rounds, **config.extras, "scene": scene_spec}

        state = initial
        seen: set[str] = set()  # instances the views' segmentation has shown (run_episode's grounded names)
        while not session.done:
            if observation is not None:
                seen.update(observation.visible_instances(VISIBLE_MIN_PIXELS))
            round_start = time.perf_counter()
            timings: dict[str, float] = {}
            request = session.make_request(images, world_state=state, goal=self.goal, grounded_targets=tuple(sorted(seen)),
                                           extras={**extras, "observation": observation})
            t0 = time.perf_counter()
            try:
                raw = planner.plan(request)
            except Exception as err:
                log.exception("planner failed")
                trajectory.error = f"planner {planner.name!r} failed in round {session.round_index}: {err}"
                break
            timings["plan_s"] = time.perf_counter() - t0
            output = session.parse(raw)
            if self.on_output is not None:
                self.on_output(session.round_index, request.instruction, output)
            inventory_before = session.inventory
            path_length = 0.0
            executed: ExecutionOutcome | None = None
            if output.subtask is None:
                feedback = session.format_feedback(output)
            elif output.subtask.is_end:
                feedback = session.end_feedback()
            else:
                try:
                    executed = backend.execute(output.subtask, output.model, session.inventory, session.round_index)
                except TimeoutError:
                    raise
                except Exception as err:
                    log.exception("executor failed")
                    trajectory.error = f"execution of {output.subtask.text()} failed in round {session.round_index}: {err}"
                    break
                feedback, path_length = executed.feedback, executed.path_length
                timings.update(executed.timings)
            record = append_round(
                trajectory, session, request.instruction, output, feedback, inventory_before, path_length, timings
            )
            if executed is not None:
                state = executed.state_after if executed.state_after is not None else backend.state()
            opened |= open_furniture(state)
            seen_views = observation
            if config.render and not session.done:
                t0 = time.perf_counter()
                images, observation = look()
                timings["render_s"] = time.perf_counter() - t0
            timings["round_s"] = time.perf_counter() - round_start
            notify_round(self.observers, record, seen_views, state)
            if self.on_round is not None:
                self.on_round(record, trajectory)
        trajectory.ended = session.ended
        final = backend.state() if trajectory.error is None else state
        if self.goal is not None and trajectory.error is None:
            trajectory.goal_satisfied = goal_satisfied(self.goal, initial, final, opened)
        notify_end(self.observers, trajectory, final)


def round_signature(trajectory: Trajectory) -> list[tuple[str, str, str, tuple[str, ...], int]]:
    """What must agree between two wirings of the same episode: per round the subtask (bracketed), the
    feedback code, its EMMOE message, the inventory after the round and the number of tries."""
    return [
        (r.subtask_text, r.feedback.code.value, r.feedback.message, tuple(r.feedback.inventory), r.feedback.attempts)
        for r in trajectory.rounds
    ]


def feedback_ok(feedback: Feedback) -> bool:
    return feedback.code is ErrorCode.OK
