"""SFT in pieces on a tiny model: a run stopped after k steps and resumed equals the uninterrupted run (losses and
weights), the answer-only LM head gives trl's loss, validation writes metrics.jsonl and the curves, two DDP
processes train, and the offline next-subtask accuracy counts what a scripted model answers."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from homiebot.training.build import DATA_FILE, BuildOptions, build  # noqa: E402
from homiebot.training.collect import collect_episodes  # noqa: E402
from homiebot.training.progress import METRICS_FILE, StopRule, append_metrics, read_metrics  # noqa: E402
from homiebot.training.tiny import write_tiny_chat_model  # noqa: E402
from homiebot.training.trainer import CHECKPOINTS, TrainingError, preset_for, train  # noqa: E402
from homiebot.types import Subtask  # noqa: E402

pytestmark = pytest.mark.models


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """Episode and single-turn SFT sets from perturbed-expert episodes of two tasks, and a tiny model."""
    import pyarrow.parquet as pq

    root = tmp_path_factory.mktemp("pieces")
    collect_episodes(root / "rec", planner="perturbed-expert", task_ids=["emmoe-001", "emmoe-002"], runs=2,
                     seed_offset=17)
    common = {"split": "all", "rewrites": 0, "system_prompt": False, "images": False}
    build([root / "rec"], root / "episodes", "sft", BuildOptions(**common, episodes=True))
    build([root / "rec"], root / "rounds", "sft", BuildOptions(**common, text_observation=True))
    rows = pq.read_table(root / "episodes" / DATA_FILE).to_pylist()
    write_tiny_chat_model(root / "model", [m["content"] for r in rows for m in r["messages"]], vocab_size=500)
    return root


def _preset(**changes):
    """The cpu preset in one process and fp32 (bit-stable across runs), a high rate so that steps move weights."""
    settings = {"processes": 1, "cpu_bf16": False, "learning_rate": 1e-2, "warmup_steps": 0, "save_steps": 1000,
                "gradient_accumulation": 1, "epochs": 2.0}
    settings.update(changes)
    return preset_for("sft", "cpu", **settings)


def _adapter(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "adapter_model.safetensors"))


def test_a_run_stopped_and_resumed_equals_the_uninterrupted_run(setup, tmp_path):
    root = setup
    whole = train("sft", root / "episodes", root / "model", tmp_path / "whole", _preset(), progress=False)
    assert whole.finished and whole.steps == 8  # 4 episodes, 2 epochs, one episode per step
    first = train("sft", root / "episodes", root / "model", tmp_path / "pieces", _preset(), progress=False,
                  stop=StopRule(stop_after_steps=3))
    assert not first.finished and first.steps == 3
    assert any("--resume" in line for line in first.lines())
    checkpoints = sorted(p.name for p in (tmp_path / "pieces" / CHECKPOINTS).glob("checkpoint-*"))
    assert checkpoints == ["checkpoint-3"]
    saved = {p.name for p in (tmp_path / "pieces" / CHECKPOINTS / "checkpoint-3").iterdir()}
    assert {"adapter_model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth"} <= saved
    # A line that the cut-off piece wrote after its checkpoint is dropped when the run resumes.
    append_metrics(tmp_path / "pieces" / METRICS_FILE, {"kind": "train", "step": 4, "loss": 99.0})
    rest = train("sft", root / "episodes", root / "model", tmp_path / "pieces", _preset(), progress=False, resume=True)
    assert rest.finished and rest.steps == 8
    assert rest.losses == pytest.approx(whole.losses, rel=1e-5, abs=1e-6)
    assert rest.step_learning_rates == pytest.approx(whole.step_learning_rates[3:], rel=1e-6)
    a, b = _adapter(tmp_path / "whole"), _adapter(tmp_path / "pieces")
    assert a.keys() == b.keys()
    for name in a:
        assert b[name].allclose(a[name], rtol=1e-5, atol=1e-6), name
    steps = [m["step"] for m in read_metrics(tmp_path / "pieces" / METRICS_FILE) if m["kind"] == "train"]
    assert steps == list(range(1, 9))
    # Each piece records what it cost whole (model loading included), which the steps' own timers leave out.
    pieces = [m for m in read_metrics(tmp_path / "pieces" / METRICS_FILE) if m["kind"] == "piece"]
    assert [(m["first_step"], m["step"], m["processes"]) for m in pieces] == [(0, 3, 1), (3, 8, 1)]
    step_cpu = sum(m["step_cpu_s"] for m in read_metrics(tmp_path / "pieces" / METRICS_FILE) if m["kind"] == "train")
    assert sum(m["cpu_s"] for m in pieces) > step_cpu > 0
    assert all(m["wall_s"] > 0 for m in pieces)


def test_the_answer_only_head_gives_trls_loss(setup, tmp_path):
    root = setup
    preset = preset_for("sft", "cpu-small", learning_rate=1e-2, save_steps=1000, batch_size=2)
    theirs = train("sft", root / "rounds", root / "model", tmp_path / "trl", preset, max_steps=3, progress=False)
    ours = train("sft", root / "rounds", root / "model", tmp_path / "ours",
                 preset_for("sft", "cpu-small", learning_rate=1e-2, save_steps=1000, batch_size=2,
                            answer_only_logits=True),
                 max_steps=3, progress=False)
    assert ours.losses == pytest.approx(theirs.losses, rel=1e-4)
    a, b = _adapter(tmp_path / "trl"), _adapter(tmp_path / "ours")
    for name in a:
        assert b[name].allclose(a[name], rtol=1e-3, atol=1e-5), name


def test_validation_writes_metrics_and_curves(setup, tmp_path):
    root = setup
    result = train("sft", root / "episodes", root / "model", tmp_path / "run", _preset(eval_steps=3, val_limit=10),
                   progress=False, val_data=root / "rounds")
    assert result.finished
    metrics = read_metrics(tmp_path / "run" / METRICS_FILE)
    val = [m for m in metrics if m["kind"] == "val"]
    assert [m["step"] for m in val] == [0, 3, 6, 8]  # before training, every 3 steps, at the end
    for m in val:
        assert 0.0 <= m["subtask_accuracy"] <= m["action_accuracy"] <= 1.0
        assert m["answers"] >= 10 and math.isfinite(m["answer_nll"])
    assert val[-1]["answer_nll"] < val[0]["answer_nll"]  # it learns the answers
    for picture in ("loss.png", "accuracy.png"):
        assert (tmp_path / "run" / picture).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    record = json.loads((tmp_path / "run" / "training.json").read_text())
    assert record["finished"] is True and record["val_data"] == str(root / "rounds")


@pytest.mark.slow
def test_two_ddp_processes_train_and_resume(setup, tmp_path):
    root = setup
    preset = _preset(processes=2, gradient_accumulation=2)
    first = train("sft", root / "episodes", root / "model", tmp_path / "ddp", preset, progress=False,
                  stop=StopRule(stop_after_steps=1))
    assert first.steps == 1 and not first.finished
    rest = train("sft", root / "episodes", root / "model", tmp_path / "ddp", preset, progress=False, resume=True)
    # 4 episodes, a global batch of 2 (one per process), 2 epochs: 4 optimizer steps.
    assert rest.finished and rest.steps == 4 and all(math.isfinite(x) for x in rest.losses)
    assert (tmp_path / "ddp" / "adapter_model.safetensors").is_file()


def test_a_piece_stops_with_a_checkpoint_past_its_memory_limit_and_resumes(setup, tmp_path):
    root = setup
    # Any process holds more than a megabyte: the piece stops after its first step, with a checkpoint.
    first = train("sft", root / "episodes", root / "model", tmp_path / "mem", _preset(), progress=False,
                  stop=StopRule(max_memory_gb=0.001))
    assert first.steps == 1 and not first.finished
    assert (tmp_path / "mem" / CHECKPOINTS / "checkpoint-1").is_dir()
    rest = train("sft", root / "episodes", root / "model", tmp_path / "mem", _preset(), progress=False, resume=True,
                 stop=StopRule(max_memory_gb=1000.0))
    assert rest.finished and rest.steps == 8


def test_bad_settings_are_refused_before_training(setup, tmp_path):
    root = setup
    with pytest.raises(TrainingError, match="--stop-after-steps"):
        train("sft", root / "episodes", root / "model", tmp_path / "a", _preset(), stop=StopRule(stop_after_steps=0))
    with pytest.raises(TrainingError, match="--hours"):
        train("sft", root / "episodes", root / "model", tmp_path / "b", _preset(), stop=StopRule(hours=-1))
    with pytest.raises(TrainingError, match="--max-memory"):
        train("sft", root / "episodes", root / "model", tmp_path / "b", _preset(), stop=StopRule(max_memory_gb=0))
    with pytest.raises(TrainingError, match="SFT only"):
        train("dpo", root / "episodes", root / "model", tmp_path / "c", preset_for("dpo", "cpu-small"),
              val_data=root / "rounds")
    with pytest.raises(TrainingError, match="no data set"):
        train("sft", root / "episodes", root / "model", tmp_path / "d", _preset(), val_data=tmp_path / "nothing")
    assert not any((tmp_path / n).exists() for n in "abcd")


def test_homie_train_sft_refuses_bad_piece_options(setup, tmp_path):
    from typer.testing import CliRunner

    from homiebot.cli import build_app

    root = setup
    base = ["train", "sft", "--data", str(root / "episodes"), "--model", str(root / "model"), "--preset", "cpu"]
    for extra, message in (
        (["--hours", "0"], "--hours must be more than 0"),
        (["--epochs", "-1"], "--epochs must be more than 0"),
        (["--val", str(tmp_path / "missing")], "no data set"),
    ):
        out = tmp_path / "out"
        result = CliRunner().invoke(build_app(), [*base, "--out", str(out), *extra])
        assert result.exit_code == 2, result.output
        assert message in result.output
        assert not out.exists() or not any(out.iterdir())


class FakeScriptedLM:
    """A causal LM that always predicts the next token of ``script`` at the position it is asked about (position
    from its key/value cache, whose length it grows and which the caller crops): greedy decoding therefore writes
    ``script``'s answer at every answer position, whatever the chat holds there."""

    def __init__(self, script: list[int], vocab: int) -> None:
        self.script, self.vocab, self.training = script, vocab, False

    def eval(self) -> None:
        self.training = False

    def train(self, mode: bool = True) -> None:
        self.training = mode

    def __call__(self, input_ids, use_cache=True, logits_to_keep=0, **kwargs):
        import torch

        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        start = cache.get_seq_length()
        count = input_ids.shape[1]
        states = input_ids.float()[:, None, :, None]
        cache.update(states, states, 0)
        logits = torch.full((1, count, self.vocab), -20.0)
        for i in range(count):
            position = start + i + 1
            logits[0, i, self.script[position] if position < len(self.script) else 0] = 20.0
        if isinstance(logits_to_keep, torch.Tensor):
            logits = logits[:, logits_to_keep]
        return SimpleNamespace(logits=logits)


