"""Planners and simulators from other packages, through Python entry points.

An installed package registers its classes under the entry-point groups :data:`PLANNERS_GROUP`
(``homiebot.planners``) and :data:`SIMULATORS_GROUP` (``homiebot.simulators``); for example in its
``pyproject.toml``::

    [project.entry-points."homiebot.planners"]
    my_planner = "my_package.planner:MyPlanner"

    [project.entry-points."homiebot.simulators"]
    my_sim = "my_package.sim:MySimulator"

after which ``homie run --planner my_planner`` and ``make_simulator("my_sim")`` find them. The registries
(:mod:`homiebot.planner.registry`, :mod:`homiebot.sim.base`) read the groups each time they look a name up
(the installed packages can change while a process runs a test suite), and built-in names win: a package
cannot replace ``expert`` or ``mujoco`` behind the user's back (it is logged and skipped). Entry points
are the packaging standard for this (Python Packaging User Guide, "Entry points specification";
:func:`importlib.metadata.entry_points`). docs/architecture.md, "Extending".
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from importlib.metadata import entry_points

log = logging.getLogger(__name__)

PLANNERS_GROUP = "homiebot.planners"
SIMULATORS_GROUP = "homiebot.simulators"


def entry_point_targets(group: str, builtin: Mapping[str, str]) -> dict[str, str]:
    """``builtin`` plus the ``name -> "module:attribute"`` targets installed packages declare in ``group``.

    A declared name that a built-in already uses is skipped with a warning; a target that is not of the form
    ``module:attribute`` is skipped with a warning (the registry would fail on it later, far from the cause).
    """
    targets = dict(builtin)
    for point in entry_points(group=group):
        if point.name in builtin:
            log.warning("%s entry point %r (%s) ignored: the name is built in", group, point.name, point.value)
            continue
        module, _, attribute = point.value.partition(":")
        if not module or not attribute or " " in point.value:
            log.warning("%s entry point %r ignored: %r is not 'module:attribute'", group, point.name, point.value)
            continue
        targets.setdefault(point.name, point.value)
    return targets
