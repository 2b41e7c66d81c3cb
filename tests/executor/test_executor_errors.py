"""One test per EMMOE error type (appendix E.1/E.4), asserting the paper's message text exactly."""

from __future__ import annotations

from dataclasses import replace

import pytest

from homiebot.executor.executor import Executor, ExecutorConfig
from homiebot.testing.fake_world import FakeWorld, kitchen_world, obj
from homiebot.types import ErrorCode, SkillResult, SkillStatus, Subtask


@pytest.fixture()
def world() -> FakeWorld:
    return FakeWorld(kitchen_world())


def run(world: FakeWorld, action: str, target: str | None = None, place: str | None = None, model: str = "RT-1-X",
        inventory=(), **config):
    executor = Executor(world, config=ExecutorConfig(**config))
    return executor.execute(Subtask(action, target, place), model, inventory)


def test_ok_message_is_None_and_inventory_updated(world):
    world.place_robot_near("brown_table", 0.5)
    fb = run(world, "Pick", "green_can")
    assert (fb.code, fb.message, fb.inventory, fb.attempts) == (ErrorCode.OK, "None", ("green_can",), 1)
    assert fb.signal == "success"


def test_F1_action_not_in_list(world):
    fb = run(world, "Wash", "apple")
    assert fb.code is ErrorCode.F1
    assert fb.message == "wash is not in the action list! You should only choose actions in the list."
    assert fb.attempts == 0 and world.skill_calls == []


def test_F1_action_outside_configured_list(world):
    fb = run(world, "Open", "fridge", model="octo", actions=("Go to", "Pick", "Put", "End"))
    assert fb.message == "open is not in the action list! You should only choose actions in the list."


def test_F1_model_not_in_list(world):
    fb = run(world, "Go to", "fridge", model="GPT-Nav")
    assert fb.code is ErrorCode.F1
    assert fb.message == "GPT-Nav is not in the model list! You should only choose models in the list."


def test_model_names_match_case_insensitively_and_leniently_by_default(world):
    world.place_robot_near("fridge", 0.5)
    fb = run(world, "Open", "fridge", model="Octo")
    assert fb.code is ErrorCode.OK
    world.reset("fake")
    world.place_robot_near("fridge", 0.5)
    assert run(world, "Open", "fridge", model="NoMaD").code is ErrorCode.OK  # paper: list membership only


def test_strict_models_requires_a_model_that_serves_the_action(world):
    world.place_robot_near("fridge", 0.5)
    fb = run(world, "Open", "fridge", model="NoMaD", strict_models=True)
    assert fb.code is ErrorCode.F1
    assert fb.message == "NoMaD can not open! You should choose a suitable model in the list."


def test_F1_missing_target_and_place(world):
    assert run(world, "Pick").message == "pick needs a target! You should output in format [action, target]."
    fb = run(world, "Put", "green_can", inventory=("green_can",))
    assert fb.code is ErrorCode.F1
    assert fb.message == "put needs a place! You should output in format [Put, object, place]."


def test_F2_target_does_not_exist(world):
    fb = run(world, "Go to", "stack of papers", model="PixNav")
    assert fb.code is ErrorCode.F2
    assert fb.message == "stack of papers does not exist! Please choose another object"


def test_F2_uses_the_place_of_a_put(world):
    fb = run(world, "Put", "green_can", "dishwasher", inventory=("green_can",))
    assert (fb.code, fb.message) == (ErrorCode.F2, "dishwasher does not exist! Please choose another object")


def test_L1_hand_full(world):
    world.place_robot_near("fridge", 0.5)
    fb = run(world, "Open", "fridge", model="octo", inventory=("green_can",))
    assert fb.code is ErrorCode.L1
    assert fb.message == "Unable to open, the hand is full"
    assert fb.inventory == ("green_can",)
    assert run(world, "Pick", "green_can", inventory=("x",)).message == "Unable to pick, the hand is full"
    assert run(world, "Close", "fridge", model="octo", inventory=("x",)).message == "Unable to close, the hand is full"


