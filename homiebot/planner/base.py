"""The ``Planner`` interface every high-level planner implements (expert, random, scripted, OpenAI, transformers).

A planner receives a :class:`PlanRequest` (what EMMOE's HLP sees: the four views, the system prompt, the
instruction, and the conversation window) and returns its raw text answer. Parsing, validation and error
feedback belong to the loop and the executor, so every backend is judged by the same rules. A planner that sends
a prompt to a model reports each call, with the exact messages, in :attr:`PlanRequest.model_calls`.

Privileged fields (``world_state``, ``goal``) are filled only for planners that declare
``privileged = True`` (the expert); model planners never see them, as EMMOE forbids background information.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from homiebot.config import MAX_ROUNDS, AnswerFormat
from homiebot.config.planners import PlannerConfig
from homiebot.sim.scene import SceneSpec
from homiebot.types import ErrorCode, Feedback, ModelCall, Observation, WorldState

if TYPE_CHECKING:  # the task language is below the planners, but PARTNR's (networkx) costs 0.2 s to import
    from homiebot.tasks.goals import GoalSpec
    from homiebot.tasks.partnr.language import EvaluationFunction


@dataclass(frozen=True)
class ChatTurn:
    """One earlier round of the conversation window: the instruction and the planner's answer."""

    instruction: str
    answer: str


@dataclass
class PlanRequest:
    system_prompt: str
    instruction: str
    images: Sequence[np.ndarray]  # front, left, back, right (RGB uint8)
    history: Sequence[ChatTurn] = ()  # the last rounds, oldest first (window of 3, appendix D)
    task: str = ""
    round_index: int = 1
    inventory: tuple[str, ...] = ()
    feedback: str = "None"
    actions: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    world_description: str | None = None  # PARTNR-style text world description, when configured
    grounded_targets: tuple[str, ...] = ()  # names perception has grounded (for constrained decoding)
    world_state: WorldState | None = None  # privileged: expert only
    goal: GoalSpec | None = None  # privileged: expert only
    # Privileged, with a perception world model only: simulator instance -> the name perception knows it by
    # (WorldModel.perceived_names). None: no perception, targets are the simulator's instance names.
    perceived_names: Mapping[str, str] | None = None
    # Privileged: the task's PARTNR evaluation function (PARTNR's JSON), when the task has one.
    evaluation: EvaluationFunction | Mapping[str, object] | None = None
    # What every planner may read besides the prompt's text and images (model backends build their prompts from
    # those only): the scene's static description (object kinds for baselines, receptacle facts for the expert,
    # the room list a text planner describes), this round's views with their instance segmentation (None when
    # the wiring fetched RGB only: see homiebot.agent.loop.reads_observation), the episode's round limit, and
    # the error code of the previous round's feedback (None in round 1).
    scene: SceneSpec | None = None
    observation: Observation | None = None
    max_rounds: int = MAX_ROUNDS
    last_error: ErrorCode | None = None
    # What the planner reports back: every call it made to a model for this round's answer, in order, with the
    # exact messages sent (homiebot.planner.messages.report_call); the loop keeps them in the round's record, so a
    # record holds each round's model input. A planner that asks no model leaves it empty. The list is shared by a
    # request derived with dataclasses.replace (a wrapper that hands its inner planner a rewritten request), so the
    # inner planner's calls reach the loop.
    model_calls: list[ModelCall] = field(default_factory=list)


