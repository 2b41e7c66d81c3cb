"""Planners for PARTNR's two agents (robot = agent 0, human = agent 1) in the loop's lock-step rounds.

PARTNR (§4.1, table 2) runs a robot and a human either **centralized** (one planner decides both agents'
actions, "with complete information about both agent's states") or **decentralized** (one planner per agent,
each with its own world graph, each reasoning about the other's actions). In the loop
(:mod:`homiebot.agent.loop`) every agent has its own session and takes one round after the other; this module
provides what plans for them:

* roles and their action lists (:func:`role_config`): the robot lacks PARTNR's state-changing skills (Turn on,
  Turn off, Clean, Fill, Pour: A.9.1), both get PARTNR's ``Wait``;
* :class:`ShareExpert`: PARTNR's heuristic expert restricted to the agent's share of the task's propositions
  (:mod:`homiebot.multiagent.split`); it waits while a proposition it depends on is the partner's and not yet
  done, and ends when every proposition is done. A partner that never does its share (a person in ``homie
  play`` who walks off) is taken over after :data:`TAKEOVER_AFTER_WAITS` waiting rounds without progress, or the
  expert ends naming what only the partner can do;
* :class:`CentralizedBrain` / :class:`Facet`: one planner answering for both agents; the robot's facet asks
  the brain, which decides both agents' next actions in one call on the same state, and the human's facet plays
  back the human's part (a facet whose partner has ended asks the brain alone). :class:`CentralizedExpert` is
  the heuristic expert as such a brain (PARTNR's Heuristic-Expert is centralized);
* :class:`ScriptedHuman`: a human that follows a fixed list of subtasks, then ends;
* :class:`PartnerAware` ReAct (decentralized): the robot hears of the partner's non-navigation actions, as
  PARTNR's decentralized agents do, through the loop's ``observe_partner`` call.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import networkx as nx

from homiebot.agent.loop import WAIT_ACTION, EpisodeConfig
from homiebot.config.collaboration import CollaborationConfig
from homiebot.executor import roles
from homiebot.executor.executor import ExecutorConfig
from homiebot.executor.roles import AGENT_NAMES
from homiebot.multiagent.centralized import AgentRole
from homiebot.multiagent.split import split_propositions
from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.partnr_expert import PartnrExpertPlanner, PlannedStep
from homiebot.planner.prompt import format_output
from homiebot.tasks.partnr.language import EvaluationFunction
from homiebot.tasks.partnr.predicates import STATE_PREDICATES
from homiebot.tasks.partnr.tracker import PropositionTracker
from homiebot.types import Feedback, Subtask, WorldState, casefold_words

log = logging.getLogger(__name__)

MODES = ("centralized", "decentralized")
#: Rounds an expert of a pair waits for its partner's share while the partner neither gets a proposition of the task
#: done nor tries anything but walking and waiting, before it takes the share over, or ends naming why when what is
#: left only the partner can do (a robot cannot switch, clean, fill or pour). A partner's Pick, Put, Open, ... (the
#: loop reports them, PARTNR's decentralized agents learn them) counts as working on it, even when it fails (a
#: noisy partner retrying is not idle); an expert partner never walks more than 2 rounds in a row, so 8 never fires
#: between experts; a person who walks off or only waits (``homie play``) costs 8 rounds, not the round limit.
TAKEOVER_AFTER_WAITS = 8


def role_actions(role: AgentRole, actions: Sequence[str]) -> tuple[str, ...]:
    """``actions`` for ``role`` (:func:`homiebot.executor.roles.role_actions`)."""
    return roles.role_actions(AGENT_NAMES[role], actions)


def role_config(role: AgentRole, base: EpisodeConfig) -> EpisodeConfig:
    """The episode configuration of one agent of a pair: its executor's (:func:`role_executor`)."""
    return replace(base, executor=role_executor(role, base.executor))


def role_executor(role: AgentRole, base: ExecutorConfig) -> ExecutorConfig:
    """The executor configuration of one agent of a pair (:func:`homiebot.executor.roles.role_executor`)."""
    return roles.role_executor(AGENT_NAMES[role], base)


def _wait(why: str) -> str:
    return format_output(why, Subtask(WAIT_ACTION), "None")


