"""EMMOE's SFT and DPO data sets from records: the paper's counts, the pairs, both prompt formats, the CLI."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from homiebot.cli import build_app
from homiebot.planner.prompt import INSTRUCTION_SUFFIX
from homiebot.testing.synthetic_records import FAILED, write_episode, write_record_set
from homiebot.training.build import DATA_FILE, BuildOptions, build, collect
from homiebot.training.emmoe import PAPER_SUFFIX
from homiebot.training.episodes import TrainingDataError, load_episodes
from homiebot.training.rewrite import TemplateRewriter, guarded


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return write_record_set(tmp_path_factory.mktemp("records") / "eval")


@pytest.mark.parametrize("prompt_format", ["runtime", "paper"])
def test_counts_follow_the_papers_formula_on_its_record_counts(records, prompt_format):
    """966 subtasks with 36 failures over 100 tasks: 930 x 4 = 3,720 SFT and 4 x (3 x 830 + 36) = 10,104 DPO
    samples (EMMOE paper, section 4.1); the 90 training tasks give 3,316 and 8,984 (section 4.2)."""
    everything = BuildOptions(prompt_format=prompt_format, split="all")
    sft, _ = collect([records], "sft", everything)
    assert sft.stats.samples == 3720 and sft.stats.end_samples == 400 and sft.stats.failed_subtasks_dropped == 36
    dpo, _ = collect([records], "dpo", everything)
    assert dpo.stats.samples == 10104
    assert dpo.stats.per_kind == {"replan": 144, "model_change": 3320, "order_change": 3320, "action_change": 3320}
    train = BuildOptions(prompt_format=prompt_format, split="train")
    assert collect([records], "sft", train)[0].stats.samples == 3316
    assert collect([records], "dpo", train)[0].stats.samples == 8984
    test = BuildOptions(prompt_format=prompt_format, split="test")
    assert collect([records], "sft", test)[0].stats.samples == 404


def test_pairs_are_never_equal_and_end_is_only_rejected(records):
    dpo, _ = collect([records], "dpo", BuildOptions(split="all"))
    for _, pair in dpo.pairs:
        assert pair.chosen != pair.rejected
        assert "[End]" not in pair.chosen
        assert pair.chosen.startswith("Subtask: [") and "\nModel: " in pair.chosen
        assert not pair.chosen.startswith("Analysis") and not pair.rejected.startswith("Analysis")
    replans = [p for _, p in dpo.pairs if p.kind == "replan"]
    # The re-plan pair's prompt is the failed round's prompt, its rejected the failed decision.
    failed_decision = f"Subtask: {FAILED[0].text()}\nModel: {FAILED[1]}"
    assert replans and all(p.rejected == failed_decision for p in replans)
    assert all(p.step.error_code == "L2" for p in replans)
    # Re-plan pairs come first within each variant, as dpo_augment appends to data_sift's pairs.
    first_variant = [p.kind for k, p in dpo.pairs if k == 0]
    assert first_variant[:36] == ["replan"] * 36


def test_runtime_prompt_is_the_recorded_instruction_with_the_system_turn(records):
    options = BuildOptions(split="train", rewrites=0)
    built, episodes = collect([records], "sft", options)
    instructions = {f"{e.key}_v0_subtask{r.index}": r.instruction for e in episodes for r in e.rounds}
    for _, step in built.sft:
        assert step.prompt == instructions[step.id]
        assert step.prompt.endswith(INSTRUCTION_SUFFIX)
        assert step.system is not None and step.system.startswith("You are a powerful housework assistant")
    paper, _ = collect([records], "sft", BuildOptions(split="train", rewrites=0, prompt_format="paper"))
    assert all(s.prompt.endswith(PAPER_SUFFIX) and s.system is None for _, s in paper.sft)


def test_execution_errors_make_no_replan_pair_unless_asked(tmp_path):
    root = tmp_path / "runs"
    write_episode(root / "episodes" / "syn-001" / "run0", "syn-001", 6, True)
    rounds = (root / "episodes" / "syn-001" / "run0" / "rounds.jsonl").read_text().splitlines()
    failed = json.loads(rounds[1])
    failed["error_code"] = "E1"
    rounds[1] = json.dumps(failed)
    (root / "episodes" / "syn-001" / "run0" / "rounds.jsonl").write_text("\n".join(rounds) + "\n")
    default, _ = collect([root], "dpo", BuildOptions(split="all", rewrites=0))
    assert default.stats.per_kind["replan"] == 0 and default.stats.pairs_dropped == {"replan: execution error": 1}
    asked, _ = collect([root], "dpo", BuildOptions(split="all", rewrites=0, replan_from_execution_errors=True))
    assert asked.stats.per_kind["replan"] == 1


def test_template_rewriter_keeps_every_name_and_varies_the_text():
    rewriter = TemplateRewriter()
    task = "put the apple_2 into the fridge and fetch a red_can"
    variants = {rewriter.rewrite(task, "task", k) for k in (1, 2, 3)}
    assert len(variants) == 3 and task not in variants
    for text in variants:
        assert "apple_2" in text and "fridge" in text and "red_can" in text
    analysis = "I successfully arrived the fridge, so I should put the apple_2 on the kitchen_counter"
    for k in (1, 2, 3):
        rewritten = rewriter.rewrite(analysis, "analysis", k)
        assert rewritten != analysis and "kitchen_counter" in rewritten and "apple_2" in rewritten


def test_rewrite_guard_refuses_lost_names_empty_and_long_answers():
    original = "put the apple_2 on the kitchen_counter"
    assert guarded(original, "place the apple on the counter") == (original, False)
    assert guarded(original, "") == (original, False)
    assert guarded(original, "x " * 200) == (original, False)
    assert guarded("go to the fridge", "head to the sofa", names={"fridge"}) == ("go to the fridge", False)
    assert guarded(original, "set the apple_2 down on the kitchen_counter") == (
        "set the apple_2 down on the kitchen_counter",
        True,
    )


def test_build_writes_a_dataset_trl_loads_and_refuses_bad_input(records, tmp_path):
    datasets = pytest.importorskip("datasets")
    stats = build([records], tmp_path / "dpo", "dpo", BuildOptions(split="train", rewrites=1))
    assert stats.samples == 2 * (3 * (829 - 90) + 29)
    data = datasets.load_dataset("parquet", data_files=str(tmp_path / "dpo" / DATA_FILE))["train"]
    assert len(data) == stats.samples
    row = data[0]
    assert row["kind"] == "replan" and row["prompt"][0]["role"] == "system" and row["chosen"][0]["role"] == "assistant"
    assert json.loads((tmp_path / "dpo" / "stats.json").read_text())["per_kind"]["replan"] == 58
    with pytest.raises(TrainingDataError, match="not an empty folder"):
        build([records], tmp_path / "dpo", "dpo")
    with pytest.raises(TrainingDataError, match="no such file"):
        build([tmp_path / "missing"], tmp_path / "other", "sft")
    assert not (tmp_path / "other").exists()
    with pytest.raises(TrainingDataError, match="no usable episode records"):
        load_episodes([tmp_path / "dpo"])


def test_homie_data_build_prints_counts_per_kind(records, tmp_path):
    runner = CliRunner()
    result = runner.invoke(
        build_app(), ["data", "build", "dpo", "--from", str(records), "--out", str(tmp_path / "o"), "--rewrites", "0"]
    )
    assert result.exit_code == 0, result.output
    assert "dpo: 2246 samples from 90 episodes x 1 variants" in result.output
    assert "replan: 29" in result.output and "order_change: 739" in result.output
    bad = runner.invoke(build_app(), ["data", "build", "ppo", "--from", str(records), "--out", str(tmp_path / "p")])
    assert bad.exit_code == 2 and "unknown data kind 'ppo'" in bad.output
    assert not (tmp_path / "p").exists()


class FakeChatClient:
    """Stands in for an OpenAI-compatible server (no server can be reached here): answers with a fixed rewrite."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.chat = self
        self.completions = self

    def create(self, **request):
        self.requests.append(request)
        text = request["messages"][1]["content"].replace("put", "place")
        message = type("Message", (), {"content": text})
        return type("Completion", (), {"choices": [type("Choice", (), {"message": message})]})


