"""The subtask-only answer format (``answer_format="subtask"``): a model trained on answers without the Analysis
line (``homie data build sft --thoughtless``; PARTNR appendix A.10) is read, constrained and recorded in that form,
while the analysis format keeps EMMOE's F1 rule for an answer without an analysis."""

from __future__ import annotations

from dataclasses import replace

import pytest

from homiebot.config import AnswerFormat
from homiebot.config.planners import planner_config
from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.constrained import AnswerConstraint, ConstraintError, f1_violation
from homiebot.planner.hf_backend import SUBTASK_MAX_NEW_TOKENS, Generation, HFPlanner
from homiebot.planner.prompt import parse_output
from homiebot.types import EMMOE_ACTIONS, EMMOE_MODELS, ErrorCode, Subtask

SUBTASK = AnswerFormat.SUBTASK
TARGETS = ("fridge", "apple", "kitchen table")


def test_an_answer_without_analysis_parses_only_in_the_subtask_format() -> None:
    text = "Subtask: [Put, apple, kitchen table]\nModel: RT-1-X"
    read = parse_output(text, SUBTASK)
    assert read.subtask == Subtask("Put", "apple", "kitchen table")
    assert read.model == "RT-1-X" and read.analysis == "" and read.parse_error is None
    refused = parse_output(text)  # the analysis format: F1, as in the paper
    assert refused.subtask is None and "Analysis:" in (refused.parse_error or "")
    # An answer with an Analysis line keeps it in either format.
    full = parse_output("Analysis: the fridge first\nSubtask: [Go to, fridge]\nModel: NoMaD", SUBTASK)
    assert full.analysis == "the fridge first" and full.subtask == Subtask("Go to", "fridge")
    assert f1_violation(text, answer_format=SUBTASK) is None
    assert f1_violation(text) is not None


def test_the_text_mode_reads_where_a_subtask_only_answer_went() -> None:
    """The prompt's reach line depends on the last subtask (a Go to may stop up to 2 m from its target): a
    subtask-only answer in the history must say it as an answer with an analysis does."""
    from homiebot.planner.base import ChatTurn
    from homiebot.planner.text_planning import last_subtask

    request = PlanRequest(system_prompt="", instruction="", images=[],
                          history=[ChatTurn("", "Subtask: [Go to, fridge]\nModel: NoMaD")])
    assert last_subtask(request) == Subtask("Go to", "fridge")


@pytest.mark.parametrize(
    "text",
    ["Go to the fridge", "Subtask: [Go to, fridge]", "Model: NoMaD", "Subtask: []\nModel: NoMaD", ""],
)
def test_malformed_subtask_only_answers_still_fail(text: str) -> None:
    read = parse_output(text, SUBTASK)
    assert read.subtask is None and read.parse_error


def _constraint(max_new_tokens: int = SUBTASK_MAX_NEW_TOKENS, targets=TARGETS) -> AnswerConstraint:
    return AnswerConstraint.build(EMMOE_ACTIONS, EMMOE_MODELS, targets, max_new_tokens=max_new_tokens,
                                  answer_format=SUBTASK)


def test_the_subtask_only_grammar_starts_at_the_subtask_line() -> None:
    grammar = _constraint().grammar()
    assert grammar.splitlines()[0] == 'root ::= "Subtask: [" subtask'
    assert "Analysis" not in grammar and "analysis" not in grammar
    # The longest free-form answer fits the default budget; a budget below the longest answer is refused.
    assert _constraint(targets=()).fixed_bytes() <= SUBTASK_MAX_NEW_TOKENS
    with pytest.raises(ConstraintError, match="max_new_tokens=20"):
        _constraint(max_new_tokens=20)


@pytest.fixture(scope="module")
def compiler():
    xgr = pytest.importorskip("xgrammar", reason="xgrammar is part of the 'models' extra")
    pytest.importorskip("transformers", reason="the tokenizer is built with transformers (the 'models' extra)")
    from homiebot.planner.tiny_vlm import build_tokenizer

    tokenizer = build_tokenizer("llava")
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=len(tokenizer), stop_token_ids=[eos])
    return xgr.GrammarCompiler(info, max_threads=1)


def _can_stop(compiler, grammar: str, text: str) -> bool:
    import xgrammar as xgr

    matcher = xgr.GrammarMatcher(compiler.compile_grammar(grammar))
    return matcher.accept_string(text) and matcher.accept_token(matcher.stop_token_ids[0])