class ShareExpert(PartnrExpertPlanner):
    """The PARTNR heuristic expert for one agent of a pair: it works only on its share of the propositions
    (:func:`homiebot.multiagent.split.split_propositions`), waits for a partner's proposition it depends on,
    and ends when every proposition of the task (both shares) is done."""

    name = "partnr_expert_share"

    def __init__(self, role: AgentRole, takeover_after: int = TAKEOVER_AFTER_WAITS) -> None:
        super().__init__()
        if takeover_after < 1:
            raise ValueError("takeover_after must be >= 1")
        self.role = role
        self.takeover_after = takeover_after
        self._share: set[int] | None = None
        self._set_down_at: tuple[str, str] | None = None  # (object, furniture) chosen to free the hand
        self._waits = 0  # Wait answers since a proposition was last newly done
        self._done_count = -1
        #: Propositions of the partner's share this expert took over (for records and tests).
        self.taken_over: list[int] = []

    def reset(self, task: str, seed: int = 0) -> None:
        super().reset(task, seed)
        self._share = None
        self._set_down_at = None
        self._waits = 0
        self._done_count = -1
        self.taken_over = []

    def _set_down(self, state: WorldState, want: str) -> PlannedStep:
        """Free the hand at one chosen furniture: with the partner moving about, "the nearest surface" changes
        from round to round, and following it could walk back and forth for ever."""
        held = state.held
        assert held is not None
        if self._set_down_at is None or self._set_down_at[0] != held:
            step = super()._set_down(state, want)
            place = step.subtask.place if step.subtask.action == "Put" else step.subtask.target
            self._set_down_at = (held, str(place))
            return step
        place = self._set_down_at[1]
        return self._approach(state, place, PlannedStep(Subtask("Put", held, place), "RT-1-X",
                                                  f"{want}, my hand must be free first."))

    def _owns(self, index: int) -> bool:
        """Only this agent's share: the larger-first order of a next-to pair (the base class) never carries the
        partner's object."""
        return self._share is None or index in self._share

    def share(self, function: EvaluationFunction) -> set[int]:
        if self._share is None:
            self._share = set(split_propositions(function)[self.role])
        return self._share

    def observe_partner(self, partner: str, subtask_text: str, feedback: Feedback) -> None:
        """The partner did something other than walking or waiting (the loop reports only those): it is working
        on the task, so the wait before a take-over starts again."""
        self._waits = 0

    def _decide(self, tracker: PropositionTracker, state: WorldState, request: PlanRequest) -> PlannedStep:
        """The next step on this agent's share; after :attr:`takeover_after` Waits with no proposition newly done
        and no partner action but walking and waiting, the partner's share is taken over (what this role can do),
        or the agent ends naming what is left."""
        function = tracker.function
        done = sum(1 for i in range(len(function.propositions)) if self._done(tracker, i))
        if done != self._done_count:
            self._done_count, self._waits = done, 0
        step = self._decide_share(tracker, state, request)
        if step.subtask.action != WAIT_ACTION:
            return step
        self._waits += 1
        if self._waits <= self.takeover_after:
            return step
        share = self.share(function)
        left = [i for i in range(len(function.propositions)) if not self._done(tracker, i) and i not in share]
        mine = [i for i in left if self.role is AgentRole.HUMAN or function.propositions[i].function_name not in STATE_PREDICATES]
        partner = "robot" if self.role is AgentRole.HUMAN else "human"
        if mine:
            log.info("%s: no progress in %d waits; taking over propositions %s of the %s's share",
                     self.role.name.lower(), self.takeover_after, mine, partner)
            share.update(mine)
            self.taken_over.extend(mine)
            self._waits = 0
            step = self._decide_share(tracker, state, request)
            if step.subtask.action != WAIT_ACTION:
                return replace(step, why=f"My partner has not done its part for {self.takeover_after} rounds, so I "
                                         f"do it. {step.why}")
        what = "; ".join(str(function.propositions[i].function_name) + "(" + ", ".join(
            str(v) for v in function.propositions[i].args.values()) + ")" for i in left) or "its part"
        why = (f"I waited {self.takeover_after} rounds without progress; left is what only the {partner} can do: {what}"
               if left and not mine else f"I waited {self.takeover_after} rounds without progress and cannot go on: {what}")
        return PlannedStep(Subtask("End"), "", why)

    def _decide_share(self, tracker: PropositionTracker, state: WorldState, request: PlanRequest) -> PlannedStep:
        function = tracker.function
        share = self.share(function)
        edges = nx.DiGraph(function.temporal_edges())
        waiting_for_partner = False
        for index in self._order(function):
            if self._done(tracker, index):
                continue
            if index not in share:
                waiting_for_partner = True
                continue
            before = nx.ancestors(edges, index) if index in edges else set()
            if any(tracker.satisfied_at[a] == -1 for a in before):
                waiting_for_partner = waiting_for_partner or any(a not in share for a in before)
                continue
            step = self._step_for(function.propositions[index], index, tracker, state, request)
            if step is not None:
                target = step.subtask.target
                if (step.subtask.action == "Pick" and target in state.entities and state.entities[target].held
                        and state.held != target):
                    # The partner holds it (PARTNR: a Pick of it would fail): wait until it is put down.
                    return PlannedStep(Subtask(WAIT_ACTION), "None", f"My partner holds the {target}, so I wait.")
                return step
        if waiting_for_partner or any(not self._done(tracker, i) for i in range(len(function.propositions))):
            if state.held is not None and not any(
                state.held in str(function.propositions[i].args) for i in share if not self._done(tracker, i)
            ):
                return self._set_down(state, "My part is done")
            return PlannedStep(Subtask(WAIT_ACTION), "None", "My part is done or waits for my partner's, so I wait.")
        return PlannedStep(Subtask("End"), "", "All steps of the task are done, so the task is complete.")


