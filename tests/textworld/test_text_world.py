"""The parallel text world rendered from the simulator's state: ALFWorld's strings, admissible commands, both
phrasings, and text and simulator kept in step."""

from __future__ import annotations

import random

import pytest

from homiebot.executor.executor import Executor, ExecutorConfig
from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.sim.scene import list_scenes
from homiebot.textworld import NOTHING_HAPPENS, NameTable, Phrasing, TextWorld, alfred_type, join_things
from homiebot.types import HOUSEHOLD_ACTIONS, EntityKind, Subtask


@pytest.fixture(scope="module")
def sim():
    simulator = MujocoSimulator(render=False)
    yield simulator
    simulator.shutdown()


def fresh(sim: MujocoSimulator, scene: str = "apartment_1", phrasing: Phrasing = Phrasing.ALFWORLD) -> TextWorld:
    sim.reset(scene, seed=0)
    world = TextWorld(sim, phrasing)
    world.reset("put a clean apple in fridge")
    return world


def test_lists_and_names_follow_alfworld() -> None:
    assert join_things([]) == ""
    assert join_things(["apple 1"]) == "a apple 1"
    assert join_things(["apple 1", "mug 1"]) == "a apple 1, and a mug 1"
    assert join_things(["apple 1", "mug 1", "bowl 1"]) == "a apple 1, a mug 1, and a bowl 1"
    assert alfred_type("kitchen_counter") == "countertop"
    assert alfred_type("sink") == "sinkbasin"
    assert alfred_type("tuna_fish_can") == "tunafishcan"
    assert alfred_type("floor_lamp") == "floorlamp"


def test_intro_is_alfworlds_three_paragraphs(sim) -> None:
    world = fresh(sim)
    assert world.intro() == (
        "-= Welcome to TextWorld, ALFRED! =-\n\n"
        "You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a chair 1, a countertop 1, "
        "a drawer 1, a floorlamp 1, a fridge 1, a microwave 1, a sidetable 1, a sinkbasin 1, a sofa 1, and a tvstand 1."
        "\n\nYour task is to: put a clean apple in fridge."
    )
    assert world.intro().split("\n\n")[1] == world.look()  # MuEP reads paragraphs 2 and 3


def test_names_are_numbered_per_type_in_instance_order(sim) -> None:
    sim.reset("apartment_6", seed=0)
    state = sim.state()
    names = NameTable.from_state(state)
    apples = sorted(n for n, e in state.entities.items() if e.category == "apple")
    assert [names.text(n) for n in apples] == [f"apple {k}" for k in range(1, len(apples) + 1)]
    assert all(names.instance(names.text(n)) == n for n in names.to_text)
    assert names.instance("  Apple   1 ") == apples[0]
    assert not any(state.entities[r].category in ("door", "stairs") for r in names.receptacles)


def test_a_pick_clean_place_episode_in_alfworld_04_phrasing(sim) -> None:
    world = fresh(sim)
    transcript = [
        ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a apple 1, and a tunafishcan 1."),
        ("take apple 1 from countertop 1", "You pick up the apple 1 from the countertop 1."),
        ("examine apple 1", "There's nothing special about apple 1."),
        ("go to sinkbasin 1", "You arrive at sinkbasin 1. On the sinkbasin 1, you see a sponge 1."),
        ("clean apple 1 with sinkbasin 1", "You clean the apple 1 using the sinkbasin 1."),
        ("examine apple 1", "This is a clean apple 1."),
        ("inventory", "You are carrying: a apple 1."),
        ("go to fridge 1", "You arrive at fridge 1. The fridge 1 is closed."),
        ("move apple 1 to fridge 1", NOTHING_HAPPENS),  # closed
        ("open fridge 1", NOTHING_HAPPENS),  # our robot opens with an empty hand (EMMOE's L1)
        ("put apple 1 in/on fridge 1", NOTHING_HAPPENS),  # the papers' phrasing is not ALFWorld 0.4's
        ("dance", NOTHING_HAPPENS),
        ("look", "You are facing the fridge 1. Next to it, you see nothing."),
    ]
    for command, expected in transcript:
        assert world.step(command).observation == expected, command
    state = sim.state()
    assert state.held == "apple" and state.entities["apple"].is_clean


def test_the_papers_phrasing_puts_in_on_and_arrives_at_a_loc(sim) -> None:
    world = fresh(sim, phrasing=Phrasing.PAPERS)
    arrive = world.step("go to fridge 1").observation
    assert arrive.startswith("You arrive at loc ") and arrive.endswith("The fridge 1 is closed.")
    assert world.step("open fridge 1").observation == "You open the fridge 1. The fridge 1 is open. In it, you see a banana 1."
    world.step("go to countertop 1")
    world.step("take apple 1 from countertop 1")
    world.step("go to fridge 1")
    assert "put apple 1 in/on fridge 1" in world.admissible_commands()
    assert world.step("move apple 1 to fridge 1").observation == NOTHING_HAPPENS
    assert world.step("put apple 1 in/on fridge 1").observation == "You put the apple 1 in/on the fridge 1."
    assert sim.state().entities["apple"].parent == "fridge"
    assert world.describe("fridge") == "The fridge 1 is open. In it, you see a apple 1, and a banana 1."


def test_heat_and_lamp_commands(sim) -> None:
    world = fresh(sim)
    world.step("go to countertop 1")
    world.step("take apple 1 from countertop 1")
    assert world.step("go to microwave 1").observation == "You arrive at microwave 1. The microwave 1 is closed."
    assert "heat apple 1 with microwave 1" in world.admissible_commands()
    assert world.step("heat apple 1 with microwave 1").observation == "You heat the apple 1 using the microwave 1."
    assert world.step("examine apple 1").observation == "This is a hot apple 1."
    assert world.step("go to floorlamp 1").observation == "You arrive at floorlamp 1. On the floorlamp 1, you see nothing."
    assert world.step("use floorlamp 1").observation == "You turn on the floorlamp 1."
    assert sim.state().entities["floor_lamp"].powered_on is True
    assert world.step("use floorlamp 1").observation == "You turn off the floorlamp 1."