def _script_changing(tokenizer, chat, answer: int, word: str) -> list[int]:  # type: ignore[no-untyped-def]
    """The chat's tokens with the one that completes ``word`` in answer ``answer`` replaced by another word's."""
    start, end = chat.answers[answer]
    at = next(i for i in range(start, end) if word in tokenizer.decode(chat.input_ids[start : i + 1]))
    other = next(t for t in range(len(tokenizer)) if tokenizer.decode([t]).strip().isalpha()
                 and tokenizer.decode([t]).strip() not in tokenizer.decode(chat.input_ids[at]))
    script = list(chat.input_ids)
    script[at] = other
    return script


def test_next_subtask_accuracy_scores_the_answers_a_scripted_model_gives(setup):
    from transformers import AutoTokenizer

    from homiebot.planner.prompt import split_subtask
    from homiebot.training.offline_eval import next_subtask_accuracy, rescore_equally_good
    from homiebot.training.sequences import tokenize_chat

    tokenizer = AutoTokenizer.from_pretrained(str(setup / "model"))
    messages = [
        {"role": "user", "content": "Task: put the apple in the fridge"},
        {"role": "assistant", "content": "Analysis: first the fridge\nSubtask: [Go to, fridge]\nModel: NoMaD"},
        {"role": "user", "content": "Feedback: None"},
        {"role": "assistant", "content": "Analysis: now open it\nSubtask: [Open, fridge]\nModel: octo"},
        {"role": "user", "content": "Feedback: None"},
        {"role": "assistant", "content": "Analysis: done\nSubtask: [End]\nModel: None"},
    ]
    chat = tokenize_chat(tokenizer, messages, [True, True, True])
    # The script: the chat itself with the token that spells the second answer's action replaced by another word.
    script = _script_changing(tokenizer, chat, 1, "Open")
    start, end = chat.answers[1]
    assert "Open" not in tokenizer.decode(script[start:end])
    model = FakeScriptedLM(script, len(tokenizer))
    result = next_subtask_accuracy(model, tokenizer, [chat])
    assert (result.answers, result.subtask_right, result.action_right, result.unparsed) == (3, 2, 2, 0)
    # Teacher-forced NLL: the script disagrees with the chat on the changed tokens only.
    assert result.nll_tokens == chat.answer_tokens
    assert result.answer_nll == pytest.approx(40.0 / chat.answer_tokens, rel=1e-3)
    assert model.training is False
    assert result.equally_good_right == 2  # no equally good sets: the exact answers alone

    # Per-answer records, and the second figure: the missed answer counts when the expert holds it equally good.
    records: list = []
    again = next_subtask_accuracy(model, tokenizer, [chat], records=records)
    assert again.subtask_right == 2 and [(r.chat, r.answer) for r in records] == [(0, 0), (0, 1), (0, 2)]
    assert [r.subtask_right for r in records] == [True, False, True]
    assert "[Go to, fridge]" in records[0].got and "[Open, fridge]" in records[1].expected
    line = records[1].got.split("Subtask:", 1)[1].strip()
    missed = split_subtask(line[1 : line.index("]")])
    assert missed.action != "Open"
    ties = [[], [Subtask("Open", "fridge"), missed], []]
    scored = next_subtask_accuracy(model, tokenizer, [chat], equally_good=[ties])
    assert (scored.subtask_right, scored.equally_good_right, scored.answers) == (2, 3, 3)
    assert scored.equally_good_accuracy == 1.0
    rescored = rescore_equally_good(records, {(0, 1): ties[1]})
    assert [r.equally_good_right for r in rescored] == [True, True, True]
    assert [r.equally_good_right for r in rescore_equally_good(records, {})] == [True, False, True]


