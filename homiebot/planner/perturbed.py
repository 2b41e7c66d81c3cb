"""The perturbed expert: the expert planner with EMMOE's designed decision errors, then its re-plan.

EMMOE-100 has 36 failed subtasks among 966, "intentionally designed ... [with] re-plans to enhance dataset
robustness" (EMMOE paper, section 2.2); they are the source of its re-plan DPO pairs (section 4.1). Our
noiseless expert never fails, so this planner makes such failures: each round, with probability
``inject`` (default 0.04, about 36/966), when the previous round succeeded and the expert's next subtask is
not End, it answers instead a plausible wrong subtask that the current state makes fail with a *decision*
error, keeping the expert's analysis for the intended step (a plausible but wrong decision, as in the
paper's appendix I case 1). The next round the expert plans again from the state the failure left, which is
the re-plan. Never two injections in a row.

The wrong subtasks, by what the state allows (EMMOE's error codes, section 3.3):

* L1: Pick another object or Open an articulated furniture while holding something;
* L2: Put with an empty hand;
* L3: Put the held object into a closed container;
* L4: Open a furniture that cannot be opened;
* D1: Pick the intended object from more than 2 m away (skipping the Go to).

Choices are seeded by the task and the seed of the episode (:meth:`reset`), so a run is reproducible.

Both experts are planners of the registry (``prompt-bound-expert``, ``perturbed-expert``; their configuration
classes are :class:`~homiebot.config.planners.PromptBoundExpertConfig` and
:class:`~homiebot.config.planners.PerturbedExpertConfig`): ``homie data collect`` records with them, and
``homie run --config RECORD/summary.json`` repeats a collected episode with the same planner and seed (the
injections are drawn from the task and seed alone).
"""

from __future__ import annotations

import logging
import random
import zlib
from dataclasses import dataclass

from homiebot.config import FAR_THRESHOLD_M, NEAR_THRESHOLD_M
from homiebot.config.planners import PerturbedExpertConfig, PromptBoundExpertConfig
from homiebot.planner.base import PlanRequest
from homiebot.planner.expert import ARTICULATION_MODEL, GRASP_MODEL, ExpertPlanner
from homiebot.planner.prompt import format_output, parse_output
from homiebot.planner.reach import INTERACT_RANGE_M
from homiebot.types import Action, EntityKind, Subtask, WorldState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Injection:
    """One injected wrong subtask and the error it is meant to cause."""

    round_index: int
    subtask: Subtask
    model: str
    expected_code: str


class PromptBoundExpertPlanner(ExpertPlanner):
    """The expert for training data: where it chooses among candidates it holds equally good (which object of a
    move first, which one to keep in hand, near which surface to put down an object it does not need), it chooses
    by what the text mode's prompt shows, within reach first and then by name, instead of by distances the prompt
    does not give (:mod:`homiebot.planner.text_planning`). Its answer is then a function of the prompt, which a
    model can learn; with the distances two episodes with the same prompt could need different answers (the data
    check counts them, :mod:`homiebot.training.data_check`). Everything else is the expert's; the evaluation's
    ``--planner expert`` is not this class."""

    name = "prompt-bound-expert"

    def _move_nearness(self, state: WorldState, obj: str, destination: tuple[float, float, float]) -> float:
        return 0.0 if self._reachable(state, obj) else 1.0

    def _robot_nearness(self, state: WorldState, name: str) -> float:
        return 0.0 if self._reachable(state, name) else 1.0


