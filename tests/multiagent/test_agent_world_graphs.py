"""Two agents with perception: one world graph per agent (homiebot/agent/agent_graphs.py), each fed by that
agent's own views, each agent's executor grounding through its own graph, each planner reading its own
description, in PARTNR's decentralized wording ("held by the agent" / "held by the other agent")."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from homiebot.agent.agent_graphs import PARTNER_ID, AgentGraphKnowledge
from homiebot.agent.loop import AgentSlot, EpisodeConfig, run_episode
from homiebot.multiagent.centralized import AgentRole
from homiebot.multiagent.pair import role_config
from homiebot.perception.world_graph import ROBOT_ID, Relation
from homiebot.perception.world_model import PerceptionConfig, WorldModel
from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.prompt import format_output
from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.tasks.suite import load_suite, task_actions
from homiebot.types import ErrorCode, Subtask

PRIVILEGED = functools.partial(
    WorldModel, config=PerceptionConfig.model_validate({"builder": "privileged", "describe_world": True})
)


class RecordingScript(Planner):
    """Follows a fixed list of subtasks and keeps the world description of every request it got."""

    name = "recording_script"
    accepts_free_text = True

    def __init__(self, steps: list[tuple[str, ...]]) -> None:
        self.steps = steps
        self.descriptions: list[str | None] = []
        self._next = 0

    def reset(self, task: str, seed: int = 0) -> None:
        self._next, self.descriptions = 0, []

    def plan(self, request: PlanRequest) -> str:
        self.descriptions.append(request.world_description)
        if self._next >= len(self.steps):
            return format_output("done", Subtask("End"), "None")
        step = self.steps[self._next]
        self._next += 1
        return format_output("scripted", Subtask(*step), "NoMaD" if step[0] == "Go to" else "RT-1-X")


def _objects(description: str | None) -> dict[str, str]:
    assert description is not None
    lines = description.split("Objects:\n", 1)[1].splitlines()
    return dict(line.split(": ", 1) for line in lines if ": " in line and not line.startswith("The agent"))


@pytest.fixture(scope="module")
def sim():
    simulator = MujocoSimulator(width=96, height=96, render=True, human=True)
    yield simulator
    simulator.shutdown()


@pytest.fixture(scope="module")
def task():
    return {t.id: t for t in load_suite("partnr").tasks}["partnr-6-007"]  # apartment_6


@pytest.mark.slow
def test_each_agent_has_its_own_graph_grounding_and_description(sim, task):
    base = EpisodeConfig.with_actions(task_actions(task), render=True)
    # The human sees green_can_2 from where it starts; the robot, facing elsewhere, does not.
    robot = RecordingScript([("Wait",), ("Go to", "green_can_2"), ("Wait",)])
    human = RecordingScript([("Go to", "green_can_2"), ("Pick", "green_can_2"), ("Wait",)])
    trajectory = run_episode(sim, robot, task=task, config=role_config(AgentRole.ROBOT, base),
                             partner=AgentSlot(human, role_config(AgentRole.HUMAN, base)), perception=PRIVILEGED)
    assert trajectory.error is None
    robot_seen = [_objects(d) for d in robot.descriptions]
    human_seen = [_objects(d) for d in human.descriptions]
    assert "green_can_2" in human_seen[0] and all("green_can_2" not in seen for seen in robot_seen)
    # Grounding through each agent's own graph: the robot cannot name what only the human has seen (F2).
    go = trajectory.rounds[1]
    assert go.subtask_text == "[Go to, green_can_2]" and go.feedback.code is ErrorCode.F2
    assert [r.feedback.code for r in trajectory.partner_rounds[:2]] == [ErrorCode.OK, ErrorCode.OK]
    # The human's own pick, in PARTNR's decentralized wording.
    assert human_seen[2]["green_can_2"] == "held by the agent"
    assert "The agent: in living_room, holding green_can_2" in (human.descriptions[2] or "")
    assert "The agent: in living_room, hands empty" in (robot.descriptions[-1] or "")


def test_what_the_partner_holds_is_held_by_the_other_agent(sim, task):
    initial = sim.reset(task.scene, seed=task.seed)
    state = sim.state()
    model = PRIVILEGED(sim.scene_spec(), state)
    knowledge = AgentGraphKnowledge(model, "robot", "human")
    knowledge.see(initial, state)
    seen = [n.name for n in model.graph.nodes() if n.name in state.entities and state.entities[n.name].kind.value == "object"]
    assert seen, "the robot sees some objects at the start"
    target = seen[0]
    person = sim.agent(1)
    assert person.go_to(target).success and person.pick(target).success
    state = sim.state()
    assert state.held is None and state.entities[target].held
    # What the graph builder does when a view shows an object in a hand (it knows one agent: "the" agent's).
    model.graph.set_placement(target, ROBOT_ID, Relation.HELD_BY)
    knowledge.see(sim.observe(), state)
    assert model.graph.placement(target) == (PARTNER_ID, Relation.HELD_BY)
    assert f"{target}: held by the other agent" in knowledge.world_description()
    assert model.graph.held_by(ROBOT_ID) == []


class FakeToolModel:
    """A scripted stand-in for the text engine: answers from a list, keeps the grammars it was given."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)
        self.grammars: list[str | None] = []
        self.conversations: list[list] = []

    def generate(self, conversations, *, grammars=None, max_new_tokens=512):
        from homiebot.planner.hf_backend import Generation

        self.grammars.append(grammars[0] if grammars else None)
        self.conversations.append(list(conversations[0]))
        text = self.answers.pop(0)
        return [Generation(text=text, prompt_tokens=1, completion_tokens=len(text), finish_reason="stop")]

    def close(self) -> None:
        pass


