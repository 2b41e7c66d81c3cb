"""An evaluation directory's setting, task snapshot and lock (the layout is in :mod:`homiebot.eval.runner`).

``eval.json`` pins what decides an episode's outcome (planner, options, noise, round limit, perception) and
snapshots the tasks and the scenes' name tables, so that a resume cannot mix settings and the metrics can be
recomputed from the directory alone. ``.lock`` is held while an evaluation writes the directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, field_validator, model_validator

from homiebot.config import MAX_ROUNDS, ArticulationMode, NoiseMode, PerceptionMode, SkillsMode
from homiebot.config.planners import ExpertPlannerConfig, PlannerConfig, planner_config, planner_config_from
from homiebot.config.run import (
    RUN_KEY,
    PerceptionChoice,
    RecordingConfig,
    RunConfig,
    SimulatorConfig,
    SkillsConfig,
)
from homiebot.eval.keypaths import SceneNameResolver
from homiebot.files import atomic_write_json
from homiebot.tasks.suite import TaskSpec, list_suites, load_suite, resolve_suite

log = logging.getLogger(__name__)

EVAL_FILE = "eval.json"
INDEX_FILE = "results.jsonl"
LOCK_FILE = ".lock"
EPISODES_DIR = "episodes"
REFERENCE_DIR = "reference"
#: The planner and noise preset whose episodes are their own PLWSR reference.
EXPERT_PLANNER = "expert"
#: Suites whose tasks carry their own PARTNR evaluation functions are referenced by the expert that plans from
#: them (docs/partnr.md, "The PARTNR expert"); the goal expert cannot switch or clean.
REFERENCE_PLANNERS = {"partnr": "partnr_expert"}
NOISE_PRESETS: tuple[str, ...] = tuple(m.value for m in NoiseMode)

JobKind = Literal["episode", "reference"]


class EvalError(RuntimeError):
    """The evaluation cannot start or resume; the message says why and what to do."""


class EvalSettings(BaseModel):
    """What decides an episode's outcome; pinned in ``eval.json`` so a resume cannot mix settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    suite: str = "emmoe100"
    # The planner with its options, typed by its configuration class (homiebot.config.planners): an eval.json of a
    # directory started before, with "planner": NAME beside "planner_options", reads as the same configuration.
    planner: SerializeAsAny[PlannerConfig] = Field(default_factory=ExpertPlannerConfig)
    # The choices are the core's enums (homiebot/config.py): a command line's or eval.json's string validates
    # to its member, and a member equals, prints and serialises as its string.
    noise: NoiseMode = NoiseMode.OFF
    # The skills' setting (docs/robots.md "Physical skills"); the PLWSR reference episodes keep the oracle skills.
    skills: SkillsMode = SkillsMode.ORACLE
    # Learned policies in model slots (slot -> LeRobot policy folder; homie eval --skill-model), with the physical
    # skills only; the PLWSR reference episodes keep the scripted ones.
    skill_models: dict[str, str] = Field(default_factory=dict, exclude_if=lambda models: not models)
    # How the physical skills open and close doors and drawers (homie eval --articulation): with the physical skills
    # always the setting they run with, the skill set's default when none was given (_articulation_resolved), so
    # that a resume after the default changed is refused (prepare_manifest); None, left out of the dump, with the
    # oracle skills.
    articulation: ArticulationMode | None = Field(None, exclude_if=lambda value: value is None)
    max_rounds: int = Field(MAX_ROUNDS, ge=1)
    backend: str = "mujoco"
    # The episodes' world graph (homiebot.perception): "off" grounds through the scene's names (EMMOE); with a
    # graph the executor grounds through it (F2 for what no view has shown) and the episodes render. The PLWSR
    # reference episodes never use one: L* is the expert's path with full knowledge.
    perception: PerceptionMode = PerceptionMode.OFF
    # How a bundled text model named in the planner options runs when the options do not say
    # (homiebot.planner.models.text_runtime_defaults): a changed default changes the answers, so a resume across
    # it is refused. None: no bundled model, or a directory started before this was pinned (those SmolLM2
    # episodes ran the bundled Q4_1 weights with flash attention on).
    model_runtime: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _planner_by_name(cls, data: object) -> object:
        """``"planner": NAME`` with ``"planner_options": {...}`` (eval.json before the planner was typed, and
        callers that name the planner) as the planner's configuration; a recovery wrapper's base, named with its
        ``base_options``, as the base's configuration."""
        if not isinstance(data, Mapping) or not (isinstance(data.get("planner"), str) or "planner_options" in data):
            return data
        data = dict(data)
        name = str(data.pop("planner", EXPERT_PLANNER))
        options = dict(data.pop("planner_options", None) or {})
        if name == "recovery" and isinstance(options.get("base"), str):
            options["base"] = {"name": options.pop("base"), **dict(options.pop("base_options", None) or {})}
        data["planner"] = planner_config(name, options)
        return data

    @model_validator(mode="before")
    @classmethod
    def _articulation_resolved(cls, data: object) -> object:
        """The physical skills without ``articulation``: the skill set's default now
        (:func:`homiebot.agent.build.resolved_skills`)."""
        if not isinstance(data, Mapping) or data.get("articulation") is not None:
            return data
        if str(data.get("skills", SkillsMode.ORACLE)) != SkillsMode.PHYSICAL.value:
            return data
        from homiebot.agent.build import resolved_skills

        return {**data, "articulation": resolved_skills(SkillsConfig(mode=SkillsMode.PHYSICAL)).articulation}

    @field_validator("planner", mode="before")
    @classmethod
    def _planner_from_json(cls, value: object) -> PlannerConfig:
        return planner_config_from(value)

    @property
    def planner_name(self) -> str:
        return self.planner.name

    @property
    def planner_options(self) -> dict[str, object]:
        """The planner's options that differ from its defaults (the report's setting table)."""
        return self.planner.given()

    @property
    def reference_planner(self) -> str:
        """The expert whose noiseless episodes are the PLWSR reference for this suite."""
        return suite_expert(self.suite)

    @property
    def self_reference(self) -> bool:
        """The expert without noise or perception is its own PLWSR reference (no separate reference episodes)."""
        return (
            self.planner.name == self.reference_planner and self.noise == NoiseMode.OFF and not self.planner_options
            and self.perception == PerceptionMode.OFF and self.skills == SkillsMode.ORACLE
        )

    @property
    def reads_views(self) -> bool:
        """Whether the episodes need the views rendered even when the records keep none: a world graph is built
        from them, and a planner that declares ``needs_views`` (the random baseline) reads their segmentation."""
        from homiebot.planner.registry import planner_class

        return self.perception != PerceptionMode.OFF or planner_class(self.planner.name).needs_views

    def run_config(self, *, images: bool = False, video: bool = False) -> RunConfig:
        """The evaluation's run configuration (no task: each episode names its own), as
        :func:`homiebot.agent.build.build_episode` builds it and ``eval.json`` keeps it (``run``). With a world
        graph the episodes give model planners its text description
        (:class:`homiebot.perception.world_model.PerceptionConfig`'s default).

        ``images`` and ``video`` are what the records keep (``homie eval --images/--video``): the simulator renders
        for them or when the episodes read the views (:attr:`reads_views`), and not otherwise, so the dump is what
        the episodes ran with and ``homie run --config DIR/eval.json`` repeats it. No episode writes its own
        HTML page (the evaluation's report has them)."""
        return RunConfig(
            planner=self.planner,
            max_rounds=self.max_rounds,
            simulator=SimulatorConfig(backend=self.backend, render=images or video or self.reads_views),
            skills=SkillsConfig(mode=self.skills, noise=self.noise, models=self.skill_models,
                                articulation=self.articulation),
            perception=PerceptionChoice(mode=self.perception, describe_world=self.perception != PerceptionMode.OFF),
            recording=RecordingConfig(images=images, video=video, report=False),
        )

    def reference_run_config(self, *, images: bool = False, video: bool = False) -> RunConfig:
        """The PLWSR reference episodes' setting: the suite's expert, noiseless, with the oracle skills and
        without a world graph, rendering only for what the records keep."""
        return self.run_config(images=images, video=video).model_copy(update={
            "planner": planner_config(self.reference_planner),
            "simulator": SimulatorConfig(backend=self.backend, render=images or video),
            "skills": SkillsConfig(),
            "perception": PerceptionChoice(),
        })

    def label(self) -> str:
        label = f"{self.planner.name} planner, noise {self.noise}"
        if self.skills != SkillsMode.ORACLE:
            label = f"{label}, {self.skills} skills"
        if self.skill_models:
            label = f"{label} ({', '.join(f'learned {slot}' for slot in self.skill_models)})"
        return label if self.perception == PerceptionMode.OFF else f"{label}, perception {self.perception}"


