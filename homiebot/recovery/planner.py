"""Conditional multi-stage failure recovery around any planner (CMFR: Farag et al., "Conditional Multi-Stage
Failure Recovery for Embodied Agents", REALM@ACL 2025; docs/recovery.md).

:class:`RecoveryPlanner` is a :class:`~homiebot.planner.base.Planner` that wraps another one (the *base*
planner: SmolLM2, an OpenAI-compatible model, ...), so the episode loop runs it unchanged. Each round it
looks at how the subtask it answered last round went (the feedback's EMMOE error code) and either answers
from its own queue of recovery steps or asks the base planner.

Control flow (CMFR section 4.5; the table of our specification, section 1.3(e)):

* a **base subtask fails** -> stage 1 (*importance*: may the robot drop it?). Not important -> drop it: the
  base planner is asked again (it sees the failure in its feedback). Important -> stage 2 (*preconditions*):
  missing ones -> run them, then try the failed subtask once more; none -> stage 3 (*workaround*): run its
  substitute steps. Stage 3 gets the same inputs as stage 2 (task, steps so far, the failed subtask, stage
  1's reason, the scene).
* the **retried subtask fails again** after stage 2's steps -> stage 3 once, told which preconditions were
  tried; if that fails too, it is dropped (decision D2: each failure passes through the chain once).
* a **recovery step fails** -> it is dropped and the queue goes on; no nested recovery (decision D3).
* the **base planner answers [End]** -> stage 4 (*post execution*): the steps still needed, run once; then
  [End] ("one final opportunity"). Trigger: always at the plan's end (decision D4's ``"always"``: the wrapper
  never reads the goal; an empty answer means done).
* **object search**: before a base subtask whose target the robot does not know (not grounded by
  perception / not in the state), and after an F2 failure, the search prompt turns the places the task
  text mentions (extracted once per episode) into steps that make the object visible; no place, no search
  (decision D5).

Switches: ``stages`` (any subset of 1-4; a disabled stage 1 counts every failure as important, a disabled
stage 2 goes straight to stage 3, a disabled stage 3 drops what stage 2 cannot fix), ``search``, and
``mode``: ``cmfr``, ``cot`` (the chain-of-thought baseline of section 5: one prompt with the same
information, answering skip / insert / replace) or ``none`` (the base planner alone, statistics only).

Costs: every LLM call happens inside one ``plan()`` call and costs no round; every step the wrapper answers
costs one round, like any subtask. At most ``max_calls_per_round`` calls per round: a stage that would
exceed it takes its fallback (stage 1: drop; stages 2-4 and search: no steps), counted as a call-limit hit.
An unreadable stage answer takes the same fallback (decision D8), counted as malformed.

What it reads: the task text, the steps it has seen run and their feedback (code and message), and a scene
representation (:mod:`homiebot.recovery.scene`) from the world graph's description (perception on) or the
request's world state (perception off). It never reads ``request.goal``: it declares
``reads_state = True`` (state without goal) and is itself unprivileged unless its base planner is.
"""

from __future__ import annotations

import logging
import re
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from homiebot.config.planners import PlannerConfig, RecoveryPlannerConfig
from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.messages import ChatMessage
from homiebot.planner.prompt import parse_output
from homiebot.recovery import parsing
from homiebot.recovery.llm import AnswerMemory, EngineLLM, OpenAILLM, RecoveryLLM
from homiebot.recovery.prompts import PromptSet
from homiebot.recovery.rules import rule_answer
from homiebot.recovery.scene import describe_from_text, describe_state, mentioned_names
from homiebot.recovery.stats import RecoveryStats, write_stats
from homiebot.types import Action, EntityKind, ErrorCode, Subtask, WorldState

log = logging.getLogger(__name__)

Mode = Literal["cmfr", "cot", "none"]
MODES: tuple[str, ...] = ("cmfr", "cot", "none")
ALL_STAGES: frozenset[int] = frozenset({1, 2, 3, 4})

# EMMOE table E2's models by action (the expert's map): navigation to objects PixNav, to rooms and furniture
# NoMaD, articulation octo, grasping RT-1-X.
_MODEL_BY_ACTION = {Action.PICK: "RT-1-X", Action.PUT: "RT-1-X", Action.OPEN: "octo", Action.CLOSE: "octo"}