class CentralizedBrain:
    """One planner for both agents (PARTNR's centralized control). Subclasses implement :meth:`decide`: the
    answers of every agent still acting, from one request per agent taken on the same world state."""

    name = "centralized"
    privileged = False
    #: As on :class:`~homiebot.planner.base.Planner`; the facets copy them.
    accepts_free_text = True
    hears_partner_navigation = False

    def __init__(self) -> None:
        self._pending: dict[AgentRole, str] = {}
        self.planning_cycles = 0  # calls of the brain (PARTNR's planning cycles for a centralized planner)
        self.role_actions: dict[AgentRole, tuple[str, ...]] = {}  # each agent's action list (from the loop)

    def reset(self, task: str, seed: int = 0) -> None:
        self._pending = {}
        self.planning_cycles = 0

    def observe(self, role: AgentRole, subtask_text: str, feedback: Feedback) -> None:
        """An agent's round ended (what it did, the executor's answer): a brain that keeps track of results
        overrides this."""

    def close(self) -> None:
        """Release the brain's model, if it holds one."""

    def answer(self, role: AgentRole, request: PlanRequest, partner_active: bool) -> str:
        self.role_actions[role] = tuple(request.actions)
        pending = self._pending.pop(role, None)
        if pending is not None:
            return pending
        roles = [AgentRole.ROBOT, AgentRole.HUMAN] if partner_active else [role]
        self.planning_cycles += 1
        answers = self.decide(role, request, roles)
        for other, text in answers.items():
            if other != role:
                self._pending[other] = text
        return answers[role]

    def decide(self, role: AgentRole, request: PlanRequest, roles: Sequence[AgentRole]) -> dict[AgentRole, str]:
        raise NotImplementedError


class Facet(Planner):
    """One agent's face of a :class:`CentralizedBrain`: the loop's planner for that agent."""

    def __init__(self, brain: CentralizedBrain, role: AgentRole) -> None:
        self.brain = brain
        self.role = role
        self.name = f"{brain.name}:{role.name.lower()}"
        self.privileged = brain.privileged
        self.accepts_free_text = brain.accepts_free_text
        self.partner: Facet | None = None
        self.ended = False
        self.hears_partner_navigation = brain.hears_partner_navigation

    def meet_partner(self, agent: str, actions: Sequence[str]) -> None:
        """The loop tells each agent's planner the partner's action list: the brain plans with both lists."""
        self.brain.role_actions[AgentRole[agent.upper()]] = tuple(actions)

    def observe_partner(self, agent: str, subtask_text: str, feedback: Feedback) -> None:
        """The loop's report of the other agent's round: to the brain, when it keeps track of results."""
        self.brain.observe(AgentRole[agent.upper()], subtask_text, feedback)

    def close(self) -> None:
        if self.role is AgentRole.ROBOT:
            self.brain.close()

    def reset(self, task: str, seed: int = 0) -> None:
        self.ended = False
        if self.role is AgentRole.ROBOT:
            self.brain.reset(task, seed)

    def plan(self, request: PlanRequest) -> str:
        partner_active = self.partner is not None and not self.partner.ended
        answer = self.brain.answer(self.role, request, partner_active)
        if "[End]" in answer:
            self.ended = True
        return answer