@dataclass(frozen=True)
class Job:
    kind: JobKind
    task_id: str
    run: int

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.task_id}:{self.run}"

    def relpath(self) -> str:
        root = EPISODES_DIR if self.kind == "episode" else REFERENCE_DIR
        return f"{root}/{self.task_id}/run{self.run}"


def suite_expert(suite: str) -> str:
    """The expert of a suite: what ``--planner expert`` (and no ``--planner``) plays on it, and its PLWSR reference.
    On the PARTNR-style suite that is ``partnr_expert``: the goal expert would play its tasks without switching or
    cleaning (docs/partnr.md, "The PARTNR expert")."""
    return REFERENCE_PLANNERS.get(resolve_suite(suite), EXPERT_PLANNER)


def task_expert(task_id: str) -> str:
    """The expert that ``--planner expert`` (and no ``--planner``) plays on a built-in task: its suite's
    (:func:`suite_expert`), in ``homie run``, ``homie up`` and the ROS planner node as in ``homie eval``; the goal
    expert for a task of no suite."""
    for suite in list_suites():
        if any(task.id == task_id for task in load_suite(suite).tasks):
            return suite_expert(suite)
    return EXPERT_PLANNER


#: EMMOE's task attributes that name a kind of instruction (EMMOE, section 3.2: short/long horizon, open-ended,
#: logical and human-style tasks); a task with none of them is "plain". The first that applies decides.
TASK_KINDS = ("human-style", "open-ended", "logical")


