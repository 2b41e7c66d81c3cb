"""Planners by name: ``homie run --planner NAME``, ``build_planner(config)``, ``make_planner("expert")``.

Planners are registered as import paths so that heavy backends (torch, openai) are imported only when
chosen. Other modules add theirs with :func:`register_planner` or a one-line edit of :data:`_PLANNERS`;
installed packages add theirs through the ``homiebot.planners`` entry-point group (:mod:`homiebot.plugins`).

A planner is built from its typed configuration (:mod:`homiebot.config.planners`): :func:`configure_planner` makes
it from a command line's options (an option the planner does not take is an error that names the options it does
take; ``None`` values are dropped, so a CLI can pass its optional flags through unconditionally; a value given as
text is typed from the configuration's field (:func:`planner_options`), so that ``-p max_new_tokens=abc`` or ``-p
constrained=maybe`` is a one-line refusal, not a comparison error deep in a backend or a string that is always
true), :func:`check_planner_config` is what commands run before they write anything (the planner's cheap look at
what it needs outside the process, :meth:`~homiebot.planner.base.Planner.preflight`: an OpenAI-compatible server
that answers), and :func:`build_planner` builds it. :func:`make_planner` is the same path for Python callers.
"""

from __future__ import annotations

import enum
import importlib
import json
import types
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin

from homiebot.config.planners import (
    ConfigError,
    PlannerConfig,
    RecoveryPlannerConfig,
    planner_config,
    planner_config_class,
)
from homiebot.planner.base import Planner
from homiebot.plugins import PLANNERS_GROUP, entry_point_targets

_PLANNERS: dict[str, str] = {
    "expert": "homiebot.planner.expert:ExpertPlanner",
    "partnr_expert": "homiebot.planner.partnr_expert:PartnrExpertPlanner",
    "scripted": "homiebot.planner.scripted:ScriptedPlanner",
    "openai": "homiebot.planner.openai_backend:OpenAIPlanner",
    "hf": "homiebot.planner.hf_backend:HFPlanner",
    "hf_partnr": "homiebot.planner.partnr_world:PartnrWorldHFPlanner",
    "random": "homiebot.planner.random_planner:RandomPlanner",
    "recovery": "homiebot.recovery.planner:RecoveryPlanner",
    "react": "homiebot.planner.react:ReActPlanner",
    # The training data's experts (homie data collect; docs/training.md): a collected record names them.
    "prompt-bound-expert": "homiebot.planner.perturbed:PromptBoundExpertPlanner",
    "perturbed-expert": "homiebot.planner.perturbed:PerturbedExpertPlanner",
    "prompt-bound-partnr-expert": "homiebot.planner.partnr_expert:PromptBoundPartnrExpertPlanner",
}


class PlannerError(ValueError):
    """Unknown planner or bad options."""


def register_planner(name: str, target: str) -> None:
    """Register a planner class by import path (``"pkg.module:Class"``)."""
    _PLANNERS[name] = target


def _targets() -> dict[str, str]:
    return entry_point_targets(PLANNERS_GROUP, _PLANNERS)


def available_planners() -> list[str]:
    return sorted(_targets())


def planner_class(name: str) -> type[Planner]:
    """The class registered as ``name`` (to read ``privileged`` / ``accepts_free_text`` without building it)."""
    targets = _targets()
    try:
        target = targets[name]
    except KeyError:
        raise PlannerError(f"unknown planner {name!r}; available: {', '.join(sorted(targets))}") from None
    module_name, attr = target.split(":")
    cls = getattr(importlib.import_module(module_name), attr)
    if not (isinstance(cls, type) and issubclass(cls, Planner)):
        raise PlannerError(f"planner {name!r} ({target}) is not a homiebot.planner.base.Planner subclass")
    return cls


def free_text_planners() -> list[str]:
    """Names of the planners that can take a free-text instruction with no goal specification."""
    names = []
    for name in available_planners():
        try:
            if planner_class(name).accepts_free_text:
                names.append(name)
        except ImportError:
            continue  # an optional backend whose dependencies are absent
    return names


