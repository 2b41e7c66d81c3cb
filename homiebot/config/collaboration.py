"""The two-agent evaluation's configuration (``homie eval --agents robot+human``; PARTNR section 4.2), in the run
configuration's family (pydantic, frozen, ``extra="forbid"``; :mod:`homiebot.config.run` says why).

A pair is named by its two planners: ``expert`` (PARTNR's heuristic expert on its share of the task), ``react``
(the ReAct tool planner), ``scripted`` (the human only: a fixed list of subtasks) or any registered planner
(decentralized only). The options given on the command line (``-p``, ``--model``) configure the pair's *model
planner*: the one planner of the pair that takes options (both agents may run it: a react pair). So they are
kept typed, as that planner's :class:`~homiebot.config.planners.PlannerConfig`, not as a loose mapping; two
different model planners in one pair would need two option sets, which one command line does not give, so such
a pair is refused. The scripted human's list is its own field (``-p script="Go to, sofa; Turn on, lamp"``).

``settings.json`` of a collaboration folder is :meth:`CollaborationConfig.pinned`, and a rerun resumes only
when it is equal. Folders written before this configuration was typed pinned a ``planner_options`` mapping;
they are refused for resuming (a new ``--out``), and ``homie metrics`` still reads them (the report needs only
the planners' names).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, field_validator

from homiebot.config import MAX_ROUNDS, NoiseMode, PerceptionMode
from homiebot.config.planners import (
    ConfigError,
    PartnrExpertPlannerConfig,
    PlannerConfig,
    planner_config,
    planner_config_from,
)
from homiebot.config.run import (
    NOISE_PRESETS,
    PairMode,
    PartnerConfig,
    PerceptionChoice,
    RecordingConfig,
    RunConfig,
    SimulatorConfig,
    SkillsConfig,
)

#: The pair's planners that take no options from the command line (PARTNR's expert, the scripted human).
OPTIONLESS_PAIR_PLANNERS = ("expert", "scripted")
#: The option of the scripted human (its subtasks, ``;``-separated), not of any model planner.
SCRIPT_OPTION = "script"


class CollaborationConfig(BaseModel):
    """Who plays the robot and the human, how they are controlled, and the episode settings they share."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    suite: str
    mode: PairMode = "decentralized"
    planner_robot: str = "expert"
    planner_human: str = "expert"
    # SerializeAsAny: the dump keeps the chosen planner's own options (as RunConfig.planner does).
    model_planner: SerializeAsAny[PlannerConfig] | None = None
    human_script: tuple[str, ...] = ()
    max_rounds: int = Field(MAX_ROUNDS, ge=1)
    noise: NoiseMode = NoiseMode.OFF
    perception: PerceptionMode = PerceptionMode.OFF

    @field_validator("noise", mode="before")
    @classmethod
    def _preset_names(cls, value: object) -> object:
        return NOISE_PRESETS.get(value.strip(), value) if isinstance(value, str) else value

    @field_validator("model_planner", mode="before")
    @classmethod
    def _planner_by_name(cls, value: object) -> PlannerConfig | None:
        return None if value is None else planner_config_from(value)

    @classmethod
    def from_options(cls, *, options: Mapping[str, object], **fields: object) -> CollaborationConfig:
        """The configuration of a command line: ``options`` (``-p`` and the named model options) become the typed
        configuration of the pair's model planner, ``script`` the scripted human's list. ``ConfigError`` (one
        line) for options no planner of the pair takes, or two model planners that would share them."""
        options = dict(options)
        script = options.pop(SCRIPT_OPTION, None)
        robot, human = str(fields.get("planner_robot", "expert")), str(fields.get("planner_human", "expert"))
        if script is not None and human != "scripted":
            raise ConfigError(f"-p {SCRIPT_OPTION}=... is the scripted human's list (--partner-planner scripted)")
        models = sorted({name for name in (robot, human) if name not in OPTIONLESS_PAIR_PLANNERS})
        if len(models) > 1:
            raise ConfigError(f"the pair's options configure one model planner; robot {robot!r} and human {human!r} "
                              "are two (use the same planner for both, or expert for one of them)")
        if not models and options:
            raise ConfigError(f"no planner of the pair takes options ({', '.join(sorted(options))}): "
                              f"{robot} and {human} take none")
        # The pair's ReAct is PARTNR's tool planner in the pair's two roles; its options are ReAct's.
        model_planner = planner_config(models[0], options) if models else None
        subtasks = tuple(s.strip() for s in str(script or "").split(";") if s.strip())
        return cls.model_validate({**fields, "model_planner": model_planner, "human_script": subtasks})

    def robot_planner_config(self) -> PlannerConfig:
        """The robot's planner as a run configuration names it: PARTNR's expert for ``expert`` (in a pair, on the
        robot's share of the task), else the pair's model planner."""
        if self.planner_robot in OPTIONLESS_PAIR_PLANNERS or self.model_planner is None:
            return PartnrExpertPlannerConfig() if self.planner_robot == "expert" else planner_config(self.planner_robot)
        return self.model_planner

    def run_config(self, task: str, run: int, *, pair: bool) -> RunConfig:
        """One episode's run configuration: run ``run`` of ``task``, the pair (the human in the scene, this pair's
        partner) or the robot alone (the baseline), with the episode settings the pair shares. With perception the
        simulator renders and the planners read their world graph's description."""
        perceives = self.perception != PerceptionMode.OFF
        return RunConfig(
            task=task,
            seed=run,
            max_rounds=self.max_rounds,
            planner=self.robot_planner_config(),
            simulator=SimulatorConfig(render=perceives, human=pair),
            skills=SkillsConfig(noise=self.noise),
            perception=PerceptionChoice(mode=self.perception, describe_world=perceives),
            recording=RecordingConfig(video=False, report=False),
            partner=PartnerConfig(planner=self.planner_human, mode=self.mode) if pair else None,
        )

    def options(self) -> dict[str, object]:
        """The model planner's constructor options (empty without one)."""
        return {} if self.model_planner is None else self.model_planner.options()

    def given_options(self) -> dict[str, object]:
        """The model planner's options that differ from their defaults (what a runtime check reads)."""
        return {} if self.model_planner is None else self.model_planner.given()

    def pinned(self) -> dict[str, object]:
        """What ``settings.json`` pins: the dump, less perception when off (folders started before it existed
        still resume) and the scripted list when empty."""
        wanted = self.model_dump(mode="json")
        if self.perception == PerceptionMode.OFF:
            del wanted["perception"]
        if not self.human_script:
            del wanted["human_script"]
        if self.model_planner is None:
            del wanted["model_planner"]
        return wanted
