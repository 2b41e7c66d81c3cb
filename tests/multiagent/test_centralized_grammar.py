"""PARTNR's two roles and the centralized planner's answer: the robot lacks the state-changing tools, the
grammar allows each agent only its own tools on described entities, the parser reads both calls."""

from __future__ import annotations

import pytest
import xgrammar
from xgrammar.testing import _is_grammar_accept_string

from homiebot.multiagent.centralized import (
    PARTNR_CENTRALIZED_MAX_LLM_CALLS,
    TERMINATION,
    AgentRole,
    centralized_grammar,
    parse_centralized,
    tools_for_role,
)
from homiebot.planner.react import WorldIndex

DESCRIPTION = """Furniture:
kitchen: fridge (closed), kitchen_counter, sink
living_room: sofa, floor_lamp
Objects:
apple_1: on kitchen_counter
sponge: on sofa"""


def answer(robot: str, human: str) -> str:
    return f"Thought: split the work\nAgent_0_Action: {robot}\nAgent_1_Action: {human}\nAssigned!"


@pytest.fixture()
def grammar() -> str:
    tools = {role: tools_for_role(role) for role in AgentRole}
    text = centralized_grammar(tools, WorldIndex.parse(DESCRIPTION), 60)
    xgrammar.Grammar.from_ebnf(text)
    return text


def test_robot_has_no_state_changing_tools():
    robot = {t.name for t in tools_for_role(AgentRole.ROBOT)}
    human = {t.name for t in tools_for_role(AgentRole.HUMAN)}
    assert human - robot == {"PowerOn", "PowerOff", "Clean", "Fill", "Pour"}
    assert PARTNR_CENTRALIZED_MAX_LLM_CALLS == 100


def test_grammar_restricts_each_agent_to_its_tools(grammar):
    assert _is_grammar_accept_string(grammar, answer("Navigate[kitchen_counter]", "PowerOn[floor_lamp]"))
    assert _is_grammar_accept_string(grammar, answer("Rearrange[apple_1, on, sofa, None, None]", "Wait[]"))
    assert _is_grammar_accept_string(grammar, "Thought: all done\n" + TERMINATION)
    assert not _is_grammar_accept_string(grammar, answer("PowerOn[floor_lamp]", "Wait[]"))  # robot: no PowerOn
    assert not _is_grammar_accept_string(grammar, answer("Pick[garage]", "Wait[]"))  # undescribed entity
    assert not _is_grammar_accept_string(grammar, "Thought: x\nAgent_0_Action: Wait[]\nAssigned!")  # both agents


def test_parse_centralized():
    calls = parse_centralized(answer("Pick[apple_1]", "Clean[sponge]"))
    assert not isinstance(calls, str)
    assert (calls[AgentRole.ROBOT].tool, calls[AgentRole.ROBOT].args) == ("Pick", ("apple_1",))
    assert (calls[AgentRole.HUMAN].tool, calls[AgentRole.HUMAN].args) == ("Clean", ("sponge",))
    assert calls[AgentRole.HUMAN].thought == "split the work"
    assert parse_centralized("Thought: done\n" + TERMINATION) == {}
    assert parse_centralized(answer("PowerOff[floor_lamp]", "Wait[]")) == (
        "Agent_0_Action: the robot cannot call PowerOff; only the human can"
    )
    assert parse_centralized("Thought: x\nAgent_0_Action: Wait[]\nAssigned!") == "the answer has no Agent_1_Action line"
    assert "Agent_1_Action" in str(parse_centralized(answer("Wait[]", "dance")))


def test_agent_without_callable_tools_is_refused():
    with pytest.raises(ValueError, match="at least one agent"):
        centralized_grammar({}, WorldIndex.parse(DESCRIPTION), 10)