# The executor's feedback texts (homiebot.executor.messages, EMMOE appendix E.1) -> code, for requests that
# carry only the message (a request built before PlanRequest had its code field).
_MESSAGE_CODES: tuple[tuple[re.Pattern[str], ErrorCode], ...] = (
    (re.compile(r"^None$"), ErrorCode.OK),
    (re.compile(r"the hand is full$"), ErrorCode.L1),
    (re.compile(r"the hand is empty$"), ErrorCode.L2),
    (re.compile(r"is closed, you should open it first$"), ErrorCode.L3),
    (re.compile(r"^Can not .*! Please choose another object$"), ErrorCode.L4),
    (re.compile(r"the target is far away$"), ErrorCode.D1),
    (re.compile(r"the target is too close$"), ErrorCode.D2),
    (re.compile(r"does not exist! Please choose another object$"), ErrorCode.F2),
    (re.compile(r"too difficult to perform$"), ErrorCode.E1),
    (re.compile(r"and the object is missing$"), ErrorCode.E2),
)


def feedback_code(request: PlanRequest) -> ErrorCode:
    """The error code of the last round's feedback: the request's ``last_error`` (the code beside the message),
    else read from the message for a request that carries none (a replayed or hand-built one: every message
    the executor writes is one of appendix E.1's fixed texts; any other is F1)."""
    code = request.last_error
    if isinstance(code, ErrorCode):
        return code
    message = (request.feedback or "None").strip()
    for pattern, mapped in _MESSAGE_CODES:
        if pattern.search(message):
            return mapped
    return ErrorCode.F1


@dataclass(frozen=True)
class RecoveryConfig:
    """Which recovery runs and its limits."""

    mode: Mode = "cmfr"
    stages: frozenset[int] = ALL_STAGES
    search: bool = True
    max_calls_per_round: int = 4
    max_tokens: int = 120
    reason_chars: int = parsing.REASON_MAX_CHARS
    history_steps: int = 8  # steps-so-far shown to a stage (the latest ones)
    max_steps: int = parsing.MAX_STEPS  # steps one stage answer may add (each costs a round)
    constrained: bool = True  # send each stage's grammar to backends that constrain decoding

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"recovery mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        bad = sorted(set(self.stages) - ALL_STAGES)
        if bad:
            raise ValueError(f"recovery stages are 1, 2, 3 and 4; got {bad}")
        if self.max_calls_per_round < 1:
            raise ValueError(f"max_calls_per_round must be >= 1, got {self.max_calls_per_round}")
        if self.max_tokens < 32:
            raise ValueError(f"max_tokens must be >= 32, got {self.max_tokens}")
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")


def parse_stages(text: str | Iterable[int]) -> frozenset[int]:
    """``"1,2,3,4"`` (or a list of ints) -> the stage set; an empty text is no stage."""
    if isinstance(text, str):
        items = [t.strip() for t in text.split(",") if t.strip()]
        try:
            stages = frozenset(int(t) for t in items)
        except ValueError:
            raise ValueError(f"recovery stages must be numbers 1-4 separated by commas, got {text!r}") from None
    else:
        stages = frozenset(int(t) for t in text)
    bad = sorted(stages - ALL_STAGES)
    if bad:
        raise ValueError(f"recovery stages are 1, 2, 3 and 4; got {bad}")
    return stages


@dataclass
class _Chain:
    """One failed base subtask on its way through the stages."""

    subtask: Subtask
    feedback: str
    code: ErrorCode
    kind: str = "stage2"  # what the queued retry follows: stage2, search or cot
    reason: str = ""
    preconditions: list[str] = field(default_factory=list)
    stage3_done: bool = False


@dataclass
class _Step:
    subtask: Subtask
    origin: str  # base, precondition, retry, workaround, post, search, cot
    reason: str = ""
    chain: _Chain | None = None
    model: str | None = None  # the base planner's own model choice (base steps)
    raw: str | None = None  # the base planner's answer, passed through unchanged


