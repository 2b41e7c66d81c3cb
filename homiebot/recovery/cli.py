"""What ``--recovery`` and ``--recovery-stages`` do on ``homie run``, ``homie eval`` and ``homie up``: wrap the
chosen planner.

``--recovery cmfr|cot|none`` turns ``--planner NAME -p k=v ...`` into the registered ``recovery`` planner whose
configuration holds the base planner's (:func:`recovery_config`; an evaluation's ``eval.json`` pins the whole
setting); without ``--recovery`` the planner runs alone. ``--recovery-stages 1,2,3,4`` picks CMFR's stages and
``--recovery-search/--no-recovery-search`` its object search. ``homie up`` hands the three to the planner node
as parameters, which builds the same wrapper with :func:`recovery_config_from_parameters`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from homiebot.config.planners import PlannerConfig, planner_config
from homiebot.files import atomic_write_json, atomic_write_text
from homiebot.planner.base import Planner
from homiebot.recovery.planner import MODES, RecoveryPlanner, parse_stages
from homiebot.recovery.stats import STATS_DIR, load_stats, summarize, summary_markdown


def recovery_planner(
    planner: str,
    options: dict[str, Any],
    recovery: str | None,
    stages: str | None = None,
    search: bool | None = None,
    stats_dir: Path | None = None,
) -> tuple[str, dict[str, Any]]:
    """The planner name and options to build: unchanged without ``recovery``, else the wrapper around them.
    Raises ``ValueError`` with one line for a bad mode or stage list."""
    if recovery is None:
        if stages is not None or search is not None:
            raise ValueError("--recovery-stages and --recovery-search need --recovery cmfr (or cot)")
        return planner, options
    if recovery not in MODES:
        raise ValueError(f"unknown --recovery {recovery!r}; choose {', '.join(MODES)}")
    if planner == "recovery":
        raise ValueError("--recovery wraps the --planner; do not also name --planner recovery")
    if stages is not None and recovery != "cmfr":
        raise ValueError("--recovery-stages applies to --recovery cmfr")
    wrapped: dict[str, Any] = {
        "base": planner,
        "base_options": {k: v for k, v in options.items() if v is not None},
        "mode": recovery,
    }
    if stages is not None:
        wrapped["stages"] = sorted(parse_stages(stages))
    if search is not None:
        wrapped["search"] = search
    if stats_dir is not None:
        wrapped["stats_dir"] = str(stats_dir)
    return "recovery", wrapped


def recovery_config(
    base: PlannerConfig,
    recovery: str | None,
    stages: str | None = None,
    search: bool | None = None,
    stats_dir: Path | None = None,
) -> PlannerConfig:
    """:func:`recovery_planner` on run configurations: ``base`` unchanged without ``recovery``, else the recovery
    wrapper's configuration holding it. Raises ``ValueError`` with one line for a bad mode or stage list, and
    :class:`~homiebot.config.planners.ConfigError` (a ``ValueError`` too) for what the wrapper's class refuses."""
    _, options = recovery_planner(base.name, {}, recovery, stages, search, stats_dir)
    if recovery is None:  # the planner alone (a recovery planner named by --planner recovery included)
        return base
    options.pop("base_options")
    return planner_config("recovery", {**options, "base": base})


#: The planner node's ``recovery_search`` parameter: "" leaves the wrapper's default (on).
SEARCH_PARAMETER: dict[str, bool | None] = {"": None, "on": True, "off": False}


def recovery_config_from_parameters(base: PlannerConfig, recovery: str, stages: str, search: str) -> PlannerConfig:
    """:func:`recovery_config` from the planner node's parameters (strings; "" = not given). Raises ``ValueError``
    with one line for a bad value."""
    if search not in SEARCH_PARAMETER:
        raise ValueError(f"recovery_search must be on, off or empty, got {search!r}")
    return recovery_config(base, recovery or None, stages or None, SEARCH_PARAMETER[search])


def write_recovery_summary(eval_dir: Path, report_dir: Path | None = None) -> dict[str, Any] | None:
    """Pool an evaluation's per-episode recovery statistics (``DIR/recovery/``) into ``recovery.json`` and
    ``recovery.md`` beside its report; None when the evaluation ran without ``--recovery``."""
    folder = eval_dir / STATS_DIR
    if not folder.is_dir():
        return None
    episodes = load_stats(folder)
    if not episodes:
        return None
    summary = summarize(episodes)
    target = report_dir or eval_dir
    target.mkdir(parents=True, exist_ok=True)
    atomic_write_json(target / "recovery.json", summary, indent=1)
    atomic_write_text(target / "recovery.md", summary_markdown(summary))
    return summary


def write_episode_stats(planner: Planner, record_dir: Path) -> Path | None:
    """``homie run`` and the planner node (``homie up``): the episode's recovery statistics as
    ``RECORD/recovery.json`` (None without ``--recovery``)."""
    if not isinstance(planner, RecoveryPlanner) or not record_dir.is_dir():
        return None
    path = record_dir / "recovery.json"
    atomic_write_json(path, planner.stats.to_json(), indent=1)
    return path
