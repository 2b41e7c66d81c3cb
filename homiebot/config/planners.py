"""One configuration class per planner, registered by the planner's name.

A run's planner is one of these (``RunConfig.planner``): the class is picked by the ``name`` field of the
configuration's JSON (``{"name": "hf", "model": "smollm2", ...}``), so a typo in an option is refused with the
names the planner takes, and the JSON dump of a run holds every option with its type. The fields of each class
mirror its planner's constructor (names and defaults; ``tests/config/test_planner_configs.py`` compares them);
what only a Python caller can hand a planner (a loaded engine, a recovery LLM, a list of scripted answers in
memory) stays a constructor argument and is not configuration.

The classes live here, in the lowest layer, and not beside their planners: the run configuration is read and
validated before any planner module (torch, openai) is imported, and nothing here imports upward.

Planners from other packages (the ``homiebot.planners`` entry points) bring their own class as the planner
class's ``config_class`` attribute (a :class:`PlannerConfig` subclass whose ``name`` is the entry point's);
a planner without one is configured by a class derived from its constructor's annotated parameters.
"""

from __future__ import annotations

import importlib
import inspect
import json
import typing
from collections.abc import Mapping
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from homiebot.config import FAR_THRESHOLD_M, NEAR_THRESHOLD_M, AnswerFormat, DecodeMode
from homiebot.plugins import PLANNERS_GROUP, entry_point_targets


class ConfigError(ValueError):
    """A configuration that does not validate; the message is one line naming the option and what is wrong."""


def validation_message(error: ValidationError, *, prefix: str = "") -> str:
    """A pydantic error as one line: ``where: message; where: message`` (pydantic's own text takes several lines
    per problem). ``prefix`` names the part of the configuration the error's locations are relative to."""
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in (prefix, *item.get("loc", ())) if p != "")
        message = str(item.get("msg", "")).removeprefix("Value error, ")
        if item.get("type") == "extra_forbidden":
            message = "unknown option"
        parts.append(f"{where or 'configuration'}: {message}")
    return "; ".join(parts)


class PlannerConfig(BaseModel):
    """What every planner configuration has: the planner's registered name. Subclasses add the planner's
    options, each typed, with the constructor's default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str

    def options(self) -> dict[str, object]:
        """The constructor's keyword arguments: every field but ``name``, as Python values (enums stay members)."""
        return {key: getattr(self, key) for key in type(self).model_fields if key != "name"}

    def given(self) -> dict[str, object]:
        """The options that differ from their defaults, as JSON values; a nested planner's configuration (a
        recovery wrapper's base) as ``{"name": ..., its given options}``. What a report shows as the planner's
        options, and what says whether the planner is the suite's expert as it comes."""
        given: dict[str, object] = {}
        dumped = self.model_dump(mode="json")
        for key, field in type(self).model_fields.items():
            value = getattr(self, key)
            if key == "name":
                continue
            if isinstance(value, PlannerConfig):
                given[key] = {"name": value.name, **value.given()}
            elif field.is_required() or value != field.get_default(call_default_factory=True):
                given[key] = dumped[key]
        return given


class ExpertPlannerConfig(PlannerConfig):
    """The goal expert (:class:`homiebot.planner.expert.ExpertPlanner`): EMMOE's reach thresholds (appendix E.1)."""

    name: Literal["expert"] = "expert"
    interact_range_m: float = Field(1.0, gt=0)
    near_threshold_m: float = Field(NEAR_THRESHOLD_M, ge=0)
    far_threshold_m: float = Field(FAR_THRESHOLD_M, gt=0)
    close_opened: bool = True


class PromptBoundExpertConfig(ExpertPlannerConfig):
    """The training data's expert (:class:`homiebot.planner.perturbed.PromptBoundExpertPlanner`): the expert's
    options; where it chooses among equally good candidates it chooses by what the text prompt shows."""

    name: Literal["prompt-bound-expert"] = "prompt-bound-expert"  # type: ignore[assignment]  # narrower literal


class PerturbedExpertConfig(ExpertPlannerConfig):
    """The expert with EMMOE's designed decision errors (:class:`homiebot.planner.perturbed.PerturbedExpertPlanner`):
    the expert's options and the probability of an injected wrong subtask per round."""

    name: Literal["perturbed-expert"] = "perturbed-expert"  # type: ignore[assignment]  # narrower literal
    inject: float = Field(0.04, ge=0.0, le=1.0)


class PartnrExpertPlannerConfig(PlannerConfig):
    """The PARTNR expert (:class:`homiebot.planner.partnr_expert.PartnrExpertPlanner`): no options."""

    name: Literal["partnr_expert"] = "partnr_expert"