class PerturbedExpertPlanner(PromptBoundExpertPlanner):
    """:class:`PromptBoundExpertPlanner` with injected decision errors (module docstring)."""

    name = "perturbed-expert"

    def __init__(
        self,
        inject: float = 0.04,
        interact_range_m: float = INTERACT_RANGE_M,
        near_threshold_m: float = NEAR_THRESHOLD_M,
        far_threshold_m: float = FAR_THRESHOLD_M,
        close_opened: bool = True,
    ) -> None:
        if not 0.0 <= inject <= 1.0:
            raise ValueError(f"inject must be a probability in [0, 1], got {inject}")
        super().__init__(interact_range_m=interact_range_m, near_threshold_m=near_threshold_m,
                         far_threshold_m=far_threshold_m, close_opened=close_opened)
        self.inject = inject
        self._rng = random.Random(0)
        self._last_injected = False
        #: The injections of the current episode (for records and tests).
        self.injections: list[Injection] = []

    def reset(self, task: str, seed: int = 0) -> None:
        super().reset(task, seed)
        self._rng = random.Random(zlib.crc32(f"{task}:{seed}".encode()))
        self._last_injected = False
        self.injections = []

    def plan(self, request: PlanRequest) -> str:
        answer = super().plan(request)
        previous_ok = request.round_index > 1 and request.feedback == "None"
        draw = self._rng.random()  # drawn every round, so the choices do not depend on earlier injections
        if self._last_injected or not previous_ok or draw >= self.inject:
            self._last_injected = False
            return answer
        intended = parse_output(answer)
        state = request.world_state
        if intended.subtask is None or state is None or Action.parse(intended.subtask.action) is Action.END:
            self._last_injected = False
            return answer
        options = self._wrong_subtasks(state, request.inventory, intended.subtask)
        if not options:
            self._last_injected = False
            return answer
        # The error code first, uniformly among those the state allows, then one of its subtasks: codes with
        # more ways to go wrong (L1: Pick or Open while holding) are not drawn more often, so that the re-plans
        # after each code are balanced in the data.
        code = self._rng.choice(sorted({c for _, _, c in options}))
        wrong, model, code = self._rng.choice([o for o in options if o[2] == code])
        self.injections.append(Injection(request.round_index, wrong, model, code))
        self._last_injected = True
        # The expert's memory holds the subtask it answered: the injected one, which the history now shows. Its
        # next round then reads it as failed ("I failed to pick ...") and decides, like the text mode's reach
        # rule, from that subtask and not from the intended one that never ran.
        self._memory.last = wrong
        self._memory.last_spoken = wrong  # answered in the simulator's names, as written below
        self._memory.spoken = {n: n for n in (wrong.target, wrong.place) if n}
        log.debug(
            "perturbed expert: round %d answers %s (expects %s) instead of %s",
            request.round_index,
            wrong.text(),
            code,
            intended.subtask.text(),
        )
        return format_output(intended.analysis, wrong, model)

    def _wrong_subtasks(
        self, state: WorldState, inventory: tuple[str, ...], intended: Subtask
    ) -> list[tuple[Subtask, str, str]]:
        entities = state.entities
        objects = sorted(n for n, e in entities.items() if e.kind is EntityKind.OBJECT and not e.held)
        furniture = sorted(n for n, e in entities.items() if e.kind is EntityKind.FURNITURE)
        openable = [n for n in furniture if entities[n].articulated and entities[n].interactive]
        closed = [n for n in openable if entities[n].is_open is False]
        fixed = [n for n in furniture if not entities[n].articulated]
        options: list[tuple[Subtask, str, str]] = []
        target = intended.target if intended.target in entities else None
        if inventory:
            held = inventory[0]
            others = [o for o in objects if o != held]
            if others:
                pick = target if target in others else self._rng.choice(others)
                options.append((Subtask("Pick", pick), GRASP_MODEL, "L1"))
            if openable:
                options.append((Subtask("Open", self._rng.choice(openable)), ARTICULATION_MODEL, "L1"))
            if closed:
                options.append((Subtask("Put", held, self._rng.choice(closed)), GRASP_MODEL, "L3"))
        else:
            if objects and furniture:
                obj = target if target in objects else self._rng.choice(objects)
                place = intended.place if intended.place in entities else self._rng.choice(furniture)
                options.append((Subtask("Put", obj, place), GRASP_MODEL, "L2"))
            if fixed:
                options.append((Subtask("Open", self._rng.choice(fixed)), ARTICULATION_MODEL, "L4"))
            if target is not None and entities[target].kind is EntityKind.OBJECT:
                parent = entities[target].parent
                hidden = parent is not None and parent in entities and entities[parent].is_open is False
                if not hidden and state.reach_distance(target) > self.far_threshold_m + 0.2:
                    options.append((Subtask("Pick", target), GRASP_MODEL, "D1"))
        return options


def expert_for_data(config: PromptBoundExpertConfig | PerturbedExpertConfig) -> PromptBoundExpertPlanner:
    """The training-data expert ``config`` describes."""
    if isinstance(config, PerturbedExpertConfig):
        return PerturbedExpertPlanner(**config.options())  # type: ignore[arg-type]  # the fields are its options
    return PromptBoundExpertPlanner(**config.options())  # type: ignore[arg-type]
