"""Offline regression from a bag: replay a recorded episode's observations and feedback to a planner.

A bag recorded during an episode (``homie up sim --record`` or ``homie bag record``) holds, per round, the
views the planner saw (``/homie/views``), the privileged state (``/sim/world_state``), the planner's answer
(``/homie/planner_output``) and the executor's feedback (``/homie/episode_status``). :func:`replay_planner`
feeds a planner the same inputs round by round and compares its subtask with the recorded one.

Decision: the replay is *open loop* ("teacher forcing"). After every round the session records the
**recorded** answer and feedback, not the replayed planner's, so that each round is judged on exactly the
inputs the original planner had; a single divergence does not make every later round incomparable. A round
agrees when the bracketed subtasks are equal (``[Put, apple, fridge]``); the model and the analysis text are
not compared.

The requests carry what the graph's planner node gives (:mod:`homiebot.ros.episode`): the scene spec
(``/sim/scene_description``) for every planner and, for planners that read the observation, the recorded
views with their segmentation and the instances seen so far (``grounded_targets``).

The views and the state of round N are those whose ``state_sequence`` equals the one the planner output
names (the simulator state version the planner saw); receive times are not used for this, because messages
of different publishers can reach a recorder out of their causal order.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

from homie_msgs.msg import EpisodeStatus, MultiView, PlannerOutput, Task
from homie_msgs.msg import WorldState as WorldStateMsg
from rclpy.serialization import deserialize_message
from std_msgs.msg import String

from homiebot.agent.loop import VISIBLE_MIN_PIXELS
from homiebot.agent.session import PlannerSession
from homiebot.config import MAX_ROUNDS
from homiebot.eval.tasks import get_task
from homiebot.planner.base import Planner
from homiebot.ros import convert
from homiebot.ros.bag import BagError, read_messages
from homiebot.ros.episode import reads_observation
from homiebot.sim.scene import SceneSpec

_TYPES = {
    "/homie/task_started": Task,
    "/homie/planner_output": PlannerOutput,
    "/homie/episode_status": EpisodeStatus,
    "/homie/views": MultiView,
    "/sim/world_state": WorldStateMsg,
    "/sim/scene_description": String,
}


@dataclass
class ReplayRound:
    index: int
    recorded: str
    replayed: str
    feedback_code: str
    agrees: bool


@dataclass
class ReplayReport:
    task_id: str
    instruction: str
    planner: str
    rounds: list[ReplayRound] = field(default_factory=list)

    @property
    def agreement(self) -> float:
        return sum(r.agrees for r in self.rounds) / len(self.rounds) if self.rounds else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "agreement": self.agreement}


def replay_planner(bag: str | os.PathLike[str], planner: Planner, max_rounds: int | None = None) -> ReplayReport:
    messages = read_messages(bag, _TYPES)
    decoded = [(m.topic, m.timestamp_ns, deserialize_message(m.data, _TYPES[m.topic])) for m in messages]
    tasks = [msg for topic, _, msg in decoded if topic == "/homie/task_started"]
    outputs = [(t, msg) for topic, t, msg in decoded if topic == "/homie/planner_output"]
    if not tasks or not outputs:
        missing = [name for name, ok in (("/homie/task_started", tasks), ("/homie/planner_output", outputs)) if not ok]
        raise BagError(f"{bag} is not an episode bag: no {', '.join(missing)}")
    task = tasks[-1]
    feedback_by_round: dict[int, Any] = {}
    for topic, _, msg in decoded:
        if topic == "/homie/episode_status" and msg.round_index > 0 and msg.state != EpisodeStatus.WAITING:
            feedback_by_round[msg.round_index] = msg.last_feedback
    spec = get_task(task.task_id) if task.task_id else None
    scenes = [msg.data for topic, _, msg in decoded if topic == "/sim/scene_description"]
    scene_spec = SceneSpec.model_validate_json(scenes[-1]) if scenes else None

    rounds_limit = max_rounds or task.max_rounds or MAX_ROUNDS
    session = PlannerSession(task.instruction, planner, max_rounds=rounds_limit)
    seed = (spec.seed if spec is not None else 0) + task.seed
    planner.reset(task.instruction, seed=seed)
    if planner.privileged and (scene_spec is None or spec is None):
        raise BagError(f"{bag}: a privileged planner needs /sim/scene_description and a built-in task id")
    observes = reads_observation(planner)
    seen: set[str] = set()
    report = ReplayReport(task.task_id, task.instruction, planner.name)

    for _stamp, recorded_msg in outputs:
        if session.done:
            break
        views = _matching(decoded, "/homie/views", recorded_msg.state_sequence)
        state_msg = _matching(decoded, "/sim/world_state", recorded_msg.state_sequence)
        if views is None or state_msg is None:
            raise BagError(f"{bag}: round {recorded_msg.round_index} has no views or state of sequence "
                           f"{recorded_msg.state_sequence} (record /homie/views and /sim/world_state)")
        state = convert.world_state_from_msg(state_msg)
        observation = convert.observation_from_msg(views) if observes else None
        if observation is not None:
            images = observation.images()
            seen.update(observation.visible_instances(VISIBLE_MIN_PIXELS))
        else:
            images = convert.multiview_images(views)
        request = session.make_request(images, world_state=state, goal=spec.goal if spec else None,
                                       grounded_targets=tuple(sorted(seen)), evaluation=spec.evaluation if spec else None,
                                       scene=scene_spec, observation=observation)
        replayed = session.parse(planner.plan(request))
        recorded = convert.planner_output_from_msg(recorded_msg)
        feedback_msg = feedback_by_round.get(recorded_msg.round_index)
        if feedback_msg is None:
            raise BagError(f"{bag}: round {recorded_msg.round_index} has a planner output but no feedback")
        feedback = convert.feedback_from_msg(feedback_msg)
        recorded_text = recorded.subtask.text() if recorded.subtask else "(unparseable)"
        replayed_text = replayed.subtask.text() if replayed.subtask else "(unparseable)"
        report.rounds.append(
            ReplayRound(recorded_msg.round_index, recorded_text, replayed_text, feedback.code.value, recorded_text == replayed_text)
        )
        session.record(recorded, feedback)
    return report


def _matching(decoded: list[tuple[str, int, Any]], topic: str, sequence: int) -> Any:
    """The last message of ``topic`` with this state sequence."""
    found = None
    for name, _, msg in decoded:
        if name == topic and msg.state_sequence == sequence:
            found = msg
    return found
