"""Episode samples (``homie data build sft --episodes``): the chat is the hf planner's own growing chat for the same
expert episode, and the tokenised sample marks exactly the learned answers (and their end-of-turn token)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.hf_backend import HFPlanner
from homiebot.planner.messages import ChatMessage
from homiebot.planner.perturbed import PromptBoundExpertPlanner
from homiebot.training.build import BuildOptions, collect
from homiebot.training.collect import collect_episodes
from homiebot.training.sequences import ChatTemplateError, sample_messages, tokenize_chat

TASK = "emmoe-001"
SEED_OFFSET = 16  # a seed the evaluation never plays (homiebot.training.collect.EVALUATION_RUNS)


class FakeTextEngine:
    """Stands in for a text model: the hf planner builds its chats without it (nothing is generated)."""

    text_only = True


class GrowingChatProbe(Planner):
    """Acts as the collection's expert and plays the hf planner's text mode around it: each round the planner's chat
    is built, the expert answers, and the planner keeps the answer as it keeps its model's (its default growing
    chat, HFPlanner.plan_batch)."""

    privileged = True

    def __init__(self, compact_turns: bool = False) -> None:
        self.expert = PromptBoundExpertPlanner()
        self.hf = HFPlanner(model="fake", engine=FakeTextEngine(), system_turn=False,  # type: ignore[arg-type]
                            compact_turns=compact_turns)
        self.chats: list[list[ChatMessage]] = []

    def reset(self, task: str, seed: int = 0) -> None:
        self.expert.reset(task, seed)
        self.hf.reset(task, seed)

    def plan(self, request: PlanRequest) -> str:
        private = replace(request, goal=None, perceived_names=None, evaluation=None)
        messages = self.hf.messages_for(private)
        answer = self.expert.plan(request)
        self.hf._transcript.keep(messages, answer, private)
        self.chats.append([*messages, ChatMessage("assistant", answer)])
        return answer


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    out = tmp_path_factory.mktemp("episodes") / "collected"
    summary = collect_episodes(out, planner="expert", task_ids=[TASK], seed_offset=SEED_OFFSET)
    assert summary.episodes == 1 and summary.succeeded == 1
    return out


@pytest.mark.parametrize("compact_turns", [False, True])
def test_an_episode_sample_is_the_text_planners_growing_chat(collected, tmp_path, compact_turns):
    """The episode's sample equals, turn for turn, the chat the hf planner holds at the end of the same episode (in
    both forms of the later turns: ``--compact-turns`` and ``-p compact_turns=true``)."""
    from homiebot.agent.loop import EpisodeConfig, run_episode
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task

    probe = GrowingChatProbe(compact_turns)
    sim = make_simulator("mujoco", render=False)
    try:
        run_episode(sim, probe, task=get_task(TASK), seed=SEED_OFFSET, config=EpisodeConfig(render=False))
    finally:
        sim.shutdown()
    runtime = [{"role": m.role, "content": m.text} for m in probe.chats[-1]]
    options = BuildOptions(split="all", rewrites=0, system_prompt=False, episodes=True, compact_turns=compact_turns)
    built, _ = collect([collected], "sft", options)
    assert len(built.chats) == 1
    chat = built.chats[0][1]
    assert chat.messages == runtime
    assert len(chat.answer_loss) == len(probe.chats) and all(chat.answer_loss) and chat.end
    # The later user turns carry only what changed: the task and the world at the start in the first turn only.
    users = [m["content"] for m in chat.messages if m["role"] == "user"]
    assert "Task:" in users[0] and all("Task:" not in u for u in users[1:])
    assert "World at the start:" in users[0] and all("World at the start:" not in u for u in users[1:])
    # The compact form: no history line after a round that added one item, no closing instruction after the first.
    assert all(("Historical Execution" in u) is not compact_turns for u in users[1:])
    assert all(("Now based on the instruction above" in u) is not compact_turns for u in users[1:])


def test_a_failed_round_stays_in_the_chat_but_is_not_learned(tmp_path):
    """With the perturbed expert's injected decision errors: the failed answers are context only, as in data_sift."""
    out = tmp_path / "collected"
    collect_episodes(out, planner="perturbed-expert", task_ids=[TASK, "emmoe-002"], runs=2, seed_offset=SEED_OFFSET,
                     inject=0.5)
    built, episodes = collect([out], "sft", BuildOptions(split="all", rewrites=0, system_prompt=False, episodes=True))
    single, _ = collect([out], "sft", BuildOptions(split="all", rewrites=0, system_prompt=False, text_observation=True))
    failed = sum(1 for e in episodes for r in e.rounds[:-1] if not r.succeeded)
    assert failed > 0
    assert sum(f.count(False) for _, f in ((c.id, c.answer_loss) for _, c in built.chats)) == failed
    assert sum(sum(c.answer_loss) for _, c in built.chats) == len(single.sft)  # the same answers are learned
    # The ambiguity check reads each learned answer after its chat, what the model reads (data_check).
    assert built.stats.ambiguity["samples"] == len(single.sft)
    assert built.stats.ambiguity["ambiguous_decision_prompts"] == 0