def test_equally_good_sets_are_read_from_a_collection_and_matched_as_the_exact_figure_matches(tmp_path):
    from homiebot.training.collect import EQUALLY_GOOD_FILE
    from homiebot.training.offline_eval import equally_good_match, read_equally_good

    lines = [{"round": 1, "subtasks": ["[Go to, apple_1]", "[Go to, apple_2]"]}, {"round": 2, "subtasks": ["[End]"]}]
    (tmp_path / EQUALLY_GOOD_FILE).write_text("".join(json.dumps(x) + "\n" for x in lines))
    ties = read_equally_good(tmp_path)
    assert ties == {1: [Subtask("Go to", "apple_1"), Subtask("Go to", "apple_2")], 2: [Subtask("End")]}
    assert read_equally_good(tmp_path / "none") == {}
    assert equally_good_match(Subtask("go to", "apple_2"), Subtask("Go to", "apple_1"), ties[1])  # action case-blind
    assert equally_good_match(Subtask("Go to", "apple_1"), Subtask("Go to", "apple_1"), [])
    assert not equally_good_match(Subtask("Pick", "apple_2"), Subtask("Go to", "apple_1"), ties[1])
    assert not equally_good_match(None, Subtask("Go to", "apple_1"), ties[1])


@pytest.mark.slow
def test_sigterm_ends_a_piece_with_a_checkpoint(setup, tmp_path):
    """`kill` during homie train sft: the step finishes, a checkpoint is saved, the command says how to resume."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "run"
    command = [
        sys.executable, "-c", "from homiebot.cli import main; main()", "train", "sft", "--preset", "cpu",
        "--processes", "1", "--data", str(setup / "episodes"), "--model", str(setup / "model"), "--out", str(out),
        "--epochs", "50", "--lr", "1e-3",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    while not any(m["kind"] == "train" for m in read_metrics(out / METRICS_FILE)):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()[0]
        time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output
    assert "continue with --resume" in output
    record = json.loads((out / "training.json").read_text())
    assert record["finished"] is False and 1 <= record["steps"] < record["max_steps"] == 50
    assert (out / CHECKPOINTS / f"checkpoint-{record['steps']}" / "optimizer.pt").is_file()


def test_init_adapter_continues_the_given_adapter(setup, tmp_path):
    """``init_adapter`` loads the adapter's weights as the starting point: with the first step's learning rate 0
    (warm-up) the saved adapter equals the one given, a new adapter would start with its B matrices zero."""
    root = setup
    first = tmp_path / "first"
    train("sft", root / "episodes", root / "model", first, _preset(), max_steps=2, progress=False)
    given = _adapter(first)
    assert any(t.abs().sum() > 0 for name, t in given.items() if "lora_B" in name)
    still = tmp_path / "continued"
    result = train("sft", root / "rounds", root / "model", still, _preset(warmup_steps=5), max_steps=1,
                   progress=False, init_adapter=first)
    assert result.steps == 1 and result.step_learning_rates == [0.0]
    continued = _adapter(still)
    assert continued.keys() == given.keys()
    for name in given:
        assert continued[name].allclose(given[name]), name
    record = json.loads((still / "training.json").read_text())
    assert record["init_adapter"] == str(first)
    # A step with a learning rate moves it from there.
    moved = tmp_path / "moved"
    train("sft", root / "rounds", root / "model", moved, _preset(), max_steps=1, progress=False, init_adapter=first)
    assert any(not _adapter(moved)[n].allclose(given[n]) for n in given)


def test_init_adapter_is_refused_where_it_cannot_apply(setup, tmp_path):
    root = setup
    with pytest.raises(TrainingError, match="not a LoRA adapter folder"):
        train("sft", root / "episodes", root / "model", tmp_path / "a", _preset(), init_adapter=root / "model")
    with pytest.raises(TrainingError, match="leave out --ref-model"):
        train("dpo", root / "episodes", root / "model", tmp_path / "b", preset_for("dpo", "cpu-small"),
              init_adapter=root / "model", ref_model=root / "model")
    with pytest.raises(TrainingError, match="--full"):
        train("sft", root / "episodes", root / "model", tmp_path / "c", _preset(lora=False), init_adapter=root / "model")
    assert not any((tmp_path / n).exists() for n in "abc")


@pytest.fixture(scope="module")
def dpo_setup(setup, tmp_path_factory):
    """An SFT adapter (2 steps) to continue with DPO, and DPO pairs in episode form (2 of each kind)."""
    root = setup
    sft = tmp_path_factory.mktemp("dpo") / "sft"
    train("sft", root / "episodes", root / "model", sft, _preset(), max_steps=2, progress=False)
    build([root / "rec"], root / "pairs", "dpo", BuildOptions(split="all", rewrites=0, system_prompt=False,
                                                             images=False, episodes=True, thoughtless=True,
                                                             max_pairs_per_kind=2))
    return root, sft


def test_dpo_continues_an_sft_adapter_against_a_frozen_copy_of_it(dpo_setup, tmp_path):
    """``homie train dpo --init-adapter``: the policy starts as the SFT adapter and the reference is that adapter as
    loaded (not the base, which a disabled adapter would give): the first step's loss is log 2 exactly, and the
    result is one adapter of the same layers that the step moved. In episode form (``build dpo --episodes``)."""
    import math

    root, sft = dpo_setup
    preset = preset_for("dpo", "cpu", cpu_bf16=False, learning_rate=1e-2, gradient_accumulation=1, logging_steps=1)
    result = train("dpo", root / "pairs", root / "model", tmp_path / "dpo", preset, max_steps=2, progress=False,
                   init_adapter=sft)
    assert result.steps == 2
    assert result.losses[0] == pytest.approx(math.log(2), abs=1e-4)  # policy == reference at the start
    given, trained = _adapter(sft), _adapter(tmp_path / "dpo")
    assert trained.keys() == given.keys()
    assert any(not trained[n].allclose(given[n]) for n in given)
    assert not (tmp_path / "dpo" / "ref").exists()  # the frozen reference copy is not saved with the result


def test_dpo_with_an_sft_term_adds_the_chosen_answers_nll(dpo_setup, tmp_path):
    """``--sft-weight w``: the loss is DPO's plus w times the chosen side's token-mean NLL (RPO); at the first step
    DPO's term is log 2, so the difference from plain DPO is w times a positive NLL."""
    import math

    root, sft = dpo_setup
    common = {"cpu_bf16": False, "gradient_accumulation": 1, "logging_steps": 1, "learning_rate": 0.0}
    plain = train("dpo", root / "pairs", root / "model", tmp_path / "plain", preset_for("dpo", "cpu", **common),
                  max_steps=1, progress=False, init_adapter=sft)
    rpo = train("dpo", root / "pairs", root / "model", tmp_path / "rpo",
                preset_for("dpo", "cpu", sft_weight=2.0, **common), max_steps=1, progress=False, init_adapter=sft)
    assert plain.losses[0] == pytest.approx(math.log(2), abs=1e-4)
    nll = (rpo.losses[0] - plain.losses[0]) / 2.0
    assert nll > 0.01  # an untrained tiny model is far from certain of the chosen answer
    with pytest.raises(TrainingError, match="--sft-weight"):
        train("dpo", root / "pairs", root / "model", tmp_path / "bad", preset_for("dpo", "cpu", sft_weight=-1.0),
              init_adapter=sft)