def test_server_rewriter_sends_the_appendix_instruction_and_caches_answers(tmp_path):
    from homiebot.training.rewrite import REWRITE_INSTRUCTION, ServerRewriter

    client = FakeChatClient()
    cache = tmp_path / "rewrites.json"
    rewriter = ServerRewriter("gpt-4o", cache, client=client)
    assert rewriter.rewrite("put the apple_2 away", "task", 1) == "place the apple_2 away"
    assert client.requests[0]["messages"][0] == {"role": "system", "content": REWRITE_INSTRUCTION}
    assert rewriter.rewrite("put the apple_2 away", "task", 1) == "place the apple_2 away"
    assert len(client.requests) == 1 and rewriter.hits == 1
    rewriter.save()
    offline = ServerRewriter("gpt-4o", cache, offline=True)
    assert offline.rewrite("put the apple_2 away", "task", 1) == "place the apple_2 away"
    assert offline.rewrite("put the apple_2 away", "task", 2) == "put the apple_2 away"  # not cached: original


def test_homie_train_refuses_bad_input_in_one_line(records, tmp_path):
    runner = CliRunner()
    missing = runner.invoke(
        build_app(),
        ["train", "sft", "--data", str(tmp_path / "none"), "--model", str(tmp_path), "--out", str(tmp_path / "a")],
    )
    assert missing.exit_code == 2 and "no data set" in missing.output and len(missing.output.strip().splitlines()) == 1
    build([records], tmp_path / "sft", "sft", BuildOptions(rewrites=0))
    preset = runner.invoke(
        build_app(),
        [
            "train",
            "sft",
            "--data",
            str(tmp_path / "sft"),
            "--model",
            str(tmp_path),
            "--out",
            str(tmp_path / "a"),
            "--preset",
            "huge",
        ],
    )
    assert preset.exit_code == 2 and "unknown preset 'huge'" in preset.output
    assert not (tmp_path / "a").exists()


def test_thoughtless_sft_answers_have_no_analysis(records, tmp_path):
    import pyarrow.parquet as pq

    build([records], tmp_path / "t", "sft", BuildOptions(rewrites=0, thoughtless=True))
    rows = pq.read_table(tmp_path / "t" / DATA_FILE).to_pylist()
    answers = [r["completion"][0]["content"] for r in rows]
    assert len(answers) == 829 and all(a.startswith("Subtask: [") and "Analysis" not in a for a in answers)
