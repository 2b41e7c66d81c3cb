"""Grammar-constrained decoding of the EMMOE answer: with it on, an F1 error cannot happen.

The answer is forced into the trained format (appendix F.1)::

    Analysis: <free text on one line>
    Subtask: [<action from the list>, <grounded target>(, <grounded place>)]
    Model: <model from the list>

Library choice: **xgrammar** (kept by the MLC/vLLM/SGLang teams; the default structured-output engine of
vLLM and SGLang). Why it and not the others:

* it compiles a per-call EBNF grammar in milliseconds (the target list changes every round, as in
  PARTNR's per-call grammar over observed entities) and fills a token mask in microseconds per step;
* it gives one matcher per batch row, so one padded batch can carry a different grammar per episode;
* the same EBNF text is what vLLM (``structured_outputs={"grammar": ...}``, older ``guided_grammar``) and
  llama.cpp's server (``grammar``, GBNF) accept, so the OpenAI-compatible backend sends the very grammar
  the local backend applies;
* it installs here with the pinned torch (2.13.0 when chosen, 2.11.0 now) and recent transformers (checked: 0.2.8).
  outlines 1.x installs too but pulls a larger dependency tree and compiles regexes into an FSM per
  vocabulary, which is slow to rebuild per call; lm-format-enforcer is pure Python and its per-token
  character-level walk is slower on 150k-token vocabularies.

Decisions (tested in ``tests/planner/test_constrained.py``):

* **Arity follows the action**: ``[End]`` takes nothing, ``Put`` takes an object and a place, every other
  known action (Go to, Pick, Open, Close) exactly one target. The executor answers a missing target or
  place with F1, so the grammar must not allow it. An action that is not one of EMMOE's takes one or two.
* **Targets** are the names perception grounded (``PlanRequest.grounded_targets``; for a text-only model,
  those of the world description it is given: ``homiebot.planner.text_planning.TextTranscript.targets``).
  Names that contain ``,``, ``[``, ``]`` or a line break cannot be written inside ``[...]`` without changing how the
  Subtask line splits, so they are dropped with a warning. When no usable name is left, the target is
  constrained in form only (``[A-Za-z0-9_]`` followed by letters, digits, spaces, ``_'./-``, at most
  48 characters): F1 is still impossible; F2 (unknown target) is then possible.
* **The Model line is always present** and names a listed model, also after ``[End]`` (the format of
  appendix D has it on every answer; the executor ignores it for End).
* **The model follows the action** (``pair_models``, on by default): after ``Go to`` only a model that
  navigates, after ``Pick``/``Put`` one that grasps, after ``Open``/``Close`` one that opens: EMMOE's
  table E2 (NoMaD and PixNav go to, octo opens and closes, RT-1-X picks and puts; M3 and the oracle do
  everything), which the system prompt also states in words. Why on by default: under the paper's check
  (list membership) the executor hands a mismatched model's subtask to a model that serves it anyway, so
  pairing changes no outcome there; under ``--strict-models`` a mismatch is F1, and a small model makes it
  in most rounds (SmolLM2-135M answers NoMaD for every Pick and Put), so without pairing "0 F1 by
  construction" would not hold. A listed model the table does not know may follow any action; an action no
  listed model serves keeps every listed model; ``End`` takes any. ``pair_models=False`` gives the paper's
  membership-only grammar.
* **Analysis** is one line of printable ASCII without ``[`` (so that appendix D's pattern cannot mistake
  a ``Subtask: [`` inside the analysis for the Subtask line), starting with a non-space character.
  ASCII also bounds the token count: every token of a byte-level vocabulary covers at least one byte, so
  an answer of N bytes needs at most N tokens. The analysis length is capped so that the longest
  complete answer fits in ``max_new_tokens`` (:func:`analysis_budget`): generation cannot be cut before
  the Model line, which would be an F1 error.
* **The subtask-only format** (``answer_format`` ``subtask``; :class:`~homiebot.config.AnswerFormat`): the
  grammar starts at ``Subtask: [`` and has no analysis, the answer of a model trained on action-only samples
  (PARTNR appendix A.10; ``homie data build sft --thoughtless``), about 12 tokens against about 44. After
  ``[End]`` it also allows ``None``, the Model that those samples give End (the executor reads no model for
  End). ``max_new_tokens`` must hold its longest answer.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from homiebot.config import AnswerFormat
from homiebot.planner.prompt import parse_output
from homiebot.types import EMMOE_ACTIONS, EMMOE_MODELS, Action, casefold_words

log = logging.getLogger(__name__)

#: Characters that would change how the Subtask line is split or matched.
_FORBIDDEN_IN_NAMES: frozenset[str] = frozenset(",[]\n\r")
#: The longest free-form target (when perception grounded nothing).
FREE_TARGET_MAX_CHARS = 48
#: Default cap of the analysis, in characters (the paper's analyses are a few sentences).
DEFAULT_ANALYSIS_MAX_CHARS = 600

_HEAD = "Analysis: "
_SUBTASK_OPEN = "\nSubtask: ["
_SUBTASK_CLOSE = "]\nModel: "
#: The subtask-only answer's first line starts here.
_SUBTASK_HEAD = "Subtask: ["
#: The Model that the subtask-only training samples give End (homiebot.training.emmoe.Step.decision).
END_MODEL = "None"


class ConstraintError(ValueError):
    """The constraint cannot be built (no actions, no models, or no room for an answer in the token budget)."""


@dataclass(frozen=True)
class AnswerConstraint:
    """What a constrained answer may contain; :meth:`grammar` renders it as EBNF (xgrammar / GBNF dialect)."""

    actions: tuple[str, ...]
    models: tuple[str, ...]
    targets: tuple[str, ...]  # empty: constrain the target's form only
    analysis_max_chars: int
    #: The models each action may name (module docstring, "The model follows the action"); empty: any model.
    action_models: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    answer_format: AnswerFormat = AnswerFormat.ANALYSIS

    @classmethod
    def build(
        cls,
        actions: Sequence[str] = (),
        models: Sequence[str] = (),
        targets: Iterable[str] = (),
        *,
        max_new_tokens: int,
        analysis_max_chars: int = DEFAULT_ANALYSIS_MAX_CHARS,
        pair_models: bool = True,
        model_actions: Mapping[str, Iterable[Action]] | None = None,
        answer_format: AnswerFormat = AnswerFormat.ANALYSIS,
    ) -> AnswerConstraint:
        """The constraint for one request; empty ``actions`` / ``models`` mean EMMOE's lists. ``model_actions``
        (which actions each model serves) defaults to EMMOE's table E2 as the executor holds it."""
        action_list = _unique(a for a in (actions or EMMOE_ACTIONS))
        model_list = _unique(m for m in (models or EMMOE_MODELS))
        for kind, names in (("action", action_list), ("model", model_list)):
            bad = [n for n in names if not n.strip() or set(n) & _FORBIDDEN_IN_NAMES]
            if bad:
                raise ConstraintError(f"{kind} names must be non-empty and free of ',[]' and line breaks: {bad}")
        usable: list[str] = []
        dropped: list[str] = []
        for name in _unique(t.strip() for t in targets):
            (dropped if not name or set(name) & _FORBIDDEN_IN_NAMES else usable).append(name)
        if dropped:
            log.warning(
                "grounded names left out of the grammar (they contain ',', '[', ']' or a line break): %s", dropped
            )
        pairs = _action_models(action_list, model_list, model_actions) if pair_models else {}
        if answer_format is AnswerFormat.SUBTASK:
            subtask_only = cls(tuple(action_list), tuple(model_list), tuple(usable), 0, pairs, answer_format)
            if subtask_only.fixed_bytes() > max_new_tokens:
                raise ConstraintError(
                    f"max_new_tokens={max_new_tokens} leaves no room for a constrained answer: the Subtask and "
                    f"Model lines can take {subtask_only.fixed_bytes()} tokens; raise max_new_tokens"
                )
            return subtask_only
        draft = cls(tuple(action_list), tuple(model_list), tuple(usable), analysis_max_chars=1)
        budget = analysis_budget(draft, max_new_tokens)
        return cls(tuple(action_list), tuple(model_list), tuple(usable), min(analysis_max_chars, budget), pairs)

    def models_for(self, action: str) -> tuple[str, ...]:
        """The models the grammar lets an answer name after ``action``."""
        if self.answer_format is AnswerFormat.SUBTASK and Action.parse(action) is Action.END:
            return (END_MODEL, *(m for m in self.models if m != END_MODEL))
        return self.action_models.get(action, self.models)

    # -------------------------------------------------------------------------------- sizes

    def longest_subtask_bytes(self) -> int:
        target = max((_utf8_len(t) for t in self.targets), default=FREE_TARGET_MAX_CHARS)
        longest = 0
        for action in self.actions:
            arity = subtask_arities(action)
            body = _utf8_len(action) + max(arity) * (2 + target)  # ", " before each target
            longest = max(longest, body)
        return longest

    def fixed_bytes(self) -> int:
        """Bytes of the longest answer besides the analysis."""
        if self.answer_format is AnswerFormat.SUBTASK:
            return (
                _utf8_len(_SUBTASK_HEAD)
                + self.longest_subtask_bytes()
                + _utf8_len(_SUBTASK_CLOSE)
                + max(_utf8_len(m) for m in (*self.models, END_MODEL))
            )
        return (
            _utf8_len(_HEAD)
            + _utf8_len(_SUBTASK_OPEN)
            + self.longest_subtask_bytes()
            + _utf8_len(_SUBTASK_CLOSE)
            + max(_utf8_len(m) for m in self.models)
        )

    # -------------------------------------------------------------------------------- grammar

    def grammar(self) -> str:
        """EBNF accepted by xgrammar, vLLM (``structured_outputs.grammar``) and llama.cpp (``grammar``)."""
        subtask_rules = []
        for action in self.actions:
            arity = subtask_arities(action)
            options = []
            for n in arity:
                options.append(" ".join([_literal(action)] + ['", " target'] * n))
            subtask_rules.append(" | ".join(options))
        if self.answer_format is AnswerFormat.SUBTASK:
            return self._subtask_only_grammar(subtask_rules)
        if self.action_models:
            return self._paired_grammar(subtask_rules)
        return "\n".join(
            [
                f"root ::= {_literal(_HEAD)} analysis {_literal(_SUBTASK_OPEN)} subtask {_literal(_SUBTASK_CLOSE)} model",
                f"analysis ::= {self._analysis_rule()}",
                "subtask ::= " + " | ".join(f"({r})" for r in subtask_rules),
                f"target ::= {self._target_rule()}",
                "model ::= " + " | ".join(_literal(m) for m in self.models),
            ]
        )

    def _paired_grammar(self, subtask_rules: list[str]) -> str:
        """The grammar with each action followed by its own models (one ``models_N`` rule per distinct set)."""
        sets: dict[tuple[str, ...], str] = {}
        steps = []
        for action, rule in zip(self.actions, subtask_rules, strict=True):
            allowed = self.models_for(action)
            name = sets.setdefault(allowed, f"models{len(sets) + 1}")
            steps.append(f"({rule}) {_literal(_SUBTASK_CLOSE)} {name}")
        return "\n".join(
            [
                f"root ::= {_literal(_HEAD)} analysis {_literal(_SUBTASK_OPEN)} subtask",
                f"analysis ::= {self._analysis_rule()}",
                "subtask ::= " + " | ".join(f"({s})" for s in steps),
                f"target ::= {self._target_rule()}",
                *(f"{name} ::= " + " | ".join(_literal(m) for m in allowed) for allowed, name in sets.items()),
            ]
        )

    def _subtask_only_grammar(self, subtask_rules: list[str]) -> str:
        """The subtask-only grammar: no analysis, each action followed by its own models (End by ``None`` too)."""
        sets: dict[tuple[str, ...], str] = {}
        steps = []
        for action, rule in zip(self.actions, subtask_rules, strict=True):
            name = sets.setdefault(self.models_for(action), f"models{len(sets) + 1}")
            steps.append(f"({rule}) {_literal(_SUBTASK_CLOSE)} {name}")
        return "\n".join(
            [
                f"root ::= {_literal(_SUBTASK_HEAD)} subtask",
                "subtask ::= " + " | ".join(f"({s})" for s in steps),
                f"target ::= {self._target_rule()}",
                *(f"{name} ::= " + " | ".join(_literal(m) for m in allowed) for allowed, name in sets.items()),
            ]
        )

    def _analysis_rule(self) -> str:
        # '!'..'Z' and '\\'..'~' is printable ASCII without space and '['; the tail adds the space.
        return f"[!-Z\\\\-~] [ -Z\\\\-~]{{0,{max(self.analysis_max_chars - 1, 0)}}}"

    def _target_rule(self) -> str:
        if self.targets:
            return " | ".join(_literal(t) for t in self.targets)
        return f"[A-Za-z0-9_] [A-Za-z0-9 _'./\\-]{{0,{FREE_TARGET_MAX_CHARS - 1}}}"


