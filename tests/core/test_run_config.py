"""The run configuration tree (homiebot/config/run.py, homiebot/config/planners.py; docs/architecture.md,
"Configuration"): one class per planner that mirrors its constructor, one-line refusals, a JSON dump that
validates back to the same configuration."""

from __future__ import annotations

import inspect

import pytest

from homiebot.config import NoiseMode, PerceptionMode
from homiebot.config.planners import (
    BUILTIN_PLANNER_CONFIGS,
    ConfigError,
    HFPlannerConfig,
    PlannerConfig,
    RecoveryPlannerConfig,
    planner_config,
)
from homiebot.config.run import RunConfig, run_config
from homiebot.planner.registry import PLANNER_OBJECTS, available_planners, build_planner, planner_class

#: Constructor arguments only a Python caller can give (loaded objects), not configuration, and the recovery
#: wrapper's spelling of its base's options (its configuration reads it into base).
PYTHON_ONLY = {*PLANNER_OBJECTS, "base_options"}


def _constructor(cls: type) -> inspect.Signature:
    """The signature that decides a planner's keywords (without ``self``): its ``__init__``, or, for one that only
    forwards ``*args, **kwargs``, the first base's that names them."""
    forwarding: inspect.Signature | None = None
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        if klass is object:
            break
        parameters = list(inspect.signature(init).parameters.values())[1:]
        if not parameters or not all(
            p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD) for p in parameters
        ):
            return inspect.Signature(parameters)
        forwarding = forwarding or inspect.Signature(parameters)
    return forwarding or inspect.Signature()


def test_every_builtin_planner_has_a_configuration_class() -> None:
    builtins = {"expert", "partnr_expert", "scripted", "openai", "hf", "hf_partnr", "random", "recovery", "react",
                "prompt-bound-expert", "perturbed-expert", "prompt-bound-partnr-expert"}
    assert builtins <= set(available_planners())
    assert set(BUILTIN_PLANNER_CONFIGS) == builtins


@pytest.mark.parametrize("name", sorted(BUILTIN_PLANNER_CONFIGS))
def test_a_planner_configuration_mirrors_its_constructor(name: str) -> None:
    """Same option names and the same defaults as the constructor, so a configured planner and one built from
    keyword arguments are the same planner (a new constructor argument fails this until the class has it)."""
    cls = planner_class(name)
    signature = _constructor(cls)
    if "config" in signature.parameters:
        # A planner built from its configuration (HFPlanner): it declares that class, and its keywords are validated
        # into it, so there is no second list of options to keep equal.
        assert cls.config_class is BUILTIN_PLANNER_CONFIGS[name]  # type: ignore[attr-defined]
        return
    parameters = {p.name: p for p in signature.parameters.values() if p.name not in PYTHON_ONLY}
    fields = {key: field for key, field in BUILTIN_PLANNER_CONFIGS[name].model_fields.items() if key != "name"}
    assert set(fields) == set(parameters)
    for key, parameter in parameters.items():
        if parameter.default is inspect.Parameter.empty:
            assert fields[key].is_required(), key
        else:
            default = fields[key].default
            assert default == parameter.default or tuple(default) == tuple(parameter.default), key


def test_dump_validates_back_to_the_same_configuration() -> None:
    config = run_config({
        "task": "emmoe-084",
        "planner": {"name": "recovery", "base": {"name": "hf", "model": "smollm2", "decode": "fast"}, "stages": "1,2"},
        "skills": {"noise": "emmoe_table4"},
        "perception": {"mode": "privileged", "describe_world": True},
    })
    assert isinstance(config.planner, RecoveryPlannerConfig)
    assert isinstance(config.planner.base, HFPlannerConfig) and config.planner.base.decode == "fast"
    assert config.planner.stages == (1, 2) and config.skills.noise is NoiseMode.EMMOE
    dumped = config.dump()
    assert dumped["planner"]["base"]["model"] == "smollm2"  # type: ignore[index]  # the base's own options
    assert run_config(dumped) == config
    assert config.perception.mode is PerceptionMode.PRIVILEGED


