"""CI-sized training: SFT, merge, DPO and resume on a tiny random model built in the test; a DPO step on one
hand-computed pair gives the loss of the DPO formula (Rafailov et al. 2023, eq. 7; EMMOE's beta 0.1)."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from homiebot.training.build import DATA_FILE, BuildOptions, build, write_dataset  # noqa: E402
from homiebot.training.tiny import write_tiny_chat_model  # noqa: E402
from homiebot.training.trainer import TrainingError, merge, preset_for, train  # noqa: E402

pytestmark = pytest.mark.models


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from homiebot.testing.synthetic_records import write_episode

    root = tmp_path_factory.mktemp("tiny")
    for n in range(3):
        write_episode(root / "runs" / "episodes" / f"syn-{n:03d}" / "run0", f"syn-{n:03d}", 4, n == 0)
    # No system turn: the tiny tokenizer spends a token on every few characters.
    options = BuildOptions(split="all", rewrites=0, system_prompt=False)
    build([root / "runs"], root / "sft", "sft", options)
    build([root / "runs"], root / "dpo", "dpo", options)
    import pyarrow.parquet as pq

    rows = pq.read_table(root / "sft" / DATA_FILE).to_pylist()
    texts = [m["content"] for r in rows for m in r["prompt"] + r["completion"]]
    write_tiny_chat_model(root / "model", texts)
    return root


def test_sft_merge_dpo_on_a_tiny_model(setup):
    root = setup
    sft = train(
        "sft",
        root / "sft",
        root / "model",
        root / "a1",
        preset_for("sft", "cpu-small", learning_rate=1e-2, save_steps=100),
        max_steps=3,
        progress=False,
    )
    assert sft.steps == 3 and len(sft.losses) == 3 and all(math.isfinite(x) for x in sft.losses)
    assert (root / "a1" / "adapter_config.json").is_file() and (root / "a1" / "adapter_model.safetensors").is_file()
    record = json.loads((root / "a1" / "training.json").read_text())
    assert record["preset"]["bf16"] is False and record["preset"]["gradient_checkpointing"] is False
    merged = merge(root / "model", root / "a1", root / "m1")
    assert (merged / "config.json").is_file()
    dpo = train(
        "dpo",
        root / "dpo",
        merged,
        root / "a2",
        preset_for("dpo", "cpu-small", save_steps=100),
        max_steps=2,
        progress=False,
    )
    # With a LoRA adapter the reference is the merged SFT model itself: the first step's loss is ln 2 exactly.
    assert dpo.losses[0] == pytest.approx(math.log(2), abs=1e-6)
    assert (root / "a2" / "adapter_config.json").is_file()
    with pytest.raises(TrainingError, match="not empty"):
        train("sft", root / "sft", root / "model", root / "a1", preset_for("sft", "cpu-small"), max_steps=1)


def test_training_resumes_from_its_checkpoint(setup):
    root = setup
    preset = preset_for("sft", "cpu-small", save_steps=1)
    first = train("sft", root / "sft", root / "model", root / "r1", preset, max_steps=2, progress=False)
    assert first.steps == 2 and (root / "r1" / "checkpoints").is_dir()
    resumed = train("sft", root / "sft", root / "model", root / "r1", preset, max_steps=3, resume=True, progress=False)
    assert resumed.steps == 3
    assert [h["step"] for h in resumed.log_history if "loss" in h] == [1, 2, 3]  # steps 1-2 from the checkpoint


def _completion_logp(model, tokenizer, prompt, completion):
    """Sum of log-probabilities of the completion's tokens after the prompt (chat template applied)."""
    import torch

    prompt_ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=True)[
        "input_ids"
    ]
    full_ids = tokenizer.apply_chat_template(prompt + completion, tokenize=True, return_dict=True)["input_ids"]
    assert full_ids[: len(prompt_ids)] == prompt_ids
    with torch.no_grad():
        logits = model(torch.tensor([full_ids])).logits[0].double()
    logp = torch.log_softmax(logits[:-1], dim=-1)
    targets = full_ids[1:]
    return sum(float(logp[i, targets[i]]) for i in range(len(prompt_ids) - 1, len(full_ids) - 1))


def _lora_b_norm(adapter) -> float:
    from safetensors.torch import load_file

    weights = load_file(str(adapter / "adapter_model.safetensors"))
    return sum(float(w.abs().sum()) for name, w in weights.items() if "lora_B" in name)


