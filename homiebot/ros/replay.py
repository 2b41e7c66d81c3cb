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

Two agents (PARTNR's robot and human, docs/ros.md "Two agents"): a bag of a two-agent episode also holds the
human's rounds under ``/human`` (``/human/homie/planner_output``, ``/human/homie/episode_status``,
``/human/homie/views``, ``/human/sim/world_state``). Given the human's planner too (``partner``), the replay takes
both agents' recorded rounds in the loop's lock-step order (round N of the robot, then round N of the human) and
does what :class:`homiebot.agent.loop.EpisodeLoop` does between them: each planner meets the other's action list
at the start, and after each recorded round the other planner hears of it (``observe_partner``; navigation only
for a planner that ``hears_partner_navigation``). Each agent's request state lists both agents, built from the
two agents' states of the same world version, as the planner node builds it. Without ``partner`` only the
robot's rounds are replayed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from homie_msgs.msg import EpisodeStatus, MultiView, PlannerOutput, Task
from homie_msgs.msg import WorldState as WorldStateMsg
from rclpy.serialization import deserialize_message
from std_msgs.msg import String

from homiebot.agent.loop import VISIBLE_MIN_PIXELS, WAIT_ACTION, EpisodeConfig
from homiebot.agent.session import PlannerSession
from homiebot.config import MAX_ROUNDS
from homiebot.planner.base import Planner
from homiebot.ros import convert
from homiebot.ros.bag import BagError, bag_info, read_messages
from homiebot.ros.episode import reads_observation
from homiebot.sim.scene import SceneSpec
from homiebot.tasks.suite import get_task, task_actions
from homiebot.types import casefold_words


@dataclass(frozen=True)
class _AgentTopics:
    """Where one agent's rounds, feedback, views and states are in a bag (its namespace, docs/ros.md)."""

    output: str
    status: str
    views: str
    state: str

    @classmethod
    def of(cls, namespace: str) -> _AgentTopics:
        return cls(f"{namespace}/homie/planner_output", f"{namespace}/homie/episode_status",
                   f"{namespace}/homie/views", f"{namespace}/sim/world_state")


#: Agent id -> its topics: the robot's at the root, the human's under /human.
AGENT_TOPICS = {role: _AgentTopics.of(convert.ROLE_NAMESPACES[name]) for role, name in convert.AGENT_NAMES.items()}

_TYPES: dict[str, Any] = {"/homie/task_started": Task, "/sim/scene_description": String}
for _topics in AGENT_TOPICS.values():
    _TYPES.update({_topics.output: PlannerOutput, _topics.status: EpisodeStatus, _topics.views: MultiView,
                   _topics.state: WorldStateMsg})


@dataclass
class ReplayRound:
    index: int
    recorded: str
    replayed: str
    feedback_code: str
    agrees: bool


def _agreement(rounds: Sequence[ReplayRound]) -> float:
    return sum(r.agrees for r in rounds) / len(rounds) if rounds else 0.0


@dataclass
class ReplayReport:
    task_id: str
    instruction: str
    planner: str
    rounds: list[ReplayRound] = field(default_factory=list)
    #: A two-agent bag replayed with the human's planner: its name and the human's rounds.
    partner_planner: str | None = None
    partner_rounds: list[ReplayRound] = field(default_factory=list)

    @property
    def agreement(self) -> float:
        """The share of agreeing rounds, over both agents' rounds when the human's were replayed."""
        return _agreement([*self.rounds, *self.partner_rounds])

    @property
    def robot_agreement(self) -> float:
        return _agreement(self.rounds)

    @property
    def partner_agreement(self) -> float | None:
        return _agreement(self.partner_rounds) if self.partner_planner is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "agreement": self.agreement, "robot_agreement": self.robot_agreement,
                "partner_agreement": self.partner_agreement}


