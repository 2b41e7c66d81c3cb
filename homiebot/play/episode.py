"""One ``homie play`` episode: the loop of any episode with a person as a planner, recorded like any episode.

The episode runs in :func:`homiebot.agent.loop.run_episode` with the usual record (docs/records.md: views per
round, ``rounds.jsonl``, ``conversation.json``, ``summary.json``, the PARTNR state files) and one more file,
``play.json``: who played which role, how the episode ended and every line the person typed.

How it ended (``ended_by``):

* ``user``: the person typed ``quit`` or closed the input. The loop stops a planner that raises with an error on
  the trajectory; a person stopping is not a failure of anything, so the error is taken off again before the
  record is written (:class:`_EndedByUser` runs before the recorder) and ``play.json`` says so. The summary
  then has ``ended: false`` and no error, and ``success`` is the episode's verdict as for any episode.
* ``end``: the person answered ``[End]`` (the task is then checked, as for any planner).
* ``round_limit``: the round limit came first.
* ``error``: the simulator or the executor failed (the record's ``error`` says how).

Success is the episode's one verdict (:mod:`homiebot.eval.verdict`), given when the record's summary is written
by the PARTNR states recorder among the ``observers`` (``homie play`` always passes one): the task's PARTNR
evaluation function for a PARTNR task (its temporal constraints included; no ``[End]`` needed), the keypaths
(TP = 100%, ``[End]`` included) for the others. :attr:`PlayOutcome.verdict` is that verdict, read back from
the record, so the play screen, ``summary.json``, the episode page and ``homie metrics`` say the same.

In a two-agent episode the person's rounds are the trajectory's ``partner_rounds``; ``play.json`` keeps them
in full (``partner_rounds``: each round as ``rounds.jsonl`` holds the robot's), so the episode page shows the
person's own moves beside the robot's.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from homiebot.agent.loop import AgentSlot, EpisodeConfig, run_episode
from homiebot.agent.observers import EpisodeObserver, ObserverBase
from homiebot.agent.recording import RecordingObserver
from homiebot.data.record import PLAY_FILE, EpisodeRecorder, read_summary, round_json
from homiebot.eval.verdict import Verdict, recorded_verdict
from homiebot.planner.base import Planner
from homiebot.play.keyboard import KeyboardPlanner
from homiebot.sim.base import Simulator
from homiebot.tasks.suite import TaskSpec
from homiebot.types import Trajectory, WorldState

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class PlayOutcome:
    """A played episode: its trajectory, how it ended (module docstring) and where its record is."""

    trajectory: Trajectory
    ended_by: str
    quit_round: int | None
    record: Path
    verdict: Verdict | None = None  # the record's verdict (module docstring); None when nothing judged it


def ended_by(trajectory: Trajectory, quit_round: int | None, max_rounds: int) -> str:
    """How the episode ended (module docstring). With a partner both agents must have answered [End]."""
    if quit_round is not None:
        return "user"
    if trajectory.error is not None:
        return "error"
    partner_ended = not trajectory.partner_rounds or trajectory.partner_rounds[-1].output.subtask is not None and \
        trajectory.partner_rounds[-1].output.subtask.is_end
    if trajectory.ended and partner_ended:
        return "end"
    rounds = max(len(trajectory.rounds), len(trajectory.partner_rounds))
    return "round_limit" if rounds >= max_rounds else "error"


class _EndedByUser(ObserverBase):
    """Runs before the recorder: says how the episode ended and adds ``play.json`` to the record."""

    def __init__(self, planner: KeyboardPlanner, recorder: EpisodeRecorder, role: str, other: str | None,
                 max_rounds: int) -> None:
        self.planner = planner
        self.recorder = recorder
        self.role = role
        self.other = other
        self.max_rounds = max_rounds
        self.ended_by = "error"
        self.quit_round: int | None = None

    def on_end(self, trajectory: Trajectory, state: WorldState | None) -> None:
        quit_event = self.planner.quit_event
        if quit_event is not None:  # the loop's clean stop (EpisodeStopRequested): no error, the goal checked
            self.quit_round = quit_event.round_index
        self.ended_by = ended_by(trajectory, self.quit_round, self.max_rounds)
        data: dict[str, Any] = {
            "player": "keyboard",
            "role": self.role,
            "other_agent": self.other,
            "ended_by": self.ended_by,
            "quit_round": self.quit_round,
            "quit_reason": quit_event.reason if quit_event is not None else None,
            "typed": [asdict(t) for t in self.planner.typed],
        }
        if trajectory.partner_rounds:
            # The human's rounds (the loop's partner rounds): the short fields the summary has for the robot's
            # rounds, and every field of rounds.jsonl, so the episode page shows them as it shows the robot's.
            data["partner_rounds"] = [
                {**round_json(r), "subtask": r.subtask_text, "code": r.feedback.code.value}
                for r in trajectory.partner_rounds
            ]
        try:
            self.recorder.add_file(PLAY_FILE, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        except Exception:  # the record never started (the reset failed before it): nothing to add to
            log.debug("play.json not added", exc_info=True)


def _run_recorded(sim: Simulator, planner: Planner, task: TaskSpec, recorder: EpisodeRecorder,
                  marker: _EndedByUser, config: EpisodeConfig, seed: int, skills: Any,
                  observers: Sequence[EpisodeObserver], **partner: Any) -> PlayOutcome:
    recording = RecordingObserver(recorder, scene_seed=task.seed + seed, config=config, topdown=sim.render_topdown)
    # The marker ends before the recorder writes the summary; the recorder starts before the observers that add
    # files to it.
    watchers: list[EpisodeObserver] = [marker, recording, *observers]
    try:
        trajectory = run_episode(sim, planner, task=task, seed=seed, config=config, skills=skills,
                                 observers=watchers, **partner)
    except BaseException:
        recording.abort()
        raise
    verdict = recorded_verdict(read_summary(recorder.out_dir))
    return PlayOutcome(trajectory, marker.ended_by, marker.quit_round, recorder.out_dir, verdict)


def play_episode(
    sim: Simulator,
    planner: KeyboardPlanner,
    task: TaskSpec,
    recorder: EpisodeRecorder,
    *,
    seed: int = 0,
    config: EpisodeConfig | None = None,
    skills: Any = None,
    observers: Sequence[EpisodeObserver] = (),
    role: str = "robot",
) -> PlayOutcome:
    """Run ``task`` with the person as the ``role`` agent's planner and record it (module docstring).

    ``observers`` come after the recorder (the screen, and observers that add files to the record: the PARTNR
    state files). An exception that escapes drops the partial record.
    """
    config = config or EpisodeConfig()
    marker = _EndedByUser(planner, recorder, role, None, config.max_rounds)
    return _run_recorded(sim, planner, task, recorder, marker, config, seed, skills, observers)


def play_human_episode(
    sim: Simulator,
    robot: Planner,
    person: KeyboardPlanner,
    task: TaskSpec,
    recorder: EpisodeRecorder,
    *,
    robot_config: EpisodeConfig,
    human_config: EpisodeConfig,
    seed: int = 0,
    skills: Any = None,
    observers: Sequence[EpisodeObserver] = (),
) -> PlayOutcome:
    """Run ``task`` with ``robot`` driving the robot and the person as PARTNR's human partner, in the loop's
    lock-step rounds (``sim`` built with the human: ``MujocoSimulator(human=True)``); recorded as
    :func:`play_episode` records. The person's rounds are the trajectory's ``partner_rounds``."""
    partner = AgentSlot(planner=person, config=human_config, role=1, name="human")
    marker = _EndedByUser(person, recorder, "human", robot.name, robot_config.max_rounds)
    return _run_recorded(sim, robot, task, recorder, marker, robot_config, seed, skills, observers, partner=partner)