@pytest.mark.parametrize(("data", "message"), [
    ({"planner": {"name": "hf", "model": "x", "max_new_token": 3}}, "planner.max_new_token: unknown option"),
    ({"planner": {"name": "hf"}}, "planner.model: Field required"),
    ({"planner": {"name": "nope"}}, "unknown planner 'nope'; available: "),
    ({"planner": {"name": "expert", "close_opened": "maybe"}}, "planner.close_opened: Input should be a valid boolean"),
    ({"planner": {"name": "recovery", "base": {"name": "expert"}, "stages": "5"}}, "recovery stages are 1, 2, 3 and 4"),
    ({"planner": {"name": "recovery", "base": {"name": "recovery", "base": {"name": "expert"}}}},
     "cannot itself be a recovery wrapper"),
    ({"task": "emmoe-084", "instruction": "tidy"}, "either a task or a free-text instruction"),
    ({"instruction": "tidy"}, "a free-text instruction needs a scene"),
    ({"perception": {"describe_world": True}}, "describe_world needs perception privileged or conceptgraph"),
    ({"skills": {"noise": "loud"}}, "skills.noise: Input should be 'off' or 'emmoe'"),
    ({"max_rounds": 0}, "max_rounds: Input should be greater than or equal to 1"),
    ({"simulator": {"backend": "mujoco", "renderr": False}}, "simulator.renderr: unknown option"),
])
def test_a_bad_configuration_is_one_line(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        run_config(data)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_configured_planner_is_built_with_its_options() -> None:
    planner = build_planner(planner_config("expert", {"interact_range_m": 1.5, "close_opened": False}))
    assert planner.interact_range_m == 1.5 and planner.close_opened is False  # type: ignore[attr-defined]
    wrapper = build_planner(planner_config("recovery", {"base": {"name": "expert"}, "mode": "none"}))
    assert wrapper.inner.name == "expert"  # type: ignore[attr-defined]


def test_a_planner_without_a_configuration_class_gets_one_from_its_constructor() -> None:
    from homiebot.config.planners import _derived_config
    from homiebot.planner.base import Planner

    class Walker(Planner):
        def __init__(self, steps: int = 2, tag: str | None = None, note=None) -> None:
            self.steps, self.tag, self.note = steps, tag, note

        def plan(self, request: object) -> str:  # type: ignore[override]
            return ""

    derived = _derived_config("walker", Walker)
    config = derived.model_validate({"name": "walker", "steps": "3"})
    assert isinstance(config, PlannerConfig) and config.options() == {"steps": 3, "tag": None, "note": None}
    assert RunConfig(planner=config).dump()["planner"] == {"name": "walker", "steps": 3, "tag": None, "note": None}
    assert derived.model_validate({"name": "walker", "note": "anything"}).options()["note"] == "anything"
    with pytest.raises(ValueError, match="steps"):
        derived.model_validate({"name": "walker", "steps": "many"})


@pytest.mark.parametrize("options", [
    {"base": "expert", "base_options": {"interact_range_m": 1.2}},  # the wrapper's constructor form (-p base=...)
    {"base": '{"name": "expert", "interact_range_m": 1.2}'},  # -p 'base={...}'
    {"base": {"name": "expert", "interact_range_m": 1.2}},
])
def test_a_recovery_base_is_taken_in_every_written_form(options: dict[str, object]) -> None:
    config = planner_config("recovery", {**options, "mode": "none"})
    assert isinstance(config, RecoveryPlannerConfig) and config.base.options()["interact_range_m"] == 1.2


def test_base_options_beside_a_configured_base_are_refused() -> None:
    with pytest.raises(ConfigError, match="give the base planner's options inside base"):
        planner_config("recovery", {"base": {"name": "expert"}, "base_options": {"interact_range_m": 1.2}})
