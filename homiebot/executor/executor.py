"""EMMOE's low-level executor (EMMOE paper, appendix E.1 and E.4): error detection, three tries, feedback.

Pipeline of :meth:`Executor.execute`, in the paper's order:

1. **Format (F1/F2).** The action must be in the action list (F1); the model must be in the model list
   (F1, see below); the target (and the place of a Put) must ground to a scene instance through the
   grounder (F2, ``AliasGrounder`` by default: EMMOE's name map).
2. **Logic (L1-L4).** With the HLP's inventory (the paper sends it with the subtask): a non-empty
   inventory forbids pick/open/close (L1); an empty one forbids put (L2); put into a closed container
   (L3); open/close of something that is not interactive, and a pick of what is not an object (L4).
3. **Distance (D1/D2).** For every action but Go to: :meth:`WorldState.reach_distance` to the target
   (the place of a Put) above 2 m is D1, below 0.1 m is D2.
4. **Execution (E1/E2).** Up to three tries, ``sim.reset_arm()`` before each. A Put that fails with the
   object out of the hand is E2 ("the object is missing"); failing the third try is E1.

Decisions where the paper is silent (tested in ``tests/executor/``; see ``docs/loop.md``):

* **Model check.** The paper lists "model not in the list" as F1 but checks list membership only.
  By default (``strict_models=False``) any listed model may run any action: the skill for the *action*
  runs; when the skill layer says the named model does not serve it (``SkillSet.serves``), a model that
  does is handed to the skill layer instead (``[Open, fridge]`` with NoMaD runs the open skill).
  ``strict_models=True`` also requires the model to serve the action (``model_actions``; NoMaD/PixNav go
  to, octo open/close, RT-1-X pick/put), else F1 with :func:`messages.model_cannot`. Model names match
  case-insensitively ("Octo" is octo).
* **Missing target / place** (``[Pick]``, ``[Put, apple]``) is F1 with its own message.
* **Pick of a furniture or a room** (``[Pick, sofa]``) is L4 with the paper's L4 message ("Can not pick sofa!
  Please choose another object"): section 3.3 defines L4 as interacting with a non-interactive object; the
  appendix E.1 code checks it for open/close only, which would leave such a pick to fail three tries as E1.
* **Extra parts** after the target of a non-Put action (``[Go to, fridge, kitchen]``) are ignored.
* **Grounding of a Put's object** prefers the held instance when it answers to the name, so
  ``[Put, apple, fridge]`` puts the apple in the hand, not the nearest apple on the counter.
* **Skill failures after the pre-checks.** ``NO_PATH``, ``EXECUTION_FAILED`` and ``CONTAINER_CLOSED`` on
  a pick are physical failures: retried, E1 after the third. ``DROPPED`` (or any failed Put that leaves the
  hand empty) is E2 at once, as in the paper. A status that repeats a pre-check (``TOO_FAR``,
  ``TOO_CLOSE``, ``HAND_FULL``, ``HAND_EMPTY``, ``NOT_INTERACTIVE``, ``CONTAINER_CLOSED`` on a put,
  ``NOT_FOUND``) means the simulator disagrees with the pre-check (e.g. a tighter arm reach): it is
  reported with that check's code and message at once, because retrying a deterministic refusal
  cannot succeed. A failed result that says it is not worth retrying (``SkillResult.retryable`` False: a
  property of the object, such as a grasp no gripper opening fits) is E1 at once, with the message of a third
  failed try.
* **End** is answered ``OK``/"None" without checks (the paper's executor does this first).
* **Inventory in the feedback** is the HLP inventory after :func:`update_inventory` with this round's code.
* **Two agents** (PARTNR's robot and human, docs/collaboration.md): an action the agent's role lacks
  (``ExecutorConfig.withheld_actions``: the robot has no Turn on / Turn off / Clean, PARTNR A.9.1) is F1 with
  :func:`messages.not_capable`; a Pick of an object the other agent holds is E1 at once with
  :func:`messages.held_by_other` (no tries: the other hand does not let go).
* **What an action needs of its target** (declared on the action: ``ActionSpec.target_is`` /
  ``target_needs``; PARTNR's Fill and Pour need a container, Pour a filled one) is checked after L4 and
  answered L4, with the requirement's own message for a state ("Unable to pour, the mug is empty, you should
  fill it first").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from homiebot.config import FAR_THRESHOLD_M, MAX_TRIES, NEAR_THRESHOLD_M
from homiebot.executor import messages
from homiebot.perception.grounding import AliasGrounder, Grounder
from homiebot.sim.base import Simulator
from homiebot.skills.actions import HandRule, action_spec
from homiebot.types import (
    EMMOE_ACTIONS,
    EMMOE_MODELS,
    Action,
    ErrorCode,
    Feedback,
    SkillResult,
    SkillStatus,
    Subtask,
    WorldState,
    casefold_words,
    update_inventory,
)

log = logging.getLogger(__name__)

#: Which actions each low-level model serves (EMMOE table E2; M3 and the oracle do everything).
DEFAULT_MODEL_ACTIONS: Mapping[str, tuple[Action, ...]] = {
    "NoMaD": (Action.GO_TO,),
    "PixNav": (Action.GO_TO,),
    "octo": (Action.OPEN, Action.CLOSE),
    "RT-1-X": (Action.PICK, Action.PUT),
    "M3": (Action.GO_TO, Action.PICK, Action.PUT, Action.OPEN, Action.CLOSE),
    "oracle": (Action.GO_TO, Action.PICK, Action.PUT, Action.OPEN, Action.CLOSE),
}
# The household actions (homiebot/skills/actions.py) are manipulations: octo switches like it opens, RT-1-X
# treats the held object like it puts it (a decision: table E2 predates these actions).
# PARTNR's Fill and Pour handle the held container like a treatment does (RT-1-X as well).
_HOUSEHOLD = {
    "octo": (Action.TURN_ON, Action.TURN_OFF),
    "RT-1-X": (Action.CLEAN, Action.HEAT, Action.COOL, Action.FILL, Action.POUR),
}
_ALL_HOUSEHOLD = (Action.TURN_ON, Action.TURN_OFF, Action.CLEAN, Action.HEAT, Action.COOL, Action.FILL, Action.POUR)
DEFAULT_MODEL_ACTIONS = {
    model: actions + _HOUSEHOLD.get(model, _ALL_HOUSEHOLD if model in ("M3", "oracle") else ())
    for model, actions in DEFAULT_MODEL_ACTIONS.items()
}


@dataclass(frozen=True)
class ExecutorConfig:
    """Thresholds and lists of the executor. Defaults are the paper's."""

    actions: tuple[str, ...] = EMMOE_ACTIONS
    models: tuple[str, ...] = EMMOE_MODELS
    max_tries: int = MAX_TRIES
    far_threshold_m: float = FAR_THRESHOLD_M  # D1: reach distance above this
    near_threshold_m: float = NEAR_THRESHOLD_M  # D2: reach distance below this
    strict_models: bool = False
    model_actions: Mapping[str, tuple[Action, ...]] = field(default_factory=lambda: dict(DEFAULT_MODEL_ACTIONS))
    #: Which agent this executor serves ("robot", "human") and the actions another agent has but it lacks.
    agent: str = "robot"
    withheld_actions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.max_tries < 1:
            raise ValueError(f"max_tries must be >= 1, got {self.max_tries}")
        if not 0 <= self.near_threshold_m < self.far_threshold_m:
            raise ValueError("need 0 <= near_threshold_m < far_threshold_m")


