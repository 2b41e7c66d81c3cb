"""Training data of the PARTNR-style suite (docs/training.md, "The PARTNR-style suite"): ``homie data collect --suite
partnr`` records the PARTNR expert on seeds no evaluation plays, ``homie data build sft --episodes`` turns its episodes
into the hf planner's own growing chat, and the typed grammar of the text mode (``-p typed_grammar=true``) admits
every answer the expert gave, so that a model trained on the data can be decoded under it."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from homiebot.cli import build_app
from homiebot.config import AnswerFormat
from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.hf_backend import HFPlanner
from homiebot.planner.messages import ChatMessage
from homiebot.planner.partnr_expert import PartnrExpertPlanner
from homiebot.planner.prompt import parse_output
from homiebot.tasks.reserved import reserved_seeds
from homiebot.tasks.suite import get_task, load_suite, task_actions
from homiebot.training.build import BuildOptions, collect
from homiebot.training.collect import check_seeds, collect_episodes
from homiebot.training.episodes import TrainingDataError

#: Turn on, Clean, first/then, next to, Fill then Pour: every kind of step the PARTNR expert takes.
TASKS = ("partnr-1-022", "partnr-1-007", "partnr-1-030", "partnr-1-003", "partnr-1-w02")
SEED_OFFSET = 3000  # past every evaluation seed of both suites (the PARTNR-style suite's reach 9592)


def test_partnr_collections_refuse_evaluation_seeds_and_the_goal_experts(tmp_path):
    partnr = load_suite("partnr").tasks
    reserved = reserved_seeds()
    assert {t.seed for t in partnr} <= set(reserved) and {t.seed for t in load_suite("emmoe100").tasks} <= set(reserved)
    # The suite's seeds are consecutive within an apartment: a small offset lands on other tasks' seeds.
    with pytest.raises(TrainingDataError, match="partnr evaluation plays.*--seed-offset 2593 or more"):
        check_seeds(partnr, 10, 1, suite="partnr")
    check_seeds(partnr, SEED_OFFSET, 10, suite="partnr")
    # EMMOE-100's free offsets stay free (the PARTNR-style seeds start at 7000).
    check_seeds(load_suite("emmoe100").tasks, 10, 12)
    out = tmp_path / "collected"
    with pytest.raises(TrainingDataError, match="PARTNR-style suite's episodes are its expert's"):
        collect_episodes(out, planner="perturbed-expert", suite="partnr", task_ids=[TASKS[0]], seed_offset=SEED_OFFSET)
    result = CliRunner().invoke(build_app(), ["data", "collect", "--suite", "partnr", "--planner", "expert", "--out",
                                              str(out), "--tasks", TASKS[0], "--seed-offset", "5"])
    assert result.exit_code == 2 and "partnr evaluation plays" in result.output, result.output
    assert not out.exists()


class FakeTextEngine:
    """Stands in for a text model: the hf planner builds its chats and grammars without it."""

    text_only = True


class TypedChatProbe(Planner):
    """Acts as the collection's expert and plays the hf planner's text mode around it, typed grammar on: each round the
    planner's chat and grammar are built, the expert answers, and the planner keeps the answer in its growing chat."""

    privileged = True

    def __init__(self) -> None:
        self.expert = PartnrExpertPlanner()
        self.hf = HFPlanner(model="fake", engine=FakeTextEngine(), system_turn=False,  # type: ignore[arg-type]
                            constrained=True, typed_grammar=True, answer_format=AnswerFormat.SUBTASK)
        self.chats: list[list[ChatMessage]] = []
        self.grammars: list[tuple[str, str]] = []  # (grammar, the expert's answer without its analysis)

    def reset(self, task: str, seed: int = 0) -> None:
        self.expert.reset(task, seed)
        self.hf.reset(task, seed)

    def plan(self, request: PlanRequest) -> str:
        private = replace(request, goal=None, perceived_names=None, evaluation=None)
        messages = self.hf.messages_for(private)
        answer = self.expert.plan(request)
        parsed = parse_output(answer)
        assert parsed.subtask is not None, answer
        self.grammars.append((self.hf.grammar_for(private), f"Subtask: {parsed.subtask.text()}\nModel: {parsed.model or 'None'}"))
        self.hf._transcript.keep(messages, answer, private)
        self.chats.append([*messages, ChatMessage("assistant", answer)])
        return answer


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    out = tmp_path_factory.mktemp("partnr") / "collected"
    summary = collect_episodes(out, planner="expert", suite="partnr", task_ids=list(TASKS), seed_offset=SEED_OFFSET)
    assert summary.episodes == len(TASKS) and summary.succeeded == len(TASKS), summary.lines()
    return out