def analysis_budget(constraint: AnswerConstraint, max_new_tokens: int) -> int:
    """The most analysis characters that still let the longest complete answer fit in ``max_new_tokens``.

    Every character allowed by the grammar is ASCII (one byte) except in grounded names, which are
    counted in UTF-8 bytes; a token of a byte-level vocabulary covers at least one byte.
    """
    budget = max_new_tokens - constraint.fixed_bytes()
    if budget < 1:
        raise ConstraintError(
            f"max_new_tokens={max_new_tokens} leaves no room for a constrained answer: the Subtask and Model "
            f"lines alone can take {constraint.fixed_bytes()} tokens; raise max_new_tokens"
        )
    return budget


def _action_models(
    actions: Sequence[str], models: Sequence[str], model_actions: Mapping[str, Iterable[Action]] | None
) -> dict[str, tuple[str, ...]]:
    """Which listed models each action may name (module docstring); actions that keep every model are left out."""
    if model_actions is None:
        from homiebot.executor.executor import DEFAULT_MODEL_ACTIONS  # table E2, where the executor keeps it

        model_actions = DEFAULT_MODEL_ACTIONS
    served = {model.lower(): frozenset(acts) for model, acts in model_actions.items()}
    pairs: dict[str, tuple[str, ...]] = {}
    for action in actions:
        known = Action.parse(action)
        if known is None or known is Action.END:
            continue
        allowed = tuple(m for m in models if m.lower() not in served or known in served[m.lower()])
        if allowed and allowed != tuple(models):
            pairs[action] = allowed
    return pairs


