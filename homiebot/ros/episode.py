"""The planner node's episode: the core's one loop with the simulator and the executor on the other side of a wire.

In the ROS 2 graph the planner node owns neither the simulator nor the executor: it resets, renders and reads
the simulator through the sim bridge's services and sends subtasks to the executor node's action. Its clients
implement :class:`homiebot.agent.loop.EpisodeBackend`, and :class:`GraphEpisode` runs
:class:`homiebot.agent.loop.EpisodeLoop` over them: the same loop :func:`homiebot.agent.loop.run_episode` runs
in-process, so the same task and seed give the same subtasks and feedback in both wirings
(``tests/ros/test_ros_support.py`` and ``tests/ros/test_ros_graph.py`` check it). docs/loop.md has the steps.

What differs is what crosses the wire:

* Views are fetched with their instance segmentation only for planners that read it
  (:func:`homiebot.agent.loop.reads_observation`: every planner but a privileged one, and any that declares
  ``needs_views``). A privileged planner (the expert) gets RGB only: its request's observation is None and
  its grounded names are empty, so its rounds move no segmentation; it reads the world state instead.
* No perception hook: the graph's perception node serves ``ResolveTarget`` to the executor instead.
* The state after a round is the one the execution reported (the graph's executor returns it with its result,
  saving a round trip); the backend is asked only when the execution reported none.

Nothing here imports rclpy; the backend's calls raise ``TimeoutError`` when the other side does not answer in
time, which ends the episode with :attr:`EpisodeOutcome.timed_out` set and the reason in
:attr:`Trajectory.error`, instead of hanging.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from homiebot.agent.loop import (
    AgentSlot,
    EpisodeBackend,
    EpisodeConfig,
    EpisodeLoop,
    EpisodeOutcome,
    EpisodeSpec,
    ExecutionOutcome,
    OutputCallback,
    reads_observation,
)
from homiebot.agent.observers import EpisodeObserver, ObserverBase
from homiebot.planner.base import Planner
from homiebot.tasks.goals import GoalSpec
from homiebot.types import Observation, RoundRecord, Trajectory, WorldState

__all__ = ["EpisodeBackend", "EpisodeOutcome", "ExecutionOutcome", "GraphEpisode", "reads_observation",
           "round_signature"]

#: Called after every round with the round and the running trajectory.
RoundCallback = Callable[[RoundRecord, Trajectory], None]


class _RoundCallbackObserver(ObserverBase):
    def __init__(self, callback: RoundCallback, trajectory: Trajectory) -> None:
        self.callback = callback
        self.trajectory = trajectory

    def on_round(self, record: RoundRecord, seen: Observation | None, state: WorldState) -> None:
        self.callback(record, self.trajectory)


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
        evaluation: Any = None,
        config: EpisodeConfig | None = None,
        on_output: OutputCallback | None = None,
        on_round: RoundCallback | None = None,
        observers: Sequence[EpisodeObserver] = (),
        always_observe: bool = False,
        partner: AgentSlot | None = None,
    ) -> None:
        """``partner``: PARTNR's human as a second agent in lock-step rounds (the backend then takes ``agent=``)."""
        spec = EpisodeSpec(instruction, scene, scene_seed, task_id, goal, run_seed, evaluation)
        watchers = list(observers)
        # always_observe: fetch the views every round whatever the planner reads (a record that keeps images).
        self.loop = EpisodeLoop(backend, planner, spec, config, observers=watchers, on_output=on_output,
                                always_observe=always_observe, partner=partner)
        if on_round is not None:
            watchers.append(_RoundCallbackObserver(on_round, self.loop.trajectory))
            self.loop.observers = tuple(watchers)

    @property
    def trajectory(self) -> Trajectory:
        return self.loop.trajectory

    def run(self) -> EpisodeOutcome:
        return self.loop.run()


def round_signature(trajectory: Trajectory) -> list[tuple[str, str, str, tuple[str, ...], int]]:
    """What must agree between two wirings of the same episode: per round the subtask (bracketed), the
    feedback code, its EMMOE message, the inventory after the round and the number of tries."""
    return [
        (r.subtask_text, r.feedback.code.value, r.feedback.message, tuple(r.feedback.inventory), r.feedback.attempts)
        for r in trajectory.rounds
    ]
