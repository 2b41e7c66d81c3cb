"""The answer grammar of constrained decoding: what it accepts and refuses, its token budget, the F1 mirror.

The grammar is checked with xgrammar's own matcher over a byte-level tokenizer built in-process, so
"accepted" means what the logits processor will let a model write. End-to-end constrained generation
with a tiny model is in ``test_backends.py``.
"""

from __future__ import annotations

import logging

import pytest

from homiebot.planner.constrained import (
    FREE_TARGET_MAX_CHARS,
    AnswerConstraint,
    ConstraintError,
    f1_violation,
)
from homiebot.planner.prompt import format_output, parse_output
from homiebot.types import EMMOE_ACTIONS, EMMOE_MODELS, ErrorCode, Subtask

TARGETS = ("fridge", "apple", "kitchen table", 'the "blue" cup')


def _constraint(targets=TARGETS, max_new_tokens=512, **kw) -> AnswerConstraint:
    return AnswerConstraint.build(EMMOE_ACTIONS, EMMOE_MODELS, targets, max_new_tokens=max_new_tokens, **kw)


# ------------------------------------------------------------------------------ pure grammar text


def test_grammar_names_every_action_model_and_target_and_escapes_quotes() -> None:
    grammar = _constraint().grammar()
    for name in ("Go to", "Pick", "Put", "Open", "Close", "End", "NoMaD", "PixNav", "octo", "RT-1-X", "kitchen table"):
        assert f'"{name}' in grammar or f'"{name}"' in grammar
    assert '"the \\"blue\\" cup"' in grammar
    # Arity: End alone, Put with two targets, the others with one.
    assert '("End")' in grammar
    assert '("Put" ", " target ", " target)' in grammar
    assert '("Go to" ", " target)' in grammar


def test_names_that_would_break_the_subtask_line_are_dropped(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        constraint = _constraint(targets=("fridge", "shelf, top", "box]", "  apple  ", "", "fridge"))
    assert constraint.targets == ("fridge", "apple")
    assert "shelf, top" in caplog.text


def test_bad_action_or_model_names_are_refused() -> None:
    with pytest.raises(ConstraintError, match="action names"):
        AnswerConstraint.build(("Go to", "Pick, up"), EMMOE_MODELS, (), max_new_tokens=512)
    with pytest.raises(ConstraintError, match="model names"):
        AnswerConstraint.build(EMMOE_ACTIONS, ("",), (), max_new_tokens=512)


def test_analysis_cap_makes_the_longest_answer_fit_the_token_budget() -> None:
    constraint = _constraint(max_new_tokens=200)
    longest_target = max(len(t) for t in TARGETS)
    # "Analysis: " + analysis + "\nSubtask: [" + "Put, <t>, <t>" + "]\nModel: " + "RT-1-X"
    fixed = len("Analysis: ") + len("\nSubtask: [") + len("Put") + 2 * (2 + longest_target) + len("]\nModel: ") + 6
    assert constraint.fixed_bytes() == fixed
    assert constraint.analysis_max_chars == 200 - fixed
    assert _constraint(max_new_tokens=5000).analysis_max_chars == 600  # the default cap wins when lower
    with pytest.raises(ConstraintError, match="raise max_new_tokens"):
        _constraint(max_new_tokens=fixed)


def test_free_form_targets_when_nothing_is_grounded() -> None:
    constraint = _constraint(targets=())
    assert constraint.targets == ()
    assert f"{{0,{FREE_TARGET_MAX_CHARS - 1}}}" in constraint.grammar()


def test_empty_lists_mean_the_papers_lists() -> None:
    constraint = AnswerConstraint.build((), (), ("fridge",), max_new_tokens=300)
    assert constraint.actions == EMMOE_ACTIONS
    assert constraint.models == EMMOE_MODELS


# ------------------------------------------------------------------------------ xgrammar acceptance


@pytest.fixture(scope="module")
def compiler():
    xgr = pytest.importorskip("xgrammar", reason="xgrammar is part of the 'models' extra")
    pytest.importorskip("transformers", reason="the tokenizer is built with transformers (the 'models' extra)")
    from homiebot.planner.tiny_vlm import build_tokenizer

    tokenizer = build_tokenizer("llava")
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=len(tokenizer), stop_token_ids=[eos])
    return xgr.GrammarCompiler(info, max_threads=1)


def _can_stop(compiler, constraint: AnswerConstraint, text: str) -> bool:
    """True when ``text`` is a complete answer: the matcher accepts it and then accepts the stop token."""
    import xgrammar as xgr

    matcher = xgr.GrammarMatcher(compiler.compile_grammar(constraint.grammar()))
    return matcher.accept_string(text) and matcher.accept_token(matcher.stop_token_ids[0])


