"""``--skills oracle|physical`` on ``homie run`` and ``homie eval``: the setting reaches the episode, is kept in the
record and pinned in ``eval.json``; a wrong value is one line and exit 2 with nothing written (docs/robots.md,
"Physical skills")."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from homiebot.cli import build_app
from homiebot.skills.physical import skillset

TASK = "emmoe-084"


def test_homie_run_skills_physical_completes_and_keeps_the_setting(tmp_path: Path):
    out = tmp_path / "run"
    result = CliRunner().invoke(build_app(), ["run", "--task", TASK, "--skills", "physical", "--out", str(out),
                                              "--no-render", "--no-report"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["success"] is True
    # With the Open/Close setting the skill set used (its default: none was given).
    assert summary["run"]["skills"] == {"mode": "physical", "noise": "off", "articulation": skillset.ARTICULATION}


def test_a_wrong_skills_value_is_one_line_and_writes_nothing(tmp_path: Path):
    out = tmp_path / "run"
    result = CliRunner().invoke(build_app(), ["run", "--task", TASK, "--skills", "physic", "--out", str(out)])
    assert result.exit_code == 2
    assert "--skills 'physic': use oracle or physical" in result.output
    assert not out.exists()


def test_homie_eval_pins_the_skills_and_refuses_a_resume_with_others(tmp_path: Path):
    out = tmp_path / "eval"
    base = ["eval", "--suite", "emmoe", "--tasks", TASK, "--runs", "1", "--workers", "1", "--no-images", "--out", str(out)]
    runner = CliRunner()
    first = runner.invoke(build_app(), [*base, "--skills", "physical"])
    assert first.exit_code == 0, first.output
    settings = json.loads((out / "eval.json").read_text())["settings"]
    assert settings["skills"] == "physical"
    assert json.loads((out / "eval.json").read_text())["run"]["skills"]["mode"] == "physical"
    # The expert with physical skills is not its own PLWSR reference: the oracle expert's episode is run beside it.
    assert (out / "reference" / TASK).is_dir()
    again = runner.invoke(build_app(), [*base, "--skills", "oracle"])
    assert again.exit_code == 2
    assert "skills: 'physical' there, 'oracle' now" in again.output


def test_homie_up_sim_refuses_a_wrong_skills_value_before_anything_starts(tmp_path: Path):
    out = tmp_path / "up"
    result = CliRunner().invoke(build_app(), ["up", "sim", "--task", TASK, "--skills", "physic", "--out", str(out)])
    assert result.exit_code == 2
    assert "--skills 'physic': use oracle or physical" in result.output
    assert not out.exists()


def _stand_in_policy(root: Path, size: int = 32) -> Path:
    """What the check of a LeRobot policy folder reads (config.json, model.safetensors): an arm policy."""
    root.mkdir(parents=True)
    inputs = {f"observation.images.{c}": {"type": "VISUAL", "shape": [3, size, size]} for c in ("head", "wrist")}
    inputs["observation.state"] = {"type": "STATE", "shape": [10]}
    config = {"type": "act", "n_action_steps": 5, "input_features": inputs,
              "output_features": {"action": {"type": "ACTION", "shape": [10]}}}
    (root / "config.json").write_text(json.dumps(config))
    (root / "model.safetensors").write_bytes(b"")
    return root


def _stand_in_go_to(root: Path) -> Path:
    """The same for a Go to policy (head and goal cameras, the goal pose, the base's velocity)."""
    root.mkdir(parents=True)
    inputs = {f"observation.images.{c}": {"type": "VISUAL", "shape": [3, 32, 32]} for c in ("head", "goal")}
    inputs["observation.state"] = {"type": "STATE", "shape": [3]}
    config = {"type": "act", "n_action_steps": 5, "input_features": inputs,
              "output_features": {"action": {"type": "ACTION", "shape": [2]}}}
    (root / "config.json").write_text(json.dumps(config))
    (root / "model.safetensors").write_bytes(b"")
    return root


def test_homie_up_sim_skill_model_is_checked_before_anything_starts_and_adds_a_policy_node(tmp_path: Path):
    """``homie up sim --skill-model`` refuses as ``homie run`` does (one line, exit 2, nothing written), and puts one
    policy node per slot into the graph after the manipulation executor, which forwards the slot's Picks to it
    (docs/skills.md, "The policy as its own ROS 2 node")."""
    from homiebot.ros.policy_nodes import PolicyNodes, policy_image_size
    from homiebot.ros.supervisor import DEFAULT_GRAPH, load_graph

    policy = _stand_in_policy(tmp_path / "policy")
    out = tmp_path / "up"
    for args, words in ((["--skill-model", f"RT-1-X={policy}"], "--skill-model needs --skills physical"),
                        (["--skills", "physical", "--skill-model", f"gpt={policy}"], "unknown model slot 'gpt'"),
                        (["--skills", "physical", "--skill-model", f"NoMaD={policy}"], "outputs 10 values"),
                        (["--skills", "physical", "--skill-model", f"RT-1-X={tmp_path / 'none'}"], "is not a folder")):
        result = CliRunner().invoke(build_app(), ["up", "sim", "--task", TASK, *args, "--out", str(out)])
        assert result.exit_code == 2, result.output
        assert words in result.output and len([ln for ln in result.stderr.splitlines() if ln.strip()]) == 1, result.output
        assert not out.exists()
    other = _stand_in_policy(tmp_path / "other", size=64)
    try:
        policy_image_size({"RT-1-X": str(policy), "octo": str(other)})
        raise AssertionError("two sizes were taken")
    except ValueError as err:
        assert "different sizes" in str(err)
    assert policy_image_size({"RT-1-X": str(policy)}) == 32
    graph = PolicyNodes({"RT-1-X": str(policy)}, 32).with_nodes(load_graph(DEFAULT_GRAPH))
    names = [node.name for node in graph.nodes]
    assert names[names.index("manip_executor") + 1] == "skill_policy_rt_1_x"
    node = graph.node("skill_policy_rt_1_x")
    assert node.module == "executor_nodes.policy_node" and "__node:=skill_policy_rt_1_x" in node.remaps
    assert node.parameters == {"model": "RT-1-X", "policy": str(policy), "action": "/skill_policy/rt_1_x/manipulate"}
    # A Go to policy gets a node of its own too, serving Navigate (docs/skills.md, "A Go to policy in the graph").
    go_to = _stand_in_go_to(tmp_path / "go_to")
    assert policy_image_size({"NoMaD": str(go_to), "RT-1-X": str(policy)}) == 32
    graph = PolicyNodes({"NoMaD": str(go_to)}, 32).with_nodes(load_graph(DEFAULT_GRAPH))
    assert graph.node("skill_policy_nomad").parameters == {"model": "NoMaD", "policy": str(go_to),
                                                           "action": "/skill_policy/nomad/navigate"}