def test_a_text_worlds_commands_are_scored_letter_for_letter_with_their_verb_as_the_action(setup):
    """MuEP's episode chat answers one command per turn, no Subtask line: before, every such answer counted as
    unparsed and the accuracy of a MuEP validation set was 0 whatever the model said."""
    from transformers import AutoTokenizer

    from homiebot.training.offline_eval import next_subtask_accuracy
    from homiebot.training.sequences import tokenize_chat

    tokenizer = AutoTokenizer.from_pretrained(str(setup / "model"))
    messages = [
        {"role": "user", "content": "Your task is to: put a clean apple in the fridge."},
        {"role": "assistant", "content": "go to countertop 1"},
        {"role": "user", "content": "You arrive at countertop 1. On the countertop 1, you see a apple 1."},
        {"role": "assistant", "content": "take apple 1 from countertop 1"},
        {"role": "user", "content": "You pick up the apple 1 from the countertop 1."},
        {"role": "assistant", "content": "go to sinkbasin 1"},
    ]
    chat = tokenize_chat(tokenizer, messages, [True, True, True])
    # The script: the chat, with a token of the third command's place changed (the verb kept).
    script = _script_changing(tokenizer, chat, 2, "sink")
    model = FakeScriptedLM(script, len(tokenizer))
    records: list = []
    result = next_subtask_accuracy(model, tokenizer, [chat], records=records)
    assert (result.answers, result.subtask_right, result.action_right, result.unparsed) == (3, 2, 3, 0), records
    assert [r.subtask_right for r in records] == [True, True, False]
    assert records[2].got.startswith("go to ") and "sinkbasin 1" not in records[2].got