class _AgentReplay:
    """One agent's side of the replay: its planner and session, its recorded rounds and feedback, what it saw."""

    def __init__(self, role: int, planner: Planner, session: PlannerSession, decoded: list[tuple[str, int, Any]]) -> None:
        self.role = role
        self.name = convert.AGENT_NAMES[role]
        self.topics = AGENT_TOPICS[role]
        self.planner = planner
        self.session = session
        self.observes = reads_observation(planner)
        self.seen: set[str] = set()
        self.rounds: list[ReplayRound] = []
        self.outputs = [msg for topic, _, msg in decoded if topic == self.topics.output]
        self.feedback: dict[int, Any] = {}
        for topic, _, msg in decoded:
            if topic == self.topics.status and msg.round_index > 0 and msg.state != EpisodeStatus.WAITING:
                self.feedback[msg.round_index] = msg.last_feedback


def holds_two_agents(bag: str | os.PathLike[str]) -> bool:
    """Whether ``bag`` holds a two-agent episode (the human's planner outputs under /human)."""
    return any(topic.name == AGENT_TOPICS[1].output and topic.count > 0 for topic in bag_info(bag).topics)


def replay_planner(bag: str | os.PathLike[str], planner: Planner, max_rounds: int | None = None,
                   partner: Planner | None = None) -> ReplayReport:
    """Replay ``bag``'s robot rounds to ``planner`` and, with ``partner``, its human rounds to the human's planner
    (a bag of a two-agent episode; module docstring)."""
    messages = read_messages(bag, _TYPES)
    decoded = [(m.topic, m.timestamp_ns, deserialize_message(m.data, _TYPES[m.topic])) for m in messages]
    tasks = [msg for topic, _, msg in decoded if topic == "/homie/task_started"]
    robot_outputs = [msg for topic, _, msg in decoded if topic == AGENT_TOPICS[0].output]
    if not tasks or not robot_outputs:
        missing = [name for name, ok in (("/homie/task_started", tasks), (AGENT_TOPICS[0].output, robot_outputs)) if not ok]
        raise BagError(f"{bag} is not an episode bag: no {', '.join(missing)}")
    task = tasks[-1]
    spec = get_task(task.task_id) if task.task_id else None
    scenes = [msg.data for topic, _, msg in decoded if topic == "/sim/scene_description"]
    scene_spec = SceneSpec.model_validate_json(scenes[-1]) if scenes else None
    pair = any(topic == AGENT_TOPICS[1].output for topic, _, _ in decoded)
    if partner is not None and not pair:
        raise BagError(f"{bag} holds one agent's episode (no {AGENT_TOPICS[1].output}): replay it without a partner planner")

    # The sessions the planner node's loop had: the task's action list, each agent's own in a pair.
    config = EpisodeConfig.with_actions(task_actions(spec), max_rounds=max_rounds or task.max_rounds or MAX_ROUNDS)
    configs = {0: config}
    if partner is not None:
        from homiebot.multiagent.centralized import AgentRole
        from homiebot.multiagent.pair import role_config

        configs = {role: role_config(AgentRole(role), config) for role in (0, 1)}
    agents = [_AgentReplay(role, p, configs[role].new_session(task.instruction, p), decoded)
              for role, p in ((0, planner), (1, partner)) if p is not None]
    seed = (spec.seed if spec is not None else 0) + task.seed
    for agent in agents:
        agent.planner.reset(task.instruction, seed=seed)
        if agent.planner.privileged and (scene_spec is None or spec is None):
            raise BagError(f"{bag}: a privileged planner needs /sim/scene_description and a built-in task id")
    if partner is not None:  # as the loop: each planner learns the other's action list
        planner.meet_partner("human", configs[1].actions)
        partner.meet_partner("robot", configs[0].actions)
    report = ReplayReport(task.task_id, task.instruction, planner.name,
                          partner_planner=partner.name if partner is not None else None)

    # The loop's lock-step order: round N of the robot, then round N of the human.
    order = sorted(((msg.round_index, agent.role, msg, agent) for agent in agents for msg in agent.outputs),
                   key=lambda item: (item[0], item[1]))
    for _, _, recorded_msg, agent in order:
        if agent.session.done:
            continue
        recorded, feedback = _replay_round(bag, decoded, agent, recorded_msg, spec, scene_spec, pair)
        for other in agents:
            if other is not agent:
                _tell(other.planner, agent.name, recorded, feedback)
    report.rounds = agents[0].rounds
    if partner is not None:
        report.partner_rounds = agents[1].rounds
    return report


