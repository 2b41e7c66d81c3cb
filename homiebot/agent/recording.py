"""The loop observer that writes an episode's record (:class:`~homiebot.data.record.EpisodeRecorder`,
docs/records.md). The record format stays in :mod:`homiebot.data.record`, below the loop; this adapter is the
loop's side of it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from numpy.typing import NDArray

from homiebot.agent.observers import ObserverBase
from homiebot.data.record import EpisodeRecorder
from homiebot.types import MotionFrame, Observation, RoundRecord, Trajectory, WorldState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MotionFeed:
    """Where the record gets the physical skills' reaching views (homiebot/sim/mujoco/motion_views.py): ``take``
    returns the frames taken since its last call; ``clock`` the simulated time now (after a round: when it ended);
    ``drain``, if given, returns the frames still on their way at the episode's end (through the graph: those
    published but not yet received)."""

    take: Callable[[], Sequence[MotionFrame]]
    clock: Callable[[], float]
    drain: Callable[[], Sequence[MotionFrame]] | None = None


class RecordingObserver(ObserverBase):
    """Writes the episode's record as an observer of the loop (docs/records.md).

    :meth:`begin` starts the record before the reset, so an episode whose reset failed still leaves a record
    that says so; every round's views are the ones the planner saw; :meth:`on_end` writes the summary, the
    conversation and the top-down map (``topdown``: a callable rendering it; a failure there only warns).
    The caller calls :meth:`abort` when the episode raises: nothing half-written is left.
    """

    def __init__(self, recorder: EpisodeRecorder, *, scene_seed: int | None = None, config: Any = None,
                 topdown: Callable[[], NDArray[Any] | None] | None = None, motion: MotionFeed | None = None) -> None:
        self.recorder = recorder
        self.scene_seed = scene_seed
        self.config = config
        self.topdown = topdown
        #: The reaching views' source (None: the record keeps none); each frame goes to the round during which it
        #: was taken, by its stamp against the simulated time each round ended at.
        self.motion = motion
        self._round_ends: list[tuple[int, float]] = []
        self._started = False

    def begin(self, trajectory: Trajectory) -> None:
        self._round_ends = []
        self.recorder.start(trajectory, scene_seed=self.scene_seed, config=self.config)
        self._started = True

    def on_start(self, trajectory: Trajectory, state: WorldState, observation: Observation | None) -> None:
        if not self._started:
            self.begin(trajectory)

    def on_round(self, record: RoundRecord, seen: Observation | None, state: WorldState) -> None:
        started = time.perf_counter()
        self.recorder.add_round(record, seen)
        if self.motion is not None:
            self._round_ends.append((record.index, self.motion.clock()))
            self._add_motion(self.motion.take())
        record.timings["record_s"] = time.perf_counter() - started

    def _add_motion(self, frames: Sequence[MotionFrame]) -> None:
        """Each frame into the first round that ended at or after its stamp (the last round's, if none did)."""
        if not self._round_ends:
            return
        for frame in frames:
            index = next((i for i, end in self._round_ends if frame.stamp <= end + 1e-6), self._round_ends[-1][0])
            self.recorder.add_motion_frames(index, [frame])

    def on_end(self, trajectory: Trajectory, state: WorldState | None) -> None:
        if not self._started:
            self.begin(trajectory)
        if self.motion is not None:
            self._add_motion([*self.motion.take(), *(self.motion.drain() if self.motion.drain is not None else ())])
        if trajectory.system_prompt is not None:
            self.recorder.note(opened=list(trajectory.opened), conversation=trajectory.conversation,
                               system_prompt=trajectory.system_prompt)
        topdown = None
        if self.topdown is not None:
            try:
                topdown = self.topdown()
            except Exception as err:  # a missing map must not lose the episode
                log.warning("top-down map not rendered: %s", err)
        self.recorder.finish(trajectory, topdown=topdown)
        self._started = False

    def abort(self) -> None:
        self.recorder.abort()
        self._started = False