def test_L2_hand_empty(world):
    fb = run(world, "Put", "green_can", "brown_table")
    assert fb.code is ErrorCode.L2
    assert fb.message == "Unable to put, the hand is empty"


def test_L3_put_into_closed_container_uses_planner_target_string(world):
    fb = run(world, "Put", "green_can", "the refrigerator", inventory=("green_can",))
    assert fb.code is ErrorCode.L3
    assert fb.message == "Unable to put, the the refrigerator is closed, you should open it first"
    fb = run(world, "Put", "green_can", "fridge", inventory=("green_can",))
    assert fb.message == "Unable to put, the fridge is closed, you should open it first"


def test_L4_open_non_interactive(world):
    world.place_robot_near("blue_sofa", 0.5)
    fb = run(world, "Open", "sofa", model="octo")
    assert fb.code is ErrorCode.L4
    assert fb.message == "Can not open sofa! Please choose another object"
    assert run(world, "Close", "kitchen", model="octo").message == "Can not close kitchen! Please choose another object"


def test_L4_pick_of_a_furniture_or_a_room(world):
    # EMMOE section 3.3: L4 is an attempt to interact with a non-interactive object; a sofa cannot be picked. It is
    # the planner's logic error, refused before any try, not three failed tries of the model (E1).
    world.place_robot_near("blue_sofa", 0.5)
    fb = run(world, "Pick", "sofa")
    assert (fb.code, fb.message, fb.attempts) == (ErrorCode.L4, "Can not pick sofa! Please choose another object", 0)
    assert world.skill_calls == [] and fb.inventory == ()
    assert run(world, "Pick", "kitchen").code is ErrorCode.L4
    assert run(world, "Pick", "sofa", inventory=("apple",)).code is ErrorCode.L1  # the paper's order: L1 first


def test_D1_far_away(world):
    world.place_robot_near("brown_table", 2.5)
    fb = run(world, "Pick", "green_can")
    assert fb.code is ErrorCode.D1
    assert fb.message == "Unable to pick, the target is far away"


def test_D2_too_close(world):
    world.place_robot_near("fridge", 0.05)
    fb = run(world, "Open", "fridge", model="octo")
    assert fb.code is ErrorCode.D2
    assert fb.message == "Unable to open, the target is too close"


def test_go_to_has_no_distance_check(world):
    world.place_robot_near("fridge", 0.0)
    assert run(world, "Go to", "fridge", model="NoMaD").code is ErrorCode.OK


def test_E1_after_three_tries_with_arm_reset_before_each(world):
    world.place_robot_near("brown_table", 0.5)
    world.fail_queue.extend([SkillStatus.EXECUTION_FAILED] * 3)
    fb = run(world, "Pick", "green_can")
    assert fb.code is ErrorCode.E1
    assert fb.message == "Unable to pick, the subtask is too difficult to perform"
    assert fb.attempts == 3 and world.reset_arm_calls == 3
    assert fb.inventory == ()


def test_a_failure_that_another_try_cannot_change_is_E1_after_one_try(world):
    # A result that says retrying will not help (a bowl no grasp fits): E1 at once, with the message of the third
    # try, and no further try (the next one, from the queue's end, would succeed).
    world.place_robot_near("brown_table", 0.5)
    world.fail_queue.append(SkillResult(SkillStatus.EXECUTION_FAILED, "grasp impossible: injected", retryable=False))
    fb = run(world, "Pick", "green_can")
    assert (fb.code, fb.message) == (ErrorCode.E1, "Unable to pick, the subtask is too difficult to perform")
    assert fb.attempts == 1 and world.reset_arm_calls == 1
    assert world.held is None and fb.inventory == ()


def test_success_on_third_try(world):
    world.place_robot_near("brown_table", 0.5)
    world.fail_queue.extend([SkillStatus.EXECUTION_FAILED] * 2)
    fb = run(world, "Pick", "green_can")
    assert (fb.code, fb.attempts, world.reset_arm_calls) == (ErrorCode.OK, 3, 3)