class PromptBoundPartnrExpertConfig(PartnrExpertPlannerConfig):
    """The PARTNR-style suite's training-data expert
    (:class:`homiebot.planner.partnr_expert.PromptBoundPartnrExpertPlanner`): an OR-list's object chosen by what the
    text prompt shows, not the nearest."""

    name: Literal["prompt-bound-partnr-expert"] = "prompt-bound-partnr-expert"  # type: ignore[assignment]  # narrower


class ScriptedPlannerConfig(PlannerConfig):
    """Answers from a script (:class:`homiebot.planner.scripted.ScriptedPlanner`)."""

    name: Literal["scripted"] = "scripted"
    outputs: tuple[str, ...] | None = None
    path: str | None = None
    on_exhausted: Literal["end", "error"] = "end"


class RandomPlannerConfig(PlannerConfig):
    """The random baseline over visible instances (:class:`homiebot.planner.random_planner.RandomPlanner`)."""

    name: Literal["random"] = "random"
    seed: int = 0
    min_pixels: int = Field(20, ge=1)


class OpenAIPlannerConfig(PlannerConfig):
    """An OpenAI-compatible chat server (:class:`homiebot.planner.openai_backend.OpenAIPlanner`)."""

    name: Literal["openai"] = "openai"
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    constrained: bool = False
    grammar_field: Literal["structured_outputs", "guided_grammar", "grammar"] = "structured_outputs"
    icl_example: bool = False
    include_history: bool = True
    max_tokens: int = Field(512, ge=1)
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    analysis_max_chars: int = Field(600, ge=1)
    temperature: float | None = 0.0
    top_p: float | None = None
    seed: int | None = None
    image_detail: Literal["low", "high", "auto"] | None = None
    timeout_s: float = Field(120.0, gt=0)
    max_retries: int = Field(3, ge=0)
    concurrency: int = Field(8, ge=1)


#: The options a shipped model's name sets (:mod:`homiebot.planner.shipped`) unless they are given: the prompt and
#: answer its training data had (``homie data build sft --episodes --thoughtless --no-system-prompt``: the growing
#: chat without a system turn, answers without the Analysis line), constrained, on llama.cpp. Flash attention and
#: the forced-text lookahead change llama.cpp's arithmetic, not the prompt: they are set because EMMOE-100 over 3
#: runs kept its success rate with them (235 of 300 without, 239 with, no F1) for about 9 % less CPU a round
#: (docs/results/planning-round-2026-11-30.md); ``-p flash_attention=false -p forced_lookahead=false`` gives the
#: rounds those earlier figures were measured with.
SHIPPED_MODEL_OPTIONS: Mapping[str, Mapping[str, object]] = {
    "homiebot-smollm2": {
        "constrained": True,
        "answer_format": AnswerFormat.SUBTASK,
        "system_turn": False,
        "include_history": True,
        "runtime": "llama_cpp",
        "flash_attention": True,
        "forced_lookahead": True,
    },
}


