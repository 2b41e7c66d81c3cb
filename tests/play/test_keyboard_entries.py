"""What a person types at ``homie play``'s prompt, parsed (homiebot/play/keyboard.py): commands, numbers,
subtasks in EMMOE's format with and without a model, and one precise line for everything else."""

from __future__ import annotations

import pytest

from homiebot.planner.base import PlanRequest
from homiebot.play.keyboard import Choice, EntryError, default_model, parse_entry
from homiebot.sim.base import make_simulator
from homiebot.types import EMMOE_ACTIONS, EMMOE_MODELS, HOUSEHOLD_ACTIONS, Action, Subtask


@pytest.fixture(scope="module")
def state():
    sim = make_simulator("mujoco", render=False)
    sim.reset("apartment_1", seed=0)
    yield sim.state()
    sim.shutdown()


def _request(state, actions=EMMOE_ACTIONS) -> PlanRequest:
    return PlanRequest(system_prompt="", instruction="", images=[], task="t", actions=tuple(actions),
                       models=EMMOE_MODELS, world_state=state)


MENU = [Choice(Subtask("Pick", "mug"), "RT-1-X"), Choice(Subtask("Go to", "fridge"), "NoMaD"),
        Choice(Subtask("End"), "None")]


@pytest.mark.parametrize(("line", "kind"), [
    ("help", "help"), ("?", "help"), ("  HELP ", "help"), ("quit", "quit"), ("exit", "quit"), ("q", "quit"),
    ("list", "list"), ("look", "look"),
])
def test_commands(state, line, kind):
    assert parse_entry(line, _request(state), MENU).kind == kind


def test_a_number_picks_from_the_list(state):
    command = parse_entry(" 2 ", _request(state), MENU)
    assert command.kind == "subtask" and command.choice == MENU[1]


@pytest.mark.parametrize(("line", "subtask", "model"), [
    ("[Go to, fridge]", Subtask("Go to", "fridge"), "NoMaD"),
    ("[go to,fridge]", Subtask("Go to", "fridge"), "NoMaD"),
    ("Subtask: [Pick, mug] Model: RT-1-X", Subtask("Pick", "mug"), "RT-1-X"),
    ("[Pick, mug] rt-1-x", Subtask("Pick", "mug"), "RT-1-X"),
    ("[Open, kitchen_drawer]", Subtask("Open", "kitchen_drawer"), "octo"),
    ("[Open, kitchen drawer] PixNav", Subtask("Open", "kitchen drawer"), "PixNav"),
    ("[Put, mug, kitchen_counter]", Subtask("Put", "mug", "kitchen_counter"), "RT-1-X"),
    ("[End]", Subtask("End"), "None"),
    ("[end] None", Subtask("End"), "None"),
])
def test_subtasks_in_emmoe_format(state, line, subtask, model):
    command = parse_entry(line, _request(state), MENU)
    assert command.kind == "subtask" and command.choice is not None
    assert command.choice.subtask == subtask and command.choice.model == model
    answer = command.choice.answer()
    assert f"Subtask: {subtask.text()}" in answer and answer.endswith(f"Model: {model}")


def test_the_answer_parses_as_the_subtask_typed(state):
    from homiebot.planner.prompt import parse_output

    choice = parse_entry("[Put, mug, kitchen_counter] RT-1-X", _request(state), MENU).choice
    assert choice is not None
    output = parse_output(choice.answer())
    assert output.subtask == Subtask("Put", "mug", "kitchen_counter") and output.model == "RT-1-X"


@pytest.mark.parametrize(("line", "says"), [
    ("", "type a subtask such as [Go to, fridge]"),
    ("go to the fridge", "not a subtask: 'go to the fridge'"),
    ("[]", "the subtask names no action"),
    ("[Fly, fridge]", "unknown action 'Fly'; the actions are: Go to, Pick, Put, Open, Close, End"),
    ("[Turn on, floor_lamp]", "unknown action 'Turn on'"),  # not in EMMOE's list
    ("[Go to]", "Go to is written [Go to, target]"),
    ("[Pick, mug, fridge]", "Pick is written [Pick, target]"),
    ("[Put, mug]", "Put is written [Put, object, place]"),
    ("[End, fridge]", "[End] takes no target"),
    ("[End] NoMaD", "[End] takes no model"),
    ("[Go to, fridge] Gemini", "unknown model 'Gemini'; the models are: NoMaD, PixNav, octo, RT-1-X"),
    ("[Go to, fridg]", "there is no target 'fridg' in this house; did you mean 'fridge'"),
    ("[Put, mug, spaceship]", "there is no place 'spaceship' in this house"),
    ("0", "no subtask number 0; choose 1-3"),
    ("4", "no subtask number 4; choose 1-3"),
])
def test_bad_input_is_one_precise_line(state, line, says):
    with pytest.raises(EntryError) as caught:
        parse_entry(line, _request(state), MENU)
    message = str(caught.value)
    assert says in message and "\n" not in message


def test_household_actions_where_the_task_has_them(state):
    command = parse_entry("[Turn on, floor_lamp]", _request(state, HOUSEHOLD_ACTIONS), MENU)
    assert command.choice == Choice(Subtask("Turn on", "floor_lamp"), "octo")


def test_default_models_follow_emmoe_table_e2():
    assert default_model(Action.GO_TO, EMMOE_MODELS) == "NoMaD"
    assert default_model(Action.PICK, EMMOE_MODELS) == "RT-1-X"
    assert default_model(Action.CLOSE, EMMOE_MODELS) == "octo"
    assert default_model(Action.END, EMMOE_MODELS) == "None"
    assert default_model(Action.PICK, ("NoMaD",)) == "NoMaD"  # nobody serves it: the first listed
