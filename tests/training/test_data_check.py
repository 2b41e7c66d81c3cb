"""The data check finds prompts whose answers differ, counts the mix and the prompt tokens; the collection refuses
the evaluation's seeds; the text mode's prompt states the current world and what is within reach, by the rule
the expert decides Go to against acting by."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from homiebot.cli import build_app
from homiebot.planner.prompt import parse_output
from homiebot.planner.text_planning import CHANGED_PREFIX
from homiebot.tasks.reserved import evaluation_seeds
from homiebot.tasks.suite import load_suite
from homiebot.training.build import BuildOptions, collect, write_dataset
from homiebot.training.collect import EVALUATION_RUNS, check_seeds, collect_episodes
from homiebot.training.data_check import (
    Sample,
    find_ambiguities,
    percentile,
    sample_mix,
    samples_from_episode_rows,
)
from homiebot.training.episodes import TEXT_PROMPTS_FILE, TrainingDataError

TASK = "emmoe-001"
SEED_OFFSET = 10  # the first seed after the evaluation's reserved runs


def _sample(sample_id: str, prompt: str, subtask: str, analysis: str = "because") -> Sample:
    return Sample(sample_id, (("user", prompt),), f"Analysis: {analysis}\nSubtask: {subtask}\nModel: RT-1-X")


def test_a_planted_ambiguity_is_found_and_distinct_prompts_are_not():
    samples = [
        _sample("a", "fridge open, apple in it", "[Pick, apple]"),
        _sample("b", "fridge open, apple in it", "[Go to, apple]"),  # the same prompt, another decision
        _sample("c", "fridge open, apple in it", "[Pick, apple]"),
        _sample("d", "apple within reach", "[Pick, apple]"),
        _sample("e", "apple far", "[Go to, apple]"),
        _sample("f", "apple far", "[Go to, apple]", analysis="other words"),  # same decision, other analysis
    ]
    report = find_ambiguities(samples)
    assert report.samples == 6 and report.distinct_prompts == 3
    assert (report.ambiguous_decision_prompts, report.ambiguous_decision_samples) == (1, 3)
    assert (report.ambiguous_prompts, report.ambiguous_samples) == (2, 5)  # the analysis differs in "apple far"
    (example,) = report.examples
    assert example["prompt"] == "fridge open, apple in it"
    assert {d: v["count"] for d, v in example["decisions"].items()} == {
        "Subtask: [Pick, apple]\nModel: RT-1-X": 2,
        "Subtask: [Go to, apple]\nModel: RT-1-X": 1,
    }
    clean = find_ambiguities([s for s in samples if s.id not in ("b", "f")])
    assert clean.ambiguous_prompts == clean.ambiguous_decision_prompts == 0 and not clean.examples


def test_mix_counts_actions_and_replans_and_percentiles_interpolate():
    samples = [_sample("a", "p1", "[Pick, apple]"), _sample("b", "p2", "[End]"), _sample("c", "p3", "[Pick, cup]")]
    mix = sample_mix(samples, {"c": "L2"})
    assert mix == {"actions": {"Pick": 2, "End": 1}, "replans_after": {"L2": 1}}
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([10], 95) == 10
    assert percentile(list(range(1, 101)), 95) == pytest.approx(95.05)


def test_homie_data_check_reports_a_planted_ambiguity(tmp_path):
    rows = [
        {"id": s.id, "variant": 0, "prompt": [{"role": "user", "content": s.messages[0][1]}],
         "completion": [{"role": "assistant", "content": s.answer}], "images": [], "after_error": code}
        for s, code in (
            (_sample("x_subtask1", "same prompt", "[Go to, fridge]"), None),
            (_sample("y_subtask1", "same prompt", "[Open, fridge]"), "L4"),
            (_sample("z_subtask1", "other prompt", "[End]"), None),
        )
    ]
    write_dataset(rows, tmp_path / "sft" / "data" / "train.parquet")
    result = CliRunner().invoke(build_app(), ["data", "check", "--from", str(tmp_path / "sft"), "--no-tokens"])
    assert result.exit_code == 0, result.output
    assert "distinct prompts: 2 of 3 samples" in result.output
    assert "different decisions: 1 (2 samples)" in result.output
    assert "re-plans after: L4 1" in result.output
    missing = CliRunner().invoke(build_app(), ["data", "check", "--from", str(tmp_path / "none"), "--no-tokens"])
    assert missing.exit_code == 2 and "error:" in missing.output and "homie data build sft" in missing.output


def _episode(episode_id: str, turns: list[tuple[str, str]], learned: list[bool]) -> dict:
    messages = [{"role": r, "content": t} for r, t in turns]
    return {"id": episode_id, "variant": 0, "messages": messages, "answer_loss": learned}


def test_an_episode_sets_answers_are_checked_after_the_chat_before_them(tmp_path):
    """In the episode form a learned answer's prompt is the whole chat before it: two episodes that agree up to
    a turn and then answer differently are one ambiguity; the same last user turn after different chats is not;
    answers that are context only are not samples."""
    world = "Task: t\nRobot: in kitchen; within reach: fridge"
    rows = [
        _episode("a", [("user", world), ("assistant", "Subtask: [Open, fridge]"), ("user", "Inventory: None"),
                       ("assistant", "Subtask: [Pick, apple]")], [True, True]),
        _episode("b", [("user", world), ("assistant", "Subtask: [Open, fridge]"), ("user", "Inventory: None"),
                       ("assistant", "Subtask: [Go to, apple]")], [True, True]),
        # The same second user turn after another first answer (context only here): another prompt.
        _episode("c", [("user", world), ("assistant", "Subtask: [Put, apple, fridge]"), ("user", "Inventory: None"),
                       ("assistant", "Subtask: [Pick, apple]")], [False, True]),
    ]
    samples = samples_from_episode_rows(rows)
    assert [s.id for s in samples] == ["a_a0", "a_a1", "b_a0", "b_a1", "c_a1"]
    assert samples[1].messages[-1] == ("user", "Inventory: None") and len(samples[1].messages) == 3
    report = find_ambiguities(samples)
    assert report.distinct_prompts == 3  # the first turn; a's and b's second; c's second
    assert (report.ambiguous_decision_prompts, report.ambiguous_decision_samples) == (1, 2)
    write_dataset(rows, tmp_path / "ep" / "data" / "train.parquet")
    result = CliRunner().invoke(build_app(), ["data", "check", "--from", str(tmp_path / "ep"), "--no-tokens"])
    assert result.exit_code == 0, result.output
    assert "5 samples" in result.output and "different decisions: 1 (2 samples)" in result.output


def test_a_collection_on_an_evaluation_seed_is_refused_before_anything_is_written(tmp_path):
    task = next(t for t in load_suite("emmoe100").tasks if t.id == TASK)
    reserved = evaluation_seeds("emmoe100")
    assert {task.seed + r for r in range(EVALUATION_RUNS)} <= reserved and task.seed + EVALUATION_RUNS not in reserved
    check_seeds([task], SEED_OFFSET, 10)  # seeds +10..+19: free
    with pytest.raises(TrainingDataError, match="evaluation plays"):
        check_seeds([task], EVALUATION_RUNS - 1, 1)
    # An offset that lands on another task's evaluation seeds is refused too (the suite's seeds are 37 apart).
    with pytest.raises(TrainingDataError, match="evaluation plays"):
        check_seeds([task], 37, 1)
    out = tmp_path / "collected"
    with pytest.raises(TrainingDataError, match="evaluation plays"):
        collect_episodes(out, task_ids=[TASK], seed_offset=0)
    assert not out.exists()
    result = CliRunner().invoke(build_app(), ["data", "collect", "--out", str(out), "--tasks", TASK, "--runs", "2",
                                              "--seed-offset", "8"])
    assert result.exit_code == 2 and "error:" in result.output and "seed" in result.output, result.output
    assert not out.exists()
    with pytest.raises(TrainingDataError, match="--inject must be a probability"):
        collect_episodes(out, planner="perturbed-expert", task_ids=[TASK], seed_offset=SEED_OFFSET, inject=1.5)
    assert not out.exists()  # refused before the collection's files


@pytest.fixture(scope="module")
def perturbed(tmp_path_factory):
    out = tmp_path_factory.mktemp("check") / "collected"
    summary = collect_episodes(out, planner="perturbed-expert", task_ids=[TASK, "emmoe-002", "emmoe-003"], runs=2,
                               seed_offset=SEED_OFFSET, inject=0.3)
    assert summary.succeeded == summary.episodes == 6 and summary.injections >= 1
    return out


def _prompts_and_answers(out):
    for record in sorted((out / "episodes").glob("*/run*")):
        rounds = [json.loads(line) for line in (record / "rounds.jsonl").read_text().splitlines() if line.strip()]
        prompts = [json.loads(line) for line in (record / TEXT_PROMPTS_FILE).read_text().splitlines() if line]
        assert [p["round"] for p in prompts] == [r["round"] for r in rounds]
        for prompt, r in zip(prompts, rounds, strict=True):
            yield prompt["messages"][-1]["content"], r


def test_the_prompt_says_what_is_within_reach_as_the_expert_decides_it(perturbed):
    """Every successful act on a target (Pick, Open, Close, Put's place) has the target listed within reach in
    the round's prompt, and every Go to followed by an act on the same target has it not listed: the prompt
    holds what the expert chose between Go to and acting by."""
    acted = went = 0
    previous = None
    for text, r in _prompts_and_answers(perturbed):
        (reach_line,) = [line for line in text.splitlines() if line.startswith("Robot: ")]
        near = reach_line.split("within reach: ", 1)[1].split(", ")
        subtask = parse_output(r["raw_output"]).subtask
        assert subtask is not None
        if r["error_code"] == "OK" and subtask.action in ("Pick", "Open", "Close", "Put"):
            target = subtask.place if subtask.action == "Put" else subtask.target
            assert target in near, (r["round"], subtask, reach_line)
            acted += 1
        if previous is not None and previous[0].action == "Go to" and subtask.target == previous[0].target:
            assert previous[0].target not in previous[1], previous
            went += 1
        previous = (subtask, near)
    assert acted >= 10 and went >= 3


def _pieces_now(text: str) -> list[str]:
    """The world now of a round's prompt, piece by piece: the world at the start's pieces (furniture, floors)
    with those in the changed line replaced by their text there."""

    def parts(line: str) -> list[str]:  # a room line's pieces: commas outside brackets
        found, depth, current = [], 0, ""
        for char in line:
            depth += (char == "[") - (char == "]")
            if char == "," and depth == 0:
                found.append(current.strip())
                current = ""
            else:
                current += char
        return [*found, current.strip()]

    start = text.split("\nWorld at the start:\n", 1)[1].split("\nHistorical Execution: ", 1)[0]
    (changed,) = [line for line in text.splitlines() if line.startswith(CHANGED_PREFIX)]
    pieces = {}
    for line in start.splitlines():
        room, _, rest = line.partition(": ")
        for part in parts(rest):
            name = part.split(" ", 1)[0]
            pieces[f"{room} floor" if name == "floor" else name] = part
    body = changed[len(CHANGED_PREFIX) :]
    for part in [] if body == "nothing" else parts(body):
        words = part.split(" ")
        key = " ".join(words[:2]) if len(words) > 1 and words[1] == "floor" else words[0]
        pieces[key] = part
    return list(pieces.values())


def test_the_prompt_shows_the_world_as_it_is_now(perturbed):
    """After a successful Open the prompt says the furniture is open; a held object is placed nowhere in the world
    now (the world at the start with the changed pieces replaced; the Inventory names it); after a failed round
    the Feedback gives the error message."""
    checked = {"open": 0, "held": 0, "failed": 0}
    before = None
    for text, r in _prompts_and_answers(perturbed):
        world = "\n".join(_pieces_now(text))
        inventory = text.split("\nInventory: ", 1)[1].split("\n", 1)[0]
        if before is not None:
            subtask = parse_output(before["raw_output"]).subtask
            if before["error_code"] == "OK" and subtask.action == "Open":
                assert f"{subtask.target} (open)" in world
                checked["open"] += 1
            if before["error_code"] != "OK":
                assert f"Feedback: {before['feedback']}" in text
                checked["failed"] += 1
        if inventory != "None":
            assert inventory not in re.findall(r"[A-Za-z0-9_]+", world), (inventory, world)
            checked["held"] += 1
        before = None if r["error_code"] == "OK" and parse_output(r["raw_output"]).subtask.action == "End" else r
    assert all(v >= 1 for v in checked.values()), checked


def test_the_built_samples_are_the_recorded_prompts_and_unambiguous(perturbed):
    built, _ = collect([perturbed], "sft", BuildOptions(rewrites=0, system_prompt=False, text_observation=True,
                                                        images=False))
    by_round = {}
    for record in sorted((perturbed / "episodes").glob("*/run*")):
        for line in (record / TEXT_PROMPTS_FILE).read_text().splitlines():
            data = json.loads(line)
            by_round[f"{record.parent.name}_{record.name}_v0_subtask{data['round']}"] = data["messages"][-1]["content"]
    assert len(built.sft) >= 30
    for _, step in built.sft:
        assert step.system is None and step.prompt == by_round[step.id]
    stats = built.stats
    assert stats.ambiguity["ambiguous_decision_prompts"] == 0
    assert sum(stats.mix["replans_after"].values()) >= 1
    assert stats.mix["actions"]["End"] == 6


def test_rare_replans_are_repeated_until_each_code_has_the_minimum():
    from homiebot.training.build import repeat_rare_replans
    from homiebot.training.emmoe import Step
    from homiebot.types import Subtask

    def step(sample_id: str, after: str | None) -> tuple[int, Step]:
        return 0, Step(sample_id, "e", None, "p", "a", Subtask("Pick", "apple"), "RT-1-X", True, "OK", (),
                       after_error=after)

    sft = [step("a", None), step("b", "D1"), step("c", "L2"), step("d", "L2"), step("e", "L2"), step("f", "L1")]
    out, added = repeat_rare_replans(sft, 3)
    ids = [s.id for _, s in out]
    assert ids[:6] == ["a", "b", "c", "d", "e", "f"]  # the originals first, unchanged
    assert added == {"D1": 2, "L1": 2}  # L2 has 3 already
    assert sorted(ids[6:]) == ["b_copy2", "b_copy3", "f_copy2", "f_copy3"]
    assert repeat_rare_replans(sft, 0)[1] == {}


def test_collect_refuses_an_unknown_noise_preset_before_writing(tmp_path):
    out = tmp_path / "collected"
    result = CliRunner().invoke(build_app(), ["data", "collect", "--out", str(out), "--tasks", TASK,
                                              "--seed-offset", "10", "--noise", "loud"])
    assert result.exit_code == 2 and "error:" in result.output and "--noise" in result.output, result.output
    assert not out.exists()


def test_a_validation_build_can_leave_out_the_prompts_a_training_set_holds(perturbed, tmp_path):
    from homiebot.training.build import build

    options = BuildOptions(rewrites=0, system_prompt=False, text_observation=True, images=False)
    first = perturbed / "episodes" / TASK / "run0"
    trained = build([first], tmp_path / "trained", "sft", options)
    everything, _ = collect([perturbed], "sft", options)
    held_out, _ = collect([perturbed], "sft", replace(options, exclude_seen=str(tmp_path / "trained")))
    assert held_out.stats.seen_excluded >= trained.samples  # run0's own samples, and any equal prompt elsewhere
    assert len(held_out.sft) == len(everything.sft) - held_out.stats.seen_excluded
    assert not {s.id for _, s in held_out.sft} & {f"{TASK}_run0_v0_subtask{n}" for n in range(1, 30)}
    result = CliRunner().invoke(build_app(), ["data", "check", "--from", str(tmp_path / "trained"), "--no-tokens",
                                              "--against", str(tmp_path / "trained")])
    assert result.exit_code == 0, result.output
    assert f"{trained.samples} of {trained.samples} samples; with another decision there: 0" in result.output


def test_dagger_refuses_an_evaluation_seed_before_anything_is_written(tmp_path):
    from homiebot.training.dagger import DAGGER_SEED_OFFSET, run_dagger
    from homiebot.training.trainer import TrainingError

    train_tasks = [t for t in load_suite("emmoe100").tasks if t.split == "train"]
    # The default offset leaves every training task 8 iterations of seeds no evaluation plays.
    check_seeds(train_tasks, DAGGER_SEED_OFFSET, 8)
    out = tmp_path / "dagger"
    # Offset 0 is the evaluation's own run 0; 1000 (the old default) lands on other tasks' runs 1-9 (seeds 37 apart).
    for offset in (0, 1000):
        with pytest.raises(TrainingError, match=f"--seed-offset {offset} --iterations 3 would collect on"):
            run_dagger(tmp_path / "no-model", out, tasks=[TASK], iterations=3, seed_offset=offset)
        assert not out.exists()
