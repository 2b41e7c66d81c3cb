"""PARTNR's Fill and Pour (appendix A.9.1, the human's liquid skills): declared like the other household actions
(homiebot/skills/actions.py), run by the embedded simulator, checked by the executor with EMMOE-style feedback,
withheld from the robot of a pair, and reachable from the ReAct tool planner (Fill[x], Pour[x])."""

from __future__ import annotations

import pytest

from homiebot.agent.loop import EpisodeConfig
from homiebot.executor.executor import Executor, ExecutorConfig
from homiebot.multiagent.centralized import AgentRole, centralized_grammar, parse_centralized, tools_for_role
from homiebot.multiagent.pair import role_config
from homiebot.planner.base import PlanRequest
from homiebot.planner.hf_backend import Generation
from homiebot.planner.prompt import parse_output
from homiebot.planner.react import TOOLS_BY_NAME, ReActPlanner, WorldIndex, acting_subtask
from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.sim.scene import parse_scene
from homiebot.skills import NoiseConfig, SkillSet
from homiebot.skills.actions import action_spec
from homiebot.types import HOUSEHOLD_ACTIONS, Action, ErrorCode, SkillStatus, Subtask

SCENE = {
    "name": "liquid_test",
    "rooms": [{"name": "kitchen", "category": "kitchen", "polygon": [[0, 0], [6, 0], [6, 5], [0, 5]]}],
    "walls": [
        {"start": [0, 0], "end": [6, 0]},
        {"start": [6, 0], "end": [6, 5]},
        {"start": [6, 5], "end": [0, 5]},
        {"start": [0, 5], "end": [0, 0]},
    ],
    "furniture": [
        {
            "name": "counter", "category": "kitchen_counter", "pose": {"x": 2.2, "y": 4.6}, "size": [1.4, 0.6, 0.9],
            "surfaces": [{"height": 0.9}],
        },
        {
            "name": "sink", "category": "sink", "pose": {"x": 4.8, "y": 4.6}, "size": [1.0, 0.6, 0.9],
            "interior": {"min": [-0.32, -0.2, 0.72], "max": [0.32, 0.22, 0.9]},
        },
        {
            "name": "table", "category": "table", "pose": {"x": 2.0, "y": 1.0}, "size": [1.2, 0.6, 0.7],
            "surfaces": [{"height": 0.7}],
        },
    ],
    "objects": [
        {"name": "apple", "category": "apple", "shape": "sphere", "size": [0.08, 0.08, 0.08], "on": "counter"},
        {"name": "mug", "category": "mug", "shape": "cylinder", "size": [0.08, 0.08, 0.1], "on": "table"},
        {"name": "bowl", "category": "bowl", "shape": "cylinder", "size": [0.16, 0.16, 0.06], "on": "table"},
    ],
    "robot": {"start": {"x": 3.0, "y": 2.5}},
}
ORACLE = "RT-1-X"


@pytest.fixture()
def world():
    sim = MujocoSimulator(render=False)
    sim.reset(parse_scene(SCENE), seed=0)
    executor = Executor(sim, config=ExecutorConfig(actions=HOUSEHOLD_ACTIONS))
    yield sim, executor
    sim.shutdown()


def run(executor: Executor, sim: MujocoSimulator, action: str, target: str, place: str | None = None):
    inventory = (sim.state().held,) if sim.state().held else ()
    return executor.execute(Subtask(action, target, place), ORACLE, inventory)


def test_containers_report_a_fill_state_and_other_objects_none(world) -> None:
    sim, _ = world
    entities = sim.state().entities
    assert entities["mug"].is_filled is False and entities["bowl"].is_filled is False
    assert entities["apple"].is_filled is None and entities["sink"].is_filled is None
    assert Action.parse("fill") is Action.FILL and Action.parse("Pour") is Action.POUR
    assert "Fill" in HOUSEHOLD_ACTIONS and "Pour" in HOUSEHOLD_ACTIONS and HOUSEHOLD_ACTIONS[-1] == "End"
    assert action_spec(Action.FILL).needs_place and action_spec(Action.POUR).target_needs is not None


