"""Water on the PARTNR-style suite: PARTNR's is_filled / is_empty evaluated from the simulator's state, recorded
in states.jsonl, the water tasks of the suite (after the other tasks, their own ids), the expert's Fill and Pour
steps alone, and the expert pair in both modes with Fill and Pour done by the human only (PARTNR A.9.1)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from homiebot.eval.partnr.states import snapshot_lines, states_from_lines
from homiebot.multiagent.centralized import AgentRole
from homiebot.multiagent.evaluate import collaboration_tasks, run_pair, run_single
from homiebot.multiagent.pair import CentralizedExpert, ShareExpert, centralized_pair
from homiebot.multiagent.split import split_propositions
from homiebot.planner.partnr_expert import PartnrExpertPlanner
from homiebot.tasks.partnr.language import EvaluationFunction, task_category
from homiebot.tasks.partnr.predicates import PREDICATES
from homiebot.tasks.suite import load_suite

pytest.importorskip("mujoco", reason="water tasks run on the MuJoCo simulator")

from homiebot.sim.mujoco.backend import MujocoSimulator  # noqa: E402


@pytest.fixture(scope="module")
def suite():
    return load_suite("partnr").tasks


@pytest.fixture(scope="module")
def water(suite):
    return {t.id: t for t in suite if "-w" in t.id}


@pytest.fixture(scope="module")
def sims():
    alone, pair = MujocoSimulator(render=False), MujocoSimulator(render=False, human=True)
    yield alone, pair
    alone.shutdown()
    pair.shutdown()


def _holds(name: str, state, objects) -> bool:
    spec = PREDICATES[name]
    assert spec.evaluate is not None
    return spec.evaluate(state, {"object_handles": objects}).is_satisfied


def test_is_filled_and_is_empty_read_the_simulators_water(sims):
    sim = sims[0]
    sim.reset("apartment_1", seed=1)
    state = sim.state()
    assert _holds("is_empty", state, ["mug"]) and not _holds("is_filled", state, ["mug"])
    # An apple holds no water: neither filled nor empty (as is_clean for an object without cleanliness).
    assert not _holds("is_empty", state, ["apple"]) and not _holds("is_filled", state, ["apple"])
    filled = replace(state, entities={**state.entities, "mug": replace(state.entities["mug"], is_filled=True)})
    assert _holds("is_filled", filled, ["mug"]) and not _holds("is_empty", filled, ["mug"])
    assert _holds("is_filled", filled, ["bowl", "mug"])  # an OR-list: one of them
    fn = EvaluationFunction.from_json({"evaluation_propositions": [
        {"function_name": "is_filled", "args": {"object_handles": ["mug"]}}]}, "t", set(state.entities))
    assert task_category(fn) == "heterogeneous"


def test_recorded_states_keep_the_water_of_containers_only(sims):
    sim = sims[0]
    sim.reset("apartment_1", seed=1)
    first = sim.state()
    second = replace(first, entities={**first.entities, "mug": replace(first.entities["mug"], is_filled=True)})
    lines = list(snapshot_lines([first, second]))
    assert lines[0]["entities"]["mug"]["is_filled"] is False and "is_filled" not in lines[0]["entities"]["apple"]
    assert lines[1]["entities"] == {"mug": {"is_filled": True}}
    back = states_from_lines(lines)
    assert back[0].entities["mug"].is_filled is False and back[1].entities["mug"].is_filled is True
    assert back[1].entities["apple"].is_filled is None
    # A record written before water existed (no is_filled field) still reads back.
    for fields in lines[0]["entities"].values():
        fields.pop("is_filled", None)
    assert states_from_lines(lines[:1])[0].entities["mug"].is_filled is None


def test_the_suite_has_water_tasks_after_the_others_and_all_are_collaboration_tasks(suite, water):
    ids = [t.id for t in suite]
    first_water = min(ids.index(i) for i in water)
    assert all("-w" in i for i in ids[first_water:])  # the earlier tasks keep their positions
    assert len(water) >= 30 and sum(t.split == "validation" for t in water.values()) >= 6
    templates = {t.encoding.split("'")[1] for t in water.values()}
    assert templates == {"fill then place", "fill and move", "pour then place"}
    functions = {t.id: EvaluationFunction.from_json(t.evaluation, t.id) for t in water.values()}
    assert all(any(p.function_name == "is_filled" for p in f.propositions) for f in functions.values())
    chosen = collaboration_tasks(list(water.values()), lambda t: functions[t.id])
    assert len(chosen) == len(water)
    for fn in functions.values():
        share = split_propositions(fn)
        assert all(fn.propositions[i].function_name == "is_filled" for i in share[AgentRole.HUMAN])


def test_the_expert_fills_and_pours_alone(sims, water):
    # partnr-6-w02: "Fill the bowl on the wood table with water, pour it into the mug, then put the mug on the
    # brown table."
    sim = sims[0]
    line, trajectory = run_single(sim, water["partnr-6-w02"], 0, PartnrExpertPlanner())
    plan = [r.subtask_text for r in trajectory.rounds]
    assert line["success"] and trajectory.ended
    assert plan.index("[Fill, bowl_1, sink]") < plan.index("[Pour, bowl_1, mug]") < plan.index("[Put, mug, brown_table]")
    state = sim.state()
    assert state.entities["mug"].is_filled is True and state.entities["bowl_1"].is_filled is False


@pytest.mark.parametrize("mode", ["decentralized", "centralized"])
def test_expert_pair_fills_with_the_human_and_places_with_the_robot(sims, water, mode):
    sim = sims[1]
    robot, human = (ShareExpert(AgentRole.ROBOT), ShareExpert(AgentRole.HUMAN)) if mode == "decentralized" \
        else centralized_pair(CentralizedExpert())
    line, trajectory = run_pair(sim, water["partnr-6-w02"], 0, robot, human)
    assert line["success"] and trajectory.ended and trajectory.error is None
    robot_actions = [r.output.subtask.action for r in trajectory.rounds if r.output.subtask is not None]
    human_steps = [r.subtask_text for r in trajectory.partner_rounds]
    assert "Fill" not in robot_actions and "Pour" not in robot_actions
    assert human_steps.index("[Fill, bowl_1, sink]") < human_steps.index("[Pour, bowl_1, mug]")
    # The robot carries the mug once the water is in it.
    assert "[Put, mug, brown_table]" in [r.subtask_text for r in trajectory.rounds]
    assert line["task_offloading"] is not None and 0 < line["task_offloading"] < 1


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["decentralized", "centralized"])
def test_expert_pair_solves_every_water_task(sims, water, mode):
    failures = []
    for task in water.values():
        robot, human = (ShareExpert(AgentRole.ROBOT), ShareExpert(AgentRole.HUMAN)) if mode == "decentralized" \
            else centralized_pair(CentralizedExpert())
        line, _ = run_pair(sims[1], task, 0, robot, human)
        if not line["success"]:
            failures.append((task.id, line["steps"]))
    assert not failures


def test_the_experts_pour_goes_into_a_target_nobody_holds(sims):
    # is_filled(mug) while the hand holds a filled bowl: Pour the bowl into the mug (after going to it); when the
    # partner holds the mug, no Pour into it: the expert goes for the mug itself (a pair's expert then waits).
    sim = sims[0]
    sim.reset("apartment_1", seed=1)
    state = sim.state()
    entities = {**state.entities, "bowl": replace(state.entities["bowl"], is_filled=True, held=True)}
    holding = replace(state, held="bowl", entities=entities)
    step = PartnrExpertPlanner()._fill(holding, ["mug"], "To fill the mug")
    assert step is not None
    assert (step.subtask.action, step.subtask.target) in (("Go to", "mug"), ("Pour", "bowl"))
    if step.subtask.action == "Pour":
        assert step.subtask.place == "mug"
    partner_holds = replace(holding, entities={**entities, "mug": replace(entities["mug"], held=True)})
    step = PartnrExpertPlanner()._fill(partner_holds, ["mug"], "To fill the mug")
    assert step is not None and step.subtask.action != "Pour"