class RecoveryPlanner(Planner):
    """Wraps ``base`` (a planner or a registered planner's name with ``base_options``) with recovery."""

    name = "recovery"
    privileged = False
    #: Reads the world state (never the goal) for its scene representation (docs/recovery.md).
    reads_state = True

    @classmethod
    def from_config(cls, config: PlannerConfig, **objects: object) -> RecoveryPlanner:
        """The wrapper a run configuration describes: its base planner is built from the base's own
        configuration (:class:`~homiebot.config.planners.RecoveryPlannerConfig`)."""
        from homiebot.planner.registry import build_planner

        if not isinstance(config, RecoveryPlannerConfig):
            raise TypeError(f"the recovery planner is configured by RecoveryPlannerConfig, not {type(config).__name__}")
        options = config.options()
        del options["base"]
        return cls(build_planner(config.base), **options, **objects)  # type: ignore[arg-type]  # fields mirror keywords

    def __init__(
        self,
        base: str | Planner,
        base_options: Mapping[str, Any] | None = None,
        *,
        mode: Mode = "cmfr",
        stages: str | Sequence[int] = (1, 2, 3, 4),
        search: bool = True,
        max_calls_per_round: int = 4,
        max_tokens: int = 120,
        max_steps: int = parsing.MAX_STEPS,
        constrained: bool = True,
        own_cache: bool = True,
        llm: RecoveryLLM | None = None,
        prompts: str | None = None,
        stats_dir: str | None = None,
        rules: bool = False,
        memory: bool = True,
    ) -> None:
        self.config = RecoveryConfig(
            mode=mode, stages=parse_stages(stages), search=bool(search) and mode != "none",
            max_calls_per_round=max_calls_per_round, max_tokens=max_tokens, constrained=constrained,
            max_steps=max_steps,
        )
        self.prompts = PromptSet.from_file(prompts) if prompts else PromptSet()
        self.inner: Planner = self._base_by_name(base, base_options) if isinstance(base, str) else base
        if isinstance(self.inner, RecoveryPlanner):
            raise ValueError("the base planner of a recovery wrapper cannot itself be a recovery wrapper")
        self.name = self.inner.name if mode == "none" else f"{mode}+{self.inner.name}"
        self.privileged = self.inner.privileged
        self.accepts_free_text = self.inner.accepts_free_text
        # The base's answers pass through unchanged when they do not parse; the wrapper's own carry an Analysis,
        # which the subtask-only reading accepts too.
        self.answer_format = self.inner.answer_format
        self.needs_views = self.inner.needs_views
        # rules: the stages are answered by CMFR appendix J's preconditions on EMMOE's codes, not by a model
        # (homiebot.recovery.rules; a diagnostic control of the ablation).
        self.rules = bool(rules) and mode != "none"
        self.llm: RecoveryLLM | None = (
            llm if llm is not None or mode == "none" or self.rules else self._llm_of(self.inner, own_cache)
        )
        self.stats_dir = Path(stats_dir) if stats_dir else None
        # A repeated stage question is answered from this episode's memory when the model is deterministic
        # (AnswerMemory); memory=False asks the model every time (the cost comparison of docs/recovery.md).
        self.memory: AnswerMemory | None = (
            AnswerMemory() if memory and bool(getattr(self.llm, "deterministic", False)) else None
        )
        self.stats = RecoveryStats()
        self._reset_episode("", 0)

    @staticmethod
    def _base_by_name(name: str, options: Mapping[str, Any] | None) -> Planner:
        """The base planner named with its options (``RecoveryPlanner("hf", {"model": "smollm2"})``): its
        configuration, checked as a command line's (one-line refusals), then built (the base of a configured
        wrapper comes from :meth:`from_config` instead)."""
        from homiebot.planner.registry import build_planner, configure_planner

        return build_planner(configure_planner(name, dict(options or {})))

    @staticmethod
    def _llm_of(inner: Planner, own_cache: bool = True) -> RecoveryLLM:
        """The base planner's own model: its engine (local) or its server (OpenAI-compatible).

        ``own_cache``: a CPU text engine (:class:`~homiebot.planner.text_lm.TextLanguageModel`) keeps the
        key/value cache of one sequence; stage calls on it would evict the base planner's conversation, which
        then has to be read again from its start after every recovery. So recovery gets a second instance of
        the same model file with its own cache (SmolLM2-135M: about 100 MB more)."""
        engine = getattr(inner, "engine", None)
        if engine is not None:
            from homiebot.planner.text_lm import TextLanguageModel

            if own_cache and isinstance(engine, TextLanguageModel):
                return EngineLLM(TextLanguageModel(engine.config), owned=True)
            return EngineLLM(engine)
        base_url = getattr(inner, "base_url", None)
        resolve = getattr(inner, "resolve_model", None)
        if base_url is not None and callable(resolve):
            return OpenAILLM(str(base_url), str(resolve()), api_key_env=str(getattr(inner, "api_key_env", "OPENAI_API_KEY")))
        raise ValueError(
            f"planner {inner.name!r} has no language model that recovery could ask; use a model planner "
            "(hf, openai) as the base, or --recovery none"
        )

    # ------------------------------------------------------------------------------------ episode state

    def _reset_episode(self, task: str, seed: int) -> None:
        self.task = task
        self.queue: deque[_Step] = deque()
        self.pending: _Step | None = None  # what the wrapper answered last round
        self.done_steps: list[str] = []
        self.base_ended = False
        self.stage4_done = False
        self.searched: set[str] = set()
        self.refused: list[Subtask] = []  # steps refused for a lasting reason (L4, F2) in this episode
        self.locations: list[tuple[str, str, str]] | None = None
        self.calls_this_round = 0
        memory = getattr(self, "memory", None)  # built after the first reset of __init__
        if memory is not None:
            memory.clear()
        config = self.config
        self.stats = RecoveryStats(mode=config.mode, stages=sorted(config.stages), search=config.search,
                                   instruction=task, seed=seed)

    def reset(self, task: str, seed: int = 0) -> None:
        self._reset_episode(task, seed)
        self.inner.reset(task, seed)

    def close(self) -> None:
        close = getattr(self.llm, "close", None)
        if callable(close):
            close()
        self.inner.close()

    # ------------------------------------------------------------------------------------ one round

    def plan(self, request: PlanRequest) -> str:
        if not self.task:
            self._reset_episode(request.task, 0)
        self.calls_this_round = 0
        self.stats.rounds += 1
        if self.pending is not None:
            self._outcome(self.pending, request)
            self.pending = None
        answer = self._next(request)
        if self.stats_dir is not None:
            write_stats(self.stats_dir, self.stats)
        return answer

    def _next(self, request: PlanRequest) -> str:
        if self.queue:
            return self._emit(self.queue.popleft(), request)
        if self.base_ended:
            return self._end("Recovery: the plan and its final check are done, so the task ends")
        raw = self.inner.plan(self._inner_request(request))
        output = parse_output(raw, self.inner.answer_format)
        subtask = output.subtask
        if subtask is None:
            return raw  # unparseable: the loop answers it with F1 feedback, the base planner sees it
        step = _Step(subtask, "base", model=output.model, raw=raw)
        if subtask.is_end:
            return self._at_end(step, request)
        if self.config.search and subtask.target and not self._known(subtask.target, request):
            searched = self._search(subtask.target, request)
            if searched:
                self.queue.extend(searched)
                self.queue.append(step)
                return self._emit(self.queue.popleft(), request)
        return self._emit(step, request)

    def _at_end(self, step: _Step, request: PlanRequest) -> str:
        """The base planner says the task is done: stage 4 once (cmfr with stage 4), then End."""
        self.base_ended = True
        if self.config.mode == "cmfr" and 4 in self.config.stages and not self.stage4_done:
            self.stage4_done = True
            self.stats.reached["4"] += 1
            steps = self._steps_stage("post_execution", request, None, "post")
            if steps:
                self.stats.stage4_with_steps += 1
                self.queue.extend(steps)
                return self._emit(self.queue.popleft(), request)
        return step.raw or self._end("Recovery: nothing is missing, so the task ends")

    def _end(self, reason: str) -> str:
        self.base_ended = True
        return f"Analysis: {reason}\nSubtask: [End]\nModel: NoMaD"

    def _emit(self, step: _Step, request: PlanRequest) -> str:
        self.pending = step
        if step.origin != "base":
            self.stats.recovery_subtasks += 1
        if step.raw is not None:
            return step.raw
        return (f"Analysis: {_one_line(step.reason) or 'Recovery step'}\nSubtask: {step.subtask.text()}\n"
                f"Model: {self._model_for(step.subtask, request)}")

    # ------------------------------------------------------------------------------------ outcomes

    def _outcome(self, step: _Step, request: PlanRequest) -> None:
        code = feedback_code(request)
        if step.subtask.is_end:
            return
        ok = code is ErrorCode.OK
        self.done_steps.append(f"{step.subtask.text()} " + ("done" if ok else f"failed ({code.value})"))
        chain = step.chain
        if ok:
            if step.origin == "retry" and chain is not None and chain.kind == "stage2":
                self.stats.stage2_success += 1
            return
        self.stats.count_failure(code.value)
        if code in (ErrorCode.L4, ErrorCode.F2):
            self.refused.append(step.subtask)
        if step.origin != "base":
            self.stats.recovery_failures += 1
        feedback = request.feedback
        if step.origin == "base":
            self.stats.failed_subtasks += 1
            self._recover(_Chain(step.subtask, feedback, code), request)
        elif step.origin == "retry" and chain is not None and chain.kind in ("stage2", "search"):
            # D2: the subtask failed again after its preconditions (or its search): stage 3 once, else drop it.
            chain.feedback, chain.code = feedback, code
            if self.config.mode == "cmfr" and 3 in self.config.stages and not chain.stage3_done:
                self._stage3(chain, request)
        # D3: any other failed recovery step is dropped; the queue goes on.

    def _recover(self, chain: _Chain, request: PlanRequest) -> None:
        mode, stages = self.config.mode, self.config.stages
        if mode == "none":
            return
        if chain.code is ErrorCode.F2 and self.config.search and chain.subtask.target:
            found = self._search(chain.subtask.target, request)
            if found:
                chain.kind = "search"
                self.queue.extend(found)
                self.queue.append(_Step(chain.subtask, "retry", "Recovery (search): try again now that it may be visible", chain))
                return
        if mode == "cot":
            self._cot(chain, request)
            return
        if not stages & {1, 2, 3}:
            return
        self.stats.reached["1"] += 1
        if 1 in stages:
            text = self._ask("importance", request, self._fields(request, chain))
            important = parsing.parse_bool(text, "important") if text is not None else None
            if important is None:
                if text is not None:
                    self.stats.count_malformed("importance")
                important = False  # D8: an unreadable answer drops the subtask
            chain.reason = parsing.parse_reason(text or "")
            if not important:
                self.stats.unimportant += 1
                return
        if 2 in stages:
            self.stats.reached["2"] += 1
            text = self._ask("preconditions", request, self._fields(request, chain))
            steps = self._read_steps(text, "preconditions", request, chain.subtask)
            missing = parsing.parse_bool(text, "missing") if text is not None else None
            if steps and missing is not False:
                self.stats.stage2_with_steps += 1
                self.stats.stage2_retried += 1
                reason = parsing.parse_reason(text or "")
                chain.preconditions = [s.text() for s in steps]
                self.queue.extend(_Step(s, "precondition", f"Recovery (stage 2): {reason}", chain) for s in steps)
                self.queue.append(_Step(chain.subtask, "retry", "Recovery (stage 2): try the failed subtask again", chain))
                return
        if 3 in stages:
            self._stage3(chain, request)

    def _stage3(self, chain: _Chain, request: PlanRequest) -> None:
        chain.stage3_done = True
        self.stats.reached["3"] += 1
        fields = self._fields(request, chain)
        if chain.preconditions:
            fields["tried"] = "\nAlready tried first, without success: " + ", ".join(chain.preconditions)
        text = self._ask("workaround", request, fields)
        steps = self._read_steps(text, "workaround", request, chain.subtask)
        if steps:
            self.stats.stage3_with_steps += 1
            reason = parsing.parse_reason(text or "")
            self.queue.extend(_Step(s, "workaround", f"Recovery (stage 3): {reason}", chain) for s in steps)

    def _cot(self, chain: _Chain, request: PlanRequest) -> None:
        text = self._ask("cot", request, self._fields(request, chain))
        choice = parsing.parse_choice(text) if text is not None else None
        steps = self._read_steps(text, "cot", request, chain.subtask)
        if choice is None:
            choice = "skip"
        if choice in ("insert", "replace") and not steps:
            choice = "skip"
        self.stats.cot[choice] += 1
        reason = parsing.parse_reason(text or "")
        if choice == "insert":
            chain.kind = "cot"
            self.queue.extend(_Step(s, "cot", f"Recovery (reasoning): {reason}", chain) for s in steps)
            self.queue.append(_Step(chain.subtask, "retry", "Recovery (reasoning): try the failed subtask again", chain))
        elif choice == "replace":
            self.queue.extend(_Step(s, "cot", f"Recovery (reasoning): {reason}", chain) for s in steps)

    def _search(self, target: str, request: PlanRequest) -> list[_Step]:
        """Steps that should make ``target`` visible, from the places the task text mentions (once per object)."""
        key = target.strip().lower()
        if key in self.searched:
            return []
        self.searched.add(key)
        if self.locations is None:
            text = self._ask("locations", request, {"task": self.task or request.task})
            self.locations = parsing.parse_locations(text) if text is not None else []
        if not self.locations:
            return []  # D5: no place in the task text, no search
        self.stats.search_calls += 1
        places = "; ".join(f"{o} {r} {p}" for o, r, p in self.locations)
        text = self._ask("search", request, {"object": target, "locations": places,
                                             "scene": self._scene(request, None), "forms": self._forms(request)})
        steps = self._read_steps(text, "search", request)
        self.stats.search_steps += len(steps)
        return [_Step(s, "search", f"Recovery (search): look for {target} where the task says it is") for s in steps]

    def _steps_stage(self, kind: str, request: PlanRequest, chain: _Chain | None, origin: str) -> list[_Step]:
        text = self._ask(kind, request, self._fields(request, chain))
        steps = self._read_steps(text, kind, request)
        reason = parsing.parse_reason(text or "")
        return [_Step(s, origin, f"Recovery (stage 4): {reason}") for s in steps]

    # ------------------------------------------------------------------------------------ model calls

    def _ask(self, kind: str, request: PlanRequest, fields: dict[str, str]) -> str | None:
        """One stage call, or None when this round's call limit is reached."""
        if self.llm is None and not self.rules:
            return None
        if self.calls_this_round >= self.config.max_calls_per_round:
            self.stats.call_limit_hits += 1
            return None
        self.calls_this_round += 1
        if self.rules or self.llm is None:
            text = rule_answer(kind, fields.get("subtask", ""), fields.get("code", ""), self._state(request))
            self.stats.calls.append({"round": request.round_index, "stage": kind, "rules": True,
                                     **{k: fields[k] for k in ("subtask", "code") if k in fields}, "answer": text})
            return text
        messages = [ChatMessage("system", self.prompts.render("system")),
                    ChatMessage("user", self.prompts.render(kind, **fields))]
        grammar = None
        if self.config.constrained:
            grammar = parsing.grammar(kind, self._actions(request), self._names(request), self.config.reason_chars,
                                      self.config.max_steps)
        started = time.perf_counter()
        key = AnswerMemory.key(messages, grammar, self.config.max_tokens)
        reply = self.memory.recall(key) if self.memory is not None else None
        if reply is None:
            reply = self.llm.complete(messages, grammar=grammar, max_tokens=self.config.max_tokens)
            if self.memory is not None:
                self.memory.keep(key, reply)
        self.stats.llm_seconds += time.perf_counter() - started
        self.stats.llm_calls += 1
        self.stats.prompt_tokens += reply.prompt_tokens
        self.stats.completion_tokens += reply.completion_tokens
        if reply.remembered:
            self.stats.remembered_calls += 1
            self.stats.remembered_tokens += reply.prompt_tokens + reply.completion_tokens
        self.stats.reused_tokens += reply.reused_tokens
        log.debug("recovery %s answered %r", kind, reply.text)
        call: dict[str, Any] = {"round": request.round_index, "stage": kind}
        if "subtask" in fields:
            call.update(subtask=fields["subtask"], code=fields.get("code", ""))
        elif "object" in fields:
            call["object"] = fields["object"]
        self.stats.calls.append({**call, "answer": reply.text, **({"remembered": True} if reply.remembered else {})})
        return reply.text

    def _read_steps(self, text: str | None, kind: str, request: PlanRequest, failed: Subtask | None = None) -> list[Subtask]:
        """The executable steps of a stage answer, each once. Dropped: a step equal to the failed subtask (it is
        neither a precondition of itself, stage 2 retries it anyway, nor a substitute for it; small models
        often echo it), and a step the executor already refused for a lasting reason in this episode (L4: the
        object cannot be opened or closed; F2: no such object), which would fail the same way again."""
        if text is None:
            return []
        read = parsing.parse_steps(text, self._actions(request), max_steps=16)  # the limit applies after the filters
        if not read.ok:
            self.stats.count_malformed(kind)
        steps: list[Subtask] = []
        dropped = read.dropped
        for step in read.steps:
            if (step in steps or len(steps) >= self.config.max_steps or (failed is not None and _same(step, failed))
                    or any(_same(step, refused) for refused in self.refused)):
                dropped += 1
            else:
                steps.append(step)
        self.stats.dropped_steps += dropped
        return steps

    # ------------------------------------------------------------------------------------ what the stages see

    def _inner_request(self, request: PlanRequest) -> PlanRequest:
        if self.inner.privileged:
            return request
        # A base planner that reads the world state itself (the text mode of a model planner: its prompt
        # describes the world from it) keeps it; the goal and perception's names stay privileged.
        return replace(request, world_state=request.world_state if self.inner.reads_state else None, goal=None,
                       perceived_names=None)

    @staticmethod
    def _actions(request: PlanRequest) -> tuple[str, ...]:
        from homiebot.types import EMMOE_ACTIONS

        return tuple(a for a in (request.actions or EMMOE_ACTIONS) if Action.parse(a) is not Action.END)

    def _forms(self, request: PlanRequest) -> str:
        return parsing.step_forms(self._actions(request))

    @staticmethod
    def _state(request: PlanRequest) -> WorldState | None:
        return request.world_state if isinstance(request.world_state, WorldState) else None

    def _names(self, request: PlanRequest) -> list[str]:
        """The names a step may use: what perception grounded, else the state's (or the scene's) names."""
        if request.grounded_targets:
            return list(request.grounded_targets)
        state = self._state(request)
        if state is not None:
            return [n for n, e in state.entities.items()]
        scene = request.scene
        names = getattr(scene, "all_names", None)
        return list(names()) if callable(names) else []

    def _known(self, target: str, request: PlanRequest) -> bool:
        """Whether the robot knows ``target``: grounded by perception, or (without perception) in the state."""
        key = target.strip().lower()
        if request.grounded_targets or request.world_description:
            return key in {t.lower() for t in request.grounded_targets}
        state = self._state(request)
        if state is None:
            return True  # nothing to check against: no search
        return any(key == n.lower() or key in (a.lower() for a in e.aliases) for n, e in state.entities.items())

    def _scene(self, request: PlanRequest, chain: _Chain | None) -> str:
        texts = [self.task or request.task, *self.done_steps[-self.config.history_steps:]]
        if chain is not None:
            texts.append(chain.subtask.text())
        state = self._state(request)
        if request.world_description and request.grounded_targets:
            words = [w for t in texts for w in re.findall(r"[A-Za-z0-9_]+", t)]
            return describe_from_text(request.world_description, words, request.inventory)
        if state is not None:
            return describe_state(state, mentioned_names(state, texts))
        return f"(agent holding {', '.join(request.inventory) if request.inventory else 'nothing'})"

    def _fields(self, request: PlanRequest, chain: _Chain | None) -> dict[str, str]:
        steps = self.done_steps[-self.config.history_steps:]
        fields = {
            "task": self.task or request.task,
            "plan": "; ".join(steps) if steps else "none yet",
            "scene": self._scene(request, chain),
            "forms": self._forms(request),
            "tried": "",
        }
        if chain is not None:
            fields.update(subtask=chain.subtask.text(), feedback=chain.feedback, code=chain.code.value,
                          reason=chain.reason or "the task needs it")
        return fields

    def _model_for(self, subtask: Subtask, request: PlanRequest) -> str:
        models = request.models or ("NoMaD", "PixNav", "octo", "RT-1-X")
        action = Action.parse(subtask.action)
        if action is Action.GO_TO:
            state = self._state(request)
            entity = state.entities.get(subtask.target or "") if state is not None else None
            is_object = entity is not None and entity.kind is EntityKind.OBJECT
            if entity is None:
                scene = request.scene
                is_object = any(getattr(o, "name", None) == subtask.target for o in getattr(scene, "objects", ()))
            model = "PixNav" if is_object else "NoMaD"
        else:
            model = _MODEL_BY_ACTION.get(action, "RT-1-X") if action is not None else "RT-1-X"
        return model if model in models else models[0]


def _same(a: Subtask, b: Subtask) -> bool:
    """The same subtask up to case and spacing."""
    def key(s: Subtask) -> tuple[str, ...]:
        return tuple(" ".join((p or "").lower().split()) for p in (s.action, s.target, s.place))

    return key(a) == key(b)


def _one_line(text: str) -> str:
    """A reason as one Analysis line that the answer pattern cannot mistake for another field."""
    line = " ".join(text.split())
    return re.sub(r"(?i)\b(analysis|subtask|model)\s*:", r"\1 -", line)[:300]