def test_fill_at_a_faucet_then_pour_into_another_container(world) -> None:
    sim, executor = world
    empty_hand = run(executor, sim, "Fill", "mug", "sink")
    assert (empty_hand.code, empty_hand.message) == (ErrorCode.L2, "Unable to fill, the hand is empty")
    assert run(executor, sim, "Go to", "mug").success and run(executor, sim, "Pick", "mug").success
    no_place = run(executor, sim, "Fill", "mug")
    assert no_place.code is ErrorCode.F1 and no_place.message.startswith("fill needs a place!")
    no_faucet = run(executor, sim, "Fill", "mug", "table")
    assert (no_faucet.code, no_faucet.message) == (ErrorCode.L4, "Can not fill table! Please choose another object")
    assert run(executor, sim, "Fill", "mug", "sink").code is ErrorCode.D1  # the sink is across the kitchen
    # Pour from an empty container: EMMOE's L-style feedback naming what to do first.
    assert run(executor, sim, "Go to", "bowl").success
    dry = run(executor, sim, "Pour", "mug", "bowl")
    assert (dry.code, dry.message) == (ErrorCode.L4, "Unable to pour, the mug is empty, you should fill it first")
    assert run(executor, sim, "Go to", "sink").success
    filled = run(executor, sim, "Fill", "mug", "sink")
    assert filled.success and filled.inventory == ("mug",)
    assert sim.state().entities["mug"].is_filled is True
    assert run(executor, sim, "Pour", "mug", "bowl").code is ErrorCode.D1
    assert run(executor, sim, "Go to", "bowl").success
    not_container = run(executor, sim, "Pour", "mug", "apple")
    assert (not_container.code, not_container.message) == (ErrorCode.L4, "Can not pour apple! Please choose another object")
    poured = run(executor, sim, "Pour", "mug", "bowl")
    assert poured.success and poured.inventory == ("mug",)
    entities = sim.state().entities
    assert (entities["mug"].is_filled, entities["bowl"].is_filled) == (False, True)
    sim.reset(parse_scene(SCENE), seed=0)  # a reset empties every container again
    assert sim.state().entities["bowl"].is_filled is False


def test_only_containers_take_water(world) -> None:
    sim, executor = world
    assert run(executor, sim, "Go to", "apple").success and run(executor, sim, "Pick", "apple").success
    assert run(executor, sim, "Go to", "sink").success
    refused = run(executor, sim, "Fill", "apple", "sink")
    assert (refused.code, refused.message) == (ErrorCode.L4, "Can not fill apple! Please choose another object")
    assert sim.fill("apple", "sink").status is SkillStatus.NOT_INTERACTIVE  # the simulator agrees


def test_noise_wrapper_keeps_the_physical_reason_of_fill(world) -> None:
    sim, _ = world
    skills = SkillSet(sim, noise=NoiseConfig(name="always", failure_probability={Action.FILL: 1.0}), seed=0)
    assert skills.run(Action.FILL, ORACLE, "mug", "sink").status is SkillStatus.HAND_EMPTY
    assert skills.run(Action.GO_TO, "NoMaD", "mug").success and skills.run(Action.PICK, ORACLE, "mug").success
    assert skills.run(Action.GO_TO, "NoMaD", "sink").success
    assert skills.run(Action.FILL, ORACLE, "mug", "sink").status is SkillStatus.EXECUTION_FAILED  # now the noise
    assert SkillSet(sim).run(Action.FILL, ORACLE, "mug", "sink").success


