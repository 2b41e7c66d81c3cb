"""``homie data collect``: expert episodes recorded as training data, in this process.

One simulator, the episodes one after another, each written atomically by the episode recorder into
``OUT/episodes/<task>/run<r>/`` (the layout of an evaluation directory, so ``homie metrics`` and the data
builders read it). Seeds: run ``r`` of a task uses ``task.seed + seed_offset + r``, so training data can be
collected on seeds an evaluation never plays (``--seed-offset``). An episode already recorded is skipped,
so an interrupted collection resumes where it stopped.

Beside each record, ``text_world.txt`` keeps the world description a text-only model is given in the hf
planner's text mode (:mod:`homiebot.planner.text_planning`), taken from the first round's request by that
mode's own code, so that ``homie data build --text-observation`` trains on the prompt the planner sends.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from homiebot.planner.base import Planner, PlanRequest
from homiebot.training.episodes import TEXT_WORLD_FILE, TrainingDataError

log = logging.getLogger(__name__)

PLANNERS = ("expert", "perturbed-expert")


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

    def lines(self) -> list[str]:
        failed = {k: v for k, v in sorted(self.codes.items()) if k != "OK"}
        return [
            f"{self.episodes} episodes recorded ({self.skipped} already there), {self.succeeded} successful, "
            f"{self.rounds} rounds in {self.seconds:.1f} s",
            f"  failed rounds by code: {', '.join(f'{k} {v}' for k, v in failed.items()) or 'none'}; "
            f"injected decision errors: {self.injections}",
            f"  records: {self.out / 'episodes'}",
        ]


def text_world_prefix(request: PlanRequest) -> str:
    """What the text mode puts before a round's instruction in a fresh chat: the world description heading and
    text (empty when the request carries no scene and no description)."""
    from homiebot.planner.text_planning import TextTranscript

    user = TextTranscript().conversation(request)[-1].text
    if not user.endswith(request.instruction):
        raise TrainingDataError("the text mode's user turn does not end with the round's instruction")
    return user[: len(user) - len(request.instruction)]


class TextWorldRecorder(Planner):
    """Plans with ``inner``; keeps the text mode's world description of the episode's first round."""

    def __init__(self, inner: Planner) -> None:
        self.inner = inner
        self.name = inner.name
        self.privileged = inner.privileged
        self.accepts_free_text = inner.accepts_free_text
        self.prefix: str | None = None

    def reset(self, task: str, seed: int = 0) -> None:
        self.prefix = None
        self.inner.reset(task, seed)

    def plan(self, request: PlanRequest) -> str:
        if self.prefix is None:
            self.prefix = text_world_prefix(request)
        return self.inner.plan(request)

    def close(self) -> None:
        self.inner.close()


def collect_episodes(
    out: str | Path,
    *,
    planner: str = "perturbed-expert",
    split: str = "train",
    runs: int = 1,
    seed_offset: int = 0,
    inject: float = 0.04,
    task_ids: Sequence[str] | None = None,
    images: bool = False,
    suite: str = "emmoe100",
) -> CollectSummary:
    from homiebot.agent.loop import EpisodeConfig, run_episode
    from homiebot.data.record import SUMMARY_FILE, EpisodeRecorder
    from homiebot.planner.expert import ExpertPlanner
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import load_suite
    from homiebot.training.perturbed import PerturbedExpertPlanner

    if planner not in PLANNERS:
        raise TrainingDataError(f"unknown --planner {planner!r} for data collection; use {' or '.join(PLANNERS)}")
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
    root.mkdir(parents=True, exist_ok=True)
    manifest = root / "collect.json"
    if manifest.is_file():
        before = json.loads(manifest.read_text(encoding="utf-8"))
        if {k: v for k, v in before.items() if k != "tasks"} != {k: v for k, v in settings.items() if k != "tasks"}:
            raise TrainingDataError(f"{root} holds a collection with other settings ({manifest}); choose another --out")
    manifest.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    # eval.json's task snapshot is where the data builders read each task's split.
    (root / "eval.json").write_text(json.dumps({"tasks": settings["tasks"]}, indent=2) + "\n", encoding="utf-8")
    summary = CollectSummary(root)
    started = time.perf_counter()
    sim = make_simulator("mujoco", render=images)
    try:
        for run in range(runs):
            for task in tasks:
                record = root / "episodes" / task.id / f"run{run}"
                if (record / SUMMARY_FILE).is_file():
                    summary.skipped += 1
                    continue
                agent = PerturbedExpertPlanner(inject=inject) if planner == "perturbed-expert" else ExpertPlanner()
                describer = TextWorldRecorder(agent)
                trajectory = run_episode(
                    sim,
                    describer,
                    task=task,
                    seed=seed_offset + run,
                    config=EpisodeConfig(render=images),
                    recorder=EpisodeRecorder(record, images=images, video=False),
                )
                if describer.prefix is not None:
                    (record / TEXT_WORLD_FILE).write_text(describer.prefix, encoding="utf-8")
                summary.episodes += 1
                summary.succeeded += int(bool(trajectory.ended and trajectory.goal_satisfied))
                summary.rounds += len(trajectory.rounds)
                summary.codes.update(r.feedback.code.value for r in trajectory.rounds)
                summary.injections += len(getattr(agent, "injections", ()))
    finally:
        sim.shutdown()
    summary.seconds = time.perf_counter() - started
    return summary
