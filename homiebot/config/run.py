"""The run configuration: one typed, nested description of an episode's setting, validated once at the edge.

``homie run`` builds a :class:`RunConfig` from its options (or from ``--config FILE``, the options on the command
line winning), :func:`homiebot.agent.build.build_episode` makes the simulator, planner, executor, observers and
recorder from it, and its JSON dump is kept in the record's ``summary.json`` (``run``) and in an evaluation's
``eval.json`` (``run``), so that a recorded run can be repeated from either file.

Family: pydantic models, frozen, ``extra="forbid"``. The configuration arrives as text (JSON files, command
lines, the planner node's parameters) and pydantic turns a bad value into one error per field, which
:func:`~homiebot.config.planners.validation_message` prints as one line; ``model_dump(mode="json")`` is the
record's and ``eval.json``'s form, and the planner's class is picked from that JSON by its ``name``
(:mod:`homiebot.config.planners`). Pydantic is already a core dependency (task suites, evaluation settings);
draccus (LeRobot's dataclass-and-CLI library) is not installed and would be a second family and a new
dependency for the same job. The loop's hot path does not read these models: the builder turns them into the
frozen dataclasses the loop and the executor use (``EpisodeConfig``, ``ExecutorConfig``), once per episode.

Nothing here imports from the layers above (agent, eval, cli): ``homiebot.config`` is the lowest layer with
``homiebot.types`` (docs/architecture.md, "Layers").
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError, field_validator, model_validator

from homiebot.config import (
    FAR_THRESHOLD_M,
    GRAPH_BUILDERS,
    HISTORY_WINDOW,
    MAX_ROUNDS,
    MAX_TRIES,
    NEAR_THRESHOLD_M,
    ArticulationMode,
    NoiseMode,
    PerceptionMode,
    SkillsMode,
)
from homiebot.config.planners import (
    ConfigError,
    ExpertPlannerConfig,
    PlannerConfig,
    planner_config_from,
    validation_message,
)

#: The key of a run configuration inside a record's ``summary.json`` and an evaluation's ``eval.json``.
RUN_KEY = "run"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SimulatorConfig(_Section):
    """The simulator backend (``homiebot.sim.base.make_simulator``), whether it renders the four views and whether
    PARTNR's human is in the scene (a second agent's body: a run with a ``partner`` needs it)."""

    backend: str = "mujoco"
    render: bool = True
    human: bool = False


#: The skill layer's own names of the noise presets (homiebot.skills.noise.PRESETS), taken as their choices.
NOISE_PRESETS: Mapping[str, NoiseMode] = {"noiseless": NoiseMode.OFF, "emmoe_table4": NoiseMode.EMMOE}


#: The low-level model slots a learned policy can fill (EMMOE table E2's models; ``--skill-model``).
SKILL_MODEL_SLOTS: tuple[str, ...] = ("RT-1-X", "octo", "NoMaD", "PixNav")


@dataclass(frozen=True)
class SkillModelSyntax:
    """How the setting that names learned skill models is spelled where it is given, for its messages: the option
    (``--skill-model``) and the skill setting it needs (``--skills physical``)."""

    option: str
    physical: str


#: ``homie run``, ``homie eval`` and ``homie up sim``: ``--skill-model MODEL=DIR``, repeated.
CLI_SKILL_MODELS = SkillModelSyntax("--skill-model", "--skills physical")
#: ``ros2 launch homie sim.launch.py skill_models:=MODEL=DIR,MODEL=DIR`` (launch/launch/sim.launch.py).
LAUNCH_SKILL_MODELS = SkillModelSyntax("skill_models:=", "skills:=physical")


def parse_skill_models(entries: Iterable[str], skills: str | None,
                       syntax: SkillModelSyntax = CLI_SKILL_MODELS) -> dict[str, str]:
    """``MODEL=DIR`` entries as slot (EMMOE's spelling, given in any case) -> absolute folder; ValueError with one
    line for a bad entry, a slot given twice, or any given without the physical skills (``skills``: the mode the run
    will have). The folders are checked by :mod:`homiebot.skills.learned_skill` (their files, not here)."""
    slots = {slot.lower(): slot for slot in SKILL_MODEL_SLOTS}
    models: dict[str, str] = {}
    for entry in entries:
        name, sep, folder = entry.partition("=")
        if not sep or not name.strip() or not folder.strip():
            raise ValueError(f"{syntax.option} {entry!r}: give MODEL=DIR (MODEL one of {', '.join(SKILL_MODEL_SLOTS)})")
        slot = slots.get(name.strip().lower())
        if slot is None:
            raise ValueError(f"{syntax.option} {entry!r}: unknown model slot {name.strip()!r}; use one of "
                             f"{', '.join(SKILL_MODEL_SLOTS)}")
        if slot in models:
            raise ValueError(f"{syntax.option} {slot} is given twice")
        models[slot] = str(Path(folder.strip()).expanduser().absolute())
    if models and skills != SkillsMode.PHYSICAL.value:
        raise ValueError(f"{syntax.option} needs {syntax.physical} (a learned policy acts through the physical skills' "
                         f"controllers)")
    return models


class SkillsConfig(_Section):
    """The skill layer: the simulator's oracle skills or the physical ones (``mode``, docs/robots.md), with
    execution noise ``off`` or EMMOE table 4's (``emmoe``); the presets' own names (``noiseless``,
    ``emmoe_table4``) are taken too. ``models``: learned policies in model slots (slot -> LeRobot policy folder,
    ``--skill-model``; homiebot/skills/learned_skill.py), the slot names EMMOE's whatever case they are given in;
    they need the physical skills. ``articulation``: how the physical skills open and close doors and drawers
    (``--articulation``), None the skill set's default (``homiebot.skills.physical.skillset.ARTICULATION``), which
    :func:`homiebot.agent.build.build_episode` fills in when it makes the physical skills, so that a record keeps
    the setting they ran with; left out of the dump while None (the oracle skills, a graph's episodes)."""

    mode: SkillsMode = SkillsMode.ORACLE
    noise: NoiseMode = NoiseMode.OFF
    articulation: ArticulationMode | None = Field(None, exclude_if=lambda value: value is None)
    # Left out of the dump when empty: the records and eval.json of runs without learned skills stay as they were.
    models: dict[str, str] = Field(default_factory=dict, exclude_if=lambda models: not models)

    @field_validator("models", mode="before")
    @classmethod
    def _slot_names(cls, value: object) -> object:
        if not isinstance(value, Mapping):
            return value
        slots = {slot.lower(): slot for slot in SKILL_MODEL_SLOTS}
        named: dict[str, object] = {}
        for key, folder in value.items():
            slot = slots.get(str(key).strip().lower())
            if slot is None:
                raise ValueError(f"unknown model slot {key!r}; use one of {', '.join(SKILL_MODEL_SLOTS)}")
            named[slot] = folder
        return named

    @model_validator(mode="after")
    def _learned_needs_physical(self) -> SkillsConfig:
        if self.models and self.mode != SkillsMode.PHYSICAL:
            raise ValueError(f"learned skill models need the physical skills (mode {SkillsMode.PHYSICAL.value})")
        if self.articulation is not None and self.mode != SkillsMode.PHYSICAL:
            raise ValueError(f"articulation is a setting of the physical skills (mode {SkillsMode.PHYSICAL.value})")
        return self

    @field_validator("noise", mode="before")
    @classmethod
    def _preset_names(cls, value: object) -> object:
        return NOISE_PRESETS.get(value.strip(), value) if isinstance(value, str) else value


class ExecutorChecks(_Section):
    """The low-level executor's checks (EMMOE appendix E.1): tries per subtask, the D1/D2 reach thresholds, and
    whether a model that does not serve the action is an F1 error."""

    strict_models: bool = False
    max_tries: int = Field(MAX_TRIES, ge=1)
    far_threshold_m: float = Field(FAR_THRESHOLD_M, gt=0)
    near_threshold_m: float = Field(NEAR_THRESHOLD_M, ge=0)

    @model_validator(mode="after")
    def _near_below_far(self) -> ExecutorChecks:
        if self.near_threshold_m >= self.far_threshold_m:
            raise ValueError("near_threshold_m must be below far_threshold_m")
        return self


class PerceptionChoice(_Section):
    """Where the planner's world knowledge comes from (:class:`~homiebot.config.PerceptionMode`), and whether
    model planners get PARTNR's text world description (EMMOE forbids it; off by default)."""

    mode: PerceptionMode = PerceptionMode.OFF
    describe_world: bool = False

    @model_validator(mode="after")
    def _description_needs_a_graph(self) -> PerceptionChoice:
        if self.describe_world and self.mode == PerceptionMode.OFF:
            raise ValueError(f"describe_world needs perception {' or '.join(GRAPH_BUILDERS)}")
        return self


class RecordingConfig(_Section):
    """What the episode's record keeps besides its rounds: the views' PNGs (None: when the simulator renders),
    the video (only of rendered views) and the HTML page."""

    images: bool | None = None
    video: bool = True
    report: bool = True


#: How a pair is controlled (PARTNR section 4.1): one planner for both agents, or one each.
PairMode = Literal["centralized", "decentralized"]


class PartnerConfig(_Section):
    """A second agent in lock-step rounds: PARTNR's human (agent 1) beside the robot (docs/collaboration.md).

    ``planner`` names the human's planner as a pair names it (``expert``: PARTNR's expert on its share of the task;
    ``react``; ``scripted``; a registered planner; ``keyboard``: a person at ``homie play``), ``mode`` how the pair is
    controlled. The pair's planners are made by the caller and handed to the build path
    (:func:`homiebot.agent.build.build_episode`'s ``planner`` and ``partner``): they answer for each other (one
    centralized brain behind both agents, an expert restricted to its share) and live above the loop
    (:mod:`homiebot.multiagent.pair`, :mod:`homiebot.play`), so this section names them for the record, and the
    run's ``planner`` is then the robot's as the pair names it. Each agent's executor settings follow from its role
    (:mod:`homiebot.executor.roles`).
    """

    planner: str = "expert"
    mode: PairMode = "decentralized"


class RunConfig(_Section):
    """One episode's setting: what to do (a built-in task, or a free-text instruction in a scene), with which
    planner, on which simulator, skills, executor checks and perception, recorded how.

    ``seed`` is the run index: the scene is reset with the task's seed plus it (free text: it alone).
    """

    task: str | None = None
    instruction: str | None = None
    scene: str | None = None
    seed: int = 0
    max_rounds: int = Field(MAX_ROUNDS, ge=1)
    history_window: int = Field(HISTORY_WINDOW, ge=0)
    # SerializeAsAny: the dump holds the chosen planner's own options (a field typed as the base class would dump
    # only its name); the class is picked from the JSON by "name" (homiebot.config.planners).
    planner: SerializeAsAny[PlannerConfig] = Field(default_factory=ExpertPlannerConfig)
    simulator: SimulatorConfig = Field(default_factory=SimulatorConfig)
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    executor: ExecutorChecks = Field(default_factory=ExecutorChecks)
    perception: PerceptionChoice = Field(default_factory=PerceptionChoice)
    recording: RecordingConfig = Field(default_factory=RecordingConfig)
    partner: PartnerConfig | None = None

    @field_validator("planner", mode="before")
    @classmethod
    def _planner_by_name(cls, value: object) -> PlannerConfig:
        return planner_config_from(value)

    @model_validator(mode="after")
    def _one_thing_to_do(self) -> RunConfig:
        if self.task is not None and self.instruction is not None:
            raise ValueError("give either a task or a free-text instruction, not both")
        if self.instruction is not None and not self.instruction.strip():
            raise ValueError("the instruction is empty")
        if self.instruction is not None and self.scene is None:
            raise ValueError("a free-text instruction needs a scene")
        if self.partner is not None and not self.simulator.human:
            raise ValueError("partner: a second agent needs the human in the scene (simulator.human)")
        return self

    def dump(self) -> dict[str, object]:
        """The JSON form kept in records and ``eval.json`` (enums as their strings)."""
        return self.model_dump(mode="json")


def run_config(data: Mapping[str, object]) -> RunConfig:
    """A :class:`RunConfig` from its JSON form; ``ConfigError`` with one line for what does not validate."""
    try:
        return RunConfig.model_validate(dict(data))
    except ValidationError as err:
        raise ConfigError(validation_message(err)) from None
    except ConfigError:
        raise


def run_config_json(path: Path) -> dict[str, object]:
    """The run configuration's JSON held in ``path``: a record's ``summary.json`` or an evaluation's ``eval.json``
    (their ``run`` key), or a file that is a run configuration itself. ``ConfigError`` with one line when the file
    cannot be read or holds none."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path} is a folder; give its summary.json or eval.json") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot be read ({err})") from None
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}: invalid JSON ({err})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a run configuration is a JSON object")
    held = data.get(RUN_KEY, data)
    if not isinstance(held, dict) or "planner" not in held:
        raise ConfigError(f"{path} holds no run configuration (no {RUN_KEY!r} with a planner): it was written "
                          "before runs kept theirs; give the options on the command line")
    return held