def test_admissible_commands_at_the_start_and_at_a_receptacle(sim) -> None:
    world = fresh(sim)
    names = world.names
    assert world.admissible_commands() == sorted(
        [f"go to {names.text(r)}" for r in names.receptacles] + ["help", "inventory", "look"]
    )
    world.step("go to fridge 1")
    here = world.admissible_commands()
    assert "open fridge 1" in here and "examine fridge 1" in here and "go to fridge 1" not in here
    assert not any(c.startswith("take") for c in here)  # the banana is behind a closed door
    world.step("open fridge 1")
    assert "take banana 1 from fridge 1" in world.admissible_commands()


@pytest.mark.parametrize("scene", list_scenes())
def test_every_admissible_command_does_something(sim, scene: str) -> None:
    """A random walk over admissible commands: each one answers something other than "Nothing happens."
    (an admissible command the simulator then refused would be a text world out of step with it)."""
    world = fresh(sim, scene)
    rng = random.Random(scene)
    refused = []
    for _ in range(60):
        command = rng.choice([c for c in world.admissible_commands() if c != "help"])
        step = world.step(command)
        assert step.admissible
        if step.observation == NOTHING_HAPPENS:
            refused.append((command, step.result))
    assert refused == []


def test_text_and_simulator_stay_in_step_under_emmoe_subtasks(sim) -> None:
    """The executor drives the simulator with EMMOE subtasks; after each round the text world's observation
    and its descriptions of every receptacle and the hand match the simulator's state."""
    world = fresh(sim)
    executor = Executor(sim, config=ExecutorConfig(actions=HOUSEHOLD_ACTIONS))
    plan = [
        Subtask("Go to", "fridge"), Subtask("Open", "fridge"), Subtask("Go to", "apple"), Subtask("Pick", "apple"),
        Subtask("Go to", "microwave"), Subtask("Heat", "apple", "microwave"), Subtask("Go to", "fridge"),
        Subtask("Put", "apple", "fridge"), Subtask("Pick", "sofa"),
    ]
    expected = [
        "You arrive at fridge 1. The fridge 1 is closed.",
        "You open the fridge 1. The fridge 1 is open. In it, you see a banana 1.",
        "You arrive at countertop 1. On the countertop 1, you see a apple 1, and a tunafishcan 1.",
        "You pick up the apple 1 from the countertop 1.",
        "You arrive at microwave 1. The microwave 1 is closed.",
        "You heat the apple 1 using the microwave 1.",
        "You arrive at fridge 1. The fridge 1 is open. In it, you see a banana 1.",
        "You move the apple 1 to the fridge 1.",
        NOTHING_HAPPENS,
    ]
    inventory: tuple[str, ...] = ()
    for subtask, text in zip(plan, expected):
        feedback = executor.execute(subtask, "octo", inventory)
        inventory = feedback.inventory
        assert world.observation_after(subtask, feedback.success) == text, subtask
        state = sim.state()
        for receptacle in world.names.receptacles:
            described = world.describe(receptacle, state)
            for obj, entity in state.entities.items():
                if entity.kind is EntityKind.OBJECT and obj in world.names.to_text:
                    shown = f"a {world.names.text(obj)}" in described.replace(",", "").split(". ")[-1] + " "
                    inside_hidden = entity.relation == "in" and state.entities[receptacle].is_open is False
                    assert shown == (entity.parent == receptacle and not inside_hidden), (receptacle, obj, described)
        held = f"a {world.names.text(state.held)}" if state.held else None
        assert world.inventory(state) == (f"You are carrying: {held}." if held else "You are not carrying anything.")
    assert sim.state().entities["apple"].is_hot and sim.state().entities["apple"].parent == "fridge"


def test_the_text_view_of_an_expert_episode_follows_the_simulator(tmp_path) -> None:
    """An EMMOE episode of the expert planner watched by the text observer: after every successful round the
    text names what the round did, in the simulator's state; the JSON lines file holds one row per round."""
    from homiebot.agent.loop import EpisodeConfig, run_episode
    from homiebot.planner.registry import make_planner
    from homiebot.tasks.suite import get_task
    from homiebot.textworld.observer import TextWorldObserver

    simulator = MujocoSimulator(render=False)
    try:
        observer = TextWorldObserver(simulator, path=tmp_path / "text.jsonl")
        trajectory = run_episode(simulator, make_planner("expert"), task=get_task("emmoe-084"),
                                 config=EpisodeConfig(render=False), observers=[observer])
        assert trajectory.goal_satisfied
        assert observer.texts[0].startswith("-= Welcome to TextWorld, ALFRED! =-")
        assert len(observer.texts) == len(trajectory.rounds) + 1
        for record, text in zip(trajectory.rounds, observer.texts[1:]):
            action = record.output.subtask.action if record.output.subtask else ""
            if action == "End" or not record.feedback.success:
                assert text == NOTHING_HAPPENS
            elif action == "Pick":
                assert text.startswith("You pick up the ")
            elif action == "Go to":
                assert text.startswith(("You arrive at ", "You are in the middle of a room."))
            elif action == "Put":
                assert text.startswith("You move the ")
        rows = (tmp_path / "text.jsonl").read_text().splitlines()
        assert len(rows) == len(trajectory.rounds) + 1
    finally:
        simulator.shutdown()