def test_the_robot_of_a_pair_cannot_fill_or_pour_but_the_human_can() -> None:
    base = EpisodeConfig.with_actions(HOUSEHOLD_ACTIONS, render=False)
    robot, human = role_config(AgentRole.ROBOT, base), role_config(AgentRole.HUMAN, base)
    assert "Fill" not in robot.actions and "Pour" not in robot.actions
    assert {"Fill", "Pour"} <= set(robot.executor.withheld_actions)
    assert "Fill" in human.actions and "Pour" in human.actions
    sim = MujocoSimulator(render=False, human=True)
    try:
        sim.reset(parse_scene(SCENE), seed=0)
        config = robot.executor  # the pair's robot: its actions, its name, the ones only the human has
        refused = Executor(sim, config=config).execute(Subtask("Fill", "mug", "sink"), ORACLE, ("mug",))
        assert refused.code is ErrorCode.F1
        assert refused.message == "the robot can not fill! Only the other agent can, you should choose another action."
        person = sim.agent(1)
        executor = Executor(person, config=ExecutorConfig(actions=human.actions, agent="human"))
        for step in (("Go to", "mug"), ("Pick", "mug"), ("Go to", "sink"), ("Fill", "mug", "sink")):
            inventory = (person.state().held,) if person.state().held else ()
            assert executor.execute(Subtask(*step), ORACLE, inventory).success, step
        assert sim.state().entities["mug"].is_filled is True
    finally:
        sim.shutdown()
    # Centralized ReAct: the robot's calls have no Fill/Pour, the human's do.
    assert "Fill" not in {t.name for t in tools_for_role(AgentRole.ROBOT)}
    assert {"Fill", "Pour"} <= {t.name for t in tools_for_role(AgentRole.HUMAN)}
    index = WorldIndex.parse("Furniture:\nkitchen: sink, table\n\nObjects:\nmug: table in kitchen\nbowl: table in kitchen")
    grammar = centralized_grammar({r: tools_for_role(r) for r in AgentRole}, index, 40)
    assert grammar.count('"Fill["') == 1
    answer = "Thought: fill it\nAgent_0_Action: Fill[mug]\nAgent_1_Action: Wait[]\nAssigned!"
    assert "only the human can" in str(parse_centralized(answer, list(AgentRole)))


class FakeToolModel:
    """A scripted stand-in for the text engine: answers the planner's calls from a list."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)

    def generate(self, conversations, *, grammars=None, max_new_tokens=512):
        text = self.answers.pop(0)
        return [Generation(text=text, prompt_tokens=1, completion_tokens=len(text), finish_reason="stop")]

    def close(self) -> None:
        pass


def test_react_tools_fill_and_pour_become_the_executor_subtasks() -> None:
    assert TOOLS_BY_NAME["Fill"].action is Action.FILL and TOOLS_BY_NAME["Pour"].action is Action.POUR
    planner = ReActPlanner(engine=FakeToolModel([
        "Thought: to the table\nNavigate[table]\nAssigned!",
        "Thought: take the mug\nPick[mug]\nAssigned!",
        "Thought: to the sink\nNavigate[sink]\nAssigned!",
        "Thought: fill it\nFill[mug]\nAssigned!",
        "Thought: pour it\nPour[bowl]\nAssigned!",
    ]))
    planner.reset("t")
    robot_tools = {t.name for t in planner.tools_for(PlanRequest("", "", [], actions=role_config(
        AgentRole.ROBOT, EpisodeConfig.with_actions(HOUSEHOLD_ACTIONS, render=False)).actions))}
    assert "Fill" not in robot_tools and "Pour" not in robot_tools
    assert {"Fill", "Pour"} <= {t.name for t in planner.tools_for(PlanRequest("", "", [], actions=HOUSEHOLD_ACTIONS))}
    scene = parse_scene(SCENE)  # no perception: the planner keeps the scene's description current (Pick -> held)
    subtasks = []
    for round_index in range(1, 6):
        request = PlanRequest("", "", [], task="Fill the bowl with water", round_index=round_index, scene=scene,
                              last_error=ErrorCode.OK if round_index > 1 else None, actions=HOUSEHOLD_ACTIONS)
        subtasks.append(parse_output(planner.plan(request)).subtask.text())
    assert subtasks == ["[Go to, table]", "[Pick, mug]", "[Go to, sink]", "[Fill, mug, sink]", "[Pour, mug, bowl]"]
    index = WorldIndex.parse("Furniture:\nkitchen: sink\n\nObjects:\nbowl: sink in kitchen")
    assert acting_subtask(TOOLS_BY_NAME["Pour"], ["bowl"], None, index.held_by("held by the agent")).text() == (
        "[Pour, bowl, bowl]"  # nothing known in the hand: the executor answers L2, the hand is empty
    )
