"""Task specifications: instruction, scene, attributes, split, keypaths (EMMOE appendix C.1) and goal.

Built-in suites live in ``homiebot/tasks/suites/*.yaml`` (``emmoe100.yaml``: the 100 tasks of appendix B).
Task ids are ``emmoe-001`` ... ``emmoe-100`` following the paper's numbering.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from homiebot.files import load_yaml
from homiebot.tasks.goals import GoalSpec
from homiebot.types import EMMOE_ACTIONS, HOUSEHOLD_ACTIONS

SUITE_DIR = Path(__file__).parent / "suites"

Attribute = Literal["short-horizon", "long-horizon", "open-ended", "logical", "human-style"]
ATTRIBUTES: tuple[str, ...] = ("short-horizon", "long-horizon", "open-ended", "logical", "human-style")


class TaskSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    instruction: str
    scene: str
    seed: int = Field(0, description="scene placement seed of run 0; run r uses seed + r")
    attributes: list[Attribute] = Field(min_length=1)
    split: Literal["train", "validation", "test"] = "train"
    keypaths: list[list[str]] = Field(min_length=1, description='ordered nodes such as "[Open, fridge]"; last is "[End]"')
    goal: GoalSpec
    encoding: str = Field("", description="how a task the embedded world cannot express literally was encoded")
    paper_index: int | None = None
    evaluation: dict[str, Any] | None = Field(
        None, description="PARTNR evaluation function (PARTNR's JSON; docs/partnr.md); None: derived from the goal"
    )

    @field_validator("evaluation")
    @classmethod
    def _evaluation_well_formed(cls, evaluation: dict[str, Any] | None, info: ValidationInfo) -> dict[str, Any] | None:
        if evaluation is not None:
            from homiebot.tasks.partnr.language import EvaluationFunction

            EvaluationFunction.from_json(evaluation, str(info.data.get("id", "?")))
        return evaluation

    @field_validator("keypaths")
    @classmethod
    def _nodes_well_formed(cls, keypaths: list[list[str]]) -> list[list[str]]:
        for path in keypaths:
            if not path:
                raise ValueError("a keypath needs at least one node")
            for node in path:
                if not (node.startswith("[") and node.endswith("]")):
                    raise ValueError(f"keypath node {node!r} must be bracketed like '[Go to, fridge]'")
        return keypaths


class TaskSuite(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    tasks: list[TaskSpec]


class TaskError(ValueError):
    """A task or suite could not be loaded, or an id is unknown."""


#: Suite names accepted beside the suite files' names (``--suite emmoe``).
SUITE_ALIASES = {"emmoe": "emmoe100"}
#: The MuEP-style suite: ALFWorld's task types in a file and format of their own
#: (:mod:`homiebot.eval.muep_suite`), played by their own runner (``homie eval --suite muep``).
MUEP_SUITE = "muep"
#: Its file: not beside the suite files (every ``suites/*.yaml`` is loaded as a TaskSuite).
MUEP_SUITE_FILE = SUITE_DIR / "alfred" / "muep.yaml"


def list_suites() -> list[str]:
    """The suites of tasks in this module's format (``suites/*.yaml``): what :func:`load_suite` loads."""
    return sorted(p.stem for p in SUITE_DIR.glob("*.yaml"))


def suite_names() -> list[str]:
    """Every name a ``--suite`` option takes, in every command: the suite files, their aliases and MuEP's."""
    return sorted({*list_suites(), *SUITE_ALIASES, MUEP_SUITE})


def resolve_suite(name: str) -> str:
    """The suite a ``--suite`` name means: a suite file's name (aliases resolved) or :data:`MUEP_SUITE`. Every
    command resolves its ``--suite`` here, so a name one command takes is a name every command takes."""
    resolved = SUITE_ALIASES.get(name, name)
    if resolved != MUEP_SUITE and resolved not in list_suites():
        raise TaskError(f"unknown suite {name!r}; available: {', '.join(suite_names())}")
    return resolved


def load_suite(name: str = "emmoe100") -> TaskSuite:
    """A suite of tasks by any name :func:`resolve_suite` takes. The MuEP-style suite is not in this format:
    asking for it is a TaskError that says where it is played."""
    resolved = resolve_suite(name)
    if resolved == MUEP_SUITE:
        raise TaskError(f"suite {name!r} holds ALFWorld's task types, played by homie eval --suite {MUEP_SUITE} "
                        "(docs/muep.md), not by this command")
    return _load_suite_file(resolved)


@cache
def _load_suite_file(name: str) -> TaskSuite:
    path = SUITE_DIR / f"{name}.yaml"
    try:
        return TaskSuite.model_validate(load_yaml(path.read_text()))
    except ValidationError as err:
        details = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()[:10])
        raise TaskError(f"invalid suite {path}: {details}") from None


def all_tasks() -> list[TaskSpec]:
    return [t for suite in list_suites() for t in load_suite(suite).tasks]


def get_task(task_id: str) -> TaskSpec:
    for task in all_tasks():
        if task.id == task_id:
            return task
    known = [t.id for t in all_tasks()]
    hint = f" (e.g. {', '.join(known[:3])} ... {known[-1]}; `homie tasks` lists them)" if known else ""
    raise TaskError(f"unknown task id {task_id!r}{hint}")


def task_actions(task: TaskSpec | None) -> tuple[str, ...]:
    """The action list an episode of ``task`` offers the planner: PARTNR-style tasks (their own evaluation
    function) switch and clean, so they get the household list (docs/textworld.md); EMMOE's tasks and free
    instructions keep the paper's list."""
    return HOUSEHOLD_ACTIONS if task is not None and task.evaluation is not None else EMMOE_ACTIONS