#: How ``-p key=true`` is written for a yes/no option (any case).
TRUE_WORDS = ("true", "1", "yes")
FALSE_WORDS = ("false", "0", "no")
_NONE_WORDS = ("none", "null")


def parse_planner_options(pairs: Sequence[str]) -> dict[str, str]:
    """``-p key=value`` pairs as typed: the values stay text until :func:`planner_options` types them from the
    planner's configuration (the last of a repeated key wins)."""
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise PlannerError(f"planner option {pair!r} must look like key=value (-p KEY=VALUE)")
        options[key.strip()] = value
    return options


#: Constructor arguments only a Python caller can give a planner (loaded objects: a model engine, a recovery LLM): not
#: configuration, handed to :func:`build_planner` beside it.
PLANNER_OBJECTS = ("engine", "llm")


def option_types(name: str) -> dict[str, object]:
    """Each option planner ``name`` takes, with its type: its configuration class's fields
    (:func:`homiebot.config.planners.planner_config_class`), and for the recovery wrapper its base's options in
    the constructor's spelling (``base_options``, which the class reads into ``base``)."""
    try:
        config_class = planner_config_class(name)
    except ConfigError as err:
        raise PlannerError(str(err)) from None
    types_: dict[str, object] = {key: field.annotation for key, field in config_class.model_fields.items()
                                 if key != "name"}
    if issubclass(config_class, RecoveryPlannerConfig):
        types_["base_options"] = Mapping[str, object]
    return types_


class _Mismatch(ValueError):
    """A value that is not of the parameter's type; the message says what was expected."""


def _type_value(value: Any, annotation: Any) -> Any:
    """``value`` as ``annotation`` says: text (from a command line) is read as that type; a value already of it
    passes. Types this does not know (engines, callables) take the value unchanged."""
    origin = get_origin(annotation)
    if annotation is Any or annotation is object:
        if isinstance(value, str):  # untyped: numbers and booleans read as JSON, the rest stays text
            try:
                return json.loads(value)
            except json.JSONDecodeError:
                return value
        return value
    if origin in (Union, types.UnionType):
        arms = get_args(annotation)
        if value is None or (isinstance(value, str) and value.strip().lower() in _NONE_WORDS and type(None) in arms):
            return None
        expected = []
        # A value already of one arm's type keeps it (``str | Path`` keeps a str); then text is tried arm by arm.
        for arm in sorted((a for a in arms if a is not type(None)), key=lambda a: not _is_instance(value, a)):
            try:
                return _type_value(value, arm)
            except _Mismatch as err:
                expected.append(str(err))
        raise _Mismatch(" or ".join(dict.fromkeys(expected)))
    if origin is Literal:
        choices = get_args(annotation)
        for choice in choices:
            if value == choice or (isinstance(value, str) and value.strip() == str(choice)):
                return choice
        raise _Mismatch(f"one of {', '.join(str(c) for c in choices)}")
    if annotation is bool:
        if isinstance(value, bool):
            return value
        word = str(value).strip().lower() if isinstance(value, (str, int)) else None
        if word in TRUE_WORDS or word in FALSE_WORDS:
            return word in TRUE_WORDS
        raise _Mismatch(f"a yes/no value ({'/'.join(TRUE_WORDS)} or {'/'.join(FALSE_WORDS)})")
    if annotation in (int, float):
        # An int is a float's value too (as in Python's own numeric tower); a bool is neither.
        accepted = (int,) if annotation is int else (int, float)
        if isinstance(value, accepted) and not isinstance(value, bool):
            return annotation(value)
        if isinstance(value, str):
            try:
                return annotation(value.strip())
            except ValueError:
                pass
        raise _Mismatch("an integer" if annotation is int else "a number")
    if annotation is str:
        if isinstance(value, str):
            return value
        raise _Mismatch("text")
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        for member in annotation:
            if value == member or (isinstance(value, str) and value.strip() == str(member.value)):
                return member
        raise _Mismatch(f"one of {', '.join(str(m.value) for m in annotation)}")
    if origin in (list, tuple, dict, Sequence, Mapping) and isinstance(value, str):
        try:  # a list or mapping given on a command line, as JSON
            parsed = json.loads(value)
        except json.JSONDecodeError:
            # Not JSON: the configuration class reads its own text forms (recovery's stages "1,2") and refuses
            # the rest in one line.
            return value
        if not isinstance(parsed, dict if origin in (dict, Mapping) else list):
            raise _Mismatch(f"JSON ({origin.__name__})")
        return parsed
    return value


