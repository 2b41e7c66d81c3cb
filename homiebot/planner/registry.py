"""Planners by name: ``make_planner("expert")``, ``homie run --planner NAME``.

Planners are registered as import paths so that heavy backends (torch, openai) are imported only when
chosen. Other modules add theirs with :func:`register_planner` or a one-line edit of :data:`_PLANNERS`;
installed packages add theirs through the ``homiebot.planners`` entry-point group (:mod:`homiebot.plugins`).

Options given to :func:`make_planner` are checked against the planner's constructor: an option the
planner does not take is an error that names the options it does take (``None`` values are dropped,
so a CLI can pass its optional flags through unconditionally).
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

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


def make_planner(name: str, **options: Any) -> Planner:
    cls = planner_class(name)
    options = {k: v for k, v in options.items() if v is not None}
    signature = inspect.signature(cls.__init__)
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
    known = [p for p in signature.parameters if p != "self"]
    unknown = sorted(k for k in options if k not in known)
    if unknown and not accepts_any:
        takes = ", ".join(known) if known else "no options"
        raise PlannerError(f"planner {name!r} does not take option(s) {', '.join(unknown)}; it takes: {takes}")
    try:
        return cls(**options)
    except (TypeError, ValueError, FileNotFoundError) as err:
        raise PlannerError(f"planner {name!r}: {err}") from err