class HFPlannerConfig(PlannerConfig):
    """A local model (:class:`homiebot.planner.hf_backend.HFPlanner`): a transformers folder (image-text or
    text-only), or a bundled GGUF model by name on llama.cpp (``runtime``, ``weights``, ``prefix_reuse``,
    ``lookup_tokens``, ``flash_attention`` are that text runtime's). docs/models.md."""

    name: Literal["hf"] = "hf"
    model: str
    adapter: str | None = None
    constrained: bool = False
    icl_example: bool = False
    include_history: bool = True
    max_new_tokens: int | None = Field(None, ge=1)
    analysis_max_chars: int = Field(600, ge=1)
    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    device: str = "auto"
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    quantization: Literal["4bit", "8bit", "fp8"] | None = None
    cache_implementation: Literal["static"] | None = None
    compile: bool = True
    attn_implementation: str | None = None
    merge_adapter: bool = True
    trust_remote_code: bool = False
    torch_threads: int | None = Field(None, ge=1)
    decode: DecodeMode = DecodeMode.AUTO
    share_prefix: bool = False
    sdpa_gqa: bool | None = None
    batched_vision: bool | None = None
    runtime: Literal["auto", "llama_cpp", "transformers"] = "auto"
    prefix_reuse: bool = True
    lookup_tokens: int = Field(0, ge=0)
    # llama.cpp, greedy under a grammar: the text the grammar forces is not decoded token by token
    # (homiebot.planner.text_lm.TextModelConfig.jump_forward).
    jump_forward: bool = True
    # With jump-forward: single-choice tokens taken with the forced text, its given-back token drafted; fewer
    # evaluations, but near ties may turn (homiebot.planner.text_lm.TextModelConfig.forced_lookahead).
    forced_lookahead: bool = False
    weights: Literal["q8_0", "bundled"] = "q8_0"
    flash_attention: bool = False
    prompt_log: str | None = None
    system_turn: bool = True
    # The text mode's later turns in the compact form (homiebot.planner.text_planning.compact_turn): for a model
    # trained on it (homie data build sft --episodes --compact-turns).
    compact_turns: bool = False
    answer_format: AnswerFormat = AnswerFormat.ANALYSIS
    # With constrained, in the text mode: each argument takes only names of its kind (a Pick an object, an Open an
    # articulated furniture, ...; homiebot.planner.partnr_world.text_mode_grammar), not any name of the world.
    typed_grammar: bool = False
    # generate: the answer is decoded (constrained or free); likelihood: SayCan-style, the grammar's subtasks
    # ranked by the model's likelihood (homiebot.planner.likelihood; the subtask-only format, llama.cpp).
    decision: Literal["generate", "likelihood"] = "generate"

    @model_validator(mode="before")
    @classmethod
    def _shipped_model_defaults(cls, data: object) -> object:
        """A shipped model's name brings the options it was trained for (:data:`SHIPPED_MODEL_OPTIONS`); an option
        given (``-p``, a flag, a run configuration) wins."""
        if not isinstance(data, Mapping) or not isinstance(data.get("model"), str):
            return data
        defaults = SHIPPED_MODEL_OPTIONS.get(str(data["model"]).strip().lower())
        return data if defaults is None else {**defaults, **data}


class HFPartnrPlannerConfig(HFPlannerConfig):
    """The hf planner shown PARTNR's text world (:class:`homiebot.planner.partnr_world.PartnrWorldHFPlanner`)."""

    name: Literal["hf_partnr"] = "hf_partnr"  # type: ignore[assignment]  # a narrower literal than the base's


class ReActPlannerConfig(PlannerConfig):
    """PARTNR's ReAct planner (:class:`homiebot.planner.react.ReActPlanner`)."""

    name: Literal["react"] = "react"
    model: str = "smollm2"
    constrained: bool = True
    perception_tools: bool = True
    max_llm_calls: int = Field(50, ge=1)
    max_calls_per_round: int = Field(4, ge=1)
    thought_max_chars: int = Field(160, ge=1)
    runtime: str = "auto"
    torch_threads: int | None = Field(None, ge=1)
    trace_log: str | None = None