def test_centralized_react_reads_both_agents_graphs_merged(tmp_path):
    from homiebot.multiagent.react_pair import CentralizedReAct
    from homiebot.types import Feedback

    engine = FakeToolModel([
        "Thought: the person looks\nAgent_1_Action: Navigate[kitchen]\nAssigned!",
        "Thought: split\nAgent_0_Action: Navigate[green_can_2]\nAgent_1_Action: Wait[]\nAssigned!",
    ])
    brain = CentralizedReAct(engine=engine, trace_log=str(tmp_path / "calls.jsonl"))
    brain.reset("Bring the cans to the table")
    robot_graph = ("Furniture:\nkitchen: table, counter\nliving_room: sofa\nObjects:\nbowl_2: on table\n"
                   "mug: held by the agent\nThe agent: in kitchen, holding mug")
    human_graph = ("Furniture:\nkitchen: table, counter\nliving_room: sofa\nObjects:\ngreen_can_2: on sofa\n"
                   "bowl_2: on counter\nmug: held by the other agent\nThe agent: in living_room, hands empty")
    actions = ("Go to", "Pick", "Put", "Wait", "End")
    brain.answer(AgentRole.HUMAN, PlanRequest("", "", [], world_description=human_graph, actions=actions), False)
    # The human picks the bowl after its graph was read: the brain applies it (PARTNR's deterministic update).
    brain.observe(AgentRole.HUMAN, "[Pick, bowl_2]", Feedback(ErrorCode.OK, "None", ("bowl_2",)))
    brain.answer(AgentRole.ROBOT, PlanRequest("", "", [], world_description=robot_graph, actions=actions, round_index=2),
                 True)
    grammar = engine.grammars[-1] or ""
    assert '"green_can_2"' in grammar  # only the human's graph has it
    told = engine.conversations[-1][-1].text
    assert "green_can_2: on sofa" in told
    assert "mug: held by Agent 0 (robot)" in told and "bowl_2: held by Agent 1 (human)" in told
    calls = (tmp_path / "calls.jsonl").read_text().splitlines()  # the centralized trace: one line per call
    assert len(calls) == 2 and '"robot": "Navigate[green_can_2]"' in calls[1]


@pytest.mark.slow
def test_homie_eval_agents_with_perception(tmp_path):
    """``homie eval --agents robot+human --perception privileged``: the expert pair on its own graphs (the single
    expert of the same task too), the setting pinned."""
    import json
    import subprocess
    import sys

    out = tmp_path / "collab"
    homie = str(Path(sys.executable).with_name("homie"))
    result = subprocess.run([homie, "eval", "--agents", "robot+human", "--perception",
                             "privileged", "--suite", "partnr", "--tasks", "partnr-6-010", "--runs", "1", "--out",
                             str(out)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert {line["kind"] for line in lines} == {"pair", "single"}
    assert all(line["error"] is None for line in lines)
    assert next(line for line in lines if line["kind"] == "pair")["success"]
    assert json.loads((out / "settings.json").read_text())["perception"] == "privileged"
