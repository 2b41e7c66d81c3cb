"""The MuEP-style suite: balanced over ALFWorld's six types and seen / unseen scenes, ALFRED's goal
conditions on the simulator's state, and every task solved by the expert in the simulator."""

from __future__ import annotations

from collections import Counter

import pytest

from homiebot.eval.muep import muep_table
from homiebot.eval.muep_suite import (
    SEEN_SCENES,
    TEMPLATES,
    UNSEEN_SCENES,
    AlfredTask,
    RandomTextAgent,
    TextExpert,
    goal_conditions,
    load_suite,
    run_text_episode,
)
from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.sim.scene import SceneError
from homiebot.tasks.alfred import TASK_TYPES


@pytest.fixture(scope="module")
def sim():
    simulator = MujocoSimulator(render=False)
    yield simulator
    simulator.shutdown()


@pytest.fixture(scope="module")
def suite() -> list[AlfredTask]:
    return load_suite()


def test_suite_is_balanced_over_types_and_splits(suite) -> None:
    assert len(suite) >= 240
    counts = Counter((t.split, t.task_type) for t in suite)
    assert {counts[("seen", t)] for t in TASK_TYPES} == {20} and {counts[("unseen", t)] for t in TASK_TYPES} == {20}
    assert {t.scene for t in suite if t.split == "seen"} <= set(SEEN_SCENES)
    assert {t.scene for t in suite if t.split == "unseen"} <= set(UNSEEN_SCENES)
    assert len({t.id for t in suite}) == len(suite)
    for task in suite:
        filled = {tpl.format(obj=task.object_type, recep=task.receptacle_type, toggle=task.toggle_type) for tpl in TEMPLATES[task.task_type]}
        assert task.instruction in filled


def test_goal_conditions_count_like_alfred(sim) -> None:
    task = AlfredTask("t", "pick_heat_then_place_in_recep", "apartment_1", 0, "seen", "apple", receptacle_type="sidetable")
    sim.reset(task.scene, seed=0)
    assert goal_conditions(task, sim.state()) == (0, 3)
    assert sim.go_to("apple").success and sim.pick("apple").success
    assert sim.go_to("microwave").success and sim.heat("apple", "microwave").success
    assert goal_conditions(task, sim.state()) == (1, 3)  # some apple hot
    assert sim.go_to("brown_table").success and sim.put("apple", "brown_table").success
    assert goal_conditions(task, sim.state()) == (3, 3)
    look = AlfredTask("l", "look_at_obj_in_light", "apartment_1", 0, "seen", "apple", toggle_type="floorlamp")
    assert goal_conditions(look, sim.state()) == (0, 2)
    assert sim.pick("apple").success and goal_conditions(look, sim.state()) == (1, 2)
    assert sim.go_to("floor_lamp").success and sim.turn_on("floor_lamp").success
    assert goal_conditions(look, sim.state()) == (2, 2)


def test_tasks_need_their_receptacle_or_lamp() -> None:
    with pytest.raises(ValueError, match="needs toggle_type"):
        AlfredTask("x", "look_at_obj_in_light", "apartment_1", 0, "seen", "apple")
    with pytest.raises(ValueError, match="unknown task type"):
        AlfredTask("x", "slice_things", "apartment_1", 0, "seen", "apple", receptacle_type="fridge")


def test_a_malformed_suite_file_is_one_precise_error(tmp_path) -> None:
    bad = tmp_path / "muep.yaml"
    bad.write_text("- {id: x, task_type: pick_and_place_simple}\n")
    with pytest.raises(SceneError, match="invalid MuEP suite"):
        load_suite(bad)
    with pytest.raises(SceneError, match="not found"):
        load_suite(tmp_path / "none.yaml")


@pytest.mark.slow
def test_expert_solves_two_tasks_of_each_type(sim, suite) -> None:
    sample = [t for task_type in TASK_TYPES for t in [x for x in suite if x.task_type == task_type][:2]]
    for task in sample:
        played = run_text_episode(sim, task, TextExpert())
        assert played.episode.success, (task.id, played.transcript)
        assert played.episode.compliant and not played.episode.repetition


@pytest.mark.slow
def test_expert_solves_the_whole_suite_and_random_does_not(sim, suite) -> None:
    expert = [run_text_episode(sim, t, TextExpert()).episode for t in suite]
    table = muep_table(expert)
    assert table["seen"]["overall"].sr == 100.0 and table["unseen"]["overall"].sr == 100.0
    assert table["seen"]["overall"].gcs == 100.0 and table["seen"]["overall"].rdi == 0.0
    random_agent = [run_text_episode(sim, t, RandomTextAgent()).episode for t in suite[::6]]
    assert muep_table(random_agent)["seen"]["overall"].sr < 50.0
    assert all(e.steps <= 30 for e in random_agent)
