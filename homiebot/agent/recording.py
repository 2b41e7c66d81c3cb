"""The loop observer that writes an episode's record (:class:`~homiebot.data.record.EpisodeRecorder`,
docs/records.md). The record format stays in :mod:`homiebot.data.record`, below the loop; this adapter is the
loop's side of it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from homiebot.agent.observers import ObserverBase
from homiebot.data.record import EpisodeRecorder
from homiebot.types import Observation, RoundRecord, Trajectory, WorldState

log = logging.getLogger(__name__)


class RecordingObserver(ObserverBase):
    """Writes the episode's record as an observer of the loop (docs/records.md).

    :meth:`begin` starts the record before the reset, so an episode whose reset failed still leaves a record
    that says so; every round's views are the ones the planner saw; :meth:`on_end` writes the summary, the
    conversation and the top-down map (``topdown``: a callable rendering it; a failure there only warns).
    The caller calls :meth:`abort` when the episode raises: nothing half-written is left.
    """

    def __init__(self, recorder: EpisodeRecorder, *, scene_seed: int | None = None, config: Any = None,
                 topdown: Callable[[], np.ndarray | None] | None = None) -> None:
        self.recorder = recorder
        self.scene_seed = scene_seed
        self.config = config
        self.topdown = topdown
        self._started = False

    def begin(self, trajectory: Trajectory) -> None:
        self.recorder.start(trajectory, scene_seed=self.scene_seed, config=self.config)
        self._started = True

    def on_start(self, trajectory: Trajectory, state: WorldState, observation: Observation | None) -> None:
        if not self._started:
            self.begin(trajectory)

    def on_round(self, record: RoundRecord, seen: Observation | None, state: WorldState) -> None:
        started = time.perf_counter()
        self.recorder.add_round(record, seen)
        record.timings["record_s"] = time.perf_counter() - started

    def on_end(self, trajectory: Trajectory, state: WorldState | None) -> None:
        if not self._started:
            self.begin(trajectory)
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
