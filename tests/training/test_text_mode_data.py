"""Data from real collected records: the text-mode SFT prompt is the hf planner's text-mode prompt for the same
round, and ``homie data export`` writes EMMOE's raw ``info.txt`` layout (EMMOE paper, appendix B.3)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import pytest
from typer.testing import CliRunner

from homiebot.cli import build_app
from homiebot.config.run import run_config
from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.expert import ExpertPlanner
from homiebot.planner.hf_backend import HFPlanner
from homiebot.planner.messages import ChatMessage
from homiebot.testing.synthetic_records import write_episode
from homiebot.training.build import BuildOptions, collect
from homiebot.training.collect import collect_episodes
from homiebot.training.episodes import TEXT_WORLD_FILE, TrainingDataError

TASK = "emmoe-001"
SEED_OFFSET = 15  # a seed the evaluation never plays (homiebot.training.collect.EVALUATION_RUNS)


@dataclass
class FakeTextEngine:
    """Stands in for a text model: the prompts are built by the planner without it (nothing is generated)."""

    text_only: bool = True


class PromptProbe(Planner):
    """Acts as the expert and keeps what the hf planner's text mode would send a text model each round."""

    privileged = True

    def __init__(self, **options: bool) -> None:
        self.expert = ExpertPlanner()
        self.hf = HFPlanner(model="fake", engine=FakeTextEngine(), **options)  # type: ignore[arg-type]
        self.prompts: list[list[ChatMessage]] = []

    def reset(self, task: str, seed: int = 0) -> None:
        self.expert.reset(task, seed)
        self.hf.reset(task, seed)

    def plan(self, request: PlanRequest) -> str:
        # What the hf planner receives in the text mode (as the loop gives it): the state, no goal or evaluation.
        private = replace(request, goal=None, perceived_names=None, evaluation=None)
        self.prompts.append(self.hf.messages_for(private))
        return self.expert.plan(request)


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    out = tmp_path_factory.mktemp("text_mode") / "collected"
    summary = collect_episodes(out, planner="expert", task_ids=[TASK], seed_offset=SEED_OFFSET)
    assert summary.episodes == 1 and summary.succeeded == 1
    return out


def _replayed_prompts(**options: bool) -> list[list[ChatMessage]]:
    from homiebot.agent.loop import EpisodeConfig, run_episode
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task

    probe = PromptProbe(**options)
    sim = make_simulator("mujoco", render=False)
    try:
        run_episode(sim, probe, task=get_task(TASK), seed=SEED_OFFSET, config=EpisodeConfig(render=False))
    finally:
        sim.shutdown()
    return probe.prompts


def test_text_observation_samples_carry_the_planners_prompt(collected):
    """Every SFT prompt equals the one the planner sends in that round with include_history=false (one fresh
    chat per round), with and without the system turn, so the trained model is evaluated on what it learnt."""
    assert (collected / "episodes" / TASK / "run0" / TEXT_WORLD_FILE).read_text().startswith("World now:\n")
    for system_turn in (False, True):
        options = BuildOptions(split="all", rewrites=0, system_prompt=system_turn, text_observation=True)
        built, _ = collect([collected], "sft", options)
        prompts = _replayed_prompts(include_history=False, system_turn=system_turn)
        assert len(prompts) == len(built.sft) >= 3
        for (_, step), messages in zip(built.sft, prompts, strict=True):
            assert messages[-1].role == "user" and step.prompt == messages[-1].text
            if system_turn:
                assert [m.role for m in messages] == ["system", "user"] and step.system == messages[0].text
            else:
                assert [m.role for m in messages] == ["user"] and step.system is None


def test_text_observation_needs_the_world_description(tmp_path):
    write_episode(tmp_path / "runs" / "episodes" / "syn-000" / "run0", "syn-000", 3, False)
    with pytest.raises(TrainingDataError, match=TEXT_WORLD_FILE):
        collect([tmp_path / "runs"], "sft", BuildOptions(split="all", rewrites=0, text_observation=True))


def test_homie_data_export_writes_emmoes_raw_layout(tmp_path):
    """A real record with an injected decision error, exported: one block per round in appendix B.3's order
    (decision and model, analysis, feedback after the round, inventory after the round), the failed round's
    error message as its feedback, End last; nothing but the train split's successful episodes."""
    runs = tmp_path / "collected"
    summary = collect_episodes(runs, planner="perturbed-expert", task_ids=[TASK], inject=1.0, seed_offset=13)
    assert summary.injections >= 1
    record = runs / "episodes" / TASK / "run0"
    # Built by the one build path: the record keeps its run configuration, naming the training expert that collected
    # it, a planner of the registry, so homie run --config can repeat it (tests/cli/test_run_config_file.py).
    run = json.loads((record / "summary.json").read_text())["run"]
    assert run["planner"]["name"] == "perturbed-expert" and run["planner"]["inject"] == 1.0
    assert (run["task"], run["seed"], run["skills"], run["simulator"]["render"]) == (TASK, 13, {"mode": "oracle", "noise": "off"}, False)
    assert run_config(run).planner.name == "perturbed-expert"
    rounds = [json.loads(line) for line in (record / "rounds.jsonl").read_text().splitlines() if line.strip()]
    task = json.loads((record / "summary.json").read_text())["instruction"]

    raw = tmp_path / "raw"
    result = CliRunner().invoke(build_app(), ["data", "export", "--from", str(runs), "--out", str(raw)])
    assert result.exit_code == 0, result.output
    assert sorted(p.relative_to(raw).as_posix() for p in raw.rglob("*.txt")) == [f"train/{TASK}_run0/info.txt"]
    blocks = (raw / "train" / f"{TASK}_run0" / "info.txt").read_text().split("\n\n")
    assert blocks[0] == f"Task: {task}" and len(blocks) == len(rounds) + 1
    for n, (block, r) in enumerate(zip(blocks[1:], rounds, strict=True), 1):
        lines = block.rstrip("\n").split("\n")
        subtask = r["subtask"]
        decision = "[End]" if subtask["action"] == "End" else f"{r['subtask_text']} ({r['model']})"
        assert lines[0] == f"Subtask{n}: {decision}"
        assert lines[1] == f"Analysis: {r['analysis']}"
        assert lines[2] == ("Feedback: None" if r["success"] else f"Feedback: {r['feedback']}")
        assert lines[3] == f"Inventory: {' '.join(r['inventory']) or 'None'}"
    assert any(not r["success"] for r in rounds) and blocks[-1].startswith(f"Subtask{len(rounds)}: [End]")

    again = CliRunner().invoke(build_app(), ["data", "export", "--from", str(runs), "--out", str(raw)])
    assert again.exit_code == 2 and again.output.count("\n") == 1  # not empty: refused in one line, nothing touched
    assert (raw / "train" / f"{TASK}_run0" / "info.txt").is_file()