def test_spans_cover_the_learned_answers_and_their_end_token(tmp_path):
    from homiebot.training.tiny import write_tiny_chat_model

    messages = [
        {"role": "user", "content": "World now: a fridge\nTask: open it"},
        {"role": "assistant", "content": "Analysis: go\nSubtask: [Go to, fridge]\nModel: NoMaD"},
        {"role": "user", "content": "Feedback: None"},
        {"role": "assistant", "content": "Analysis: open\nSubtask: [Open, fridge]\nModel: octo"},
    ]
    model = write_tiny_chat_model(tmp_path / "tiny", [m["content"] for m in messages] * 20)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model))
    chat = tokenize_chat(tokenizer, messages, [False, True])
    assert len(chat.answers) == 1
    start, end = chat.answers[0]
    assert tokenizer.decode(chat.input_ids[start:end]) == messages[3]["content"] + tokenizer.eos_token
    assert sum(chat.completion_mask()) == end - start
    both = tokenize_chat(tokenizer, messages, [True, True])
    assert [tokenizer.decode(both.input_ids[a:b]) for a, b in both.answers] == [
        messages[1]["content"] + tokenizer.eos_token,
        messages[3]["content"] + tokenizer.eos_token,
    ]
    # A single-turn row: only its completion is learned, also when its prompt holds earlier answers.
    row = {"prompt": messages[:3], "completion": messages[3:]}
    assert sample_messages(row) == (messages, [False, True])
    # A template that rewrites answers would train on text the runtime never sends: refused.
    tokenizer.chat_template = tokenizer.chat_template.replace("message['content']", "message['content'] | upper")
    with pytest.raises(ChatTemplateError):
        tokenize_chat(tokenizer, messages, [False, True])


def test_episodes_are_refused_for_the_paper_format(collected, tmp_path):
    from homiebot.training.episodes import TrainingDataError

    with pytest.raises(TrainingDataError, match="--episodes"):
        collect([collected], "sft", BuildOptions(split="all", rewrites=0, episodes=True, prompt_format="paper"))
    with pytest.raises(TrainingDataError, match="--episodes"):
        collect([collected], "dpo", BuildOptions(split="all", rewrites=0, episodes=True, prompt_format="paper"))
    with pytest.raises(TrainingDataError, match="--compact-turns"):
        collect([collected], "sft", BuildOptions(split="all", rewrites=0, compact_turns=True))


def test_a_dpo_pair_in_episode_form_is_prompted_with_the_chat_up_to_its_round(tmp_path):
    """``homie data build dpo --episodes``: each pair's prompt is the episode chat (the SFT episode sample's, which
    the test above shows is the planner's own) cut after the pair's user turn; its sides are the answers in the
    shipped model's form (``--thoughtless``); the re-plan pairs are prompted where the failed answer was given."""
    import pyarrow.parquet as pq

    from homiebot.training.build import DATA_FILE, build

    out = tmp_path / "collected"
    collect_episodes(out, planner="perturbed-expert", task_ids=[TASK, "emmoe-002"], runs=2, seed_offset=SEED_OFFSET,
                     inject=0.5)
    common = {"split": "all", "rewrites": 0, "system_prompt": False, "images": False, "thoughtless": True}
    build([out], tmp_path / "sft", "sft", BuildOptions(**common, episodes=True))
    build([out], tmp_path / "dpo", "dpo", BuildOptions(**common, episodes=True))
    chats = {r["id"]: r["messages"] for r in pq.read_table(tmp_path / "sft" / DATA_FILE).to_pylist()}
    pairs = pq.read_table(tmp_path / "dpo" / DATA_FILE).to_pylist()
    kinds = {p["kind"] for p in pairs}
    assert {"replan", "order_change"} <= kinds
    for pair in pairs:
        episode = next(e for e in chats if pair["id"].startswith(e + "_subtask"))
        chat, prompt = chats[episode], pair["prompt"]
        assert prompt == chat[: len(prompt)] and prompt[-1]["role"] == "user"
        assert all(m["role"] != "system" for m in prompt)
        turn = len(prompt)  # the answer given in this round follows the prompt in the chat
        for side in (pair["chosen"], pair["rejected"]):
            assert len(side) == 1 and side[0]["role"] == "assistant"
            assert side[0]["content"].startswith("Subtask: [") and "Analysis" not in side[0]["content"]
        assert pair["chosen"] != pair["rejected"]
        if pair["kind"] == "replan":
            assert chat[turn]["content"] == pair["rejected"][0]["content"]  # the failed answer, as given
        else:
            assert chat[turn]["content"] == pair["chosen"][0]["content"]  # the expert's successful answer


def test_dpo_pairs_are_chosen_by_kind_and_sampled_per_kind(collected):
    from homiebot.training.episodes import TrainingDataError

    every, _ = collect([collected], "dpo", BuildOptions(split="all", rewrites=0, episodes=True))
    counts = {k: sum(1 for _, p in every.pairs if p.kind == k) for k in ("model_change", "order_change")}
    assert min(counts.values()) >= 3
    options = BuildOptions(split="all", rewrites=0, episodes=True, pair_kinds=("order_change", "model_change"),
                           max_pairs_per_kind=2)
    some, _ = collect([collected], "dpo", options)
    assert sorted(p.kind for _, p in some.pairs) == ["model_change"] * 2 + ["order_change"] * 2
    again, _ = collect([collected], "dpo", options)
    assert [p.step.id for _, p in again.pairs] == [p.step.id for _, p in some.pairs]  # a fixed seed
    order = [p.step.id for _, p in every.pairs]
    assert [order.index(p.step.id) for _, p in some.pairs if p.kind == "order_change"] == sorted(
        order.index(p.step.id) for _, p in some.pairs if p.kind == "order_change"
    )
    assert some.stats.per_kind["order_change"] == 2 and some.stats.per_kind["action_change"] == 0
    assert some.stats.pairs_dropped["sampled out (--max-pairs-per-kind)"] == sum(counts.values()) - 4
    with pytest.raises(TrainingDataError, match="unknown pair kind"):
        collect([collected], "dpo", BuildOptions(split="all", rewrites=0, pair_kinds=("swap",)))
    with pytest.raises(TrainingDataError, match="kind dpo"):
        collect([collected], "sft", BuildOptions(split="all", rewrites=0, max_pairs_per_kind=3))