class RecoveryPlannerConfig(PlannerConfig):
    """Failure recovery around another planner (:class:`homiebot.recovery.planner.RecoveryPlanner`):
    ``base`` is that planner's own configuration. docs/recovery.md."""

    name: Literal["recovery"] = "recovery"
    # SerializeAsAny: the base's own options are dumped with it (a field typed as the base class dumps its name only).
    base: SerializeAsAny[PlannerConfig]
    mode: Literal["cmfr", "cot", "none"] = "cmfr"
    stages: tuple[int, ...] = (1, 2, 3, 4)
    search: bool = True
    max_calls_per_round: int = Field(4, ge=1)
    max_tokens: int = Field(120, ge=1)
    max_steps: int = Field(2, ge=1)
    constrained: bool = True
    own_cache: bool = True
    prompts: str | None = None
    stats_dir: str | None = None
    rules: bool = False
    memory: bool = True

    @model_validator(mode="before")
    @classmethod
    def _base_named_with_its_options(cls, data: object) -> object:
        """The wrapper's constructor form, ``base=NAME`` beside ``base_options={...}`` (``--planner recovery -p base=hf
        -p 'base_options={"model": "smollm2"}'``, and eval.json before planners were typed), as the base's
        configuration; ``base`` given as a JSON object's text is read as one."""
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        base = data.get("base")
        if isinstance(base, str) and base.strip().startswith("{"):
            try:
                data["base"] = base = json.loads(base)
            except json.JSONDecodeError as err:
                raise ValueError(f"base: not a JSON object ({err})") from None
        options = data.pop("base_options", None)
        if isinstance(base, str):
            if options is not None and not isinstance(options, Mapping):
                raise ValueError("base_options: must be an object of the base planner's options")
            data["base"] = {"name": base, **dict(options or {})}
        elif options:
            raise ValueError("base_options: give the base planner's options inside base")
        return data

    @field_validator("base", mode="before")
    @classmethod
    def _base_by_name(cls, value: object) -> PlannerConfig:
        base = planner_config_from(value)
        if isinstance(base, RecoveryPlannerConfig):
            raise ValueError("the base planner of a recovery wrapper cannot itself be a recovery wrapper")
        return base

    @field_validator("stages", mode="before")
    @classmethod
    def _stages_from_text(cls, value: object) -> object:
        """``--recovery-stages 1,2`` as text, as the command lines and the planner node give it."""
        if isinstance(value, str):
            items = [item.strip() for item in value.split(",") if item.strip()]
            if not all(item.isdigit() for item in items):
                raise ValueError(f"recovery stages must be numbers 1-4 separated by commas, got {value!r}")
            return tuple(int(item) for item in items)
        return value

    @field_validator("stages")
    @classmethod
    def _stages_known(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        bad = sorted(set(value) - {1, 2, 3, 4})
        if bad:
            raise ValueError(f"recovery stages are 1, 2, 3 and 4; got {bad}")
        return tuple(sorted(set(value)))


#: The built-in planners' configuration classes by planner name (the names of homiebot.planner.registry).
BUILTIN_PLANNER_CONFIGS: Mapping[str, type[PlannerConfig]] = {
    cls.model_fields["name"].default: cls
    for cls in (
        ExpertPlannerConfig,
        PromptBoundExpertConfig,
        PerturbedExpertConfig,
        PartnrExpertPlannerConfig,
        PromptBoundPartnrExpertConfig,
        ScriptedPlannerConfig,
        RandomPlannerConfig,
        OpenAIPlannerConfig,
        HFPlannerConfig,
        HFPartnrPlannerConfig,
        ReActPlannerConfig,
        RecoveryPlannerConfig,
    )
}


def _derived_config(name: str, planner: type) -> type[PlannerConfig]:
    """A configuration class for an installed planner that declares none: one field per keyword parameter of its
    constructor, typed by its annotation, with its default (a parameter without a default is required)."""
    init = planner.__init__  # type: ignore[misc]  # the class's own constructor is what is read
    try:
        hints = typing.get_type_hints(init)
    except Exception:  # annotations naming what only type checkers import: untyped options are not offered
        hints = {}
    fields: dict[str, tuple[object, object]] = {}
    for parameter in list(inspect.signature(init).parameters.values())[1:]:
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        # An unannotated parameter takes what its constructor takes (the package did not say more).
        fields[parameter.name] = (hints.get(parameter.name, object), default)
    model: type[PlannerConfig] = create_model(  # type: ignore[call-overload]
        f"{planner.__name__}Config",
        __base__=PlannerConfig,
        __config__=None,
        name=(Literal[name], name),
        **fields,
    )
    return model


def planner_config_class(name: str) -> type[PlannerConfig]:
    """The configuration class of planner ``name``: a built-in's, an installed planner's ``config_class``, or one
    derived from its constructor. ``ConfigError`` for a name no planner has."""
    builtin = BUILTIN_PLANNER_CONFIGS.get(name)
    if builtin is not None:
        return builtin
    targets = entry_point_targets(PLANNERS_GROUP, {})
    target = targets.get(name)
    if target is None:
        known = sorted({*BUILTIN_PLANNER_CONFIGS, *targets})
        raise ConfigError(f"unknown planner {name!r}; available: {', '.join(known)}")
    module_name, _, attribute = target.partition(":")
    planner = getattr(importlib.import_module(module_name), attribute)
    declared = getattr(planner, "config_class", None)
    if isinstance(declared, type) and issubclass(declared, PlannerConfig):
        return declared
    if not isinstance(planner, type):
        raise ConfigError(f"planner {name!r} ({target}) is not a class")
    return _derived_config(name, planner)


def planner_config_from(value: object) -> PlannerConfig:
    """A planner configuration from its JSON form (``{"name": ..., options}``) or an instance (kept)."""
    if isinstance(value, PlannerConfig):
        return value
    if not isinstance(value, Mapping) or not isinstance(value.get("name"), str):
        raise ValueError("a planner configuration is an object with the planner's name: {\"name\": \"expert\", ...}")
    return planner_config_class(str(value["name"])).model_validate(dict(value))


def planner_config(name: str, options: Mapping[str, object] | None = None) -> PlannerConfig:
    """Planner ``name`` configured with ``options`` (values of their types, or text from a command line that
    pydantic reads as the field's type). ``ConfigError`` with one line for a bad option."""
    cls = planner_config_class(name)
    try:
        return cls.model_validate({**dict(options or {}), "name": name})
    except ValidationError as err:
        raise ConfigError(f"planner {name!r}: {validation_message(err)}") from None