def _replay_round(bag: str | os.PathLike[str], decoded: list[tuple[str, int, Any]], agent: _AgentReplay,
                  recorded_msg: Any, spec: Any, scene_spec: SceneSpec | None, pair: bool) -> tuple[Any, Any]:
    """One recorded round of ``agent``: its request from the recorded views and state, the planner's answer
    compared with the recorded one, the recorded answer and feedback folded into its session."""
    sequence = recorded_msg.state_sequence
    views = _matching(decoded, agent.topics.views, sequence)
    state_msg = _matching(decoded, agent.topics.state, sequence)
    if views is None or state_msg is None:
        raise BagError(f"{bag}: the {agent.name}'s round {recorded_msg.round_index} has no views or state of sequence "
                       f"{sequence} (record {agent.topics.views} and {agent.topics.state})")
    state = convert.world_state_from_msg(state_msg)
    if pair:  # the planner node lists both agents in every state of a two-agent episode (from both agents' states)
        other = 1 - agent.role
        other_msg = _matching(decoded, AGENT_TOPICS[other].state, sequence)
        if other_msg is None:
            raise BagError(f"{bag}: the {agent.name}'s round {recorded_msg.round_index} has no "
                           f"{AGENT_TOPICS[other].state} of sequence {sequence}")
        state = convert.with_both_agents(state, agent.role, convert.world_state_from_msg(other_msg))
    observation = convert.observation_from_msg(views) if agent.observes else None
    if observation is not None:
        images = observation.images()
        agent.seen.update(observation.visible_instances(VISIBLE_MIN_PIXELS))
    else:
        images = convert.multiview_images(views)
    request = agent.session.make_request(images, world_state=state, goal=spec.goal if spec else None,
                                         grounded_targets=tuple(sorted(agent.seen)),
                                         evaluation=spec.evaluation if spec else None, scene=scene_spec,
                                         observation=observation)
    replayed = agent.session.parse(agent.planner.plan(request), agent.planner.answer_format)
    recorded = convert.planner_output_from_msg(recorded_msg)
    feedback_msg = agent.feedback.get(recorded_msg.round_index)
    if feedback_msg is None:
        raise BagError(f"{bag}: the {agent.name}'s round {recorded_msg.round_index} has a planner output but no feedback")
    feedback = convert.feedback_from_msg(feedback_msg)
    recorded_text = recorded.subtask.text() if recorded.subtask else "(unparseable)"
    replayed_text = replayed.subtask.text() if replayed.subtask else "(unparseable)"
    agent.rounds.append(ReplayRound(recorded_msg.round_index, recorded_text, replayed_text, feedback.code.value,
                                    recorded_text == replayed_text))
    agent.session.record(recorded, feedback)
    return recorded, feedback


def _tell(planner: Planner, agent_name: str, recorded: Any, feedback: Any) -> None:
    """The other agent's recorded round, told as the loop tells it (EpisodeLoop._tell_partner: PARTNR's
    decentralized agents hear the partner's non-navigation actions; End and unparseable answers are not told)."""
    subtask = recorded.subtask
    if subtask is None or subtask.is_end:
        return
    navigation = casefold_words(subtask.action) in (casefold_words("Go to"), casefold_words(WAIT_ACTION))
    if not navigation or planner.hears_partner_navigation:
        planner.observe_partner(agent_name, subtask.text(), feedback)


def _matching(decoded: list[tuple[str, int, Any]], topic: str, sequence: int) -> Any:
    """The last message of ``topic`` with this state sequence."""
    found = None
    for name, _, msg in decoded:
        if name == topic and msg.state_sequence == sequence:
            found = msg
    return found
