"""The skill-set layer: model names per skill, execution noise, the EMMOE Table 4 preset."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from homiebot.skills import (
    EMMOE_TABLE4_SR_PERCENT,
    ExecutionNoise,
    NoiseConfig,
    SkillSet,
    UnservedModelError,
)
from homiebot.types import Action, SkillStatus

MANIPULATION = (Action.PICK, Action.PUT, Action.OPEN, Action.CLOSE)


def test_models_per_skill(headless):
    skills = SkillSet(headless)
    assert skills.serves(Action.GO_TO, "NoMaD") and skills.serves(Action.GO_TO, "PixNav")
    assert not skills.serves(Action.GO_TO, "octo") and not skills.serves(Action.GO_TO, "RT-1-X")
    for action in MANIPULATION:
        assert skills.serves(action, "octo") and skills.serves(action, "RT-1-X")
        assert not skills.serves(action, "NoMaD")
    for action in (Action.GO_TO,) + MANIPULATION:
        assert skills.serves(action, "M3") and skills.serves(action, "oracle")
    assert skills.serves(Action.PICK, "rt-1-x") and skills.serves(Action.GO_TO, " nomad ")  # case-insensitive
    assert not skills.serves(Action.END, "M3") and not skills.serves(Action.PICK, "GPT-4o")
    assert set(skills.models()) == {"NoMaD", "PixNav", "octo", "RT-1-X", "M3", "oracle"}
    assert skills.models_for(Action.GO_TO) == ("NoMaD", "PixNav", "M3", "oracle")


def test_unserved_model_raises(headless):
    headless.reset("apartment_1", seed=0)
    lenient = SkillSet(headless)
    # Like the executor's default: a known model may run any skill (EMMOE checks list membership only).
    assert lenient.run(Action.PICK, "NoMaD", "apple").status is SkillStatus.TOO_FAR
    with pytest.raises(UnservedModelError, match="GPT-4o does not serve Pick"):
        lenient.run(Action.PICK, "GPT-4o", "apple")
    with pytest.raises(UnservedModelError):
        lenient.run(Action.END, "M3", "apple")
    strict = SkillSet(headless, strict_models=True)
    with pytest.raises(UnservedModelError, match="NoMaD does not serve Pick"):
        strict.run(Action.PICK, "NoMaD", "apple")
    assert strict.run(Action.PICK, "rt-1-x", "apple").status is SkillStatus.TOO_FAR


def test_noiseless_runs_the_simulator_skills(headless):
    headless.reset("apartment_1", seed=0)
    skills = SkillSet(headless)  # default: noiseless
    assert not skills.noise.config.enabled
    steps = [
        (Action.GO_TO, "NoMaD", "fridge", None),
        (Action.OPEN, "octo", "fridge", None),
        (Action.GO_TO, "PixNav", "apple", None),
        (Action.PICK, "RT-1-X", "apple", None),
        (Action.GO_TO, "NoMaD", "fridge", None),
        (Action.PUT, "RT-1-X", "apple", "fridge"),
        (Action.CLOSE, "octo", "fridge", None),
    ]
    for action, model, target, place in steps:
        result = skills.run(action, model, target, place)
        assert result.success, (action, result)
    assert headless.state().entities["apple"].parent == "fridge"
    assert skills.attempts[Action.GO_TO] == 3 and skills.successes[Action.GO_TO] == 3
    # A precise physical failure passes through unchanged.
    assert skills.run(Action.PUT, "M3", "apple", "fridge").status is SkillStatus.HAND_EMPTY


def test_noise_config_validation():
    config = NoiseConfig(failure_probability={"go_to": 0.5, "Pick": 0.25, Action.PUT: 0.1})
    assert config.failure(Action.GO_TO) == 0.5 and config.failure(Action.PICK) == 0.25
    assert config.failure(Action.OPEN) == 0.0 and config.enabled
    with pytest.raises(ValidationError, match="0..1"):
        NoiseConfig(failure_probability={"pick": 1.5})
    with pytest.raises(ValidationError, match="unknown skill"):
        NoiseConfig(failure_probability={"fly": 0.1})
    with pytest.raises(ValidationError, match="End"):
        NoiseConfig(failure_probability={"End": 0.1})
    with pytest.raises(ValidationError):
        NoiseConfig(drop_probability=2.0)
    with pytest.raises(ValidationError):
        NoiseConfig(failure_probability={}, typo=1)
    with pytest.raises(ValueError, match="presets: emmoe_table4, noiseless"):
        NoiseConfig.preset("loud")


def test_emmoe_table4_preset_values():
    preset = NoiseConfig.preset("emmoe_table4")
    expected = {Action.GO_TO: 45.32, Action.PICK: 22.45, Action.PUT: 40.97, Action.OPEN: 43.13, Action.CLOSE: 36.45}
    assert EMMOE_TABLE4_SR_PERCENT == expected
    for action, sr in expected.items():
        assert preset.failure(action) == pytest.approx(1 - sr / 100)
    assert preset.drop_probability == 1.0
    assert not NoiseConfig.preset("noiseless").enabled


def test_three_try_executions_recover_table4_success_per_attempt():
    """The executor's rule (up to three tries, stop at the first success) measured as successes / attempts
    gives back the table's SR: the derivation of the preset (Wald's identity)."""
    noise = ExecutionNoise(NoiseConfig.preset("emmoe_table4"), seed=123)
    for action, sr in EMMOE_TABLE4_SR_PERCENT.items():
        attempts = successes = 0
        for _ in range(20000):
            for _try in range(3):
                attempts += 1
                if not noise.attempt_fails(action):
                    successes += 1
                    break
        assert successes / attempts == pytest.approx(sr / 100, abs=0.01), action


def test_noise_keeps_precise_reasons_and_changes_nothing(headless):
    headless.reset("apartment_1", seed=0)
    always = NoiseConfig(name="always", failure_probability={a: 1.0 for a in (Action.GO_TO,) + MANIPULATION})
    skills = SkillSet(headless, always, seed=0)
    # Preconditions first: the apple is out of reach from the living room.
    assert skills.run(Action.PICK, "M3", "apple").status is SkillStatus.TOO_FAR
    assert skills.run(Action.GO_TO, "M3", "unicorn").status is SkillStatus.NOT_FOUND
    before = headless.state()
    result = skills.run(Action.GO_TO, "NoMaD", "fridge")
    assert result.status is SkillStatus.EXECUTION_FAILED and "always" in result.detail
    assert headless.state() == before  # a failed attempt leaves the world as it was


def test_failed_put_drops_the_object(headless):
    headless.reset("apartment_1", seed=0)
    headless.go_to("kitchen_counter")
    assert headless.pick("apple").success
    skills = SkillSet(headless, NoiseConfig(failure_probability={"put": 1.0}, drop_probability=1.0), seed=0)
    result = skills.run(Action.PUT, "RT-1-X", "apple", "kitchen_counter")
    assert result.status is SkillStatus.DROPPED and "apple" in result.detail
    state = headless.state()
    apple = state.entities["apple"]
    assert state.held is None and not apple.held and apple.parent is None
    assert apple.position[2] < 0.1 and apple.room == "kitchen"  # on the kitchen floor
    # It can be picked up again from the floor.
    assert headless.go_to("apple").success
    assert headless.pick("apple").success


def test_failed_put_without_drop_keeps_the_object(headless):
    headless.reset("apartment_1", seed=0)
    headless.go_to("kitchen_counter")
    headless.pick("apple")
    skills = SkillSet(headless, NoiseConfig(failure_probability={"put": 1.0}, drop_probability=0.0), seed=0)
    assert skills.run(Action.PUT, "RT-1-X", "apple", "kitchen_counter").status is SkillStatus.EXECUTION_FAILED
    assert headless.state().held == "apple"


def test_noise_is_seeded(headless):
    def outcomes(seed: int) -> list[SkillStatus]:
        headless.reset("apartment_1", seed=0)
        skills = SkillSet(headless, "emmoe_table4", seed=seed)
        statuses = []
        for _ in range(30):
            statuses.append(skills.run(Action.GO_TO, "NoMaD", "fridge").status)
            statuses.append(skills.run(Action.GO_TO, "NoMaD", "sofa").status)
        return statuses

    assert outcomes(5) == outcomes(5)
    assert outcomes(5) != outcomes(6)
    rate = np.mean([s is SkillStatus.SUCCESS for s in outcomes(5)])
    assert 0.2 < rate < 0.75  # around Go to's 45 %


def test_reseed_restarts_the_stream(headless):
    headless.reset("apartment_1", seed=0)
    skills = SkillSet(headless, "emmoe_table4", seed=1)
    first = [skills.noise.attempt_fails(Action.PICK) for _ in range(20)]
    skills.reseed(1)
    assert [skills.noise.attempt_fails(Action.PICK) for _ in range(20)] == first
