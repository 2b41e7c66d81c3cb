"""The PARTNR-style suite: size, categories computed from the functions, split by scene, every task valid in
its scene and not done at the start, instructions naming only the scene's entities; the noiseless PARTNR
expert solves every task (slow)."""

from __future__ import annotations

from collections import Counter

import pytest

from homiebot.eval.partnr.generate import SPLITS, Draft, say, verify
from homiebot.tasks.partnr.language import CATEGORIES, EvaluationFunction, EvaluationProposition, task_category
from homiebot.tasks.partnr.tracker import evaluate_states
from homiebot.tasks.suite import load_suite

pytest.importorskip("mujoco", reason="the suite is checked on the MuJoCo simulator")


@pytest.fixture(scope="module")
def suite():
    return load_suite("partnr")


@pytest.fixture(scope="module")
def sim():
    from homiebot.sim.mujoco.backend import MujocoSimulator

    simulator = MujocoSimulator(render=False)
    yield simulator
    simulator.shutdown()


def function(task) -> EvaluationFunction:
    return EvaluationFunction.from_json(task.evaluation, task.id)


def test_size_categories_and_split(suite):
    assert len(suite.tasks) >= 300
    categories = Counter(task_category(function(t)) for t in suite.tasks)
    assert set(categories) == set(CATEGORIES)
    assert min(categories.values()) >= 60
    for t in suite.tasks:
        # the label written for readers is the one computed from the function
        assert f"category {task_category(function(t))};" in t.encoding
        assert t.split == SPLITS[t.scene]
    assert {t.split for t in suite.tasks} == {"train", "validation", "test"}
    assert len({t.id for t in suite.tasks}) == len(suite.tasks)
    assert len({(t.scene, t.instruction) for t in suite.tasks}) == len(suite.tasks)


@pytest.mark.slow
def test_every_task_is_valid_in_its_scene_and_not_done_at_the_start(suite, sim):
    for t in suite.tasks:
        sim.reset(t.scene, seed=t.seed)
        state = sim.state()
        fn = EvaluationFunction.from_json(t.evaluation, t.id, state.entities)
        start = evaluate_states(fn, [state])
        assert not any(start.satisfied_at[i] == 0 for i in fn.terminal_indices()), t.id
        mentions = t.encoding.split("mentions ")[1].split(", ")
        for name in mentions:
            assert name in state.entities, (t.id, name)
            assert say(name) in t.instruction, (t.id, name)
        assert t.keypaths[0][-1] == "[End]"


def test_verification_rejects_done_and_unsolvable_tasks(sim):
    sim.reset("apartment_1", seed=1)
    home = sim.state().entities["apple"].parent
    done = Draft("Leave the apple where it is.",
                 [EvaluationProposition("is_on_top", {"object_handles": ["apple"], "receptacle_handles": [home]})],
                 ["apple"], goal=[{"type": "placed", "object": "apple", "relation": "on", "receptacle": home}])
    verdict = verify(sim, done, "apartment_1", 1, "t-done")
    assert not verdict.ok and verdict.reason.startswith("already satisfied at the start")
    # the floor lamp has no surface: the expert cannot put anything on it
    impossible = Draft("Put the apple on the floor lamp.",
                       [EvaluationProposition("is_on_top", {"object_handles": ["apple"],
                                                            "receptacle_handles": ["floor_lamp"]})],
                       ["apple", "floor_lamp"],
                       goal=[{"type": "placed", "object": "apple", "relation": "on", "receptacle": "floor_lamp"}])
    verdict = verify(sim, impossible, "apartment_1", 1, "t-impossible")
    assert not verdict.ok and verdict.reason.startswith("expert PC 0.00")


@pytest.mark.slow
def test_noiseless_partnr_expert_solves_every_task(suite, sim):
    failures = []
    for t in suite.tasks:
        if not _verify_task(sim, t):
            failures.append(t.id)
    assert not failures, failures


def _verify_task(sim, task) -> bool:
    from homiebot.agent.loop import EpisodeConfig, run_episode
    from homiebot.planner.partnr_expert import PartnrExpertPlanner
    from homiebot.types import HOUSEHOLD_ACTIONS

    fn = function(task)
    planner = PartnrExpertPlanner()
    config = EpisodeConfig.with_actions(HOUSEHOLD_ACTIONS, render=False)
    trajectory = run_episode(sim, planner, task=task, seed=0, config=config)
    result = evaluate_states(fn, [*planner.seen_states, sim.state()])
    return bool(trajectory.ended and result.success and len(trajectory.rounds) <= 20)