def test_E1_go_to_no_path(world):
    world.fail_queue.extend([SkillStatus.NO_PATH] * 3)
    fb = run(world, "Go to", "blue_sofa", model="NoMaD")
    assert fb.message == "Unable to go to, the subtask is too difficult to perform"


def test_E2_object_missing_pops_inventory(world):
    world.place_robot_near("brown_table", 0.5)
    assert run(world, "Pick", "green_can").code is ErrorCode.OK
    world.fail_queue.append(SkillStatus.DROPPED)
    fb = run(world, "Put", "green_can", "brown_table", inventory=("green_can",))
    assert fb.code is ErrorCode.E2
    assert fb.message == "Unable to put, and the object is missing"
    assert fb.inventory == () and fb.attempts == 1


def test_E2_when_hand_is_empty_though_planner_believes_it_holds(world):
    # HLP inventory says green_can but the hand is empty: the put fails with nothing in hand -> E2 (paper).
    world.place_robot_near("brown_table", 0.5)
    fb = run(world, "Put", "green_can", "brown_table", inventory=("green_can",))
    assert (fb.code, fb.message) == (ErrorCode.E2, "Unable to put, and the object is missing")


def test_skill_refusal_twin_of_a_precheck_is_reported_at_once(world):
    world.place_robot_near("brown_table", 0.5)
    world.fail_queue.append(SkillStatus.TOO_FAR)
    fb = run(world, "Pick", "green_can")
    assert (fb.code, fb.message, fb.attempts) == (ErrorCode.D1, "Unable to pick, the target is far away", 1)


def test_pick_from_closed_container_is_retried_then_E1(world):
    world.entities["green_can"] = obj("green_can", "fridge", "in", world.entities["fridge"])
    world.place_robot_near("fridge", 0.5)
    fb = run(world, "Pick", "green_can")
    assert (fb.code, fb.message, fb.attempts) == (ErrorCode.E1, "Unable to pick, the subtask is too difficult to perform", 3)


def test_end_is_ok_without_checks(world):
    fb = run(world, "End", model="")
    assert (fb.code, fb.message) == (ErrorCode.OK, "None")


def test_put_grounds_the_held_instance(world):
    # Two apples, the other one nearer than the held one: the held one is put.
    world.place_robot_near("blue_sofa", 0.5)
    assert run(world, "Pick", "apple").code is ErrorCode.OK
    world.go_to("brown_table")
    world.entities["apple"] = replace(world.entities["apple"], position=(9.0, 3.0, 0.9))
    world.entities["apple_2"] = replace(world.entities["green_can"], name="apple_2", category="apple")
    report = Executor(world).execute_detailed(Subtask("Put", "apple", "brown_table"), "RT-1-X", ("apple",))
    assert report.feedback.code is ErrorCode.OK and report.target == "apple"
    assert world.entities["apple"].parent == "brown_table"


def test_skill_layer_model_substitution_is_lenient_by_default(world):
    from homiebot.skills import SkillSet

    world.place_robot_near("fridge", 0.5)
    skills = SkillSet(world)
    fb = Executor(world, skills=skills).execute(Subtask("Open", "fridge"), "NoMaD", ())
    assert fb.code is ErrorCode.OK and world.entities["fridge"].is_open  # NoMaD cannot open: a serving model ran
    fb = Executor(world, skills=skills, config=ExecutorConfig(strict_models=True)).execute(
        Subtask("Close", "fridge"), "PixNav", ())
    assert (fb.code, fb.message) == (ErrorCode.F1, "PixNav can not close! You should choose a suitable model in the list.")


def test_L4_pick_of_a_furniture_in_the_simulator():
    # The same on the embedded MuJoCo world, whose pick skill failed such a pick three times (E1) before.
    from homiebot.sim.mujoco.backend import MujocoSimulator

    sim = MujocoSimulator(render=False)
    try:
        sim.reset("apartment_1", seed=0)
        sim.go_to("sofa")
        fb = Executor(sim).execute(Subtask("Pick", "sofa"), "RT-1-X", ())
        assert (fb.code, fb.message, fb.attempts) == (ErrorCode.L4, "Can not pick sofa! Please choose another object", 0)
    finally:
        sim.shutdown()