def _is_instance(value: Any, annotation: Any) -> bool:
    target = get_origin(annotation) or annotation
    try:
        return isinstance(value, target) and not (isinstance(value, bool) and target in (int, float))
    except TypeError:  # Literal and other special forms
        return False


def planner_options(name: str, options: Mapping[str, object]) -> dict[str, object]:
    """``options`` checked against planner ``name``'s configuration (:func:`option_types`): ``None`` values dropped,
    an option it does not take refused with the list of those it takes, every value given as text typed from its
    field's annotation (integers, numbers, yes/no as true/false/1/0/yes/no, the choices of a ``Literal`` or enum,
    lists and mappings as JSON). Raises :class:`PlannerError`."""
    planner_class(name)  # an unknown planner is refused with the list of the known ones
    annotations = option_types(name)
    given = {k: v for k, v in options.items() if v is not None}
    unknown = sorted(k for k in given if k not in annotations)
    if unknown:
        takes = ", ".join(annotations) if annotations else "no options"
        raise PlannerError(f"planner {name!r} does not take option(s) {', '.join(unknown)}; it takes: {takes}")
    typed: dict[str, object] = {}
    for key, value in given.items():
        try:
            typed[key] = _type_value(value, annotations[key])
        except _Mismatch as err:
            raise PlannerError(f"planner {name!r}: option {key}={value} must be {err}") from None
    return {k: v for k, v in typed.items() if v is not None}


def make_planner(name: str, /, **options: object) -> Planner:
    """Planner ``name`` from keyword options, for Python callers (tests, benchmarks, notebooks): the options are
    its configuration (:func:`configure_planner`, with a command line's one-line refusals) and the loaded objects
    of :data:`PLANNER_OBJECTS` (an ``engine``), handed to :func:`build_planner` beside it."""
    objects = {key: options.pop(key) for key in PLANNER_OBJECTS if options.get(key) is not None}
    return build_planner(configure_planner(name, options), **objects)


def check_planner_config(config: PlannerConfig) -> None:
    """What a command runs on a run configuration's planner before it writes anything: the planner is installed
    (:class:`PlannerError` otherwise) and its :meth:`~homiebot.planner.base.Planner.preflight` passes (bad input:
    :class:`PlannerError`; a server that does not answer raises the backend's own error). A recovery wrapper's
    base is checked too."""
    cls = planner_class(config.name)
    if isinstance(config, RecoveryPlannerConfig):
        check_planner_config(config.base)
    try:
        cls.preflight(config.options())
    except (TypeError, ValueError, FileNotFoundError) as err:
        raise PlannerError(f"planner {config.name!r}: {err}") from err


def build_planner(config: PlannerConfig, **objects: object) -> Planner:
    """The planner a run configuration describes (:meth:`~homiebot.planner.base.Planner.from_config`); ``objects``:
    what only a Python caller can hand it (a loaded ``engine``). Bad options that only the planner can see (a model
    folder of no known architecture) are a :class:`PlannerError`."""
    cls = planner_class(config.name)
    try:
        return cls.from_config(config, **objects)
    except (TypeError, ValueError, FileNotFoundError) as err:
        raise PlannerError(f"planner {config.name!r}: {err}") from err


def configure_planner(name: str, options: Mapping[str, object]) -> PlannerConfig:
    """Planner ``name``'s run configuration from command-line options (``-p key=value`` text and the named flags):
    typed as :func:`planner_options` types them (its one-line refusals), then validated by the planner's
    configuration class (:mod:`homiebot.config.planners`). Raises :class:`PlannerError`."""
    typed = planner_options(name, options)
    try:
        return planner_config(name, typed)
    except ConfigError as err:
        raise PlannerError(str(err)) from None