@pytest.mark.models
@pytest.mark.parametrize(
    "subtask, model",
    [
        (Subtask("Go to", "fridge"), "NoMaD"),
        (Subtask("Pick", "apple"), "RT-1-X"),
        (Subtask("Put", "apple", "kitchen table"), "RT-1-X"),
        (Subtask("Open", 'the "blue" cup'), "octo"),
        (Subtask("End"), "PixNav"),
    ],
)
def test_valid_answers_are_accepted_and_parse_without_f1(compiler, subtask: Subtask, model: str) -> None:
    constraint = _constraint()
    text = format_output("The fridge is closed, so I open it first; then I pick the apple.", subtask, model)
    assert _can_stop(compiler, constraint, text)
    assert f1_violation(text) is None
    assert parse_output(text).subtask == subtask


@pytest.mark.models
@pytest.mark.parametrize(
    "text, why",
    [
        ("Analysis: ok\nSubtask: [Fly, fridge]\nModel: NoMaD", "action not in the list"),
        ("Analysis: ok\nSubtask: [Go to, fridge]\nModel: GPT", "model not in the list"),
        ("Analysis: ok\nSubtask: [Go to, garage]\nModel: NoMaD", "target not grounded"),
        ("Analysis: ok\nSubtask: [Put, apple]\nModel: RT-1-X", "Put without a place"),
        ("Analysis: ok\nSubtask: [Pick]\nModel: RT-1-X", "missing target"),
        ("Analysis: ok\nSubtask: [End, fridge]\nModel: NoMaD", "End takes no target"),
        ("Analysis: see Subtask: [Fly, x]\nSubtask: [Go to, fridge]\nModel: NoMaD", "'[' in the analysis"),
        ("Analysis:  \nSubtask: [Go to, fridge]\nModel: NoMaD", "blank analysis"),
        ("Analysis: ok\nSubtask: [Go to, fridge]", "no Model line"),
        ("Subtask: [Go to, fridge]\nModel: NoMaD", "no Analysis line"),
        ("Analysis: ok\nSubtask: [go to, fridge]\nModel: NoMaD", "action not spelled as listed"),
    ],
)
def test_invalid_answers_are_refused(compiler, text: str, why: str) -> None:
    assert not _can_stop(compiler, _constraint(), text), why


@pytest.mark.models
def test_analysis_longer_than_its_cap_is_refused(compiler) -> None:
    constraint = _constraint(max_new_tokens=120)
    cap = constraint.analysis_max_chars
    fits = format_output("a" * cap, Subtask("Go to", "fridge"), "NoMaD")
    too_long = format_output("a" * (cap + 1), Subtask("Go to", "fridge"), "NoMaD")
    assert _can_stop(compiler, constraint, fits)
    assert not _can_stop(compiler, constraint, too_long)
    assert len(fits.encode()) <= 120


@pytest.mark.models
def test_free_form_target_accepts_names_but_not_separators(compiler) -> None:
    constraint = _constraint(targets=())
    assert _can_stop(compiler, constraint, "Analysis: go\nSubtask: [Go to, living room]\nModel: NoMaD")
    assert not _can_stop(compiler, constraint, "Analysis: go\nSubtask: [Go to, a, b]\nModel: NoMaD")
    assert not _can_stop(compiler, constraint, "Analysis: go\nSubtask: [Go to,  ]\nModel: NoMaD")


# ------------------------------------------------------------------------------ F1 mirror vs executor


class _ReachedTheSimulator(Exception):
    """Raised by the stand-in simulator: the executor got past every F1 check."""


class _NoSimulator:
    def state(self):
        raise _ReachedTheSimulator


@pytest.mark.parametrize(
    "text",
    [
        "Analysis: a\nSubtask: [Go to, fridge]\nModel: NoMaD",
        "Analysis: a\nSubtask: [go  to, fridge]\nModel: nomad",
        "Analysis: a\nSubtask: [Fly, fridge]\nModel: NoMaD",
        "Analysis: a\nSubtask: [Pick, apple]\nModel: GPT-4o",
        "Analysis: a\nSubtask: [Pick]\nModel: RT-1-X",
        "Analysis: a\nSubtask: [Put, apple]\nModel: RT-1-X",
        "Analysis: a\nSubtask: [Put, apple, fridge]\nModel: RT-1-X",
        "Analysis: a\nSubtask: [End]\nModel: anything",
        "Analysis: a\nSubtask: Go to, fridge\nModel: NoMaD",
        "Analysis: a\nSubtask: []\nModel: NoMaD",
        "no template at all",
    ],
)
def test_f1_violation_agrees_with_the_executor(text: str) -> None:
    from homiebot.executor.executor import Executor

    parsed = parse_output(text)
    executor = Executor(sim=_NoSimulator())  # type: ignore[arg-type]
    if parsed.subtask is None:
        executor_f1 = True  # the session answers unparseable output with F1 before the executor
    else:
        try:
            feedback = executor.execute(parsed.subtask, parsed.model, ())
            executor_f1 = feedback.code is ErrorCode.F1
        except _ReachedTheSimulator:
            executor_f1 = False
    assert (f1_violation(text) is not None) == executor_f1