def centralized_pair(brain: CentralizedBrain) -> tuple[Facet, Facet]:
    robot, human = Facet(brain, AgentRole.ROBOT), Facet(brain, AgentRole.HUMAN)
    robot.partner, human.partner = human, robot
    return robot, human


class CentralizedExpert(CentralizedBrain):
    """PARTNR's Heuristic-Expert as one planner: both agents' next steps decided together on the same state
    (the robot's request, whose world state lists both agents): the human's step is planned on the state seen
    from the human's pose and hand (:func:`_as_agent`)."""

    name = "partnr_expert_pair"
    privileged = True
    accepts_free_text = False

    def __init__(self) -> None:
        super().__init__()
        self.experts = {role: ShareExpert(role) for role in AgentRole}

    def reset(self, task: str, seed: int = 0) -> None:
        super().reset(task, seed)
        for expert in self.experts.values():
            expert.reset(task, seed)

    def decide(self, role: AgentRole, request: PlanRequest, roles: Sequence[AgentRole]) -> dict[AgentRole, str]:
        state = request.world_state
        if state is None:
            raise ValueError("the centralized expert needs the privileged world state")
        answers = {}
        for other in roles:
            seen = _as_agent(state, other)
            answers[other] = self.experts[other].plan(replace(request, world_state=seen))
        return answers


def _as_agent(state: WorldState, role: AgentRole) -> WorldState:
    """``state`` from agent ``role``'s point of view (its pose, radius, hand and room), from ``state.agents``."""
    for agent in state.agents:
        if agent.role == int(role):
            return replace(state, robot=agent.pose, robot_radius=agent.radius, held=agent.held, robot_room=agent.room)
    if role is AgentRole.ROBOT:
        return state
    raise ValueError(f"the world state has no agent {int(role)}")


class ScriptedHuman(Planner):
    """A human partner that performs a fixed list of subtasks (``[Go to, floor_lamp]`` or ``Go to, floor_lamp``),
    one per round, then ends. No privileged input: a stand-in for a person or a simple simulated human."""

    name = "scripted_human"
    accepts_free_text = True

    def __init__(self, subtasks: Sequence[str] | str = ()) -> None:
        if isinstance(subtasks, str):
            subtasks = [s for s in subtasks.split(";") if s.strip()]
        self.subtasks = [s.strip().strip("[]").strip() for s in subtasks]
        self._next = 0

    def reset(self, task: str, seed: int = 0) -> None:
        self._next = 0

    def plan(self, request: PlanRequest) -> str:
        if self._next >= len(self.subtasks):
            return format_output("My list of subtasks is done.", Subtask("End"), "None")
        text = self.subtasks[self._next]
        self._next += 1
        parts = [p.strip() for p in text.split(",")]
        subtask = Subtask(parts[0], parts[1] if len(parts) > 1 else None, parts[2] if len(parts) > 2 else None)
        model = "NoMaD" if casefold_words(parts[0]) == "go to" else ("octo" if casefold_words(parts[0]) in (
            "open", "close", "turn on", "turn off") else "RT-1-X")
        return format_output(f"Scripted step {self._next} of {len(self.subtasks)}.", subtask, model)


@dataclass
class PartnerEvent:
    """One partner action the loop reported (PARTNR: non-navigation actions only)."""

    agent: str
    subtask: str
    feedback: Feedback


class PartnerLog:
    """Mixin: keeps the partner actions the loop reports through ``observe_partner``. List it before the planner
    class (``class P(PartnerLog, SomePlanner)``), so that its ``observe_partner`` comes before the Planner no-op."""

    def observe_partner(self, agent: str, subtask_text: str, feedback: Feedback) -> None:
        self.partner_events().append(PartnerEvent(agent, subtask_text, feedback))

    def partner_events(self) -> list[PartnerEvent]:
        # Created on first use: the mixin has no __init__ of its own, so planners keep their keyword constructors.
        events: list[PartnerEvent] | None = getattr(self, "_partner_events", None)
        if events is None:
            events = []
            self._partner_events = events
        return events