@pytest.mark.parametrize("stage", ["sft", "dpo"])
def test_the_first_step_trains_at_the_configured_rate(setup, tmp_path, stage):
    """cpu-small has no warm-up: step 1 applies the configured rate and moves the adapter (LoRA's B starts at 0).
    With one warm-up step (transformers' linear warm-up) step 1 applies lr 0 and the adapter stays zero."""
    root = setup
    data = root / stage
    plain = train(
        stage,
        data,
        root / "model",
        tmp_path / "plain",
        preset_for(stage, "cpu-small", learning_rate=1e-2),
        max_steps=1,
        progress=False,
    )
    assert plain.step_learning_rates == [pytest.approx(1e-2)]
    assert _lora_b_norm(tmp_path / "plain") > 0
    record = json.loads((tmp_path / "plain" / "training.json").read_text())
    assert record["preset"]["warmup_steps"] == 0 and record["step_learning_rates"] == plain.step_learning_rates
    warm = train(
        stage,
        data,
        root / "model",
        tmp_path / "warm",
        preset_for(stage, "cpu-small", learning_rate=1e-2, warmup_steps=1),
        max_steps=2,
        progress=False,
    )
    assert warm.step_learning_rates[0] == 0.0 and warm.step_learning_rates[1] == pytest.approx(1e-2)
    one = train(
        stage,
        data,
        root / "model",
        tmp_path / "one",
        preset_for(stage, "cpu-small", learning_rate=1e-2, warmup_steps=1),
        max_steps=1,
        progress=False,
    )
    assert one.step_learning_rates == [0.0] and _lora_b_norm(tmp_path / "one") == 0.0


def test_homie_train_takes_warmup_steps(setup, tmp_path):
    """``homie train dpo --warmup-steps 1``: the option reaches the trainer (step 1 at lr 0, step 2 at the rate)."""
    from typer.testing import CliRunner

    from homiebot.cli import build_app

    root = setup
    args = ["train", "dpo", "--data", str(root / "dpo"), "--model", str(root / "model"), "--out", str(tmp_path / "o")]
    result = CliRunner().invoke(build_app(), [*args, "--max-steps", "2", "--lr", "1e-2", "--warmup-steps", "1"])
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "o" / "training.json").read_text())
    assert record["preset"]["warmup_steps"] == 1
    assert record["step_learning_rates"][0] == 0.0 and record["step_learning_rates"][1] == pytest.approx(1e-2)


def test_warmup_defaults_and_refusal():
    assert preset_for("sft", "cpu-small").warmup_steps == 0 and preset_for("dpo", "cpu-small").warmup_steps == 0
    # The GPU presets keep the papers' 3 % ratio.
    assert preset_for("sft", "emmoe").warmup_steps is None and preset_for("sft", "emmoe").warmup_ratio == 0.03
    assert preset_for("dpo", "cpu-small", warmup_steps=5).warmup_steps == 5
    with pytest.raises(TrainingError, match="--warmup-steps must be 0 or more"):
        preset_for("dpo", "cpu-small", warmup_steps=-1)


