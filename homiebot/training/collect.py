"""``homie data collect``: expert episodes recorded as training data, in this process.

One simulator, the episodes one after another, each written atomically by the episode recorder into
``OUT/episodes/<task>/run<r>/`` (the layout of an evaluation directory, so ``homie metrics`` and the data
builders read it). Seeds: run ``r`` of a task uses ``task.seed + seed_offset + r``, so training data can be
collected on seeds an evaluation never plays (``--seed-offset``). An episode already recorded is skipped,
so an interrupted collection resumes where it stopped.

Beside each record, ``text_prompts.jsonl`` keeps, for every round, the chat the hf planner's text mode
sends a text-only model in that round with ``include_history=False`` (:func:`homiebot.planner.text_planning.
fresh_text_chat`: the task, the world at the start, the history, what changed and the rest of the round's
instruction), built from the request by that mode's own function and its per-episode transcript, so that ``homie
data build --text-observation`` trains on the prompt the planner sends, and the round's world description as it
is now (``world``: what ``--episodes`` replays the growing chat with). ``text_world.txt`` keeps the first
round's world description (what older builds read). With ``equally_good``, ``equally_good.jsonl`` keeps for every
round the subtasks the expert holds equally good there (:meth:`homiebot.planner.expert.ExpertPlanner.equally_good`:
its own answer first), which the offline accuracy may accept beside the exact answer
(:mod:`homiebot.training.offline_eval`).

**Seeds the evaluation never plays.** An evaluation plays run ``r`` of a task on the scene seed
``task.seed + r`` (:mod:`homiebot.eval.runner`); a collection whose scene seeds meet one that any suite's evaluation
plays (EMMOE-100's, the PARTNR-style suite's, MuEP's: the apartments are the same and a seed places their objects
alike; :mod:`homiebot.tasks.reserved`, the one table every collector asks) is refused before anything is written
(:func:`check_seeds`). EMMOE-100's task seeds are 37 apart, so ``--seed-offset 10 --runs 10`` (training) and
``--seed-offset 20 --runs 3`` (validation) fit between them; the PARTNR-style suite's are consecutive within an
apartment, so its collections go past them all (``--seed-offset 3000``: seeds from 10000; docs/training.md).

**The suite's expert.** EMMOE-100's episodes are the goal expert's (``expert``: the prompt-bound expert,
``perturbed-expert``: with injected decision errors); the PARTNR-style suite's are the PARTNR expert's
(:class:`homiebot.planner.partnr_expert.PartnrExpertPlanner`, which plans from the task's evaluation function and
switches, cleans and fills: ``--planner expert``), as ``homie eval --suite partnr`` plays them, except that it
chooses an OR-list's object by what the prompt shows (``prompt-bound-partnr-expert`` in the records:
:class:`~homiebot.planner.partnr_expert.PromptBoundPartnrExpertPlanner`).
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.text_planning import TextTranscript
from homiebot.tasks.reserved import EVALUATION_RUNS
from homiebot.training.episodes import TEXT_PROMPTS_FILE, TEXT_WORLD_FILE, TrainingDataError

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from homiebot.tasks.suite import TaskSpec

PLANNERS = ("expert", "perturbed-expert")

#: The suite whose expert is the PARTNR expert (the collection's ``--planner expert`` there).
PARTNR_SUITE = "partnr"
#: The planner a collection of a suite plays when none is named (``homie data collect --planner``'s default): the
#: PARTNR-style suite's collection plays its expert only, the MuEP-style suite's its privileged expert (or, named,
#: the searching one); every other suite's (EMMOE-100) the perturbed expert, whose injected decision errors give
#: EMMOE's re-plans.
SUITE_PLANNERS = {PARTNR_SUITE: "expert", "muep": "expert"}
DEFAULT_PLANNER = "perturbed-expert"

#: Per round, the subtasks the expert holds equally good (``equally_good=True``; module docstring).
EQUALLY_GOOD_FILE = "equally_good.jsonl"


@dataclass
class CollectSummary:
    out: Path
    episodes: int = 0
    skipped: int = 0
    succeeded: int = 0
    rounds: int = 0
    codes: Counter[str] = field(default_factory=Counter)
    injections: int = 0
    seconds: float = 0.0
    seed_offset: int = 0

    def lines(self) -> list[str]:
        failed = {k: v for k, v in sorted(self.codes.items()) if k != "OK"}
        return [
            f"{self.episodes} episodes recorded ({self.skipped} already there), {self.succeeded} successful, "
            f"{self.rounds} rounds in {self.seconds:.1f} s",
            f"  scene seeds: the task's seed + {self.seed_offset} (--seed-offset) + the run",
            f"  failed rounds by code: {', '.join(f'{k} {v}' for k, v in failed.items()) or 'none'}; "
            f"injected decision errors: {self.injections}",
            f"  records: {self.out / 'episodes'}",
        ]


def text_world_prefix(request: PlanRequest) -> str:
    """The first round's world description as ``text_world.txt`` keeps it (its heading and text, then a newline;
    empty when the request carries no scene and no description)."""
    from homiebot.planner.text_planning import DESCRIPTION_HEADING, split_world

    description = TextTranscript().world_text(_unprivileged(request))
    if description is None:
        return ""
    if split_world(description) is None:  # describe_world's text has its own heading
        return f"{DESCRIPTION_HEADING}\n{description.strip()}\n"
    return description.strip() + "\n"


def _unprivileged(request: PlanRequest) -> PlanRequest:
    """What the hf planner receives of ``request`` (the state, never the goal, the evaluation function or
    perception's names)."""
    from dataclasses import replace

    return replace(request, goal=None, evaluation=None, perceived_names=None, model_calls=[])


def text_round_prompt(request: PlanRequest, transcript: TextTranscript) -> list[dict[str, str]]:
    """The chat the hf planner's text mode sends for ``request`` with ``include_history=False``, as role/content
    messages, ``transcript`` being the episode's (it keeps the world at the start): built from what that planner
    receives."""
    from homiebot.planner.text_planning import fresh_text_chat

    return [{"role": m.role, "content": m.text} for m in fresh_text_chat(_unprivileged(request), transcript)]


class TextWorldRecorder(Planner):
    """Plans with ``inner``; keeps the text mode's world description of the episode's first round, and the text
    mode's chat (:func:`text_round_prompt`) and world description of every round; with ``equally_good``, the
    subtasks ``inner`` (an expert) holds equally good in every round, asked before it plans."""

    def __init__(self, inner: Planner, equally_good: bool = False) -> None:
        self.inner = inner
        self.record_ties = equally_good
        self.ties: list[dict[str, object]] = []
        self.name = inner.name
        self.privileged = inner.privileged
        self.accepts_free_text = inner.accepts_free_text
        self.prefix: str | None = None
        self.prompts: list[dict[str, object]] = []
        self.transcript = TextTranscript()

    def reset(self, task: str, seed: int = 0) -> None:
        self.prefix = None
        self.prompts = []
        self.ties = []
        self.transcript = TextTranscript()
        self.inner.reset(task, seed)

    def plan(self, request: PlanRequest) -> str:
        if self.prefix is None:
            self.prefix = text_world_prefix(request)
        messages = text_round_prompt(request, self.transcript)
        world = self.transcript.world_text(_unprivileged(request))
        self.prompts.append({"round": request.round_index, "messages": messages, "world": world})
        if self.record_ties:
            equally_good = getattr(self.inner, "equally_good", None)
            if equally_good is None:
                raise TrainingDataError(f"planner {self.inner.name!r} cannot say which subtasks it holds equally good")
            self.ties.append({"round": request.round_index, "subtasks": [s.text() for s in equally_good(request)]})
        return self.inner.plan(request)

    def close(self) -> None:
        self.inner.close()


def check_seeds(
    tasks: Sequence[TaskSpec], seed_offset: int, runs: int, suite: str = "emmoe100", runs_option: str = "--runs"
) -> None:
    """Refuse a collection whose scene seeds (``task.seed + seed_offset + r``) include one that any suite's evaluation
    plays (:func:`homiebot.tasks.reserved.reserved_seeds`: EMMOE-100's, the PARTNR-style suite's and MuEP's alike).
    ``suite``: the collection's, whose task seeds' spacing the hint reads; ``runs_option``: the command's name for
    ``runs`` in the message (DAgger's is ``--iterations``)."""
    from homiebot.tasks.reserved import refusal, seed_clashes

    clashes = seed_clashes(_played(tasks, seed_offset, runs))
    if not clashes:
        return
    free = free_offsets(tasks, runs, suite)
    if free is None:
        hint = f"choose another --seed-offset or fewer {runs_option}"
    elif free[1] is not None:
        hint = f"--seed-offset {free[0]} to {free[1]} fit (the task seeds are {free[1] + runs} apart)"
    else:
        hint = f"--seed-offset {free[0]} or more fits (past every evaluation's seeds)"
    raise TrainingDataError(refusal(clashes, f"--seed-offset {seed_offset} {runs_option} {runs}", hint))


def _played(tasks: Sequence[TaskSpec], offset: int, runs: int) -> list[tuple[str, int]]:
    return [(task.id, task.seed + offset + r) for task in tasks for r in range(runs)]


def free_offsets(tasks: Sequence[TaskSpec], runs: int, suite: str = "emmoe100") -> tuple[int, int | None] | None:
    """The seed offsets at which ``runs`` runs of ``tasks`` meet no evaluation's seed: ``(first, last)`` between the
    evaluation's runs of one task and the next task's seed, ``(first, None)`` past every reserved seed, or None."""
    from homiebot.tasks.reserved import last_reserved_seed, seed_clashes
    from homiebot.tasks.suite import load_suite

    seeds = sorted({t.seed for t in load_suite(suite).tasks})
    gap = min((b - a for a, b in zip(seeds, seeds[1:], strict=False)), default=0)
    if gap - runs >= EVALUATION_RUNS and not seed_clashes(_played(tasks, EVALUATION_RUNS, runs)):
        return EVALUATION_RUNS, gap - runs
    past = last_reserved_seed() + 1 - min(t.seed for t in tasks)  # the first offset past every reserved seed
    return (past, None) if past > 0 else None


def default_planner(suite: str) -> str:
    """The planner a collection of ``suite`` (any name ``--suite`` takes) plays when none is named
    (:data:`SUITE_PLANNERS`)."""
    from homiebot.tasks.suite import TaskError, resolve_suite

    try:
        return SUITE_PLANNERS.get(resolve_suite(suite), DEFAULT_PLANNER)
    except TaskError as err:
        raise TrainingDataError(str(err)) from None


def collect_episodes(
    out: str | Path,
    *,
    planner: str | None = None,
    split: str = "train",
    runs: int = 1,
    seed_offset: int | None = None,
    inject: float = 0.04,
    task_ids: Sequence[str] | None = None,
    images: bool = False,
    suite: str = "emmoe100",
    noise: str = "off",
    equally_good: bool = False,
) -> CollectSummary:
    """Record the episodes (module docstring). ``noise``: a skill noise preset (``off``, ``emmoe``: EMMOE table 4's
    per-try failures, seeded by the scene seed as in an evaluation), so that execution errors (E1, E2) and the
    expert's re-plans after them are in the data too. ``equally_good``: also record, per round, the subtasks the
    expert holds equally good (``equally_good.jsonl``; the episodes are the same as without it). ``planner``: None
    plays the suite's :func:`default_planner`. ``seed_offset``: None takes the first that meets no evaluation's
    seed (:func:`free_offsets`; the summary says which)."""
    from homiebot.agent.build import build_episode, build_simulator
    from homiebot.config.planners import PerturbedExpertConfig, PromptBoundExpertConfig, PromptBoundPartnrExpertConfig
    from homiebot.config.run import RecordingConfig, RunConfig, SimulatorConfig, SkillsConfig
    from homiebot.data.record import SUMMARY_FILE
    from homiebot.planner.partnr_expert import PromptBoundPartnrExpertPlanner
    from homiebot.planner.perturbed import expert_for_data
    from homiebot.skills.noise import preset_name
    from homiebot.tasks.suite import TaskError, load_suite, resolve_suite

    if planner is None:
        planner = default_planner(suite)
    if planner not in PLANNERS:
        raise TrainingDataError(f"unknown --planner {planner!r} for data collection; use {' or '.join(PLANNERS)}")
    try:
        partnr = resolve_suite(suite) == PARTNR_SUITE
        load_suite(suite)
    except TaskError as err:
        raise TrainingDataError(str(err)) from None
    if partnr and planner != "expert":
        # The perturbed expert injects its errors into the goal expert's plan, which is not how this suite's
        # tasks are played (switching, cleaning, ordering): its re-plans come from --noise emmoe instead.
        raise TrainingDataError(
            f"--planner {planner} plays EMMOE-100's goals; the PARTNR-style suite's episodes are its expert's "
            "(--planner expert; --noise emmoe for re-plans after execution errors)"
        )
    if runs < 1:
        raise TrainingDataError(f"--runs must be >= 1, got {runs}")
    if split not in ("train", "test", "validation", "all"):
        raise TrainingDataError(f"unknown split {split!r}; use train, test, validation or all")
    tasks = [t for t in load_suite(suite).tasks if split in ("all", t.split)]
    if task_ids:
        known = {t.id: t for t in load_suite(suite).tasks}
        missing = [t for t in task_ids if t not in known]
        if missing:
            raise TrainingDataError(f"unknown task id(s): {', '.join(missing)}")
        tasks = [known[t] for t in task_ids]
    if seed_offset is None:
        free = free_offsets(tasks, runs, suite)
        if free is None:
            raise TrainingDataError(f"no --seed-offset keeps {runs} runs of these tasks off every evaluation's seeds; "
                                    "give fewer --runs")
        seed_offset = free[0]
    check_seeds(tasks, seed_offset, runs, suite)
    try:
        noise_preset = preset_name(noise, "--noise")
    except ValueError as err:
        raise TrainingDataError(str(err)) from None
    if not 0.0 <= inject <= 1.0:
        raise TrainingDataError(f"--inject must be a probability in [0, 1], got {inject}")
    # Each record's run configuration (summary.json's "run") names the training expert it was collected with.
    expert: PerturbedExpertConfig | PromptBoundExpertConfig | PromptBoundPartnrExpertConfig
    if partnr:
        expert = PromptBoundPartnrExpertConfig()
    elif planner == "perturbed-expert":
        expert = PerturbedExpertConfig(inject=inject)
    else:
        expert = PromptBoundExpertConfig()
    setting = RunConfig(
        planner=expert,
        simulator=SimulatorConfig(render=images),
        skills=SkillsConfig(noise=noise_preset),
        recording=RecordingConfig(images=images, video=False, report=False),
    )
    root = Path(out).expanduser().absolute()
    if root.exists() and any(root.iterdir()) and not (root / "collect.json").is_file():
        raise TrainingDataError(f"output {root} exists, is not empty and is not a collection; choose another --out")
    settings = {
        "planner": planner,
        "split": split,
        "runs": runs,
        "seed_offset": seed_offset,
        "inject": inject,
        "suite": suite,
        "images": images,
        "tasks": {t.id: {"split": t.split} for t in tasks},
    }
    if noise_preset != "noiseless":
        settings["noise"] = noise_preset  # absent when noiseless: collections written before the option resume
    root.mkdir(parents=True, exist_ok=True)
    manifest = root / "collect.json"
    if manifest.is_file():
        before = json.loads(manifest.read_text(encoding="utf-8"))
        if {k: v for k, v in before.items() if k != "tasks"} != {k: v for k, v in settings.items() if k != "tasks"}:
            raise TrainingDataError(f"{root} holds a collection with other settings ({manifest}); choose another --out")
    manifest.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    # eval.json's task snapshot is where the data builders read each task's split.
    (root / "eval.json").write_text(json.dumps({"tasks": settings["tasks"]}, indent=2) + "\n", encoding="utf-8")
    summary = CollectSummary(root, seed_offset=seed_offset)
    started = time.perf_counter()
    sim = build_simulator(setting.simulator)
    try:
        for run in range(runs):
            for task in tasks:
                record = root / "episodes" / task.id / f"run{run}"
                if (record / SUMMARY_FILE).is_file():
                    summary.skipped += 1
                    continue
                agent = (PromptBoundPartnrExpertPlanner() if isinstance(expert, PromptBoundPartnrExpertConfig)
                         else expert_for_data(expert))
                describer = TextWorldRecorder(agent, equally_good=equally_good)
                config = setting.model_copy(update={"task": task.id, "seed": seed_offset + run})
                trajectory = build_episode(config, out=record, task=task, simulator=sim, planner=describer).run()
                if describer.prefix is not None:
                    (record / TEXT_WORLD_FILE).write_text(describer.prefix, encoding="utf-8")
                lines = (json.dumps(p, ensure_ascii=False) + "\n" for p in describer.prompts)
                (record / TEXT_PROMPTS_FILE).write_text("".join(lines), encoding="utf-8")
                if equally_good:
                    ties = (json.dumps(t, ensure_ascii=False) + "\n" for t in describer.ties)
                    (record / EQUALLY_GOOD_FILE).write_text("".join(ties), encoding="utf-8")
                summary.episodes += 1
                summary.succeeded += int(bool(trajectory.ended and trajectory.goal_satisfied))
                summary.rounds += len(trajectory.rounds)
                summary.codes.update(r.feedback.code.value for r in trajectory.rounds)
                summary.injections += len(getattr(agent, "injections", ()))
    finally:
        sim.shutdown()
    summary.seconds = time.perf_counter() - started
    return summary
