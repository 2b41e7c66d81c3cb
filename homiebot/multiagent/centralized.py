"""Roles of PARTNR's two agents and the centralized ReAct planner's answer: grammar and parser.

PARTNR (§4.1, appendix A.9) pairs a robot (agent 0, the "task receiver") with a human (agent 1, the "task
giver"). Both have the rearrangement tools; only the human has the state-changing ones (A.9.1: "Agents
acting in the robot role do not have access to state-modifying actions (Clean, Fill, Pour, PowerOff,
PowerOn)"; Fill and Pour have no skill here). A centralized planner answers for both agents at once::

    Thought: <free text>
    Agent_0_Action: Navigate[kitchen_counter]
    Agent_1_Action: PowerOn[floor_lamp]
    Assigned!

or ends the episode with ``Final Thought: Exit!``; its grammar (A.9.2, rebuilt from PARTNR's code) allows
for each agent only that agent's tools, on the entities of the shared world description. These pieces
build on the single-agent ReAct planner (:mod:`homiebot.planner.react`), which is used as is for each
agent of a decentralized pair.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence

from homiebot.planner.react import (
    STOP_WORD,
    TOOLS,
    Tool,
    ToolCall,
    WorldIndex,
    call_rules,
    literal,
    parse_tool_call,
    thought_rule,
)

#: PARTNR A.9: "centralized baselines had a maximum timeout of 100 replanning calls".
PARTNR_CENTRALIZED_MAX_LLM_CALLS = 100
#: The tools only the human has (PARTNR A.9.1).
STATE_CHANGING_TOOLS: frozenset[str] = frozenset({"PowerOn", "PowerOff", "Clean", "Fill", "Pour"})
TERMINATION = "Final Thought: Exit!"


class AgentRole(enum.IntEnum):
    """PARTNR's agent ids: the robot is agent 0, the human agent 1."""

    ROBOT = 0
    HUMAN = 1

    @property
    def label(self) -> str:
        return f"Agent_{int(self)}_Action"


def tools_for_role(role: AgentRole, tools: Sequence[Tool] = TOOLS) -> list[Tool]:
    """``tools`` less the state-changing ones for the robot (PARTNR A.9.1)."""
    if role is AgentRole.HUMAN:
        return list(tools)
    return [t for t in tools if t.name not in STATE_CHANGING_TOOLS]


def centralized_grammar(tools: Mapping[AgentRole, Sequence[Tool]], index: WorldIndex, thought_max_chars: int) -> str:
    """One answer for every agent in ``tools`` (in agent order), each call restricted to that agent's tools,
    or the termination line; the entity rules are shared. Same EBNF dialect as the single-agent grammar
    (xgrammar and llama.cpp GBNF)."""
    if not tools:
        raise ValueError("a centralized grammar needs at least one agent")
    roles = sorted(tools)
    rules: dict[str, str] = {}
    lines = []
    for role in roles:
        built = call_rules(tools[role], index)
        if not built.calls:
            raise ValueError(f"agent {int(role)} has no tool it can call")
        rules.update(built.rules)
        lines.append(f"call-{int(role)} ::= " + " | ".join(f"({c})" for c in built.calls))
    action = ' "\\n" '.join(f"{literal(role.label + ': ')} call-{int(role)}" for role in roles)
    head = [
        'root ::= "Thought: " thought "\\n" (action | termination)',
        f"action ::= {action} {literal(chr(10) + STOP_WORD)}",
        f"termination ::= {literal(TERMINATION)}",
        thought_rule(thought_max_chars),
    ]
    return "\n".join([*head, *lines, *(f"{name} ::= {rule}" for name, rule in rules.items())])


def parse_centralized(
    text: str, roles: Sequence[AgentRole] = (AgentRole.ROBOT, AgentRole.HUMAN)
) -> dict[AgentRole, ToolCall] | str:
    """Each agent's call from a centralized answer, ``{}`` for the termination line, or what is wrong (one
    line). A call of a tool the agent's role lacks is an error."""
    if TERMINATION in text and not any(role.label in text for role in roles):
        return {}
    thought_match = re.search(r"Thought:\s*(.*)", text)
    thought = thought_match.group(1).strip() if thought_match else ""
    calls: dict[AgentRole, ToolCall] = {}
    for role in roles:
        match = re.search(rf"{role.label}:\s*(.*)", text)
        if match is None:
            return f"the answer has no {role.label} line"
        parsed = parse_tool_call(match.group(1))
        if isinstance(parsed, str):
            return f"{role.label}: {parsed}"
        if role is AgentRole.ROBOT and parsed.tool in STATE_CHANGING_TOOLS:
            return f"{role.label}: the robot cannot call {parsed.tool}; only the human can"
        calls[role] = ToolCall(parsed.tool, parsed.args, thought)
    return calls
