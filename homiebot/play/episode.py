"""One ``homie play`` episode: the loop of any episode with a person as a planner, recorded like any episode.

The episode is built by the one build path (:func:`homiebot.agent.build.build_episode`, from the run
configuration of :func:`play_config`) and runs in the loop with the usual record (docs/records.md: views per
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

from homiebot.agent.observers import EpisodeObserver, ObserverBase
from homiebot.config import MAX_ROUNDS
from homiebot.config.planners import PartnrExpertPlannerConfig, PlannerConfig, planner_config
from homiebot.config.run import PartnerConfig, RunConfig, run_config
from homiebot.data.record import PLAY_FILE, EpisodeRecorder, read_summary, round_json
from homiebot.eval.verdict import Verdict, recorded_verdict
from homiebot.planner.base import Planner
from homiebot.play.keyboard import KeyboardPlanner, KeyboardPlannerConfig
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


def play_config(task: TaskSpec, *, role: str = "robot", robot: PlannerConfig | None = None, seed: int = 0,
                max_rounds: int = MAX_ROUNDS, noise: str = "off", render: bool = True, video: bool = True,
                report: bool = True) -> RunConfig:
    """The run configuration of a played episode of ``task``: the person as the only agent (``role`` robot; the
    run's planner is :class:`KeyboardPlannerConfig`), or as PARTNR's human beside ``robot`` (``role`` human: the
    human in the scene, the partner's planner ``keyboard``)."""
    fields: dict[str, object] = {
        "task": task.id, "seed": seed, "max_rounds": max_rounds, "skills": {"noise": noise},
        "simulator": {"render": render, "human": role == "human"}, "recording": {"video": video, "report": report},
    }
    if role == "human":
        fields["planner"] = robot if robot is not None else PartnrExpertPlannerConfig()
        fields["partner"] = PartnerConfig(planner=KeyboardPlannerConfig().name)
    else:
        fields["planner"] = KeyboardPlannerConfig()
    return run_config(fields)


def robot_planner(name: str, task: TaskSpec) -> tuple[Planner, PlannerConfig]:
    """The planner that drives the robot while the person plays the human, and its configuration as the record
    names it. ``expert`` on a task with a PARTNR evaluation function is the expert restricted to the robot's share
    of the task (:class:`homiebot.multiagent.pair.ShareExpert`, PARTNR A.9.1: the robot lacks the state-changing
    skills), so the person has the human's share left to do; on other tasks it is the single-agent expert, which
    reads the state and carries on whatever the person did."""
    from homiebot.multiagent import pair
    from homiebot.multiagent.centralized import AgentRole
    from homiebot.planner.registry import build_planner

    if name == "expert" and task.evaluation is not None:
        return pair.ShareExpert(AgentRole.ROBOT), PartnrExpertPlannerConfig()
    setting = planner_config(name)
    return build_planner(setting), setting


def play_episode(
    config: RunConfig,
    person: KeyboardPlanner,
    recorder: EpisodeRecorder,
    *,
    robot: Planner | None = None,
    simulator: Simulator | None = None,
    observers: Sequence[EpisodeObserver] = (),
) -> PlayOutcome:
    """Run ``config``'s episode with the person as its only agent, or, with ``config.partner``, as PARTNR's human
    beside ``robot`` in the loop's lock-step rounds (the person's rounds are then the trajectory's
    ``partner_rounds``), built by the one build path (:func:`homiebot.agent.build.build_episode`) and recorded
    into ``recorder`` (module docstring). ``simulator``: the caller's (it then closes it); else one is made and
    shut down at the end.

    ``observers`` come after the recorder (the screen, and observers that add files to the record: the PARTNR
    state files). An exception that escapes drops the partial record.
    """
    from homiebot.agent.build import build_episode

    if config.partner is not None and robot is None:
        raise ValueError("the person plays the human: give the planner that drives the robot")
    role = "human" if config.partner is not None else "robot"
    marker = _EndedByUser(person, recorder, role, robot.name if robot is not None else None, config.max_rounds)
    # The marker ends before the recorder writes the summary; the recorder starts before the observers that add
    # files to it.
    if robot is not None and config.partner is not None:
        episode = build_episode(config, simulator=simulator, planner=robot, partner=person, recorder=recorder,
                                observers=observers, first_observers=[marker])
    else:
        episode = build_episode(config, simulator=simulator, planner=person, recorder=recorder,
                                observers=observers, first_observers=[marker])
    try:
        trajectory = episode.run()
    finally:
        episode.close()
    verdict = recorded_verdict(read_summary(recorder.out_dir))
    return PlayOutcome(trajectory, marker.ended_by, marker.quit_round, recorder.out_dir, verdict)