@runtime_checkable
class SkillRunner(Protocol):
    """Runs one attempt of an action with scene instance names (already grounded), and declares which
    skill models serve which action (EMMOE appendix E.1 lists the models; :class:`homiebot.skills.SkillSet`
    maps them). :class:`SkillRunnerBase` gives the defaults: every model serves every action."""

    def run(self, action: Action, model: str, target: str, place: str | None = None) -> SkillResult: ...

    def serves(self, action: Action, model: str) -> bool:
        """Whether ``model`` runs ``action``."""
        ...

    def models_for(self, action: Action) -> tuple[str, ...]:
        """The models that run ``action``, preferred first (empty: no preference)."""
        ...


class SkillRunnerBase:
    """Defaults of :class:`SkillRunner`'s declarations for a runner that has no model table."""

    def serves(self, action: Action, model: str) -> bool:
        return True

    def models_for(self, action: Action) -> tuple[str, ...]:
        return ()


class SimulatorSkills(SkillRunnerBase):
    """The simulator's own oracle skills, dispatched by action (used when no skill layer is given)."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim

    def run(self, action: Action, model: str, target: str, place: str | None = None) -> SkillResult:
        return action_spec(action).run(self.sim, target, place)


@dataclass
class ExecutionReport:
    """Everything one :meth:`Executor.execute_detailed` call found out (the feedback plus details for records)."""

    feedback: Feedback
    action: Action | None = None
    model: str | None = None  # the canonical list spelling, when the model is in the list
    target: str | None = None  # grounded instance name
    place: str | None = None  # grounded instance name (Put)
    results: list[SkillResult] = field(default_factory=list)
    reach_distance_m: float | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def path_length(self) -> float:
        return sum(r.path_length for r in self.results)

    @property
    def released_at(self) -> tuple[float, float, float] | None:
        """A successful Put's: where the hand let go of the object (the last try's ``SkillResult.released_at``);
        None when the subtask failed or the skill does not know."""
        return self.results[-1].released_at if self.results and self.feedback.success else None


class _Fail(Exception):
    """Internal: a pre-check failed with this code and message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


