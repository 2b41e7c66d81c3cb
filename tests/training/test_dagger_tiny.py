"""EMMA's DAgger loop, CI-sized: a tiny random student acts, the oracle expert labels every state, the pairs are
aggregated and train the student with DPO, the student is evaluated; the labels are the teacher's answers."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("trl")

from homiebot.planner.prompt import parse_output  # noqa: E402
from homiebot.training.dagger import LabeledRound, pairs_of, run_dagger  # noqa: E402
from homiebot.training.tiny import write_tiny_chat_model  # noqa: E402
from homiebot.training.trainer import TrainingError, preset_for  # noqa: E402

pytestmark = pytest.mark.models


def test_agreeing_rounds_make_no_pair():
    same = "Analysis: a\nSubtask: [Go to, fridge]\nModel: NoMaD"
    other = "Analysis: b\nSubtask: [Go to, fridge]\nModel: NoMaD"
    wrong = "Analysis: c\nSubtask: [Pick, apple]\nModel: RT-1-X"
    rows, dropped = pairs_of([LabeledRound("p1", same, other), LabeledRound("p2", wrong, same)])
    assert dropped == 1 and rows == [{"prompt": "p2", "chosen": same, "rejected": wrong}]


def test_two_iterations_on_a_tiny_student(tmp_path):
    from homiebot.planner.prompt import system_prompt
    from homiebot.planner.text_planning import describe_scene, text_system_prompt
    from homiebot.sim.scene import load_scene
    from homiebot.tasks.suite import load_suite

    # The tokenizer learns the prompt's own text so that the text-mode prompt (system information, world
    # description) stays within a few thousand tokens.
    scene = load_scene(load_suite("emmoe100").tasks[0].scene)
    texts = [text_system_prompt(system_prompt()), describe_scene(scene).text, "Analysis: go\nSubtask: [Go to, fridge]"]
    model = write_tiny_chat_model(tmp_path / "student", texts * 4, vocab_size=800)
    results = run_dagger(
        model,
        tmp_path / "out",
        tasks=["emmoe-001"],
        eval_tasks=["emmoe-002"],
        iterations=2,
        max_rounds=2,
        preset=preset_for("dpo", "cpu-small", save_steps=100, max_length=8192),
        steps_per_iteration=1,
        max_new_tokens=120,
    )
    assert [r.iteration for r in results] == [0, 1]
    first, second = results
    assert first.rounds == 2 and first.new_pairs + first.agreeing_rounds == 2
    assert second.pairs_total == first.new_pairs + second.new_pairs  # D aggregates
    assert first.train_steps == 1 and first.eval_episodes == 1
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "out" / "iter1" / "data" / "train.parquet").to_pylist()
    assert len(rows) == second.pairs_total
    for row in rows:  # chosen is the expert's answer, a parseable EMMOE answer; rejected the student's
        assert parse_output(row["chosen"]).subtask is not None and row["chosen"] != row["rejected"]
        assert row["prompt"].endswith("<|im_start|>assistant\n")
        # The evaluation's prompt (docs/results/training.md): one user turn, no system turn, no earlier chat.
        assert row["prompt"].startswith("<|im_start|>user\n") and row["prompt"].count("<|im_start|>") == 2
    assert json.loads((tmp_path / "out" / "dagger.json").read_text())["iterations"][1]["pairs_total"] == len(rows)
    (label_only,) = run_dagger(
        model, tmp_path / "labels", tasks=["emmoe-001"], iterations=1, max_rounds=1, steps_per_iteration=0
    )
    assert label_only.train_steps == 0 and label_only.rounds == 1
    assert not (tmp_path / "labels" / "iter0" / "adapter").exists()
    with pytest.raises(TrainingError, match="not empty"):
        run_dagger(model, tmp_path / "out", tasks=["emmoe-001"])
    with pytest.raises(TrainingError, match="unknown task"):
        run_dagger(model, tmp_path / "new", tasks=["emmoe-999"])