@pytest.mark.models
@pytest.mark.parametrize(
    "text, accepted",
    [
        ("Subtask: [Go to, fridge]\nModel: NoMaD", True),
        ("Subtask: [Put, apple, kitchen table]\nModel: RT-1-X", True),
        ("Subtask: [End]\nModel: None", True),  # what the thoughtless samples give End
        ("Analysis: go\nSubtask: [Go to, fridge]\nModel: NoMaD", False),
        ("Subtask: [Go to, fridge]\nModel: None", False),  # None only after End
        ("Subtask: [Pick, apple]\nModel: NoMaD", False),  # the model follows the action (table E2)
        ("Subtask: [Go to, garage]\nModel: NoMaD", False),  # not a grounded name
    ],
)
def test_the_subtask_only_grammar_accepts_exactly_the_trained_answers(compiler, text: str, accepted: bool) -> None:
    assert _can_stop(compiler, _constraint().grammar(), text) is accepted


def test_the_option_is_typed_and_sets_a_small_answer_budget() -> None:
    config = planner_config("hf", {"model": "smollm2", "answer_format": "subtask"})
    assert config.answer_format is SUBTASK  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="answer_format"):
        planner_config("hf", {"model": "smollm2", "answer_format": "thoughts"})
    planner = HFPlanner(model="fake", engine=FakeAnsweringEngine(), answer_format="subtask")  # type: ignore[arg-type]
    assert planner.answer_format is SUBTASK and planner.max_new_tokens == SUBTASK_MAX_NEW_TOKENS
    assert HFPlanner(model="fake", engine=FakeAnsweringEngine(), max_new_tokens=40,  # type: ignore[arg-type]
                     answer_format="subtask").max_new_tokens == 40


class FakeAnsweringEngine:
    """Stands in for the trained text model (no weights here): it answers what it is told to, and keeps the
    grammar and budget the planner handed it."""

    text_only = True

    def __init__(self) -> None:
        self.next_answer = ""
        self.grammars: list[str] = []

    def generate(self, conversations, *, grammars=None, max_new_tokens=512, **_) -> list[Generation]:
        self.grammars.extend(grammars or [])
        return [Generation(self.next_answer, 1, 1, "stop") for _ in conversations]

    def close(self) -> None:
        pass


class ThoughtlessExpert(Planner):
    """The expert's decisions without their Analysis line, sent through the hf planner's text mode as a trained
    thoughtless model's answers would be (its prompt built, its grammar made, its answer kept in the chat)."""

    privileged = True

    def __init__(self, answer_format: AnswerFormat) -> None:
        from homiebot.planner.perturbed import PromptBoundExpertPlanner

        self.expert = PromptBoundExpertPlanner()
        self.engine = FakeAnsweringEngine()
        self.hf = HFPlanner(model="fake", engine=self.engine, constrained=True,  # type: ignore[arg-type]
                            system_turn=False, answer_format=answer_format)
        self.answer_format = self.hf.answer_format

    def reset(self, task: str, seed: int = 0) -> None:
        self.expert.reset(task, seed)
        self.hf.reset(task, seed)

    def plan(self, request: PlanRequest) -> str:
        decision = parse_output(self.expert.plan(request))
        assert decision.subtask is not None
        model = "None" if decision.subtask.is_end else decision.model
        self.engine.next_answer = f"Subtask: {decision.subtask.text()}\nModel: {model}"
        return self.hf.plan(replace(request, goal=None, perceived_names=None, evaluation=None))


def _episode(answer_format: AnswerFormat):
    from homiebot.agent.loop import EpisodeConfig, run_episode
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task

    planner = ThoughtlessExpert(answer_format)
    sim = make_simulator("mujoco", render=False)
    try:
        result = run_episode(sim, planner, task=get_task("emmoe-001"), seed=16,
                             config=EpisodeConfig(render=False, max_rounds=12))
    finally:
        sim.shutdown()
    return planner, result


@pytest.mark.slow
def test_a_thoughtless_episode_runs_without_f1_in_the_subtask_format() -> None:
    planner, result = _episode(SUBTASK)
    rounds = result.rounds
    assert rounds and rounds[-1].output.subtask is not None and rounds[-1].output.subtask.is_end
    assert all(r.feedback.code is not ErrorCode.F1 and r.output.analysis == "" for r in rounds)
    assert planner.engine.grammars and all(g.startswith('root ::= "Subtask: ["') for g in planner.engine.grammars)
    # The same answers from a planner in the analysis format are format errors.
    _, refused = _episode(AnswerFormat.ANALYSIS)
    first = refused.rounds[0]
    assert first.feedback.code is ErrorCode.F1
