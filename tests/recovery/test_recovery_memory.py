"""A repeated stage question is answered from the episode's memory when the model is deterministic
(homiebot.recovery.llm.AnswerMemory): same decisions, fewer model calls, counted in the statistics."""

from __future__ import annotations

import json
from collections.abc import Sequence

from homiebot.planner.messages import ChatMessage
from homiebot.planner.prompt import parse_output
from homiebot.planner.scripted import ScriptedPlanner
from homiebot.recovery.llm import AnswerMemory, EngineLLM, LLMReply, ScriptedLLM
from homiebot.recovery.planner import RecoveryPlanner
from homiebot.recovery.stats import summarize
from tests.recovery.recovery_helpers import TASK, answer, request

TOO_HARD = "Unable to pick, the subtask is too difficult to perform"


def _stage_answers(messages: Sequence[ChatMessage]) -> str:
    """A deterministic stand-in model: its answer is a function of the question (important; nothing missing;
    a workaround, a step whose name depends on how many failed steps the prompt lists)."""
    text = messages[-1].text
    if "still need this step" in text:
        return json.dumps({"reason": "needed", "important": True})
    if "Some steps work only" in text:
        return json.dumps({"reason": "nothing", "missing": False, "steps": []})
    return json.dumps({"reason": "other", "steps": [f"[Go to, {'table' if text.count('failed (E1)') % 2 else 'fridge'}]"]})


def _episode(memory: bool, rounds: int = 30, deterministic: bool = True) -> tuple[list[str], RecoveryPlanner, ScriptedLLM]:
    """The base planner picks the apple every round and every step fails (E1)."""
    llm = ScriptedLLM(responder=_stage_answers, deterministic=deterministic)
    planner = RecoveryPlanner(ScriptedPlanner([answer("[Pick, apple]")] * rounds), llm=llm, stages="1,2,3",
                              search=False, memory=memory)
    planner.reset(TASK, seed=3)
    subtasks: list[str] = []
    feedback = "None"
    for index in range(1, rounds + 1):
        output = parse_output(planner.plan(request(feedback, round_index=index)))
        assert output.subtask is not None
        subtasks.append(output.subtask.text())
        feedback = TOO_HARD
    return subtasks, planner, llm


def test_repeated_questions_are_answered_from_memory_with_the_same_decisions():
    asked, without, llm_without = _episode(memory=False)
    remembered, with_memory, llm_with = _episode(memory=True)
    assert remembered == asked  # the same subtasks every round
    assert [c["answer"] for c in with_memory.stats.calls] == [c["answer"] for c in without.stats.calls]
    assert with_memory.stats.llm_calls == without.stats.llm_calls  # questions asked: the same statistic
    # Once the last 8 steps repeat one cycle (pick, go to), the questions repeat: asked of the model once each.
    assert len(llm_with.prompts) < len(llm_without.prompts) == without.stats.llm_calls
    assert with_memory.stats.remembered_calls == without.stats.llm_calls - len(llm_with.prompts) > 0
    assert without.stats.remembered_calls == 0
    assert with_memory.stats.prompt_tokens == without.stats.prompt_tokens
    remembered_calls = [c for c in with_memory.stats.calls if c.get("remembered")]
    assert len(remembered_calls) == with_memory.stats.remembered_calls
    summary = summarize([with_memory.stats.to_json()])
    assert summary["model_calls_per_episode"] == len(llm_with.prompts)
    assert summary["computed_tokens_per_episode"] == (
        with_memory.stats.prompt_tokens + with_memory.stats.completion_tokens - with_memory.stats.remembered_tokens)


def test_a_model_that_is_not_declared_deterministic_is_always_asked():
    _, planner, llm = _episode(memory=True, deterministic=False)
    assert planner.memory is None and planner.stats.remembered_calls == 0
    assert len(llm.prompts) == planner.stats.llm_calls


def test_memory_is_per_episode():
    _, planner, llm = _episode(memory=True, rounds=3)
    first = len(llm.prompts)
    assert first > 0 and len(planner.memory or ()) == first
    planner.reset(TASK, seed=4)  # a new episode asks again
    assert len(planner.memory or ()) == 0
    planner.plan(request("None", round_index=1))
    planner.plan(request(TOO_HARD, round_index=2))
    assert len(llm.prompts) > first


def test_memory_keys_on_messages_grammar_and_limit_and_forgets_the_oldest():
    memory = AnswerMemory(max_entries=2)
    one = [ChatMessage("system", "s"), ChatMessage("user", "q")]
    key = AnswerMemory.key(one, "root ::= x", 120)
    assert memory.recall(key) is None
    memory.keep(key, LLMReply("a", 10, 2, reused_tokens=4))
    hit = memory.recall(key)
    assert hit is not None and hit.text == "a" and hit.remembered and hit.reused_tokens == 0 and hit.prompt_tokens == 10
    assert memory.recall(AnswerMemory.key(one, None, 120)) is None
    assert memory.recall(AnswerMemory.key(one, "root ::= x", 60)) is None
    memory.keep(AnswerMemory.key(one, None, 1), LLMReply("b"))
    memory.keep(AnswerMemory.key(one, None, 2), LLMReply("c"))
    assert memory.recall(key) is None and len(memory) == 2


def test_engine_llm_reports_the_reused_prompt_tokens_of_the_engine():
    class _Engine:
        last_stats = type("Stats", (), {"reused_tokens": 7})()

        def generate(self, conversations, grammars=None, max_new_tokens=0):
            return [type("Gen", (), {"text": "{}", "prompt_tokens": 9, "completion_tokens": 1})()]

    reply = EngineLLM(_Engine()).complete([ChatMessage("user", "q")], grammar=None, max_tokens=32)
    assert (reply.prompt_tokens, reply.completion_tokens, reply.reused_tokens) == (9, 1, 7)
    assert EngineLLM.deterministic
