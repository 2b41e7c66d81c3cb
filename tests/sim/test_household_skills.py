"""The household skills of ALFWorld's task types (Turn on / Turn off, Clean, Heat, Cool) in the embedded
simulator, through the executor's declared checks (homiebot/skills/actions.py) and EMMOE's feedback."""

from __future__ import annotations

import numpy as np
import pytest

from homiebot.executor.executor import Executor, ExecutorConfig
from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.sim.scene import SceneError, parse_scene
from homiebot.skills import NoiseConfig, SkillSet
from homiebot.types import HOUSEHOLD_ACTIONS, Action, ErrorCode, SkillStatus, Subtask

KITCHEN = {
    "name": "household_test",
    "rooms": [{"name": "kitchen", "category": "kitchen", "polygon": [[0, 0], [6, 0], [6, 5], [0, 5]]}],
    "walls": [
        {"start": [0, 0], "end": [6, 0]},
        {"start": [6, 0], "end": [6, 5]},
        {"start": [6, 5], "end": [0, 5]},
        {"start": [0, 5], "end": [0, 0]},
    ],
    "furniture": [
        {
            "name": "fridge", "category": "fridge", "pose": {"x": 0.6, "y": 4.5}, "size": [0.8, 0.75, 1.8],
            "interior": {"min": [-0.34, -0.3, 0.08], "max": [0.34, 0.32, 1.7]},
            "articulation": {"kind": "hinged"}, "interactive": True, "appliance": True, "powered_on": True,
        },
        {
            "name": "counter", "category": "kitchen_counter", "pose": {"x": 2.2, "y": 4.6}, "size": [1.4, 0.6, 0.9],
            "surfaces": [{"height": 0.9}],
        },
        {
            "name": "microwave", "category": "microwave", "pose": {"x": 3.6, "y": 4.6}, "size": [0.6, 0.5, 1.2],
            "interior": {"min": [-0.26, -0.2, 0.9], "max": [0.26, 0.22, 1.15]},
            "articulation": {"kind": "hinged"}, "interactive": True, "appliance": True,
        },
        {
            "name": "sink", "category": "sink", "pose": {"x": 4.8, "y": 4.6}, "size": [1.0, 0.6, 0.9],
            "interior": {"min": [-0.32, -0.2, 0.72], "max": [0.32, 0.22, 0.9]},
        },
        {"name": "lamp", "category": "floor_lamp", "pose": {"x": 5.6, "y": 0.5}, "size": [0.35, 0.35, 1.5], "appliance": True},
        {
            "name": "table", "category": "table", "pose": {"x": 2.0, "y": 1.0}, "size": [1.2, 0.6, 0.7],
            "surfaces": [{"height": 0.7}],
        },
    ],
    "objects": [
        {"name": "apple", "category": "apple", "shape": "sphere", "size": [0.08, 0.08, 0.08], "on": "counter"},
        {"name": "mug", "category": "mug", "shape": "cylinder", "size": [0.08, 0.08, 0.1], "on": "table"},
    ],
    "robot": {"start": {"x": 3.0, "y": 2.5}},
}

ORACLE = "octo"  # any listed model runs any action in the lenient default


@pytest.fixture()
def world():
    sim = MujocoSimulator(render=False)
    sim.reset(parse_scene(KITCHEN), seed=0)
    executor = Executor(sim, config=ExecutorConfig(actions=HOUSEHOLD_ACTIONS))
    yield sim, executor
    sim.shutdown()


def run(executor: Executor, sim: MujocoSimulator, action: str, target: str, place: str | None = None):
    inventory = (sim.state().held,) if sim.state().held else ()
    return executor.execute(Subtask(action, target, place), ORACLE, inventory)


def test_functions_default_by_category_and_states_start_false(world) -> None:
    sim, _ = world
    state = sim.state()
    assert state.entities["microwave"].functions == ("heat",)
    assert state.entities["fridge"].functions == ("cool",)
    assert state.entities["sink"].functions == ("clean",)
    assert state.entities["lamp"].functions == ("light",)
    assert state.entities["counter"].functions == ()
    assert state.entities["lamp"].powered_on is False and state.entities["counter"].powered_on is None
    apple = state.entities["apple"]
    assert (apple.is_clean, apple.is_hot, apple.is_cold) == (False, False, False)
    assert state.entities["counter"].is_hot is None


def test_turn_on_and_off_a_lamp_lights_it_in_the_model(world) -> None:
    sim, executor = world
    assert run(executor, sim, "Go to", "lamp").success
    compiled = sim._compiled
    light, shade = compiled.lamp_lights["lamp"], compiled.lamp_shade_geoms["lamp"]
    off_rgba = compiled.model.geom_rgba[shade].copy()
    assert not compiled.model.light_active[light]
    feedback = run(executor, sim, "Turn on", "lamp")
    assert feedback.code is ErrorCode.OK and feedback.message == "None"
    assert sim.state().entities["lamp"].powered_on is True
    assert compiled.model.light_active[light]
    assert not np.allclose(compiled.model.geom_rgba[shade], off_rgba)
    assert run(executor, sim, "Turn off", "lamp").success
    assert sim.state().entities["lamp"].powered_on is False
    assert not compiled.model.light_active[light]
    np.testing.assert_allclose(compiled.model.geom_rgba[shade], off_rgba)