def test_one_dpo_step_gives_the_loss_computed_by_hand(setup, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    root = setup
    reference = write_tiny_chat_model(tmp_path / "reference", ["go to the fridge", "pick the apple"], seed=7)
    # The reference shares the policy's tokenizer so both score the same tokens.
    tokenizer = AutoTokenizer.from_pretrained(str(root / "model"))
    tokenizer.save_pretrained(str(reference))
    ref_model = AutoModelForCausalLM.from_pretrained(str(root / "model"))
    import torch

    torch.manual_seed(7)
    for parameter in ref_model.parameters():
        parameter.data.add_(0.05 * torch.randn_like(parameter))
    ref_model.save_pretrained(str(reference))
    prompt = [{"role": "user", "content": "Task: tidy task syn-000\nInventory: None"}]
    chosen = [{"role": "assistant", "content": "Subtask: [Go to, fridge]\nModel: NoMaD"}]
    rejected = [{"role": "assistant", "content": "Subtask: [Put, banana, sink]\nModel: RT-1-X"}]
    write_dataset([{"prompt": prompt, "chosen": chosen, "rejected": rejected}], tmp_path / "pair" / DATA_FILE)
    policy = AutoModelForCausalLM.from_pretrained(str(root / "model"))
    ref = AutoModelForCausalLM.from_pretrained(str(reference))
    beta = 0.1
    margin = (
        _completion_logp(policy, tokenizer, prompt, chosen) - _completion_logp(ref, tokenizer, prompt, chosen)
    ) - (_completion_logp(policy, tokenizer, prompt, rejected) - _completion_logp(ref, tokenizer, prompt, rejected))
    by_hand = -math.log(1.0 / (1.0 + math.exp(-beta * margin)))
    assert abs(by_hand - math.log(2)) > 1e-3  # the two models differ: not the trivial ln 2
    preset = preset_for("dpo", "cpu-small", lora=False, batch_size=1, save_steps=100, beta=beta)
    result = train(
        "dpo",
        tmp_path / "pair",
        root / "model",
        tmp_path / "out",
        preset,
        max_steps=1,
        ref_model=reference,
        progress=False,
    )
    assert result.losses[0] == pytest.approx(by_hand, rel=1e-4, abs=1e-5)


def test_the_trained_adapter_plans_a_constrained_episode(setup, tmp_path):
    """The adapter is usable at once from the command line: ``homie run --planner hf --model DIR --adapter DIR``
    loads the trained text model (a causal LM folder, not an image-text one) and runs an episode in the
    simulator in the text mode, every answer in the format (constrained decoding), so no F1."""
    from typer.testing import CliRunner

    from homiebot.cli import build_app

    root = setup
    adapter = root / "e1"
    train(
        "sft",
        root / "sft",
        root / "model",
        adapter,
        preset_for("sft", "cpu-small", save_steps=100),
        max_steps=1,
        progress=False,
    )
    out = tmp_path / "episode"
    args = ["run", "--task", "emmoe-001", "--planner", "hf", "--model", str(root / "model"), "--constrained"]
    args += ["--adapter", str(adapter), "-p", "max_new_tokens=120", "-p", "include_history=false"]
    args += ["-p", "system_turn=false", "--max-rounds", "2", "--no-render", "--no-video", "--no-report"]
    result = CliRunner().invoke(build_app(), [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    rounds = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines() if line.strip()]
    assert len(rounds) == 2
    assert all(r["parse_error"] is None and r["error_code"] != "F1" for r in rounds)


def test_a_text_model_refuses_image_model_options(setup):
    """Options only the image-text loader implements are refused for a trained text model, in one line."""
    from homiebot.planner.hf_backend import HFPlanner, PlannerLoadError

    with pytest.raises(PlannerLoadError, match="text-only causal LM; quantization"):
        HFPlanner(model=str(setup / "model"), quantization="4bit")


def test_offline_scores_on_held_out_data(setup):
    from homiebot.training.offline_eval import evaluate_offline

    root = setup
    scores = evaluate_offline(root / "model", sft_data=root / "sft", dpo_data=root / "dpo", limit=6)
    assert scores.samples == 6 and scores.pairs == 6
    assert math.isfinite(scores.answer_nll) and scores.answer_nll > 0
    assert scores.answers == 6 and 0.0 <= scores.subtask_accuracy <= scores.action_accuracy <= 1.0
    assert 0.0 <= scores.pair_accuracy <= 1.0 and set(scores.pair_accuracy_by_kind) <= {
        "replan",
        "model_change",
        "order_change",
        "action_change",
    }
    with pytest.raises(TrainingError, match="give an SFT data set"):
        evaluate_offline(root / "model")


def test_several_data_sets_train_as_one_and_mixed_forms_are_refused(setup, tmp_path):
    """``homie train sft --data A --data B``: the sets are concatenated (DAgger's noisy and noiseless corrections);
    an episode set beside a single-round set is refused in one line before a model loads."""
    from typer.testing import CliRunner

    from homiebot.cli import build_app
    from homiebot.training.trainer import load_rows

    root = setup
    one = load_rows(root / "sft", "sft")
    both = load_rows([root / "sft", root / "sft"], "sft")
    assert len(both) == 2 * len(one) and both.column_names == one.column_names
    args = ["train", "sft", "--data", str(root / "sft"), "--data", str(root / "sft"), "--model", str(root / "model")]
    result = CliRunner().invoke(build_app(), [*args, "--out", str(tmp_path / "o"), "--max-steps", "1"])
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "o" / "training.json").read_text())
    assert record["data"] == [str(root / "sft"), str(root / "sft")] and record["samples"] == len(both)

    chat = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "[End]"}]
    write_dataset([{"id": "ep-0", "messages": chat, "answer_loss": [True]}], tmp_path / "ep" / DATA_FILE)
    with pytest.raises(TrainingError, match="different forms"):
        load_rows([root / "sft", tmp_path / "ep"], "sft")
    mixed = CliRunner().invoke(build_app(), [*args[:4], "--data", str(tmp_path / "ep"), *args[6:], "--out", str(tmp_path / "m")])
    assert mixed.exit_code != 0 and "different forms" in mixed.output
    assert not (tmp_path / "m").exists() or not any((tmp_path / "m").iterdir())