def partner_lines(events: Sequence[PartnerEvent]) -> str:
    """PARTNR's ``Other_Agent_Action`` lines for the partner's actions since the last call."""
    return "\n".join(
        f"Other agent ({e.agent}) action: {e.subtask} -> {'success' if e.feedback.success else 'failed: ' + e.feedback.message}"
        for e in events
    )


# ------------------------------------------------------------------------------------------------ factories

#: Planner names that have a two-agent form here (others come from the registry, decentralized only).
PAIR_PLANNERS = ("expert", "react", "scripted")


def make_pair_planners(
    mode: str, robot: str, human: str, options: Mapping[str, Any] | None = None
) -> tuple[Planner, Planner]:
    """The robot's and the human's planners of a pair named on a command line or in node parameters: ``options``
    configure the pair's model planner (:meth:`CollaborationConfig.from_options`); :func:`pair_planners`."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose {' or '.join(MODES)}")
    return pair_planners(CollaborationConfig.from_options(
        options=options or {}, suite="", mode=mode, planner_robot=robot, planner_human=human))


def pair_planners(config: CollaborationConfig) -> tuple[Planner, Planner]:
    """The robot's and the human's planners of a pair. ``expert``: the heuristic expert on its proposition share
    (centralized: one :class:`CentralizedExpert`); ``react``: the ReAct tool planner (centralized: one
    :class:`~homiebot.multiagent.react_pair.CentralizedReAct` answering for both; decentralized: one
    :class:`~homiebot.multiagent.react_pair.PartnerReAct` per agent); ``scripted`` (human only): a
    :class:`ScriptedHuman` with ``config.human_script``; any other registry name: the planner of
    ``config.model_planner`` per agent (decentralized only)."""
    robot, human = config.planner_robot, config.planner_human
    if robot == "scripted":
        raise ValueError("the scripted planner plays the human only (--partner-planner scripted)")
    if config.mode == "centralized":
        if robot != human:
            raise ValueError(f"centralized control is one planner for both agents: --planner and --partner-planner "
                             f"must name the same planner (got {robot!r} and {human!r})")
        if robot == "expert":
            return centralized_pair(CentralizedExpert())
        if robot == "react":
            from homiebot.multiagent.react_pair import CentralizedReAct

            # The options given, not ReAct's defaults: the centralized planner has its own call budget. They are
            # ReAct's validated options (CollaborationConfig.model_planner), as JSON values.
            given: dict[str, Any] = dict(config.given_options())
            return centralized_pair(CentralizedReAct(**given))
        raise ValueError(f"centralized control needs a planner that answers for both agents: expert or react, not {robot!r}")
    return _one(robot, AgentRole.ROBOT, config), _one(human, AgentRole.HUMAN, config)


def _one(name: str, role: AgentRole, config: CollaborationConfig) -> Planner:
    if name == "expert":
        return ShareExpert(role)
    if name == "react":
        from homiebot.multiagent.react_pair import PartnerReAct

        return PartnerReAct(role=role, **config.given_options())
    if name == "scripted":
        return ScriptedHuman(config.human_script)
    return _model_planner(config)


def _model_planner(config: CollaborationConfig) -> Planner:
    from homiebot.planner.registry import build_planner

    if config.model_planner is None:  # from_options always makes one for a planner that is not optionless
        raise ValueError("the pair names a model planner without its configuration")
    return build_planner(config.model_planner)


def make_single_planner(name: str, options: Mapping[str, Any] | None = None) -> Planner:
    """The robot's planner alone, for the single-agent baseline (``expert``: PARTNR's expert);
    :func:`single_planner`."""
    return single_planner(CollaborationConfig.from_options(options=options or {}, suite="", planner_robot=name))


def single_planner(config: CollaborationConfig) -> Planner:
    """The robot's planner of ``config`` alone, for the single-agent baseline of the same task."""
    if config.planner_robot == "expert":
        return PartnrExpertPlanner()
    return _model_planner(config)