def test_switching_needs_no_free_hand_but_an_appliance_within_reach(world) -> None:
    sim, executor = world
    assert run(executor, sim, "Turn on", "lamp").code is ErrorCode.D1  # from the start pose, > 2 m
    assert run(executor, sim, "Go to", "apple").success and run(executor, sim, "Pick", "apple").success
    feedback = run(executor, sim, "Turn on", "counter")
    assert (feedback.code, feedback.message) == (ErrorCode.L4, "Can not turn on counter! Please choose another object")
    assert run(executor, sim, "Go to", "lamp").success
    assert run(executor, sim, "Turn on", "lamp").success  # holding the apple: look at it under the lamp
    assert sim.state().held == "apple"


def test_emmoe_action_list_rejects_the_household_actions() -> None:
    sim = MujocoSimulator(render=False)
    sim.reset(parse_scene(KITCHEN), seed=0)
    feedback = Executor(sim).execute(Subtask("Turn on", "lamp"), ORACLE, ())
    assert feedback.code is ErrorCode.F1
    assert feedback.message == "turn on is not in the action list! You should only choose actions in the list."
    sim.shutdown()


def test_heat_cool_clean_the_held_object(world) -> None:
    sim, executor = world
    feedback = run(executor, sim, "Heat", "apple", "microwave")
    assert (feedback.code, feedback.message) == (ErrorCode.L2, "Unable to heat, the hand is empty")
    assert run(executor, sim, "Go to", "apple").success and run(executor, sim, "Pick", "apple").success
    missing = run(executor, sim, "Heat", "apple")
    assert (missing.code, missing.message) == (ErrorCode.F1, "heat needs a place! You should output in format [Heat, object, place].")
    assert run(executor, sim, "Heat", "apple", "counter").code is ErrorCode.L4
    assert run(executor, sim, "Go to", "microwave").success
    heated = run(executor, sim, "Heat", "apple", "microwave")  # the door stays closed, as in ALFWorld
    assert heated.success and heated.inventory == ("apple",)
    apple = sim.state().entities["apple"]
    assert (apple.is_hot, apple.is_cold, apple.held) == (True, False, True)
    assert run(executor, sim, "Go to", "fridge").success and run(executor, sim, "Cool", "apple", "fridge").success
    apple = sim.state().entities["apple"]
    assert (apple.is_hot, apple.is_cold) == (False, True)
    assert run(executor, sim, "Clean", "apple", "sink").code is ErrorCode.D1
    assert run(executor, sim, "Go to", "sink").success and run(executor, sim, "Clean", "apple", "sink").success
    assert sim.state().entities["apple"].is_clean is True
    # A reset restores the scene's states.
    sim.reset(parse_scene(KITCHEN), seed=0)
    apple = sim.state().entities["apple"]
    assert (apple.is_clean, apple.is_hot, apple.is_cold) == (False, False, False)


def test_treating_something_other_than_the_held_object_fails_and_is_retried(world) -> None:
    sim, executor = world
    assert run(executor, sim, "Go to", "apple").success and run(executor, sim, "Pick", "apple").success
    assert run(executor, sim, "Go to", "microwave").success
    report = executor.execute_detailed(Subtask("Heat", "mug", "microwave"), ORACLE, ("apple",))
    assert report.feedback.code is ErrorCode.E1 and len(report.results) == 3
    assert sim.state().entities["mug"].is_hot is False


def test_skill_set_runs_the_declared_actions_with_noise_prechecks(world) -> None:
    sim, _ = world
    skills = SkillSet(sim, noise=NoiseConfig(name="always", failure_probability={"Turn on": 1.0}), seed=0)
    refused = skills.run(Action.TURN_ON, "octo", "lamp")  # too far: the precheck's reason, not the noise
    assert refused.status is SkillStatus.TOO_FAR
    assert skills.run(Action.GO_TO, "NoMaD", "lamp").success
    assert skills.run(Action.TURN_ON, "octo", "lamp").status is SkillStatus.EXECUTION_FAILED  # now the noise
    executor = Executor(sim, config=ExecutorConfig(actions=HOUSEHOLD_ACTIONS), skills=SkillSet(sim))
    assert executor.execute(Subtask("Go to", "lamp"), "NoMaD", ()).success
    assert executor.execute(Subtask("Turn on", "lamp"), "octo", ()).success


def test_a_light_must_be_an_appliance() -> None:
    bad = dict(KITCHEN, furniture=[{"name": "lamp", "category": "floor_lamp", "pose": {"x": 1, "y": 1}, "size": [0.3, 0.3, 1.5]}])
    with pytest.raises(SceneError, match="a light must be an appliance"):
        parse_scene(bad)


def test_a_lamp_that_is_on_is_brighter_in_the_views() -> None:
    sim = MujocoSimulator(width=96, height=96, render=True)
    try:
        sim.reset(parse_scene(KITCHEN), seed=0)
        assert sim.go_to("lamp").success
        lamp_id = next(i for i, n in sim.observe().instance_names.items() if n == "lamp")

        def lamp_brightness() -> float:
            view = sim.observe().views["front"]
            mask = view.segmentation == lamp_id
            assert mask.sum() > 20, "the lamp is in the front view"
            return float(view.rgb[mask].mean())

        off = lamp_brightness()
        assert sim.turn_on("lamp").success
        assert lamp_brightness() > off + 5
    finally:
        sim.shutdown()
