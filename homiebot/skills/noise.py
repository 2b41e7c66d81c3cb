"""Execution noise: seeded per-attempt skill failures that reproduce EMMOE's low-level success rates.

EMMOE's low-level models fail often (Table 4); the oracle skills of the embedded simulator never do. A
:class:`NoiseConfig` makes an attempt that *would* succeed fail with a per-skill probability, drawn
from a seeded ``numpy.random.Generator``; a failed Put may also drop the object (EMMOE's "the object is
missing", E2). Noise is off by default (preset ``noiseless``).

Preset ``emmoe_table4`` and how its numbers follow from the paper:

* **Per-attempt success = Table 4's SR.** The caption says the SR "represents an average value as each
  skill is attempted up to three times per execution": successes divided by attempts. If every attempt
  succeeds independently with probability q, Wald's identity gives E[successes] = q * E[attempts] for
  any stopping rule (stop at the first success, or after three tries), so successes / attempts estimates
  q itself. Hence failure probability per attempt = 1 - SR: Go to 0.5468, Pick 0.7755, Put (Place)
  0.5903, Open 0.5687, Close 0.6355. ``tests/sim/test_skills.py`` runs the executor's three-try rule
  against the preset and recovers the table's SR.
* **Drop probability 1.0.** Table H7 counts 178 failed Place executions; the E2 ("object is missing")
  columns of Tables H5 and H6 sum to 178 as well (26 in successful, 152 in failed trajectories), and E2
  can only come from a Put. So in the paper every failed placement lost the object.

Noise never hides a precise reason: when the simulator offers ``precheck`` (the embedded one does), an
attempt whose preconditions fail returns that failure (TOO_FAR, CONTAINER_CLOSED, ...) without drawing.
A failed attempt leaves the world as it was, except for a drop.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from homiebot.types import Action, SkillResult

#: Table 4 of the EMMOE paper: success rate per attempt, in percent ("Place" is the Put skill).
EMMOE_TABLE4_SR_PERCENT: dict[Action, float] = {
    Action.GO_TO: 45.32,
    Action.PICK: 22.45,
    Action.PUT: 40.97,
    Action.OPEN: 43.13,
    Action.CLOSE: 36.45,
}
SKILL_ACTIONS: tuple[Action, ...] = (Action.GO_TO, Action.PICK, Action.PUT, Action.OPEN, Action.CLOSE)


def _parse_action(key: Any) -> Action:
    if isinstance(key, Action):
        return key
    action = Action.parse(str(key).replace("_", " "))  # "go_to", "Go to", "pick"
    if action is None:
        raise ValueError(f"unknown skill {key!r}; skills: {', '.join(a.value for a in SKILL_ACTIONS)}")
    if action is Action.END:
        raise ValueError("End is not a skill and cannot fail")
    return action


class NoiseConfig(BaseModel):
    """Per-skill failure probability per attempt, and the chance that a failed Put drops the object."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "custom"
    failure_probability: dict[Action, float] = Field(default_factory=dict, description="per attempt, 0..1; missing = 0")
    drop_probability: float = Field(0.0, ge=0.0, le=1.0, description="P(object leaves the hand | Put attempt failed by noise)")

    @field_validator("failure_probability", mode="before")
    @classmethod
    def _keys(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        parsed: dict[Action, float] = {}
        for key, probability in value.items():
            parsed[_parse_action(key)] = probability
        return parsed

    @field_validator("failure_probability")
    @classmethod
    def _range(cls, value: dict[Action, float]) -> dict[Action, float]:
        for action, probability in value.items():
            if not 0.0 <= probability <= 1.0:
                raise ValueError(f"failure probability of {action.value} must lie in 0..1, got {probability}")
        return value

    @property
    def enabled(self) -> bool:
        return any(p > 0 for p in self.failure_probability.values())

    def failure(self, action: Action) -> float:
        return self.failure_probability.get(action, 0.0)

    @classmethod
    def preset(cls, name: str) -> NoiseConfig:
        try:
            return PRESETS[name]
        except KeyError:
            raise ValueError(f"unknown noise preset {name!r}; presets: {', '.join(sorted(PRESETS))}") from None


PRESETS: dict[str, NoiseConfig] = {
    "noiseless": NoiseConfig(name="noiseless"),
    "emmoe_table4": NoiseConfig(
        name="emmoe_table4",
        failure_probability={a: round(1.0 - sr / 100.0, 6) for a, sr in EMMOE_TABLE4_SR_PERCENT.items()},
        drop_probability=1.0,
    ),
}

#: The command lines' short names of the presets (``--noise off``, ``--noise emmoe``).
PRESET_ALIASES: dict[str, str] = {"off": "noiseless", "emmoe": "emmoe_table4"}


def preset_name(name: str, what: str = "noise preset") -> str:
    """The preset ``name`` means (a preset name or one of :data:`PRESET_ALIASES`); ValueError for any other,
    naming it as ``what`` (a command line passes its option, ``--noise``)."""
    key = name.strip()
    resolved = PRESET_ALIASES.get(key, key)
    if resolved not in PRESETS:
        raise ValueError(f"unknown {what} {name!r}; presets: {', '.join([*PRESET_ALIASES, *sorted(PRESETS)])}")
    return resolved


@runtime_checkable
class SupportsPrecheck(Protocol):
    """A simulator that can say, without acting, which failure a skill would return (or None)."""

    def precheck(self, action: str, target: str, place: str | None = None) -> SkillResult | None: ...


@runtime_checkable
class SupportsDrop(Protocol):
    """A simulator that can let the held object fall (a failed put that loses the object)."""

    def drop_held(self) -> str | None: ...


class ExecutionNoise:
    """The random draws of one noise configuration; one Generator per episode (seeded by the caller)."""

    def __init__(self, config: NoiseConfig, seed: int | np.random.SeedSequence | None = 0):
        self.config = config
        self.rng = np.random.default_rng(seed)

    def attempt_fails(self, action: Action) -> bool:
        probability = self.config.failure(action)
        if probability <= 0.0:
            return False  # no draw: a noiseless skill does not shift the random stream of the others
        return bool(self.rng.random() < probability)

    def drops(self) -> bool:
        probability = self.config.drop_probability
        if probability <= 0.0:
            return False
        return bool(self.rng.random() < probability)
