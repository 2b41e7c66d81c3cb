"""The MuEP-style suite's training episodes: the text expert on tasks the suite does not hold (``homie data collect
--suite muep``; the data set is built by :mod:`homiebot.training.muep_data`).

:func:`collect_muep` plays the privileged text expert (:class:`homiebot.eval.muep_suite.TextExpert`; MuEP's
demonstrations come from a planner on full metadata too) in the simulator's text world, under MuEP's protocol (30
steps, the AA / ABAB stop), on :func:`training_tasks`: every (type, object, receptacle or lamp) MuEP's filters allow
on the **seen** apartments that the suite does not hold, every tenth of them kept for validation. The unseen
apartments stay apartments no training episode was played in (ALFWorld's valid_unseen rooms). The seen split's
apartments are the same rooms, with the same furniture holding the same objects (the scene seed moves objects'
spots only), so a seen task's room is known to a trained model, as ALFWorld's seen rooms are; its task is not.

**Seeds.** ``homie eval --suite muep`` plays every task once, on ``task.seed`` (1-319). As for the other suites
(:mod:`homiebot.training.collect`), a collection that meets a scene seed any suite's evaluation plays (the first
:data:`~homiebot.tasks.reserved.EVALUATION_RUNS` of every task of MuEP's, EMMOE-100's and the PARTNR-style suite's, in
any apartment: :mod:`homiebot.tasks.reserved`) is refused before anything is written (:func:`check_seeds`): run ``r``
plays the scene seed ``seed_offset + r``. Without one, ``seed_offset`` is :data:`DEFAULT_SEED_OFFSET` (10000,
past every suite's evaluation seeds, the offset the data of docs/training.md were collected on).

Output::

    OUT/collect.json      the settings (suite muep, split, runs, seed offset, phrasing) and the tasks
    OUT/episodes.jsonl    one line per episode: task, run, seed, split (train or validation), type, success, the intro
                          and the transcript
                          (command, observation), how many commands were not admissible, seconds

An interrupted collection resumes (the episodes it holds are skipped).
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homiebot.files import read_json_lines

if TYPE_CHECKING:
    from homiebot.eval.muep_suite import AlfredTask, TextAgent
    from homiebot.sim.base import Simulator

log = logging.getLogger(__name__)

SUITE = "muep"
EPISODES_FILE = "episodes.jsonl"
MANIFEST = "collect.json"
SPLITS = ("train", "validation", "all")
#: The scene seed of run 0 when no ``--seed-offset`` is given (module docstring).
DEFAULT_SEED_OFFSET = 10000


class CollectionError(ValueError):
    """A collection refused before anything is played (one line)."""


def check_seeds(seed_offset: int, runs: int) -> None:
    """Refuse a collection whose scene seeds (``seed_offset + r``) meet a seed any suite's evaluation plays
    (:func:`homiebot.tasks.reserved.reserved_seeds`; one line)."""
    from homiebot.tasks.reserved import last_reserved_seed, refusal, seed_clashes

    clashes = seed_clashes((f"run {r}", seed_offset + r) for r in range(runs))
    if clashes:
        raise CollectionError(refusal(clashes, f"--seed-offset {seed_offset} --runs {runs}",
                                      f"--seed-offset {last_reserved_seed() + 1} or more fits (past every "
                                      "evaluation's seeds)"))


@dataclass
class MuepCollectSummary:
    out: Path
    episodes: int = 0
    skipped: int = 0
    succeeded: int = 0
    steps: int = 0
    not_admissible: int = 0
    goal_at_start: int = 0
    seconds: float = 0.0
    per_type: Counter[str] = field(default_factory=Counter)
    seed_offset: int = DEFAULT_SEED_OFFSET

    def lines(self) -> list[str]:
        return [
            f"{self.episodes} episodes recorded ({self.skipped} already there), {self.succeeded} successful, "
            f"{self.steps} commands in {self.seconds:.1f} s",
            f"  scene seeds: {self.seed_offset} (--seed-offset) + the run",
            f"  commands outside the admissible list: {self.not_admissible}; tasks not played, their goal held at "
            f"the start: {self.goal_at_start}",
            f"  records: {self.out / EPISODES_FILE}",
        ]


def training_tasks(sim: Simulator, seed: int, phrasing_variant: int = 0) -> list[AlfredTask]:
    """Every task MuEP's filters 1-3 allow on the seen apartments that the suite does not hold (another type,
    object, receptacle or lamp), each with its scene seed ``seed``, named ``muep-<split>-<scene>-<type>-<object>-
    <receptacle or lamp>``: split ``validation`` for every tenth of a scene's tasks in a fixed order, ``train`` for
    the rest. The instruction's template alternates over the tasks (shifted by ``phrasing_variant``)."""
    from homiebot.eval.muep_suite import SEEN_SCENES, AlfredTask, instruction_for, load_suite
    from homiebot.eval.muep_suite import _candidates as candidates

    def key(t: AlfredTask) -> tuple[str, str, str, str, str]:
        return t.task_type, t.scene, t.object_type, t.receptacle_type, t.toggle_type

    held = {key(t) for t in load_suite()}
    tasks = []
    for scene in SEEN_SCENES:
        fresh = sorted((c for c in candidates(scene, seed, sim) if key(c) not in held), key=key)
        for number, cand in enumerate(fresh):
            split = "validation" if number % 10 == 0 else "train"
            target = cand.receptacle_type or cand.toggle_type
            tasks.append(AlfredTask(
                id=f"muep-{split}-{scene}-{cand.task_type}-{cand.object_type}-{target}",
                task_type=cand.task_type, scene=scene, seed=seed, split=split, object_type=cand.object_type,
                receptacle_type=cand.receptacle_type, toggle_type=cand.toggle_type,
                instruction=instruction_for(cand.task_type, cand.object_type, cand.receptacle_type, cand.toggle_type,
                                            number + phrasing_variant),
            ))
    return tasks