#: Skill statuses that repeat a pre-check: reported at once with the pre-check's code (see module doc).
def _precheck_twin(status: SkillStatus, action: Action, target_text: str, place_text: str | None) -> tuple[ErrorCode, str] | None:
    word = action.value
    if status is SkillStatus.TOO_FAR:
        return ErrorCode.D1, messages.too_far(word)
    if status is SkillStatus.TOO_CLOSE:
        return ErrorCode.D2, messages.too_close(word)
    if status is SkillStatus.HAND_FULL:
        return ErrorCode.L1, messages.hand_full(word)
    if status is SkillStatus.HAND_EMPTY:
        return ErrorCode.L2, messages.hand_empty(word)
    if status is SkillStatus.NOT_INTERACTIVE:
        return ErrorCode.L4, messages.not_interactive(word, target_text)
    if status is SkillStatus.CONTAINER_CLOSED and action is Action.PUT:
        return ErrorCode.L3, messages.container_closed(place_text or target_text)
    if status is SkillStatus.NOT_FOUND:
        return ErrorCode.F2, messages.does_not_exist(target_text)
    return None


class Executor:
    """Checks a subtask, runs it with up to three tries, and answers with EMMOE feedback."""

    def __init__(
        self,
        sim: Simulator,
        grounder: Grounder | None = None,
        config: ExecutorConfig | None = None,
        skills: SkillRunner | None = None,
    ) -> None:
        self.sim = sim
        self.grounder = grounder if grounder is not None else AliasGrounder()
        self.config = config if config is not None else ExecutorConfig()
        self.skills = skills if skills is not None else SimulatorSkills(sim)
        self._actions = {" ".join(a.lower().split()): a for a in self.config.actions}
        self._models = {m.lower(): m for m in self.config.models}
        self._withheld = {casefold_words(a) for a in self.config.withheld_actions}

    # ------------------------------------------------------------------------------------ public

    def execute(self, subtask: Subtask, model: str, inventory: Sequence[str]) -> Feedback:
        """Appendix E.1: error detection, then up to three tries; returns the feedback the HLP receives."""
        return self.execute_detailed(subtask, model, inventory).feedback

    def execute_detailed(
        self, subtask: Subtask, model: str, inventory: Sequence[str], state: WorldState | None = None
    ) -> ExecutionReport:
        """:meth:`execute` with the details. ``state``: the simulator's current state when the caller already
        holds it (the loop does), saving a snapshot; it must be current, or the checks judge a stale world."""
        inventory = tuple(inventory)
        report = ExecutionReport(feedback=Feedback(ErrorCode.OK, messages.SUCCESS, inventory))
        started = time.perf_counter()
        try:
            self._check_and_run(subtask, model, inventory, report, state)
            code, message = ErrorCode.OK, messages.SUCCESS
        except _Fail as fail:
            code, message = fail.code, fail.message
        report.feedback = Feedback(
            code=code,
            message=message,
            inventory=update_inventory(inventory, subtask, code),
            attempts=len(report.results),
        )
        report.timings["execute_s"] = time.perf_counter() - started
        return report

    # ------------------------------------------------------------------------------------ pipeline

    def _check_and_run(
        self, subtask: Subtask, model: str, inventory: tuple[str, ...], report: ExecutionReport, state: WorldState | None
    ) -> None:
        t0 = time.perf_counter()
        action = self._check_action(subtask.action)
        report.action = action
        if action is Action.END:
            return
        report.model = self._check_model(model, action)
        spec = action_spec(action)  # which checks apply (homiebot/skills/actions.py)
        target_text = (subtask.target or "").strip()
        if not target_text:
            raise _Fail(ErrorCode.F1, messages.missing_target(action.value))
        place_text = (subtask.place or "").strip() if spec.needs_place else None
        if spec.needs_place and not place_text:
            raise _Fail(ErrorCode.F1, messages.missing_place(action.value))

        if state is None:
            state = self.sim.state()
        target = self._ground(target_text, state, prefer_held=spec.needs_place)
        place = self._ground(place_text, state) if place_text is not None else None
        report.target, report.place = target, place
        # What the checks below are about: the place of a Put, the target otherwise (the paper's ``target``).
        subject, subject_text = (place, place_text) if place is not None else (target, target_text)
        assert subject is not None and subject_text is not None

        word = action.value
        if action is Action.PICK and state.held != target and state.entities[target].held:
            holder = next((a.name for a in state.agents if a.held == target), "other agent")
            raise _Fail(ErrorCode.E1, messages.held_by_other(word, target_text, holder))
        # Logical errors, in the paper's order, as the action declares them.
        if inventory and spec.hand is HandRule.EMPTY:
            raise _Fail(ErrorCode.L1, messages.hand_full(word))
        if not inventory and spec.hand is HandRule.HOLDING:
            raise _Fail(ErrorCode.L2, messages.hand_empty(word))
        entity = state.entities[subject]
        if spec.place_must_be_open and entity.articulated and entity.is_open is False:
            raise _Fail(ErrorCode.L3, messages.container_closed(subject_text))
        if spec.acts_on is not None and not spec.acts_on(entity):
            raise _Fail(ErrorCode.L4, messages.not_interactive(word, subject_text))
        # What the action needs of its target itself (Fill / Pour: a container; Pour: a filled one).
        if spec.target_is is not None and not spec.target_is(state.entities[target]):
            raise _Fail(ErrorCode.L4, messages.not_interactive(word, target_text))
        if spec.target_needs is not None and not spec.target_needs.test(state.entities[target]):
            raise _Fail(ErrorCode.L4, spec.target_needs.message(messages.action_word(word), target_text))
        # Distance errors, for every action but Go to.
        if spec.checks_distance:
            distance = state.reach_distance(subject)
            report.reach_distance_m = distance
            if distance > self.config.far_threshold_m:
                raise _Fail(ErrorCode.D1, messages.too_far(word))
            if distance < self.config.near_threshold_m:
                raise _Fail(ErrorCode.D2, messages.too_close(word))
        report.timings["checks_s"] = time.perf_counter() - t0
        runner_model = self._serving_model(action, report.model)
        self._run_with_tries(action, runner_model, target, place, target_text, place_text, report)

    def _check_action(self, text: str) -> Action:
        key = casefold_words(text)
        action = Action.parse(text)
        if action is not None and action.value.lower() in self._withheld:
            raise _Fail(ErrorCode.F1, messages.not_capable(self.config.agent, action.value))
        if action is None or key not in self._actions:
            raise _Fail(ErrorCode.F1, messages.not_in_action_list(text))
        return action

    def _check_model(self, text: str, action: Action) -> str:
        canonical = self._models.get(" ".join(text.strip().split()).lower())
        if canonical is None:
            raise _Fail(ErrorCode.F1, messages.not_in_model_list(text.strip()))
        if self.config.strict_models:
            served = self.config.model_actions.get(canonical, ())
            if action not in served:
                raise _Fail(ErrorCode.F1, messages.model_cannot(canonical, action.value))
        return canonical

    def _serving_model(self, action: Action, model: str) -> str:
        """The model name handed to the skill runner. A runner that declares which models serve which action
        (``serves`` / ``models_for``, as :class:`homiebot.skills.SkillSet` does) gets, in the lenient default,
        a model that serves the action when the planner's listed model does not (the paper checks list
        membership only); with ``strict_models`` that case was already F1."""
        if self.skills.serves(action, model):
            return model
        for candidate in self.skills.models_for(action):
            log.debug("%s does not serve %s; running it with %s", model, action.value, candidate)
            return candidate
        raise _Fail(ErrorCode.F1, messages.model_cannot(model, action.value))

    def _ground(self, text: str, state: WorldState, prefer_held: bool = False) -> str:
        result = self.grounder.ground(text, state)
        if result.instance is None:
            raise _Fail(ErrorCode.F2, messages.does_not_exist(text))
        if prefer_held and state.held is not None and state.held in result.candidates:
            return state.held
        return result.instance

    def _run_with_tries(
        self,
        action: Action,
        model: str,
        target: str,
        place: str | None,
        target_text: str,
        place_text: str | None,
        report: ExecutionReport,
    ) -> None:
        word = action.value
        t0 = time.perf_counter()
        try:
            for attempt in range(1, self.config.max_tries + 1):
                self.sim.reset_arm()
                result = self.skills.run(action, model, target, place)
                report.results.append(result)
                if result.success:
                    return
                log.debug("%s %s try %d failed: %s %s", word, target, attempt, result.status.value, result.detail)
                if action is Action.PUT and (result.status is SkillStatus.DROPPED or self.sim.state().held is None):
                    raise _Fail(ErrorCode.E2, messages.object_missing(word))
                twin = _precheck_twin(result.status, action, target_text, place_text)
                if twin is not None:
                    raise _Fail(*twin)
                if not result.retryable:
                    break  # another try would fail the same way: E1 now, as after the last try
            raise _Fail(ErrorCode.E1, messages.too_difficult(word))
        finally:
            report.timings["skills_s"] = time.perf_counter() - t0
