"""The high-level-planner side of an episode (EMMOE appendix D ``HomieBot``), with no simulator access.

A :class:`PlannerSession` owns what the paper's HLP process owns: the task text, the planner, the
conversation (a window of 3 rounds), the inventory, the historical-execution string, the round counter
and the 20-round limit. It builds each round's :class:`~homiebot.planner.base.PlanRequest`, parses the
answer, and folds the executor's feedback back in. The in-process loop (:mod:`homiebot.agent.loop`) and
the ROS 2 planner node both drive it, so the two wirings produce the same instructions.

Decisions (tested in ``tests/agent/test_session.py``):

* **Unparseable output** (neither appendix D's pattern nor appendix H.1's relaxed one matches, or the
  Subtask names no action) is answered with F1 feedback whose message is :data:`FORMAT_ERROR_MESSAGE`
  (the paper has none; this one reuses the system prompt's own words so a model trained on EMMOE
  recognises it). The round counts, the history records ``({n}) invalid output(fail)``, the loop goes on.
* **History text** of a parsed round is the text between the brackets, as in the paper
  (``(2) Pick, green_can(success) ``); for the relaxed pattern it is the rebuilt ``action, target``.
* **End** is detected on the parsed action (``Action.END``), not with the paper's ``"end" in
  subtask.lower()``, which also fires on ``[Pick, blender]``.
* **Inventory** follows :func:`homiebot.planner.conversation.update_inventory` on the parsed action.
* **Privileged fields** (``world_state``, ``goal``, ``evaluation``, ``perceived_names``) reach only planners
  with ``privileged = True``; ``world_state`` (never the goal) also reaches one that declares
  ``reads_state = True``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from numpy.typing import NDArray

from homiebot.config import HISTORY_WINDOW, MAX_ROUNDS, AnswerFormat
from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.conversation import Conversation
from homiebot.planner.prompt import build_instruction, history_entry, parse_output, system_prompt
from homiebot.sim.scene import SceneSpec
from homiebot.types import (
    EMMOE_ACTIONS,
    EMMOE_MODELS,
    ErrorCode,
    Feedback,
    Observation,
    PlannerOutput,
    WorldState,
    update_inventory,
)

#: F1 feedback for an answer that does not follow the response template (the paper defines none).
FORMAT_ERROR_MESSAGE = (
    "The output is not in the required format! You should output strictly with the response template: "
    "Analysis: ..., Subtask: [action, target], Model: ..."
)
#: What the historical-execution string shows for an unparseable round.
INVALID_SUBTASK_TEXT = "invalid output"


class SessionFinished(RuntimeError):
    """A request was asked of a session that already ended (End output or round limit)."""


class PlannerSession:
    """EMMOE's HLP state machine for one episode.

    Use: ``while not s.done: req = s.make_request(images); out = s.parse(planner.plan(req));
    fb = <executor>(out) if out.subtask else s.format_feedback(out); s.record(out, fb)``.
    """

    def __init__(
        self,
        task: str,
        planner: Planner,
        *,
        actions: Sequence[str] = EMMOE_ACTIONS,
        models: Sequence[str] = EMMOE_MODELS,
        model_descriptions: dict[str, str] | None = None,
        max_rounds: int = MAX_ROUNDS,
        history_window: int = HISTORY_WINDOW,
        world_description: str | None = None,
    ) -> None:
        if max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1, got {max_rounds}")
        self.task = task
        self.planner = planner
        self.actions = tuple(actions)
        self.models = tuple(models)
        self.max_rounds = max_rounds
        self.world_description = world_description
        self.system_prompt = system_prompt(self.actions, self.models, model_descriptions)
        self.conversation = Conversation(window=history_window)
        self.inventory: tuple[str, ...] = ()
        self.historical_execution = ""
        self.feedback = "None"  # message of the last round's feedback
        self.last_error: ErrorCode | None = None  # code of the last round's feedback
        self.round = 0  # rounds completed
        self.ended = False  # the planner answered [End]
        self._pending_instruction: str | None = None

    # ------------------------------------------------------------------------------------ state

    @property
    def done(self) -> bool:
        """The planner answered [End], or the round limit (20 in the paper) is reached."""
        return self.ended or self.round >= self.max_rounds

    @property
    def round_index(self) -> int:
        """1-based index of the round being planned now."""
        return self.round + 1

    def instruction(self) -> str:
        """Appendix D ``generate_instruction`` for the current round."""
        return build_instruction(self.task, self.inventory, self.historical_execution, self.feedback)

    # ------------------------------------------------------------------------------------ rounds

    def make_request(
        self,
        images: Sequence[NDArray[Any]],
        world_state: WorldState | None = None,
        goal: Any = None,
        *,
        grounded_targets: Sequence[str] = (),
        perceived_names: Mapping[str, str] | None = None,
        evaluation: Any = None,
        scene: SceneSpec | None = None,
        observation: Observation | None = None,
    ) -> PlanRequest:
        """The request for the current round. The privileged fields are dropped for planners that do not
        declare them (module docstring)."""
        if self.done:
            raise SessionFinished(f"the session has ended after {self.round} rounds")
        instruction = self.instruction()
        self._pending_instruction = instruction
        privileged = self.planner.privileged
        reads_state = privileged or self.planner.reads_state
        return PlanRequest(
            system_prompt=self.system_prompt,
            instruction=instruction,
            images=list(images),
            history=self.conversation.recent(),
            task=self.task,
            round_index=self.round_index,
            inventory=self.inventory,
            feedback=self.feedback,
            actions=self.actions,
            models=self.models,
            world_description=self.world_description,
            grounded_targets=tuple(grounded_targets),
            world_state=world_state if reads_state else None,
            goal=goal if privileged else None,
            perceived_names=dict(perceived_names) if privileged and perceived_names is not None else None,
            evaluation=evaluation if privileged else None,
            scene=scene,
            observation=observation,
            max_rounds=self.max_rounds,
            last_error=self.last_error,
        )

    @staticmethod
    def parse(raw: str, answer_format: AnswerFormat = AnswerFormat.ANALYSIS) -> PlannerOutput:
        """Appendix D's pattern with appendix H.1's fallback, and the subtask-only answer for a planner that
        answers in that format (:attr:`Planner.answer_format`); never raises."""
        return parse_output(raw, answer_format)

    def format_feedback(self, output: PlannerOutput) -> Feedback:
        """The F1 feedback for an answer :meth:`parse` could not read."""
        return Feedback(code=ErrorCode.F1, message=FORMAT_ERROR_MESSAGE, inventory=self.inventory, attempts=0)

    def end_feedback(self) -> Feedback:
        """End needs no execution: the paper's executor answers ``None``/success at once."""
        return Feedback(code=ErrorCode.OK, message="None", inventory=self.inventory, attempts=0)

    def record(self, output: PlannerOutput, feedback: Feedback) -> None:
        """Fold one round's answer and feedback into the conversation, inventory and history."""
        if self.done:
            raise SessionFinished(f"the session has ended after {self.round} rounds")
        instruction = self._pending_instruction if self._pending_instruction is not None else self.instruction()
        self._pending_instruction = None
        self.round += 1
        self.conversation.append(instruction, output.raw)
        self.inventory = update_inventory(self.inventory, output.subtask, feedback.code)
        if output.subtask is not None:
            subtask_text = output.subtask.text()[1:-1]
        else:
            subtask_text = INVALID_SUBTASK_TEXT
        self.historical_execution += history_entry(self.round, subtask_text, feedback.signal)
        self.feedback = feedback.message
        self.last_error = feedback.code
        if output.subtask is not None and output.subtask.is_end:
            self.ended = True