class EpisodeStopRequested(Exception):  # noqa: N818 (a request, not an error)
    """Raised by :meth:`Planner.plan` to stop the episode cleanly: a person at the keyboard quit. The loop ends
    the episode there without an error, checks the goal as at any end, and keeps ``reason`` in
    :attr:`homiebot.types.Trajectory.stopped`; any other exception from ``plan`` is a failure."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


PlannerT = TypeVar("PlannerT", bound="Planner")


class Planner(ABC):
    """High-level planner. Implementations are registered in :mod:`homiebot.planner.registry`."""

    #: Registry name (``--planner NAME``).
    name: str = "planner"
    #: Whether the planner reads privileged state and the goal specification (the expert does).
    privileged: bool = False
    #: Whether the planner can take a free-text instruction with no goal specification.
    accepts_free_text: bool = True
    #: Whether a privileged planner still reads the views' segmentation (the random baseline picks what is
    #: visible); unprivileged planners always get it.
    needs_views: bool = False
    #: Whether an unprivileged planner reads the world state, never the goal (a failure-recovery wrapper builds
    #: its scene representation from it). Privileged planners read both.
    reads_state: bool = False
    #: In a two-agent episode, whether the planner also hears the partner's navigation (a centralized planner's
    #: facet, which sees both agents); otherwise only the partner's other actions, as PARTNR's decentralized agents
    #: learn them ("PARTNR", section 4.1).
    hears_partner_navigation: bool = False
    #: The answer's form: EMMOE's with an Analysis line, or without it (:class:`~homiebot.config.AnswerFormat`);
    #: the loop parses the planner's answers by it.
    answer_format: AnswerFormat = AnswerFormat.ANALYSIS
    #: Whether the planner keeps its own answers in the chat it sends next and can be told that another answer was
    #: executed in place of its last one (:meth:`adopt_answer`): DAgger's takeover episodes need it
    #: (:mod:`homiebot.training.corrections`).
    adopts_answers: bool = False

    @classmethod
    def from_config(cls: type[PlannerT], config: PlannerConfig, **objects: object) -> PlannerT:
        """The planner a run configuration describes (:mod:`homiebot.config.planners`): its options are the
        constructor's keyword arguments, with ``objects`` (what is not configuration: a loaded engine). A planner
        whose configuration holds another planner's overrides it (the recovery wrapper builds its base first)."""
        return cls(**config.options(), **objects)

    @classmethod  # noqa: B027 (optional hook: most planners need nothing outside the process)
    def preflight(cls, options: Mapping[str, Any]) -> None:
        """Check, cheaply and before a command writes anything, that what the planner needs from outside the process
        is there (a server that answers); raise the planner's own error when it is not. ``options`` are the planner's
        configuration's options (:meth:`homiebot.config.planners.PlannerConfig.options`, as
        :func:`homiebot.planner.registry.check_planner_config` hands them). Loading a model is not cheap: that is
        the constructor's job."""

    def reset(self, task: str, seed: int = 0) -> None:  # noqa: B027 (optional hook: most planners keep no state)
        """Called once at the start of an episode."""

    @abstractmethod
    def plan(self, request: PlanRequest) -> str:
        """Return the raw answer text for one round."""

    def plan_batch(self, requests: Sequence[PlanRequest]) -> list[str]:
        """Answer several episodes' requests; backends that batch on a GPU override this."""
        return [self.plan(r) for r in requests]

    def adopt_answer(self, answer: str) -> None:
        """The loop executed ``answer`` instead of this planner's last answer: keep ``answer`` in its place in the
        chat the next rounds are sent (only where :attr:`adopts_answers` says so)."""
        raise NotImplementedError(f"planner {self.name!r} keeps no chat of its own answers to amend")

    def close(self) -> None:  # noqa: B027 (optional hook: only model backends hold resources)
        """Release model servers, GPU memory, connections."""

    def meet_partner(self, partner: str, actions: Sequence[str]) -> None:  # noqa: B027 (two-agent hook)
        """A two-agent episode starts: the partner's name ("robot", "human") and action list (a planner that
        plans for both agents needs it); single-agent planners ignore it."""

    def observe_partner(self, partner: str, subtask_text: str, feedback: Feedback) -> None:  # noqa: B027 (two-agent hook)
        """The partner finished a round: what it did and the executor's answer; single-agent planners ignore it."""
