"""The ReAct tool planner for PARTNR's two agents: decentralized (one :class:`PartnerReAct` per agent) and
centralized (one :class:`CentralizedReAct` language model answering for both).

PARTNR (§4.1 and appendix A.9, the prompt structures of spec §2.3 and §2.4) runs:

* **decentralized** ReAct agents, each with its own world description kept by deterministic updates, told in
  the system prompt that another agent works on the same task at the same time, and told of the partner's
  non-navigation actions (the finetuning data's ``Other_Agent_Action`` lines; the loop delivers them through
  ``observe_partner``). The robot is the "task receiver", the human the "task giver". Our
  :class:`PartnerReAct` is :class:`homiebot.planner.react.ReActPlanner` with these additions: the role
  paragraph in the system prompt, the partner's actions in the next observation turn, the partner's picks and
  placements applied to its world index ("held by the other agent"), and ``Wait`` answered with what the
  partner did since;
* **centralized** ReAct: one model, one call per round for both agents, answering
  ``Agent_0_Action: <call>`` / ``Agent_1_Action: <call>`` under a grammar that allows each agent only its tools
  (:func:`homiebot.multiagent.centralized.centralized_grammar`), or ``Final Thought: Exit!``; its observations
  come back as ``Agent_0_Observation`` / ``Agent_1_Observation`` lines. PARTNR caps it at 100 calls.

Wording is ours, following the structure the spec describes (no prompt text copied).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from homiebot.multiagent.centralized import (
    PARTNR_CENTRALIZED_MAX_LLM_CALLS,
    TERMINATION,
    AgentRole,
    centralized_grammar,
    parse_centralized,
    tools_for_role,
)
from homiebot.multiagent.pair import WAIT_ACTION, CentralizedBrain, PartnerEvent, PartnerLog, partner_lines
from homiebot.planner.base import PlanRequest
from homiebot.planner.messages import ChatMessage
from homiebot.planner.prompt import format_output
from homiebot.planner.react import (
    AGENT_TOOL,
    DEFAULT_THOUGHT_MAX_CHARS,
    PERCEPTION_TOOLS,
    STOP_WORD,
    SYSTEM_PROMPT,
    TOOLS,
    TOOLS_BY_NAME,
    ChatEngine,
    ReActPlanner,
    Tool,
    ToolCall,
    WorldIndex,
    acting_subtask,
    grammar_max_bytes,
)
from homiebot.planner.text_planning import describe_scene
from homiebot.types import Action, ErrorCode, Feedback, Subtask, casefold_words

log = logging.getLogger(__name__)

#: What each role is told about the other agent (PARTNR: the robot receives the task, the human gives it).
ROLE_TEXT = {
    AgentRole.ROBOT: (
        "Another agent, a person, works on the same task in the same home at the same time. You take the part "
        "of the task the instruction leaves to the helper: when it says 'you move the cup and I will wash it', "
        "you move the cup. If the other agent already holds an object or has finished a step, move on to another "
        "part of the task."
    ),
    AgentRole.HUMAN: (
        "Another agent, a robot, works on the same task in the same home at the same time; only you can switch "
        "appliances on or off, clean, fill and pour. You take the part of the task the instruction keeps for the speaker: "
        "when it says 'you move the cup and I will wash it', you wash it. If the robot already holds an object or "
        "has finished a step, move on to another part of the task."
    ),
}


#: How many of the partner's earlier actions FindAgentActionTool reports besides the last one.
AGENT_HISTORY = 5


class PartnerReAct(PartnerLog, ReActPlanner):  # the log first: its observe_partner, not the Planner no-op
    """One decentralized ReAct agent of a pair (module docstring). ``role``: robot or human; the other
    arguments are :class:`~homiebot.planner.react.ReActPlanner`'s.

    It hears every round of the partner (``hears_partner_navigation``): the observation turns carry the
    non-navigation ones only, as PARTNR's; FindAgentActionTool (PARTNR's "summary of the other agent's actions")
    answers from all of them, so that it can say where the partner went."""

    name = "react_pair"
    partner_tools = True
    hears_partner_navigation = True

    def __init__(self, role: AgentRole | int | str = AgentRole.ROBOT, **options: Any) -> None:
        super().__init__(**options)
        if isinstance(role, str):
            role = AgentRole[role.upper()]
        self.role = AgentRole(role)
        self.name = f"react_pair:{self.role.name.lower()}"
        self.trace_agent = self.role.name.lower()
        self._unread: list[PartnerEvent] = []
        self._heard: list[PartnerEvent] = []  # every round of the partner, navigation included

    def reset(self, task: str, seed: int = 0) -> None:
        super().reset(task, seed)
        self._unread = []
        self._heard = []
        self.partner_events().clear()

    def observe_partner(self, agent: str, subtask_text: str, feedback: Feedback) -> None:
        self._heard.append(PartnerEvent(agent, subtask_text, feedback))
        parts = [p.strip() for p in subtask_text.strip("[]").split(",")]
        if casefold_words(parts[0]) in ("go to", WAIT_ACTION.lower()):
            return  # PARTNR's decentralized agents are told the partner's non-navigation actions
        super().observe_partner(agent, subtask_text, feedback)
        event = self.partner_events()[-1]
        self._unread.append(event)
        index = self._episode.index
        if index is None or not feedback.success:
            return
        action = Action.parse(parts[0])
        target = parts[1] if len(parts) > 1 else ""
        if action is Action.PICK and target in index.objects:
            index.objects[target] = "held by the other agent"
        elif action in (Action.PUT, Action.OPEN, Action.CLOSE):
            index.apply(Subtask(parts[0], target, parts[2] if len(parts) > 2 else None))

    def _generate(self, tools: Sequence[Tool], index: WorldIndex) -> str:
        turns = self._episode.turns
        if turns and turns[0].role == "system" and ROLE_TEXT[self.role] not in turns[0].text:
            turns[0] = ChatMessage("system", f"{SYSTEM_PROMPT}\n\n{ROLE_TEXT[self.role]}")
        return super()._generate(tools, index)

    def _result_turn(self, request: PlanRequest) -> str:
        text = super()._result_turn(request)
        return self._with_partner(text)

    def partner_summary(self) -> str:
        """FindAgentActionTool's answer: the partner's last action and its outcome, what it did before (at most
        :data:`AGENT_HISTORY` actions), and what it holds as far as this agent's world description knows."""
        if not self._heard:
            return "The other agent has not acted yet."
        agent = self._heard[-1].agent

        def said(event: PartnerEvent) -> str:
            return f"{event.subtask} ({'done' if event.feedback.success else 'failed: ' + event.feedback.message})"

        lines = [f"The other agent ({agent}) last did {said(self._heard[-1])}."]
        earlier = self._heard[-1 - AGENT_HISTORY:-1]
        if earlier:
            lines.append("Before that: " + "; ".join(said(e) for e in earlier) + ".")
        index = self._episode.index
        held = index.held_by("held by the other agent") if index is not None else None
        lines.append(f"It holds {held}." if held else "It holds nothing that you know of.")
        return " ".join(lines)

    def _answer_inside(self, call: ToolCall, index: WorldIndex) -> str:  # type: ignore[override]
        if call.tool == AGENT_TOOL:
            return self.partner_summary()
        if call.tool == "Wait":
            told = partner_lines(self._unread) or "The other agent did nothing new."
            self._unread = []
            return f"Waited. {told}"
        return super()._answer_inside(call, index)

    def _with_partner(self, text: str) -> str:
        if not self._unread:
            return text
        lines = partner_lines(self._unread)
        self._unread = []
        return f"{text}\n{lines}"


