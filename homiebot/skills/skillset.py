"""The skill-set layer the executor calls: low-level model names -> skills, with optional execution noise.

EMMOE's planner names a low-level model with every subtask (``Model: NoMaD``). Each :class:`Skill`
advertises the model names it serves:

* Go to: the navigation models ``NoMaD`` and ``PixNav`` (EMMOE table E2);
* Pick, Put, Open, Close: the manipulation models ``octo`` and ``RT-1-X``. Table E2 lists RT-1-X for
  picking and placing and Octo for opening and closing, but the paper's executor never rejects a
  manipulation model for a manipulation action, so both serve all four here; the executor's
  ``strict_models`` option applies table E2 when wanted;
* ``M3`` and ``oracle`` serve every skill (M3 is the Habitat oracle-skill suite EMMOE evaluates with).

Names match case-insensitively ("Octo", "nomad"). Behind every model is the same skill of the simulator
(the learned policies cannot run here); a model name selects nothing but whether the skill serves it.
:class:`SkillSet` implements the executor's ``SkillRunner`` protocol (``run(action, model, target,
place)``): one call is one attempt.

Model checking follows the executor (``homiebot/executor/executor.py``): by default any *known* model
name may run any skill, because EMMOE's executor only checks that the model is in its list; a name no
skill serves raises :class:`UnservedModelError` (the executor reports it as F1 before it gets here).
``strict_models=True`` requires the skill itself to serve the model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from homiebot.sim.base import Simulator
from homiebot.skills.actions import action_spec
from homiebot.skills.noise import ExecutionNoise, NoiseConfig, SupportsDrop, SupportsPrecheck
from homiebot.types import Action, SkillResult, SkillStatus, WorldState

NAVIGATION_MODELS: tuple[str, ...] = ("NoMaD", "PixNav")
MANIPULATION_MODELS: tuple[str, ...] = ("octo", "RT-1-X")
UNIVERSAL_MODELS: tuple[str, ...] = ("M3", "oracle")


#: The world as perception knows it, from the simulator's state (homiebot.perception.world_model.WorldModel.perceived_state).
PerceivedWorld = Callable[[WorldState], WorldState]


@runtime_checkable
class PlansInPerceivedWorld(Protocol):
    """A skill runner whose skills plan from geometry (where to stand, grasp and place, what to avoid) and can take
    it from perception's world graph instead of the simulator's state (``--skills physical`` with
    ``--perception``); the episode gives it the transform after the reset. The oracle skills place by name and
    do not declare this."""

    def plan_in(self, world: PerceivedWorld | None) -> None:
        """Plan from ``world(state)`` from now on (None: from the simulator's state)."""


class UnservedModelError(ValueError):
    """A skill was asked to run with a model it does not serve (the executor reports this as F1)."""


@dataclass(frozen=True)
class Skill:
    """One skill and the low-level model names that can execute it."""

    action: Action
    models: tuple[str, ...]

    def serves(self, model: str) -> bool:
        key = model.strip().lower()
        return any(key == m.lower() for m in self.models)

    def __call__(self, sim: Simulator, target: str, place: str | None = None) -> SkillResult:
        return action_spec(self.action).run(sim, target, place)


DEFAULT_SKILLS: tuple[Skill, ...] = (
    Skill(Action.GO_TO, NAVIGATION_MODELS + UNIVERSAL_MODELS),
    Skill(Action.PICK, MANIPULATION_MODELS + UNIVERSAL_MODELS),
    Skill(Action.PUT, MANIPULATION_MODELS + UNIVERSAL_MODELS),
    Skill(Action.OPEN, MANIPULATION_MODELS + UNIVERSAL_MODELS),
    Skill(Action.CLOSE, MANIPULATION_MODELS + UNIVERSAL_MODELS),
    # The household skills of ALFWorld's task types (homiebot/skills/actions.py), manipulations as well.
    Skill(Action.TURN_ON, MANIPULATION_MODELS + UNIVERSAL_MODELS),
    Skill(Action.TURN_OFF, MANIPULATION_MODELS + UNIVERSAL_MODELS),
    Skill(Action.CLEAN, MANIPULATION_MODELS + UNIVERSAL_MODELS),
    Skill(Action.HEAT, MANIPULATION_MODELS + UNIVERSAL_MODELS),
    Skill(Action.COOL, MANIPULATION_MODELS + UNIVERSAL_MODELS),
    # PARTNR's liquid skills (appendix A.9.1), the human's.
    Skill(Action.FILL, MANIPULATION_MODELS + UNIVERSAL_MODELS),
    Skill(Action.POUR, MANIPULATION_MODELS + UNIVERSAL_MODELS),
)


class SkillSet:
    """Skills over one simulator, with execution noise (off unless ``noise`` says otherwise).

    Args:
        sim: the simulator whose oracle skills run.
        noise: a :class:`NoiseConfig`, a preset name (``"noiseless"``, ``"emmoe_table4"``) or None (noiseless).
        seed: seeds the noise Generator; use the episode seed so that a run is reproducible.
        skills: the skills and the models they serve.
        strict_models: require the action's skill to serve the model (else any known model runs it).
    """

    def __init__(
        self,
        sim: Simulator,
        noise: NoiseConfig | str | None = None,
        seed: int = 0,
        skills: tuple[Skill, ...] = DEFAULT_SKILLS,
        strict_models: bool = False,
    ):
        self.sim = sim
        self.strict_models = strict_models
        config = NoiseConfig.preset(noise) if isinstance(noise, str) else (noise or NoiseConfig.preset("noiseless"))
        self.noise = ExecutionNoise(config, seed)
        self._skills = {s.action: s for s in skills}
        #: Attempts and successes per action since construction (what Table 4's SR is computed from).
        self.attempts: Counter[Action] = Counter()
        self.successes: Counter[Action] = Counter()

    def reseed(self, seed: int) -> None:
        """Restart the noise stream (call at each episode reset with the episode seed)."""
        self.noise = ExecutionNoise(self.noise.config, seed)

    @property
    def skills(self) -> tuple[Skill, ...]:
        return tuple(self._skills.values())

    def models(self) -> tuple[str, ...]:
        """Every model name some skill serves, in first-seen order."""
        seen: dict[str, None] = {}
        for skill in self._skills.values():
            for model in skill.models:
                seen.setdefault(model, None)
        return tuple(seen)

    def models_for(self, action: Action) -> tuple[str, ...]:
        skill = self._skills.get(action)
        return skill.models if skill is not None else ()

    def serves(self, action: Action, model: str) -> bool:
        skill = self._skills.get(action)
        return skill is not None and skill.serves(model)

    def reset_arm(self) -> None:
        self.sim.reset_arm()

    def knows(self, model: str) -> bool:
        """Whether some skill serves ``model``."""
        return any(skill.serves(model) for skill in self._skills.values())

    def run(self, action: Action, model: str, target: str, place: str | None = None) -> SkillResult:
        """One attempt of ``action`` by ``model`` on scene instances.

        Raises UnservedModelError for an action without skill, for a model no skill serves, and (with
        ``strict_models``) for a model the action's skill does not serve: the executor checks these first.
        """
        skill = self._skills.get(action)
        if skill is None:
            raise UnservedModelError(f"no skill for {action.value}")
        if not skill.serves(model) and (self.strict_models or not self.knows(model)):
            raise UnservedModelError(f"{model} does not serve {action.value}; it is served by {', '.join(skill.models)}")
        result = self._attempt(skill, target, place)
        self.attempts[action] += 1
        if result.success:
            self.successes[action] += 1
        return result

    def _attempt(self, skill: Skill, target: str, place: str | None) -> SkillResult:
        action = skill.action
        if self.noise.config.failure(action) > 0.0:
            if isinstance(self.sim, SupportsPrecheck):
                refusal = self.sim.precheck(action_spec(action).sim_name, target, place)
                if refusal is not None:
                    return refusal
            if self.noise.attempt_fails(action):
                if action is Action.PUT and self.noise.drops() and isinstance(self.sim, SupportsDrop):
                    dropped = self.sim.drop_held()
                    if dropped is not None:
                        return SkillResult(SkillStatus.DROPPED, f"the put failed and {dropped} fell out of the hand")
                return SkillResult(SkillStatus.EXECUTION_FAILED, f"{action.value} failed (execution noise '{self.noise.config.name}')")
        return skill(self.sim, target, place)

    def success_rates(self) -> dict[Action, float]:
        """Successes / attempts per action so far (NaN where nothing was attempted)."""
        return {a: (self.successes[a] / self.attempts[a]) if self.attempts[a] else float(np.nan) for a in self._skills}