def test_partnr_expert_episodes_become_the_text_planners_growing_chat(collected):
    from homiebot.agent.loop import EpisodeConfig, run_episode
    from homiebot.sim.base import make_simulator

    options = BuildOptions(split="all", rewrites=0, system_prompt=False, episodes=True, thoughtless=True)
    built, _ = collect([collected], "sft", options)
    chats = {key.split("_run")[0]: chat for key, chat in ((c.id, c) for _, c in built.chats)}
    assert sorted(chats) == sorted(TASKS)
    answers = " ".join(m["content"] for c in chats.values() for m in c.messages if m["role"] == "assistant")
    for action in ("Turn on", "Clean", "Fill", "Pour", "Put", "End"):
        assert f"[{action}" in answers, action
    sim = make_simulator("mujoco", render=False)
    try:
        for task_id in ("partnr-1-030", "partnr-1-w02"):
            probe = TypedChatProbe()
            task = get_task(task_id)
            run_episode(sim, probe, task=task, seed=SEED_OFFSET, config=EpisodeConfig.with_actions(task_actions(task), render=False))
            # turn for turn the planner's chat; the answers are the expert's without the analysis (--thoughtless)
            runtime = [m.text for m in probe.chats[-1] if m.role == "user"]
            assert [m["content"] for m in chats[task_id].messages if m["role"] == "user"] == runtime
    finally:
        sim.shutdown()


@pytest.fixture(scope="module")
def compiler():
    xgr = pytest.importorskip("xgrammar", reason="xgrammar is part of the 'models' extra")
    pytest.importorskip("transformers", reason="the tokenizer is built with transformers (the 'models' extra)")
    from homiebot.planner.tiny_vlm import build_tokenizer

    tokenizer = build_tokenizer("llava")
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=len(tokenizer), stop_token_ids=[eos])
    return xgr.GrammarCompiler(info, max_threads=1)


def _accepts(compiler, grammar: str, text: str) -> bool:
    import xgrammar as xgr

    matcher = xgr.GrammarMatcher(compiler.compile_grammar(grammar))
    return matcher.accept_string(text) and matcher.accept_token(matcher.stop_token_ids[0])


@pytest.mark.models
@pytest.mark.parametrize("task_id", TASKS)
def test_the_text_modes_typed_grammar_admits_every_expert_answer(compiler, task_id):
    from homiebot.agent.loop import EpisodeConfig, run_episode
    from homiebot.sim.base import make_simulator

    probe = TypedChatProbe()
    task = get_task(task_id)
    sim = make_simulator("mujoco", render=False)
    try:
        run_episode(sim, probe, task=task, seed=SEED_OFFSET, config=EpisodeConfig.with_actions(task_actions(task), render=False))
    finally:
        sim.shutdown()
    assert probe.grammars
    for grammar, answer in probe.grammars:
        assert _accepts(compiler, grammar, answer), answer
    # and it types: a room is not picked, a sofa not switched on, nothing is put with empty hands
    first = probe.grammars[0][0]
    for wrong in ("Subtask: [Pick, living_room]\nModel: RT-1-X", "Subtask: [Turn on, sofa]\nModel: octo",
                  "Subtask: [Put, mug, sofa]\nModel: RT-1-X"):
        assert not _accepts(compiler, first, wrong), wrong


def test_the_data_expert_chooses_an_or_lists_object_by_what_the_prompt_shows(tmp_path):
    """"Put one of the apples on the brown table" on three seeds: the evaluation's expert walks to the nearest apple
    (apple_1 twice, apple_2 once, from one and the same first prompt: the distance is in no prompt); the data's expert
    (``prompt_bound``) to one within reach, else the first by name, so the same prompt gets the same answer."""
    from homiebot.training.data_check import find_ambiguities, samples_from_episode_rows

    out = tmp_path / "collected"
    summary = collect_episodes(out, planner="expert", suite="partnr", task_ids=["partnr-2-002"], runs=3,
                               seed_offset=SEED_OFFSET)
    assert summary.succeeded == 3
    record = json.loads((out / "episodes" / "partnr-2-002" / "run0" / "summary.json").read_text())
    assert record["run"]["planner"] == {"name": "prompt-bound-partnr-expert"}  # homie run --config repeats it
    options = BuildOptions(split="all", rewrites=0, system_prompt=False, episodes=True, thoughtless=True)
    built, _ = collect([out], "sft", options)
    firsts = {c.messages[1]["content"] for _, c in built.chats}
    assert firsts == {"Subtask: [Go to, apple_1]\nModel: PixNav"}
    rows = [{"id": c.id, "messages": c.messages, "answer_loss": c.answer_loss} for _, c in built.chats]
    assert find_ambiguities(samples_from_episode_rows(rows)).ambiguous_decision_prompts == 0