def _held_text(role: AgentRole) -> str:
    """How the centralized world description places an object an agent holds (PARTNR: ``held by Agent 0 (Robot)``)."""
    return f"held by Agent {int(role)} ({role.name.lower()})"


@dataclass
class _Agent:
    """The centralized planner's bookkeeping per agent."""

    queue: list[Subtask] = field(default_factory=list)
    last_place: str | None = None
    observation: str | None = None  # the result of its last action, for the next observation turn


class CentralizedReAct(CentralizedBrain):
    """PARTNR's centralized ReAct: one model plans both agents each round (module docstring).

    ``model`` / ``engine`` / ``constrained`` / ``thought_max_chars`` / ``runtime`` / ``torch_threads`` as
    :class:`~homiebot.planner.react.ReActPlanner`; ``max_llm_calls``: PARTNR's 100 for centralized control.
    Unprivileged: it reads the scene's description and keeps it current with both agents' results."""

    name = "react_centralized"
    privileged = False
    accepts_free_text = True
    hears_partner_navigation = True

    def __init__(self, model: str = "smollm2", constrained: bool = True,
                 max_llm_calls: int = PARTNR_CENTRALIZED_MAX_LLM_CALLS,
                 thought_max_chars: int = DEFAULT_THOUGHT_MAX_CHARS, runtime: str = "auto",
                 torch_threads: int | None = None, engine: ChatEngine | None = None, trace_log: str | None = None,
                 **unused: Any) -> None:
        super().__init__()
        self.trace_log = Path(trace_log) if trace_log else None
        if self.trace_log is not None and not self.trace_log.parent.is_dir():
            raise ValueError(f"trace_log: folder {str(self.trace_log.parent)!r} does not exist")
        if max_llm_calls < 1 or thought_max_chars < 1:
            raise ValueError("max_llm_calls and thought_max_chars must be >= 1")
        if engine is None:
            from homiebot.planner.models import bundled_model
            from homiebot.planner.text_lm import TextLanguageModel, TextModelConfig

            bundled = bundled_model(model)
            if bundled is None:
                raise ValueError(f"model {model!r} is not a bundled text model; the react planner runs smollm2")
            engine = TextLanguageModel(TextModelConfig(bundled, runtime=runtime, threads=torch_threads))  # type: ignore[arg-type]
        self.engine: ChatEngine = engine
        self.constrained = constrained
        self.max_llm_calls = max_llm_calls
        self.thought_max_chars = thought_max_chars
        self.llm_calls = 0
        self._turns: list[ChatMessage] = []
        self._index: WorldIndex | None = None
        self._agents: dict[AgentRole, _Agent] = {}
        self._task = ""
        self._graphs: dict[AgentRole, str] = {}  # with perception: each agent's own graph's description
        self._human_results: list[Subtask] = []  # the human's successful actions since its graph was read

    def reset(self, task: str, seed: int = 0) -> None:
        super().reset(task, seed)
        self.llm_calls = 0
        self._turns = []
        self._index = None
        self._agents = {role: _Agent() for role in AgentRole}
        self._task = task
        self._graphs = {}
        self._human_results = []

    def answer(self, role: AgentRole, request: PlanRequest, partner_active: bool) -> str:
        if request.world_description:
            self._graphs[role] = request.world_description
            if role is AgentRole.HUMAN:
                self._human_results = []
        return super().answer(role, request, partner_active)

    def _merged_graphs(self) -> WorldIndex:
        """With perception each agent has its own world graph (:mod:`homiebot.agent.agent_graphs`); PARTNR's
        centralized planner has "complete information about both agent's states": the union of the two graphs'
        entities, where each agent's own graph is believed about what it holds ("held by Agent 0 (robot)"), and
        the robot's graph about anything both describe otherwise. The human's graph is the one of its last
        request (it plans after the robot within a round)."""
        merged = WorldIndex()
        for role in (AgentRole.HUMAN, AgentRole.ROBOT):  # the robot's last: it wins where the two differ
            text = self._graphs.get(role)
            if text is None:
                continue
            index = WorldIndex.parse(text)
            merged.rooms.extend(r for r in index.rooms if r not in merged.rooms)
            merged.furniture.update(index.furniture)
            merged.open_state.update(index.open_state)
            for name, where in index.objects.items():
                if where == "held by the agent":
                    merged.objects[name] = _held_text(role)
                elif where != "held by the other agent" and not merged.objects.get(name, "").startswith("held by Agent"):
                    merged.objects[name] = where  # (the other agent's hand: the holder's own graph says so)
        # The human acted after its graph was read: its results since then, as the deterministic updates do.
        for subtask in self._human_results:
            self._apply(merged, AgentRole.HUMAN, subtask)
        return merged

    @staticmethod
    def _apply(index: WorldIndex, role: AgentRole, subtask: Subtask) -> None:
        index.apply(subtask)
        if Action.parse(subtask.action) is Action.PICK and subtask.target in index.objects:
            index.objects[subtask.target] = _held_text(role)

    def close(self) -> None:
        self.engine.close()

    # The loop tells the robot's facet of the human's rounds (all of them: centralized control sees both).
    def observe(self, role: AgentRole, subtask_text: str, feedback: Feedback) -> None:
        agent = self._agents.setdefault(role, _Agent())
        agent.observation = "Successful execution!" if feedback.success else f"Failed! {feedback.message}"
        if feedback.success and self._index is not None:
            parts = [p.strip() for p in subtask_text.strip("[]").split(",")]
            done = Subtask(parts[0], parts[1] if len(parts) > 1 else None, parts[2] if len(parts) > 2 else None)
            self._apply(self._index, role, done)
            if role is AgentRole.HUMAN and self._graphs:
                self._human_results.append(done)

    def tools(self, role: AgentRole, request: PlanRequest) -> list[Tool]:
        """``role``'s tools: its action list (the loop's ``meet_partner`` gives the partner's), less the state-changing
        tools for the robot (PARTNR A.9.1), without the perception tools (PARTNR's main-paper ReAct)."""
        listed = self.role_actions.get(role, tuple(request.actions))
        actions = {Action.parse(a) for a in listed} if listed else set()
        allowed = [t for t in TOOLS if t.name not in PERCEPTION_TOOLS and (not actions or all(a in actions for a in t.needs))]
        return tools_for_role(role, allowed)

    def decide(self, role: AgentRole, request: PlanRequest, roles: Sequence[AgentRole]) -> dict[AgentRole, str]:
        agent = self._agents.setdefault(role, _Agent())
        if request.round_index > 1 and request.last_error is not None:  # this agent's own last result
            agent.observation = ("Successful execution!" if request.last_error is ErrorCode.OK
                                 else f"Failed! {request.feedback}")
        if not self._turns:
            description = request.world_description or (
                describe_scene(request.scene).text if request.scene is not None else "Furniture:\nObjects:\nNo objects found yet")
            self._index = WorldIndex.parse(description)
            self._turns = [ChatMessage("system", self._system()), ChatMessage("user", self._task_turn(description, request, roles))]
        if self._graphs:  # perception: both agents' own graphs, merged, every call
            self._index = self._merged_graphs()
        assert self._index is not None
        # The rest of a Rearrange goes on without a call, while its steps succeed.
        answers: dict[AgentRole, str] = {}
        asking = []
        for other in roles:
            queued = self._agents[other].queue
            if queued and (other != role or request.last_error is ErrorCode.OK):
                answers[other] = self._answer(other, queued.pop(0), "Rearrange continues", request)
            else:
                self._agents[other].queue = []
                asking.append(other)
        if not asking:
            return answers
        if self._turns[-1].role == "assistant":
            self._turns.append(ChatMessage("user", self._observation_turn(roles)))
        if self.llm_calls >= self.max_llm_calls:
            for other in asking:
                answers[other] = format_output(f"the limit of {self.max_llm_calls} planner calls is reached",
                                               Subtask("End"), "None")
            return answers
        self.llm_calls += 1
        tools = {other: self.tools(other, request) for other in asking}
        grammar = centralized_grammar(tools, self._index, self.thought_max_chars) if self.constrained else None
        budget = sum(grammar_max_bytes(t, self._index, self.thought_max_chars) for t in tools.values())
        text = self.engine.generate([list(self._turns)], grammars=[grammar], max_new_tokens=budget)[0].text
        cut = text.find(STOP_WORD)
        text = text[: cut + len(STOP_WORD)] if cut >= 0 else text
        self._turns.append(ChatMessage("assistant", text))
        parsed = parse_centralized(text, asking)
        if self.trace_log is not None:  # one JSON line per call, as the single-agent planner's trace_log
            entry = {"task": self._task, "round": request.round_index, "call": self.llm_calls, "answer": text,
                     "asked": [r.name.lower() for r in asking],
                     "result": parsed if isinstance(parsed, str) else
                     {r.name.lower(): f"{c.tool}[{', '.join(c.args)}]" for r, c in parsed.items()}}
            with self.trace_log.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(entry) + "\n")
        if isinstance(parsed, str):
            log.info("react_centralized: unusable answer (%s)", parsed)
            for other in asking:  # the loop answers the raw text with F1 format feedback
                answers[other] = text
            return answers
        if not parsed:  # Final Thought: Exit!
            for other in asking:
                answers[other] = format_output("Both agents are done.", Subtask("End"), "None")
            return answers
        for other, call in parsed.items():
            steps = self._subtasks(other, call)
            self._agents[other].queue = steps[1:]
            answers[other] = self._answer(other, steps[0], call.thought, request)
        return answers

    # ------------------------------------------------------------------------------------------- text

    @staticmethod
    def _system() -> str:
        return (
            "You direct two agents in a home, a robot (Agent 0) and a person (Agent 1), who carry out one task "
            "together. Both can walk to rooms, furniture and objects, pick objects up, put them on or in furniture, "
            "and open and close furniture; only the person can switch appliances on or off, clean, fill and pour. "
            "Divide the "
            "work so that both are busy and the task is done in as few rounds as possible; give an agent with "
            "nothing left to do Wait[]. Each turn, think briefly, then give one action for each agent. When the "
            f"whole task is done, answer with the line {TERMINATION}"
        )

    def _task_turn(self, description: str, request: PlanRequest, roles: Sequence[AgentRole]) -> str:
        listing = []
        for role in AgentRole:
            names = ", ".join(t.name for t in self.tools(role, request))
            listing.append(f"Agent {int(role)} ({role.name.lower()}) can call: {names}")
        details = "\n".join(f"- {t.name}: {t.description}" for t in TOOLS if t.name not in PERCEPTION_TOOLS)
        return (
            f"Task: {self._task}\n\n{description.strip()}\n\n" + "\n".join(listing) + f"\n\nWhat the actions do:\n{details}\n\n"
            "Answer in exactly this form:\n\nThought: <why>\nAgent_0_Action: <one call>\nAgent_1_Action: <one call>\n"
            f"{STOP_WORD}\n\nFor example:\nThought: Each agent fetches one of the two objects\n"
            f"Agent_0_Action: Navigate[table_1]\nAgent_1_Action: Navigate[counter_1]\n{STOP_WORD}"
        )

    def _observation_turn(self, roles: Sequence[AgentRole]) -> str:
        assert self._index is not None
        lines = []
        for role in AgentRole:
            seen = self._agents[role].observation
            if seen is not None:
                lines.append(f"Agent_{int(role)}_Observation: {seen}")
                self._agents[role].observation = None
        lines.append(f"Objects:\n{self._index.objects_text()}")
        return "\n".join(lines)

    def _subtasks(self, role: AgentRole, call: ToolCall) -> list[Subtask]:
        tool = TOOLS_BY_NAME[call.tool]
        if tool.name == "Rearrange":
            obj, furniture = call.args[0], call.args[2]
            return [Subtask("Go to", obj), Subtask("Pick", obj), Subtask("Go to", furniture), Subtask("Put", obj, furniture)]
        if tool.name == "Wait":
            return [Subtask(WAIT_ACTION)]
        assert self._index is not None
        held = self._index.held_by(_held_text(role))
        return [acting_subtask(tool, call.args, self._agents[role].last_place, held)]

    def _answer(self, role: AgentRole, subtask: Subtask, thought: str, request: PlanRequest) -> str:
        assert self._index is not None
        action = Action.parse(subtask.action)
        if action is Action.GO_TO and subtask.target in self._index.furniture:
            self._agents[role].last_place = subtask.target
        model = ReActPlanner._model_for(action, subtask.target, self._index, request.models)
        return format_output(f"{thought.strip() or 'No thought'} (centralized call {self.llm_calls})", subtask, model)
