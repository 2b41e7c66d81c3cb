"""The planner node's episode: the core's one loop with the simulator and the executor on the other side of a wire.

In the ROS 2 graph the planner node owns neither the simulator nor the executor: it resets, renders and reads
the simulator through the sim bridge's services and sends subtasks to the executor node's action. Its clients
implement :class:`homiebot.agent.loop.EpisodeBackend`, and the node builds its episode with the one build path
(:func:`homiebot.agent.build.build_episode` with ``backend=``), which runs :class:`homiebot.agent.loop.EpisodeLoop`
over them (:func:`homiebot.agent.loop.run_over_backend`): the same loop :func:`homiebot.agent.loop.run_episode`
runs in-process, so the same task and seed give the same subtasks and feedback in both wirings
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

from homiebot.agent.loop import (
    EpisodeBackend,
    EpisodeOutcome,
    ExecutionOutcome,
    reads_observation,
)
from homiebot.types import Trajectory

__all__ = ["EpisodeBackend", "EpisodeOutcome", "ExecutionOutcome", "reads_observation", "round_signature"]


def round_signature(trajectory: Trajectory) -> list[tuple[str, str, str, tuple[str, ...], int]]:
    """What must agree between two wirings of the same episode: per round the subtask (bracketed), the
    feedback code, its EMMOE message, the inventory after the round and the number of tries."""
    return [
        (r.subtask_text, r.feedback.code.value, r.feedback.message, tuple(r.feedback.inventory), r.feedback.attempts)
        for r in trajectory.rounds
    ]