def subtask_arities(action: str) -> tuple[int, ...]:
    """How many targets ``action`` takes in the grammar (module docstring, "Arity follows the action")."""
    known = Action.parse(action)
    if known is Action.END:
        return (0,)
    if known is Action.PUT:
        return (2,)
    if known is not None:
        return (1,)
    return (1, 2)


def _literal(text: str) -> str:
    """An EBNF string literal (escapes that xgrammar, GBNF and vLLM's parsers share)."""
    escaped = (
        text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    )
    return f'"{escaped}"'


def _unique(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


# --------------------------------------------------------------------------------- F1 check


def f1_violation(
    text: str,
    actions: Sequence[str] = EMMOE_ACTIONS,
    models: Sequence[str] = EMMOE_MODELS,
    *,
    strict_models: bool = False,
    model_actions: Mapping[str, Iterable[Action]] | None = None,
    answer_format: AnswerFormat = AnswerFormat.ANALYSIS,
) -> str | None:
    """Why ``text`` would be an F1 error, or None. Mirrors the F1 checks of :mod:`homiebot.executor.executor`.

    In order: unparseable (appendix D pattern, H.1 fallback), action not in the list, ``End`` (passes with no
    further check), model not in the list (case-insensitive), with ``strict_models`` a model that does not serve
    the action (``model_actions``, table E2 by default), missing target, Put without a place.
    """
    parsed = parse_output(text, answer_format)
    if parsed.subtask is None:
        return f"unparseable: {parsed.parse_error}"
    action_keys = {" ".join(a.lower().split()) for a in actions}
    key = casefold_words(parsed.subtask.action)
    action = Action.parse(parsed.subtask.action)
    if action is None or key not in action_keys:
        return f"action not in the list: {parsed.subtask.action!r}"
    if action is Action.END:
        return None
    if " ".join(parsed.model.strip().split()).lower() not in {m.lower() for m in models}:
        return f"model not in the list: {parsed.model!r}"
    if strict_models:
        if model_actions is None:
            from homiebot.executor.executor import DEFAULT_MODEL_ACTIONS

            model_actions = DEFAULT_MODEL_ACTIONS
        canonical = next(m for m in models if m.lower() == " ".join(parsed.model.strip().split()).lower())
        if action not in set(model_actions.get(canonical, ())):
            return f"{canonical} does not serve {action.value}"
    if not (parsed.subtask.target or "").strip():
        return "missing target"
    if action is Action.PUT and not (parsed.subtask.place or "").strip():
        return "Put without a place"
    return None


# ------------------------------------------------------------------------ transformers logits processor


class GrammarCompilerCache:
    """One xgrammar compiler per tokenizer, with compiled grammars cached by their text (LRU, bounded).

    Built lazily so that importing this module needs neither torch nor xgrammar.
    """

    def __init__(
        self,
        tokenizer: Any,
        vocab_size: int,
        stop_token_ids: Sequence[int],
        cache_limit_bytes: int = 64 * 2**20,
        *,
        vocabulary: Sequence[bytes] | None = None,
    ) -> None:
        """``tokenizer``: a transformers tokenizer; or None with ``vocabulary``, each token's bytes (a GGUF's
        vocabulary as llama.cpp writes it: :class:`homiebot.planner.text_lm._JumpForward`)."""
        try:
            import xgrammar as xgr
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ConstraintError(
                "constrained decoding needs xgrammar (pip install -e '.[models]'); or pass constrained=False"
            ) from exc
        self._xgr = xgr
        self.stop_token_ids = tuple(sorted({int(t) for t in stop_token_ids}))
        if vocabulary is not None:
            # RAW: the strings are the tokens' text, whatever the tokenizer's own encoding; a token that writes
            # nothing (a special one) is special to xgrammar.
            info = xgr.TokenizerInfo(
                list(vocabulary), xgr.VocabType.RAW, vocab_size=vocab_size, stop_token_ids=list(self.stop_token_ids)
            )
        else:
            info = xgr.TokenizerInfo.from_huggingface(
                tokenizer, vocab_size=vocab_size, stop_token_ids=list(self.stop_token_ids)
            )
        # The grammar changes every round (grounded targets), so the cache is bounded: a long-running server
        # would otherwise keep every compiled grammar (about 80 KB each with a 1k vocabulary, more with 150k).
        self.compiler = xgr.GrammarCompiler(
            info, max_threads=1, cache_enabled=True, cache_limit_bytes=cache_limit_bytes
        )
        self.vocab_size = vocab_size

    def compile(self, grammar: str) -> Any:
        try:
            return self.compiler.compile_grammar(grammar)
        except RuntimeError as exc:
            raise ConstraintError(f"the answer grammar does not compile: {exc}") from exc


class GrammarLogitsProcessor:
    """A transformers logits processor with one xgrammar matcher per batch row.

    Written here rather than using ``xgrammar.contrib.hf.LogitsProcessor`` because rows of one batch carry
    different grammars (each episode's grounded targets) and rows that finished early must stop feeding
    their padding to the matcher. One instance serves one ``generate`` call.
    """

    def __init__(self, compiled_grammars: Sequence[Any | None]) -> None:
        import xgrammar as xgr

        present = [g for g in compiled_grammars if g is not None]
        if not present:
            raise ValueError("GrammarLogitsProcessor needs at least one grammar")
        self._xgr = xgr
        # ``None`` rows are unconstrained (a server batch may mix constrained and free requests).
        self.matchers = [xgr.GrammarMatcher(g) if g is not None else None for g in compiled_grammars]
        vocab_size = present[0].tokenizer_info.vocab_size
        self.bitmask = xgr.allocate_token_bitmask(len(self.matchers), vocab_size)
        self._started = False

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if input_ids.shape[0] != len(self.matchers):
            raise RuntimeError(f"batch of {input_ids.shape[0]} rows for {len(self.matchers)} grammars")
        if self._started:
            last = input_ids[:, -1].tolist()
            for row, matcher in enumerate(self.matchers):
                if matcher is not None and not matcher.is_terminated() and not matcher.accept_token(int(last[row])):
                    raise RuntimeError(f"row {row}: the sampled token {last[row]} breaks the grammar")
        self._started = True
        self._xgr.reset_token_bitmask(self.bitmask)  # every token allowed, then each constrained row filled
        for row, matcher in enumerate(self.matchers):
            if matcher is not None and not matcher.is_terminated():
                matcher.fill_next_token_bitmask(self.bitmask, row)
        # xgrammar applies masks on CPU and CUDA tensors; the mask allows only the stop tokens once a row's
        # grammar is complete, and generate() replaces a finished row's tokens with padding anyway.
        if scores.device.type not in ("cpu", "cuda"):
            masked = scores.to("cpu")
            self._xgr.apply_token_bitmask_inplace(masked, self.bitmask)
            return masked.to(scores.device)
        self._xgr.apply_token_bitmask_inplace(scores, self.bitmask.to(scores.device, non_blocking=True))
        return scores