def collect_muep(
    out: str | Path,
    *,
    split: str = "train",
    runs: int = 1,
    seed_offset: int | None = None,
    task_ids: Sequence[str] | None = None,
    phrasing: str = "alfworld",
    planner: str = "expert",
) -> MuepCollectSummary:
    """Record the text expert's episodes of :func:`training_tasks` of ``split`` (``train``, ``validation`` or
    ``all``) on the scene seed ``seed_offset + r`` for run ``r`` (the other instruction template on odd runs).
    ``planner``: ``expert`` (privileged: it goes straight to the object) or ``searching-expert`` (it searches
    until an observation names the object; :class:`homiebot.eval.muep_suite.SearchingTextExpert`).

    Not the suite's own tasks on other seeds: the seed moves objects' spots, never which furniture holds them
    (:mod:`homiebot.sim.mujoco.backend`), so such an episode is, command for command, the evaluation's (116 of 120
    seen tasks on 10 new seeds each, 2026-11-30)."""
    from homiebot.eval.muep import RepetitionStop
    from homiebot.eval.muep_suite import SearchingTextExpert, TextExpert, goal_conditions, run_text_episode
    from homiebot.sim.mujoco.backend import MujocoSimulator
    from homiebot.textworld.world import Phrasing

    if split not in SPLITS:
        raise CollectionError(f"unknown split {split!r} for --suite muep; use {', '.join(SPLITS)}")
    if runs < 1:
        raise CollectionError(f"--runs must be >= 1, got {runs}")
    experts = {"expert": TextExpert, "searching-expert": SearchingTextExpert}
    if planner not in experts:
        raise CollectionError(f"--suite muep records expert or searching-expert episodes, not --planner {planner}")
    if phrasing not in {p.value for p in Phrasing}:
        raise CollectionError(f"unknown phrasing {phrasing!r}; use alfworld or papers")
    seed_offset = DEFAULT_SEED_OFFSET if seed_offset is None else seed_offset
    check_seeds(seed_offset, runs)
    root = Path(out).expanduser().absolute()
    if root.exists() and any(root.iterdir()) and not (root / MANIFEST).is_file():
        raise CollectionError(f"output {root} exists, is not empty and is not a collection; choose another --out")
    settings = {"suite": SUITE, "planner": planner, "split": split, "runs": runs, "seed_offset": seed_offset,
                "phrasing": phrasing}
    manifest = root / MANIFEST
    if manifest.is_file():
        before = json.loads(manifest.read_text(encoding="utf-8"))
        if {k: v for k, v in before.items() if k != "tasks"} != settings:
            raise CollectionError(f"{root} holds a collection with other settings ({manifest}); choose another --out")
    summary = MuepCollectSummary(root, seed_offset=seed_offset)
    started = time.perf_counter()
    sim = MujocoSimulator(render=False)
    try:
        generated = [t for t in training_tasks(sim, seed_offset) if split in ("all", t.split)]
        tasks = generated
        if task_ids:
            known = {t.id: t for t in generated}
            missing = [t for t in task_ids if t not in known]
            if missing:
                raise CollectionError(f"unknown MuEP training task id(s) of split {split}: {', '.join(missing[:5])}")
            tasks = [known[t] for t in task_ids]
        root.mkdir(parents=True, exist_ok=True)
        manifest.write_text(json.dumps({**settings, "tasks": {t.id: {"split": t.split} for t in tasks}}, indent=2)
                            + "\n", encoding="utf-8")
        done = {(r["task"], r["run"]) for r in read_records(root)}
        with (root / EPISODES_FILE).open("a", encoding="utf-8") as sink:
            for run in range(runs):
                variants = {t.id: t for t in training_tasks(sim, seed_offset + run, run)} if run else {}
                for task in tasks:
                    if (task.id, run) in done:
                        summary.skipped += 1
                        continue
                    played_task = variants.get(task.id, task)
                    sim.reset(played_task.scene, seed=played_task.seed)
                    if goal_conditions(played_task, sim.state())[0] != 0:  # MuEP's filter 4
                        summary.goal_at_start += 1
                        continue
                    expert = _AdmissibleCounter(experts[planner]())
                    t0 = time.perf_counter()
                    played = run_text_episode(sim, played_task, expert, phrasing, policy=RepetitionStop())
                    record = {
                        "task": task.id, "run": run, "seed": played_task.seed, "split": task.split,
                        "task_type": task.task_type, "success": played.episode.success, "intro": played.intro,
                        "transcript": [list(step) for step in played.transcript],
                        "not_admissible": expert.outside, "seconds": round(time.perf_counter() - t0, 3),
                    }
                    sink.write(json.dumps(record, ensure_ascii=False) + "\n")
                    sink.flush()
                    summary.episodes += 1
                    summary.succeeded += int(played.episode.success)
                    summary.steps += len(played.transcript)
                    summary.not_admissible += expert.outside
                    summary.per_type[task.task_type] += 1
    finally:
        sim.shutdown()
    summary.seconds = time.perf_counter() - started
    return summary


class _AdmissibleCounter:
    """The expert, counting the commands it plays that the admissible list does not hold (the constrained hf agent
    could not play them)."""

    def __init__(self, inner: TextAgent) -> None:
        self.inner = inner
        self.name = inner.name
        self.outside = 0

    def reset(self, task: Any, world: Any, observation: Any) -> None:
        self.inner.reset(task, world, observation)

    def act(self, observation: Any, admissible: list[str]) -> str | None:
        command = self.inner.act(observation, admissible)
        if command is not None and command not in admissible:
            self.outside += 1
        return command




def read_records(root: Path) -> list[dict[str, Any]]:
    """The episodes a collection holds (none when it has no episodes file yet)."""
    path = root / EPISODES_FILE
    if not path.is_file():
        return []
    try:
        return read_json_lines(path, "an episode record")
    except ValueError as err:
        raise CollectionError(str(err)) from None