def stratum_of(task: TaskSpec) -> tuple[str, str, str]:
    """A task's stratum for :func:`stratified_tasks`: (split, horizon, kind)."""
    horizon = "long" if "long-horizon" in task.attributes else "short"
    kind = next((k for k in TASK_KINDS if k in task.attributes), "plain")
    return task.split, horizon, kind


def stratified_tasks(tasks: Sequence[TaskSpec], n: int) -> list[TaskSpec]:
    """``n`` of ``tasks`` spread over their strata (:func:`stratum_of`) in proportion to the strata's sizes, at
    least one from each (so that n below the number of strata is refused), the largest remainders rounding up;
    within a stratum, tasks evenly spaced in the suite's order, so that the same call gives the same subset.

    Why: a subset by ``--limit`` is the suite's first tasks, which in EMMOE-100 are all training tasks of the
    same scenes; an ablation over them says nothing about the test split or the rare kinds of instruction.
    """
    strata: dict[tuple[str, str, str], list[TaskSpec]] = {}
    for task in tasks:
        strata.setdefault(stratum_of(task), []).append(task)
    if n >= len(tasks):
        return list(tasks)
    if n < len(strata):
        raise EvalError(f"a stratified subset of {n} cannot hold one task of each of the selection's {len(strata)} strata")
    keys = sorted(strata)
    extra = n - len(keys)  # one per stratum first, the rest in proportion to what each has left
    spare = {k: len(strata[k]) - 1 for k in keys}
    total = sum(spare.values())
    share = {k: extra * spare[k] / total if total else 0.0 for k in keys}
    counts = {k: 1 + int(share[k]) for k in keys}
    for k in sorted(keys, key=lambda k: (-(share[k] - int(share[k])), k))[: n - sum(counts.values())]:
        counts[k] += 1
    chosen: set[str] = set()
    for k in keys:
        members, m = strata[k], counts[k]
        chosen.update(members[(2 * i + 1) * len(members) // (2 * m)].id for i in range(m))
    return [t for t in tasks if t.id in chosen]


def select_tasks(suite: str, split: str = "all", task_ids: Sequence[str] | None = None) -> list[TaskSpec]:
    tasks = list(load_suite(suite).tasks)
    if split not in ("all", "train", "validation", "test"):
        raise EvalError(f"unknown split {split!r}; use all, train, validation (PARTNR-style suite) or test")
    if split != "all":
        tasks = [t for t in tasks if t.split == split]
    if task_ids:
        known = {t.id: t for t in tasks}
        unknown = [t for t in task_ids if t not in known]
        if unknown:
            raise EvalError(f"unknown task id(s) {', '.join(unknown)} in suite {suite!r} (split {split})")
        tasks = [known[t] for t in dict.fromkeys(task_ids)]
    if not tasks:
        raise EvalError(f"no task selected (suite {suite!r}, split {split})")
    return tasks


def scene_name_rows(scene: str) -> list[list[Any]]:
    """``[name, category, aliases]`` for every room, furniture and object of a library scene."""
    from homiebot.sim.scene import load_scene

    spec = load_scene(scene)
    entities: list[Any] = [*spec.rooms, *spec.furniture, *spec.objects]  # three pydantic models with these fields
    return [[e.name, e.category, list(e.aliases)] for e in entities]


def resolver_for(rows: Sequence[Sequence[Any]]) -> SceneNameResolver:
    from homiebot.tasks.goals import CATEGORY_GROUPS

    return SceneNameResolver.from_entities(((r[0], r[1], tuple(r[2])) for r in rows), groups=CATEGORY_GROUPS)


def is_finished(record_dir: Path) -> bool:
    from homiebot.data.record import SUMMARY_FILE

    return (record_dir / SUMMARY_FILE).is_file()


@contextlib.contextmanager
def eval_lock(out_dir: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``DIR/.lock``: two evaluations never write one directory. The kernel drops
    the lock when the holder dies, so a killed evaluation never leaves a stale lock behind."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(out_dir / LOCK_FILE, os.O_CREAT | os.O_RDWR, 0o666)  # the umask takes its part, as for open()
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise EvalError(f"another evaluation is writing {out_dir} (its {LOCK_FILE} is locked)") from None
        yield
    finally:
        os.close(fd)


def load_manifest(out_dir: Path) -> dict[str, Any]:
    path = out_dir / EVAL_FILE
    try:
        manifest: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return manifest
    except FileNotFoundError:
        raise EvalError(f"{out_dir} holds no evaluation ({EVAL_FILE} missing)") from None
    except json.JSONDecodeError as err:
        raise EvalError(
            f"{path} is damaged (invalid JSON: {err}); it cannot be rebuilt from the records: evaluate into a new --out"
        ) from None


def _has_episodes(out_dir: Path) -> bool:
    """Whether any episode of the evaluation in ``out_dir`` has finished (its record's summary written)."""
    root = out_dir / EPISODES_DIR
    return root.is_dir() and any(is_finished(run) for task in root.iterdir() if task.is_dir() for run in task.iterdir())


def prepare_manifest(
    out_dir: Path, settings: EvalSettings, tasks: Sequence[TaskSpec], *, images: bool = False, video: bool = False,
    articulation_given: bool = False,
) -> dict[str, Any]:
    """Create ``eval.json`` or check it against this run's setting; add newly selected tasks to it.

    ``images`` and ``video``: what this command's records keep (not pinned: a resume may keep more or less). The
    ``run`` section is the run configuration this command's episodes are built from
    (:meth:`EvalSettings.run_config`); a resume that keeps other views replaces it, since each record's
    ``summary.json`` holds the one it ran with.

    The physical skills' Open/Close setting (``articulation``) is pinned as they run it, the default resolved. A
    directory started before it was pinned so (physical skills, no ``articulation`` in ``eval.json``) ran with the
    default of its day, the simulator's before 2026-11-30 and the arm's since: with finished episodes it resumes
    only when the command names the setting (``articulation_given``: ``homie eval --articulation``), which is then
    pinned; without any, it takes this run's."""
    task_json = {t.id: t.model_dump(mode="json", by_alias=True) for t in tasks}
    path = out_dir / EVAL_FILE
    if path.exists():
        manifest = load_manifest(out_dir)
        pinned = manifest.get("settings", {})
        wanted = settings.model_dump(mode="json")
        adopted = False
        if (isinstance(pinned, dict) and pinned.get("skills") == SkillsMode.PHYSICAL.value
                and pinned.get("articulation") is None and wanted.get("articulation") is not None):
            if _has_episodes(out_dir) and not articulation_given:
                raise EvalError(
                    f"{out_dir} holds physical-skill episodes that do not record how Open and Close ran (started "
                    "before eval.json pinned it; the default was the simulator's until 2026-11-30, the arm's since): "
                    "resume with --articulation oracle or --articulation physical as they ran, or use another --out")
            pinned = manifest["settings"] = {**pinned, "articulation": wanted["articulation"]}
            adopted = True
        with contextlib.suppress(ValueError):
            # Settings added since the directory was started take their defaults (what those episodes ran with).
            pinned = EvalSettings.model_validate(pinned).model_dump(mode="json")
        if pinned != wanted:
            differing = [k for k in sorted(set(pinned) | set(wanted)) if pinned.get(k) != wanted.get(k)]
            diff = ", ".join(f"{k}: {pinned.get(k)!r} there, {wanted.get(k)!r} now" for k in differing)
            hint = "use another --out"
            if differing == ["articulation"] and pinned.get("articulation") is not None:
                hint = f"resume it with --articulation {pinned['articulation']}, or use another --out"
            raise EvalError(f"{out_dir} holds an evaluation with another setting ({diff}); {hint}")
        for task_id, spec in task_json.items():
            old = manifest["tasks"].get(task_id)
            if old is not None and old != spec:
                raise EvalError(
                    f"task {task_id} changed since {out_dir} was started (instruction, keypaths or goal); "
                    "use another --out to evaluate the new version"
                )
        changed = adopted or any(t not in manifest["tasks"] for t in task_json)
    else:
        manifest = {"format_version": 1, "settings": settings.model_dump(mode="json"), "tasks": {}, "names": {}}
        changed = True
    run = settings.run_config(images=images, video=video).dump()
    if manifest.get(RUN_KEY) != run:
        # The run configuration the episodes are built from (homie run --config DIR/eval.json repeats it); derived
        # from the settings, so a directory started before it was kept (or kept with the simulator rendering
        # when its episodes did not) gets it right on its next resume.
        manifest[RUN_KEY] = run
        changed = True
    manifest["tasks"].update({k: v for k, v in task_json.items() if k not in manifest["tasks"]})
    for task in tasks:
        if task.scene not in manifest["names"]:
            manifest["names"][task.scene] = scene_name_rows(task.scene)
            changed = True
    if changed:
        atomic_write_json(path, manifest, indent=1, sort_keys=True)
    return manifest


def remove_stale_temp_dirs(out_dir: Path) -> int:
    """Temp directories of records that were being written when a previous run died."""
    removed = 0
    for root in (out_dir / EPISODES_DIR, out_dir / REFERENCE_DIR):
        if not root.is_dir():
            continue
        for task_dir in root.iterdir():
            if not task_dir.is_dir():
                continue
            for child in task_dir.iterdir():
                if child.name.startswith(".") and (".tmp-" in child.name or ".old-" in child.name):
                    shutil.rmtree(child, ignore_errors=True)
                    removed += 1
    return removed
