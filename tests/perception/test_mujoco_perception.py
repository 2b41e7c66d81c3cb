"""Perception on the embedded MuJoCo simulator: the exploration episode's graph quality, the world model in an
episode (partial observability, action updates, grounding against the graph), and the ``homie perception`` CLI."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from homiebot.executor import messages
from homiebot.perception.grounding import ExactTiersGrounder
from homiebot.perception.quality import evaluate, explore
from homiebot.perception.world_graph import ROBOT_ID, NodeKind, Relation, WorldGraph
from homiebot.perception.world_model import PerceptionConfig, WorldModel


@pytest.mark.slow
def test_exploration_graph_matches_ground_truth(sim):
    sim.reset("apartment_1", seed=0)
    spec = sim.scene_spec()
    exploration = explore(sim, spec)
    assert exploration.failed_targets == [] and exploration.stops == 1 + len(spec.rooms) + len(spec.furniture)
    report = evaluate(exploration, spec, grounder=ExactTiersGrounder())
    cg, privileged = report.conceptgraph, report.privileged
    # the banana in the closed fridge is never observable; everything else is
    assert privileged.objects_observable == cg.objects_observable == privileged.objects_total - 2
    assert cg.observable_recall == 1.0 and cg.object_precision == 1.0
    assert cg.furniture_recall == 1.0 and cg.furniture_precision == 1.0
    assert cg.relation_accuracy == 1.0 and cg.room_accuracy == 1.0
    assert cg.mean_position_error < 0.05
    names = {n.name for n in exploration.conceptgraph.graph.nodes(NodeKind.OBJECT)}
    assert "banana" not in names and not names & set(sim.state().entities)  # labels, not instance names
    by_source = report.grounding_truth.by_source  # without the model: every EMMOE name, and no unknown name
    assert by_source["emmoe"][0] == by_source["emmoe"][1] > 40
    assert by_source["negative"][0] == by_source["negative"][1]
    json.dumps(report.to_dict())


@pytest.mark.parametrize("builder", ["privileged", "conceptgraph"])
def test_world_model_in_an_episode(sim, builder):
    from homiebot.executor.executor import Executor
    from homiebot.types import Subtask

    sim.reset("apartment_1", seed=0)
    model = WorldModel(sim.scene_spec(), sim.state(), PerceptionConfig(builder=builder, semantic_grounding=False))
    model.observe(sim.observe(), sim.state())
    executor = Executor(sim, grounder=model.grounder())
    # the banana sits in the closed fridge: perception has not seen it, so naming it is F2
    report = executor.execute_detailed(Subtask("Go to", "banana"), "NoMaD", (), sim.state())
    assert report.feedback.code.value == "F2" and report.feedback.message == messages.does_not_exist("banana")
    for subtask in (Subtask("Go to", "fridge"), Subtask("Open", "fridge")):
        report = executor.execute_detailed(subtask, "NoMaD", (), sim.state())
        assert report.feedback.success, report.feedback
        model.record_action(subtask.action, report.target, report.place, sim.state())
        model.observe(sim.observe(), sim.state())
    fridge = model.node_for_instance("fridge", sim.state())
    assert fridge is not None and fridge.states.get("is_open") is True
    report = executor.execute_detailed(Subtask("Pick", "banana"), "RT-1-X", (), sim.state())
    assert report.feedback.success and report.target == "banana"
    model.record_action("Pick", report.target, None, sim.state())
    model.observe(sim.observe(), sim.state())
    banana = model.node_for_instance("banana", sim.state())
    assert model.graph.placement(banana.id) == (ROBOT_ID, Relation.HELD_BY)
    assert f"{banana.name}: held by robot" in model.describe()
    assert len([n for n in model.graph.nodes(NodeKind.OBJECT) if n.category == "banana"]) == 1
    assert banana.name in model.observed_targets()
    WorldGraph.from_json(model.graph.to_json())  # what the ROS node will publish round-trips


@pytest.mark.slow
def test_cli_eval_json_and_files(tmp_path):
    from homiebot.cli import build_app

    out = tmp_path / "perception"
    result = CliRunner().invoke(build_app(), ["perception", "eval", "--scene", "apartment_1", "--json", "--no-semantic",
                                              "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{"):])
    assert report["conceptgraph"]["observable_recall"] == 1.0 and report["threshold"] is None
    assert sorted(p.name for p in out.iterdir()) == [
        "conceptgraph_description.txt", "conceptgraph_graph.json", "conceptgraph_topdown.png",
        "privileged_description.txt", "privileged_graph.json", "privileged_topdown.png", "report.json",
    ]
    assert WorldGraph.load(out / "conceptgraph_graph.json").nodes(NodeKind.OBJECT)


def test_cli_rejects_an_unknown_scene(tmp_path):
    from homiebot.cli import build_app

    result = CliRunner().invoke(build_app(), ["perception", "graph", "--scene", "nowhere", "--out", str(tmp_path / "g")])
    assert result.exit_code == 2
    assert "unknown scene 'nowhere'" in result.output and not (tmp_path / "g").exists()