# ------------------------------------------------------------------------------ the model follows the action


def test_each_action_names_only_the_models_of_table_e2() -> None:
    from homiebot.executor.executor import DEFAULT_MODEL_ACTIONS
    from homiebot.types import Action

    constraint = _constraint()
    assert constraint.models_for("Go to") == ("NoMaD", "PixNav")
    assert constraint.models_for("Pick") == constraint.models_for("Put") == ("RT-1-X",)
    assert constraint.models_for("Open") == constraint.models_for("Close") == ("octo",)
    assert constraint.models_for("End") == EMMOE_MODELS  # the executor ignores End's model
    for action in EMMOE_ACTIONS[:-1]:
        for model in constraint.models_for(action):
            assert Action.parse(action) in DEFAULT_MODEL_ACTIONS[model]
    grammar = constraint.grammar()
    assert '("Pick" ", " target) "]\\nModel: " models2' in grammar and 'models2 ::= "RT-1-X"\n' in grammar


def test_pairing_keeps_unknown_models_and_unserved_actions_open() -> None:
    constraint = AnswerConstraint.build(("Go to", "Pick", "Dance"), ("NoMaD", "MyArm"), ("fridge",), max_new_tokens=300)
    assert constraint.models_for("Go to") == ("NoMaD", "MyArm")  # MyArm is not in table E2: allowed anywhere
    assert constraint.models_for("Pick") == ("MyArm",)
    assert constraint.models_for("Dance") == ("NoMaD", "MyArm")  # not an EMMOE action: every model
    only_nav = AnswerConstraint.build(("Go to", "Pick"), ("NoMaD",), ("fridge",), max_new_tokens=300)
    assert only_nav.models_for("Pick") == ("NoMaD",)  # no listed model grasps: the list stays whole
    paper = _constraint(pair_models=False)
    assert paper.action_models == {} and 'model ::= "NoMaD" | "PixNav" | "octo" | "RT-1-X"' in paper.grammar()


@pytest.mark.models
@pytest.mark.parametrize(
    "text, paired, paper",
    [
        ("Analysis: a\nSubtask: [Pick, apple]\nModel: NoMaD", False, True),
        ("Analysis: a\nSubtask: [Pick, apple]\nModel: RT-1-X", True, True),
        ("Analysis: a\nSubtask: [Go to, fridge]\nModel: RT-1-X", False, True),
        ("Analysis: a\nSubtask: [Go to, fridge]\nModel: PixNav", True, True),
        ("Analysis: a\nSubtask: [Open, fridge]\nModel: octo", True, True),
        ("Analysis: a\nSubtask: [End]\nModel: RT-1-X", True, True),
    ],
)
def test_paired_grammar_refuses_a_model_that_does_not_serve_the_action(compiler, text, paired, paper) -> None:
    assert _can_stop(compiler, _constraint(), text) is paired
    assert _can_stop(compiler, _constraint(pair_models=False), text) is paper
    assert (f1_violation(text, strict_models=True) is None) is paired


@pytest.mark.parametrize(
    "text",
    [
        "Analysis: a\nSubtask: [Pick, apple]\nModel: NoMaD",
        "Analysis: a\nSubtask: [Pick, apple]\nModel: rt-1-x",
        "Analysis: a\nSubtask: [Open, fridge]\nModel: RT-1-X",
        "Analysis: a\nSubtask: [End]\nModel: NoMaD",
    ],
)
def test_strict_f1_violation_agrees_with_the_strict_executor(text: str) -> None:
    from homiebot.executor.executor import Executor, ExecutorConfig

    parsed = parse_output(text)
    assert parsed.subtask is not None
    executor = Executor(sim=_NoSimulator(), config=ExecutorConfig(strict_models=True))  # type: ignore[arg-type]
    try:
        executor_f1 = executor.execute(parsed.subtask, parsed.model, ()).code is ErrorCode.F1
    except _ReachedTheSimulator:
        executor_f1 = False
    assert (f1_violation(text, strict_models=True) is not None) == executor_f1
