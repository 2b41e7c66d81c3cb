"""The ReAct planner for two agents on the real loop and simulator, with a scripted stand-in for the language
model (the real SmolLM2 pair is measured in docs/results/collaboration.md): centralized (one model, both agents'
calls per answer, grammar per agent) and decentralized (one model each, the partner's actions in the
observations)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from homiebot.agent.loop import AgentSlot, EpisodeConfig, run_episode
from homiebot.multiagent.centralized import AgentRole
from homiebot.multiagent.pair import centralized_pair, make_pair_planners, role_config
from homiebot.multiagent.react_pair import ROLE_TEXT, CentralizedReAct, PartnerReAct
from homiebot.planner.hf_backend import Generation
from homiebot.planner.messages import ChatMessage
from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.tasks.suite import load_suite, task_actions
from homiebot.types import ErrorCode


class FakeToolModel:
    """A scripted stand-in for the text engine: answers from a list, keeps what it was given."""

    def __init__(self, answers: Sequence[str]) -> None:
        self.answers = list(answers)
        self.conversations: list[list[ChatMessage]] = []
        self.grammars: list[str | None] = []
        self.closed = False

    def generate(self, conversations, *, grammars=None, max_new_tokens=512) -> list[Generation]:
        self.conversations.append(list(conversations[0]))
        self.grammars.append(grammars[0] if grammars else None)
        text = self.answers.pop(0) if self.answers else "Thought: nothing left\nFinal Thought: Exit!"
        return [Generation(text=text, prompt_tokens=1, completion_tokens=len(text), finish_reason="stop")]

    def close(self) -> None:
        self.closed = True


def both(thought: str, robot: str | None, human: str | None) -> str:
    lines = [f"Thought: {thought}"]
    if robot is not None:
        lines.append(f"Agent_0_Action: {robot}")
    if human is not None:
        lines.append(f"Agent_1_Action: {human}")
    return "\n".join([*lines, "Assigned!"])


@pytest.fixture(scope="module")
def sim():
    simulator = MujocoSimulator(render=False, human=True)
    yield simulator
    simulator.shutdown()


@pytest.fixture(scope="module")
def task():
    # "Put the red can in the kitchen cabinet, then turn on the floor lamp." (apartment_6)
    return {t.id: t for t in load_suite("partnr").tasks}["partnr-6-007"]


def _configs(task):
    base = EpisodeConfig.with_actions(task_actions(task), render=False)
    return role_config(AgentRole.ROBOT, base), role_config(AgentRole.HUMAN, base)


def test_centralized_react_plans_both_agents_per_call(sim, task):
    model = FakeToolModel([
        both("go to the cabinet and the lamp", "Navigate[kitchen_cabinet]", "Navigate[floor_lamp]"),
        both("open the cabinet, the lamp must wait for the can", "Open[kitchen_cabinet]", "Wait[]"),
        both("the robot moves the can", "Rearrange[red_can, within, kitchen_cabinet, None, None]", "Wait[]"),
        both("the person waits for the can", None, "Wait[]"),  # the robot's Rearrange goes on without a call
        both("the person waits for the can", None, "Wait[]"),
        both("the person waits for the can", None, "Wait[]"),
        both("the can is in; the lamp now", "Wait[]", "PowerOn[floor_lamp]"),
        "Thought: both parts are done\nFinal Thought: Exit!",
    ])
    brain = CentralizedReAct(engine=model)  # type: ignore[arg-type]
    robot, human = centralized_pair(brain)
    robot_config, human_config = _configs(task)
    trajectory = run_episode(sim, robot, task=task, config=robot_config, partner=AgentSlot(human, human_config))
    assert trajectory.error is None
    assert trajectory.goal_satisfied is True
    assert [r.subtask_text for r in trajectory.rounds] == [
        "[Go to, kitchen_cabinet]", "[Open, kitchen_cabinet]", "[Go to, red_can]", "[Pick, red_can]",
        "[Go to, kitchen_cabinet]", "[Put, red_can, kitchen_cabinet]", "[Wait]", "[End]"]
    assert [r.subtask_text for r in trajectory.partner_rounds][-2:] == ["[Turn on, floor_lamp]", "[End]"]
    assert all(r.feedback.code is ErrorCode.OK for r in trajectory.rounds + trajectory.partner_rounds)
    assert brain.llm_calls == 8
    # One grammar per call; rounds where the robot's Rearrange goes on ask for the person's action only.
    assert "call-0" in model.grammars[0] and "call-1" in model.grammars[0]
    assert "call-0" not in model.grammars[3] and "call-1" in model.grammars[3]
    robot_rule = next(line for line in model.grammars[0].splitlines() if line.startswith("call-0"))
    assert "PowerOn" not in robot_rule and "PowerOn" in model.grammars[0]
    # Both agents' results come back as observations in the next user turn.
    observed = model.conversations[1][-1].text
    assert "Agent_0_Observation: Successful execution!" in observed
    assert "Agent_1_Observation: Successful execution!" in observed
    assert model.conversations[-1][-1].text.count("held by") == 0  # the can was put down again


def test_decentralized_react_agents_hear_of_each_other(sim, task):
    robot_model = FakeToolModel([
        "Thought: fetch the can\nNavigate[red_can]\nAssigned!",
        "Thought: take it\nPick[red_can]\nAssigned!",
        "Thought: what did the person do\nWait[]\nAssigned!",
        "Thought: done\nDone[]\nAssigned!",
    ])
    human_model = FakeToolModel([
        "Thought: to the lamp\nNavigate[floor_lamp]\nAssigned!",
        "Thought: switch it on\nPowerOn[floor_lamp]\nAssigned!",
        "Thought: wait for the robot\nWait[]\nAssigned!",
        "Thought: the robot holds the can\nDone[]\nAssigned!",
    ])
    robot = PartnerReAct(role=AgentRole.ROBOT, engine=robot_model)
    human = PartnerReAct(role="human", engine=human_model)
    robot_config, human_config = _configs(task)
    trajectory = run_episode(sim, robot, task=task, config=robot_config, partner=AgentSlot(human, human_config))
    assert trajectory.error is None
    assert [r.subtask_text for r in trajectory.partner_rounds][:2] == ["[Go to, floor_lamp]", "[Turn on, floor_lamp]"]
    # Role paragraphs in the system prompts.
    assert ROLE_TEXT[AgentRole.ROBOT] in robot_model.conversations[0][0].text
    assert ROLE_TEXT[AgentRole.HUMAN] in human_model.conversations[0][0].text
    # The robot's tools exclude PowerOn (its action list has no Turn on); the human's include it.
    assert "PowerOn" not in robot_model.grammars[0] and "PowerOn" in human_model.grammars[0]
    # The robot is told of the person's Turn on (not of its Navigate), with the outcome.
    told = "\n".join(m.text for m in robot_model.conversations[-1] if m.role == "user")
    assert "Other agent (human) action: [Turn on, floor_lamp] -> success" in told
    assert "[Go to, floor_lamp]" not in told
    # The person is told of the robot's Pick, and its world index has the can in the other agent's hand.
    human_told = "\n".join(m.text for m in human_model.conversations[-1] if m.role == "user")
    assert "Other agent (robot) action: [Pick, red_can] -> success" in human_told
    assert "red_can: held by the other agent" in human_told
    assert [e.subtask for e in robot.partner_events()] == ["[Turn on, floor_lamp]"]


def test_find_agent_action_tool_reports_the_partners_rounds(sim, task):
    """PARTNR's FindAgentActionTool: a decentralized agent asks what the other did (navigation included), at the
    cost of an LLM call and no round; a single agent is not offered it."""
    robot_model = FakeToolModel([
        "Thought: fetch the can\nNavigate[red_can]\nAssigned!",
        "Thought: what is the person doing\nFindAgentActionTool[]\nAssigned!",
        "Thought: take it\nPick[red_can]\nAssigned!",
        "Thought: and now\nFindAgentActionTool[]\nAssigned!",
        "Thought: done\nDone[]\nAssigned!",
    ])
    human_model = FakeToolModel([
        "Thought: to the lamp\nNavigate[floor_lamp]\nAssigned!",
        "Thought: switch it on\nPowerOn[floor_lamp]\nAssigned!",
        "Thought: the robot has the can\nDone[]\nAssigned!",
    ])
    robot = PartnerReAct(role=AgentRole.ROBOT, engine=robot_model)
    human = PartnerReAct(role=AgentRole.HUMAN, engine=human_model)
    assert robot.partner_summary() == "The other agent has not acted yet."
    robot_config, human_config = _configs(task)
    trajectory = run_episode(sim, robot, task=task, config=robot_config, partner=AgentSlot(human, human_config))
    assert trajectory.error is None
    assert [r.subtask_text for r in trajectory.rounds] == ["[Go to, red_can]", "[Pick, red_can]", "[End]"]
    assert '"FindAgentActionTool[]"' in robot_model.grammars[0]
    results = [m.text for m in robot_model.conversations[-1] if m.role == "user" and m.text.startswith("Result: The other")]
    assert results[0] == ("Result: The other agent (human) last did [Go to, floor_lamp] (done). "
                          "It holds nothing that you know of.")
    assert results[1] == ("Result: The other agent (human) last did [Turn on, floor_lamp] (done). "
                          "Before that: [Go to, floor_lamp] (done). It holds nothing that you know of.")
    # The observation turns still carry only the partner's non-navigation actions (PARTNR's decentralized agents).
    told = [m.text for m in robot_model.conversations[-1] if m.role == "user" and "Other agent (human) action" in m.text]
    assert told and all("[Go to, floor_lamp] ->" not in t for t in told)
    assert [e.subtask for e in robot.partner_events()] == ["[Turn on, floor_lamp]"]
    # The human asked nothing; it was told of the robot's Pick, and the can is in the other agent's hand.
    assert human.partner_summary().endswith("It holds red_can.")
    # A single-agent ReAct planner has no partner to ask about.
    from homiebot.planner.react import ReActPlanner

    single = ReActPlanner(engine=FakeToolModel([]))
    assert "FindAgentActionTool" not in {t.name for t in single.tools_for(robot_model_request(task))}
    assert "FindAgentActionTool" in {t.name for t in robot.tools_for(robot_model_request(task))}
    assert "FindAgentActionTool" not in {
        t.name for t in PartnerReAct(engine=FakeToolModel([]), perception_tools=False).tools_for(robot_model_request(task))
    }


def robot_model_request(task):
    from homiebot.planner.base import PlanRequest

    return PlanRequest("", "", [], actions=task_actions(task))


def test_pair_factory_refuses_what_it_cannot_build():
    with pytest.raises(ValueError, match="same planner"):
        make_pair_planners("centralized", "expert", "react")
    with pytest.raises(ValueError, match="human only"):
        make_pair_planners("decentralized", "scripted", "expert")
    with pytest.raises(ValueError, match="unknown mode"):
        make_pair_planners("joint", "expert", "expert")
    robot, human = make_pair_planners("decentralized", "expert", "scripted", {"script": "Go to, sofa; Turn on, floor_lamp"})
    assert robot.name == "partnr_expert_share" and human.name == "scripted_human"
