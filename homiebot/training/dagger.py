"""``homie train dagger``: EMMA's interactive imitation loop (EMMA paper, Algorithm 1, eq. 2) with an oracle teacher.

Per iteration: the student planner (a trained text model, :class:`~homiebot.planner.text_engine.CausalTextModel`)
acts in the simulator; at every state it visits, the teacher labels what it would have done; the pairs
(chosen = the teacher's answer, rejected = the student's) are aggregated over iterations (DAgger's data set D)
and train the student with the DPO loss against a frozen reference, then the student is evaluated.

Decisions (docs/training.md):

* **Teacher**: by default the privileged expert (:class:`~homiebot.planner.expert.ExpertPlanner`) on the
  simulator's state, EMMA's "oracle" ablation: it needs no parallel text world and no LLM, and labels each
  state online. Or EMMA's LLM expert (:class:`~homiebot.training.teacher.LLMTeacher`: any planner backend as
  the actor, a critic and its memory of three reflections) reading the parallel text world
  (:mod:`homiebot.textworld`), which labels the episode's states after the critic has reflected on it.
  Either answer is a full EMMOE answer, analysis included.
* **Prompt**: the exact text the student's model was given that round (its chat template rendered), so a pair
  trains the student on the context it acted in.
* **Pairs** where the student's subtask and model equal the teacher's are dropped (the DPO term is constant
  ln 2 there: no gradient). Every episode feeds D (Algorithm 1; EMMA's code used failed episodes only).
* **Reference and initialisation**: EMMA's pi_ref is the behaviour-cloned agent, frozen, and pi_theta starts
  from it. Here each iteration trains a new LoRA adapter on the starting model (which is therefore the
  reference: trl scores it with the adapter disabled) over all of D so far, the classic DAgger retraining on
  the aggregate; the student of the next iteration is the starting model with that adapter.
* Preset ``emma`` (Table 2): beta 0.1, lr 5e-6, batch 16, 5 epochs per trial, 1,024 tokens, 12 trials; on a CPU
  use ``cpu-small`` and few steps.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homiebot.config import MAX_ROUNDS
from homiebot.config.planners import HFPlannerConfig
from homiebot.config.run import RunConfig, SimulatorConfig
from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.prompt import parse_output
from homiebot.training.collect import check_seeds
from homiebot.training.episodes import TrainingDataError
from homiebot.training.teacher import LLMTeacher, TextEpisodeLog, VisitedState
from homiebot.training.trainer import Preset, TrainingError, preset_for, train

if TYPE_CHECKING:
    from homiebot.agent.observers import EpisodeObserver
    from homiebot.sim.base import Simulator
    from homiebot.tasks.suite import TaskSpec

log = logging.getLogger(__name__)

# The student's scene seeds: task seed + 22 + i, past the training data's offsets (10-21) and before the validation
# set's (30-32) in docs/training.md, clear of every evaluation seed (task seed + 0..9; the suite's task seeds are 37
# apart), so up to 8 iterations play states neither trained on elsewhere nor evaluated.
DAGGER_SEED_OFFSET = 22


def as_engine(engine: Any) -> Any:
    """The hf planner types its ``engine`` as its own two classes; any object with their interface works."""
    return engine


@dataclass(frozen=True)
class LabeledRound:
    prompt: str
    student: str
    teacher: str


@dataclass(frozen=True)
class TeacherCheck:
    """One state an LLM teacher labelled, beside what the privileged expert would do there (the measure of how
    often the teacher is right: EMMA reports only the student's outcome, not its teacher's accuracy)."""

    task: str
    round: int
    student: str  #: the student's subtask (its text, or "(unparsed)")
    teacher: str | None  #: the teacher's subtask, None when its answer did not parse (no pair)
    oracle: str | None  #: the expert's subtask on the simulator's state, None without an oracle
    teacher_model: str | None = None
    oracle_model: str | None = None

    @property
    def teacher_right(self) -> bool:
        return self.teacher is not None and self.teacher == self.oracle

    @property
    def teacher_action_right(self) -> bool:
        return self.teacher is not None and self.oracle is not None and _action(self.teacher) == _action(self.oracle)


def _action(subtask: str) -> str:
    return subtask.strip("[]").split(",", 1)[0].strip()


@dataclass(frozen=True)
class _PendingState:
    prompt: str
    answer: str
    state: VisitedState
    oracle: str | None


class LabelingPlanner(Planner):
    """Acts with the student, asks the teacher at every state (module docstring). Privileged so that its requests
    carry the state and goal the oracle reads; the student gets the request without them.

    With an :class:`LLMTeacher` the states are kept (the request and the text world's log so far, from
    ``text_world``: a :class:`homiebot.textworld.observer.TextWorldObserver` of the same episode) and labelled
    by :meth:`finish_episode` after the critic's reflection."""

    name = "dagger"
    privileged = True
    accepts_free_text = False

    def __init__(
        self, student: Any, teacher: Planner | LLMTeacher, text_world: Any = None, oracle: Planner | None = None
    ) -> None:
        self.student = student
        self.teacher = teacher
        self.text_world = text_world
        #: With an LLM teacher: the privileged expert answers every state too, only to measure the teacher.
        self.oracle = oracle
        self.rounds: list[LabeledRound] = []
        self.unlabeled: list[_PendingState] = []
        self.checks: list[TeacherCheck] = []
        self.reflections: list[tuple[str, str]] = []  #: (task, the critic's plan) per failed episode
        self._task = ""
        self._seed = 0
        self._subtasks: list[str] = []

    def reset(self, task: str, seed: int = 0) -> None:
        self._task, self._seed, self._subtasks = task, seed, []
        self.unlabeled = []
        self.student.reset(task, seed)
        if isinstance(self.teacher, Planner):
            self.teacher.reset(task, seed)
        if self.oracle is not None:
            self.oracle.reset(task, seed)

    def text_log(self) -> TextEpisodeLog:
        """The text world's log of the rounds executed so far: intro, then each student subtask and its
        observation (the text world's texts: the intro, then one per executed round)."""
        texts = list(getattr(self.text_world, "texts", []) or [""])
        return TextEpisodeLog(texts[0], list(zip(self._subtasks, texts[1:], strict=False)))

    def plan(self, request: PlanRequest) -> str:
        private = replace(request, world_state=None, goal=None, perceived_names=None, evaluation=None)
        answer = str(self.student.plan(private))
        # A model-backed teacher's or oracle's calls are not the round's: the record keeps the student's only.
        request = replace(request, model_calls=[])
        prompt = str(getattr(getattr(self.student, "engine", None), "last_prompt", "")) or request.instruction
        if isinstance(self.teacher, LLMTeacher):
            if self.text_world is None:
                raise ValueError("an LLM teacher reads the parallel text world: set text_world for the episode")
            oracle = self.oracle.plan(request) if self.oracle is not None else None
            self.unlabeled.append(_PendingState(prompt, answer, VisitedState(private, self.text_log().text()), oracle))
        else:
            self.rounds.append(LabeledRound(prompt, answer, self.teacher.plan(request)))
        parsed = parse_output(answer).subtask
        self._subtasks.append(parsed.text() if parsed is not None else "(an answer that does not parse)")
        return answer

    def finish_episode(self, solved: bool) -> int:
        """With an LLM teacher: reflect on a failed episode, then label its states; returns how many labels."""
        if not isinstance(self.teacher, LLMTeacher):
            return 0
        if not solved:
            plan = self.teacher.reflect(self._task, self.text_log().text())
            if plan is not None:
                self.reflections.append((self._task, plan))
        labelled = 0
        for number, pending in enumerate(self.unlabeled, start=1):
            label = self.teacher.label(self._task, pending.state, self._seed)
            if label is not None:
                self.rounds.append(LabeledRound(pending.prompt, pending.answer, label))
                labelled += 1
            student, teacher = parse_output(pending.answer), parse_output(label) if label is not None else None
            oracle = parse_output(pending.oracle) if pending.oracle is not None else None
            self.checks.append(
                TeacherCheck(
                    self._task,
                    number,
                    student.subtask.text() if student.subtask is not None else "(unparsed)",
                    teacher.subtask.text() if teacher is not None and teacher.subtask is not None else None,
                    oracle.subtask.text() if oracle is not None and oracle.subtask is not None else None,
                    teacher.model if teacher is not None else None,
                    oracle.model if oracle is not None else None,
                )
            )
        self.unlabeled = []
        return labelled


def pairs_of(rounds: Sequence[LabeledRound]) -> tuple[list[dict[str, str]], int]:
    """DPO rows (prompt text, chosen = teacher, rejected = student) and how many agreeing rounds were dropped."""
    rows, same = [], 0
    for r in rounds:
        student, teacher = parse_output(r.student), parse_output(r.teacher)
        if student.subtask == teacher.subtask and student.model == teacher.model:
            same += 1
            continue
        rows.append({"prompt": r.prompt, "chosen": r.teacher, "rejected": r.student})
    return rows, same


@dataclass
class IterationResult:
    iteration: int
    episodes: int
    successes: int
    rounds: int
    new_pairs: int
    agreeing_rounds: int
    pairs_total: int
    train_steps: int = 0
    train_seconds: float = 0.0
    losses: list[float] = field(default_factory=list)
    eval_episodes: int = 0
    eval_successes: int = 0
    seconds: float = 0.0
    #: An LLM teacher's states against the privileged expert's answers there (TeacherCheck), and its critic.
    teacher_states: int = 0
    teacher_unparsed: int = 0
    teacher_right: int = 0
    teacher_action_right: int = 0
    student_right: int = 0
    reflections: list[str] = field(default_factory=list)


def student_config(
    model: str | Path, adapter: Path | None, max_new_tokens: int, include_history: bool, system_turn: bool
) -> HFPlannerConfig:
    """The student as an hf planner's configuration: the model folder, the iteration's adapter and the prompt
    options (the run configuration of its episodes; the planner itself is built on the loaded engine)."""
    return HFPlannerConfig(
        model=str(model),
        adapter=None if adapter is None else str(adapter),
        constrained=True,
        max_new_tokens=max_new_tokens,
        include_history=include_history,
        system_turn=system_turn,
    )


def _episodes(
    sim: Simulator, planner: Planner, tasks: Sequence[TaskSpec], seed: int, setting: RunConfig
) -> tuple[int, int, int]:
    """The tasks' episodes (run ``seed``), built by :func:`homiebot.agent.build.build_episode` from ``setting``
    on the caller's simulator and planner; no record is kept. Returns episodes, successes, rounds."""
    from homiebot.agent.build import build_episode

    successes = rounds = 0
    for task in tasks:
        observers: list[EpisodeObserver] = []
        if isinstance(planner, LabelingPlanner) and isinstance(planner.teacher, LLMTeacher):
            from homiebot.textworld.observer import TextWorldObserver

            planner.text_world = TextWorldObserver(sim)
            observers.append(planner.text_world)
        config = setting.model_copy(update={"task": task.id, "seed": seed})
        trajectory = build_episode(config, task=task, simulator=sim, planner=planner, observers=observers).run()
        solved = bool(trajectory.ended and trajectory.goal_satisfied)
        if isinstance(planner, LabelingPlanner):
            planner.finish_episode(solved)
        successes += int(solved)
        rounds += len(trajectory.rounds)
    return len(tasks), successes, rounds


def _record_teacher(result: IterationResult, labeler: LabelingPlanner, path: Path) -> None:
    """An LLM teacher's figures into ``result`` and its states, one JSON line each, into ``path``."""
    checks = labeler.checks
    result.teacher_states = len(checks)
    result.teacher_unparsed = sum(c.teacher is None for c in checks)
    result.teacher_right = sum(c.teacher_right for c in checks)
    result.teacher_action_right = sum(c.teacher_action_right for c in checks)
    result.student_right = sum(c.oracle is not None and c.student == c.oracle for c in checks)
    result.reflections = [f"{task}: {plan}" for task, plan in labeler.reflections]
    lines = [json.dumps({**c.__dict__, "teacher_right": c.teacher_right}) for c in checks]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def run_dagger(
    model: str | Path,
    out: str | Path,
    *,
    tasks: Sequence[str],
    eval_tasks: Sequence[str] = (),
    iterations: int = 3,
    max_rounds: int = MAX_ROUNDS,
    preset: Preset | None = None,
    steps_per_iteration: int | None = None,
    seed_offset: int = DAGGER_SEED_OFFSET,
    max_new_tokens: int = 160,
    threads: int | None = 1,
    teacher: LLMTeacher | None = None,
    include_history: bool = False,
    system_turn: bool = False,
) -> list[IterationResult]:
    """Run ``iterations`` DAgger iterations from the (SFT) model folder ``model``; see the module docstring.
    ``steps_per_iteration=0`` labels and writes the pairs without training (to measure a teacher).

    ``OUT/iter<i>/`` gets that iteration's data set (all pairs so far) and adapter; ``OUT/dagger.json`` the
    per-iteration figures. Student episodes use seeds ``seed_offset + i`` (new states each iteration).
    ``teacher``: EMMA's LLM expert (:mod:`homiebot.training.teacher`); default the privileged expert (oracle).
    ``include_history`` / ``system_turn``: the student's prompt, as the hf planner's options of those names; the
    defaults are the prompt ``homie data build --text-observation --no-system-prompt`` trains on and the
    evaluation in docs/results/training.md plans with (a fresh chat per round, no system turn), so the pairs
    train the student on the prompt it is evaluated with.
    """
    from homiebot.agent.build import build_simulator
    from homiebot.planner.expert import ExpertPlanner
    from homiebot.planner.hf_backend import HFPlanner
    from homiebot.planner.text_engine import CausalTextModel
    from homiebot.tasks.suite import load_suite
    from homiebot.training.build import DATA_FILE, write_dataset

    if iterations < 1:
        raise TrainingError(f"iterations must be >= 1, got {iterations}")
    target = Path(out).expanduser().absolute()
    if target.exists() and any(target.iterdir()):
        raise TrainingError(f"output {target} is not empty; choose another --out")
    known = {t.id: t for t in load_suite("emmoe100").tasks}
    missing = [t for t in [*tasks, *eval_tasks] if t not in known]
    if missing or not tasks:
        raise TrainingError(f"unknown task id(s): {', '.join(missing)}" if missing else "no training tasks")
    # The student's episodes become training pairs: like a collection, they may not be played on a scene seed that
    # an evaluation plays (iteration i plays run seed_offset + i of every task).
    try:
        check_seeds([known[t] for t in tasks], seed_offset, iterations, runs_option="--iterations")
    except TrainingDataError as err:
        raise TrainingError(str(err)) from err
    settings = preset or preset_for("dpo", "cpu-small")
    target.mkdir(parents=True)
    aggregate: list[dict[str, str]] = []
    results: list[IterationResult] = []
    adapter: Path | None = None
    # The student's episodes: noiseless, not rendered (a text-only student), EMMOE's action list.
    setting = RunConfig(max_rounds=max_rounds, simulator=SimulatorConfig(render=False))
    sim = build_simulator(setting.simulator)
    try:
        for i in range(iterations):
            started = time.perf_counter()
            engine = CausalTextModel(model, adapter=adapter, threads=threads)
            student = HFPlanner(
                model="student",
                engine=as_engine(engine),
                constrained=True,
                max_new_tokens=max_new_tokens,
                include_history=include_history,
                system_turn=system_turn,
            )
            # An LLM teacher is measured against the expert on the same states (the expert does not label then).
            labeler = LabelingPlanner(
                student,
                teacher if teacher is not None else ExpertPlanner(),
                oracle=ExpertPlanner() if teacher is not None else None,
            )
            acting = setting.model_copy(
                update={"planner": student_config(model, adapter, max_new_tokens, include_history, system_turn)}
            )
            episodes, successes, rounds = _episodes(sim, labeler, [known[t] for t in tasks], seed_offset + i, acting)
            rows, same = pairs_of(labeler.rounds)
            aggregate.extend(rows)
            result = IterationResult(i, episodes, successes, rounds, len(rows), same, len(aggregate))
            folder = target / f"iter{i}"
            folder.mkdir(parents=True, exist_ok=True)
            if labeler.checks:
                _record_teacher(result, labeler, folder / "teacher.jsonl")
            if aggregate and steps_per_iteration != 0:
                write_dataset(aggregate, folder / DATA_FILE)
                trained = train(
                    "dpo", folder, model, folder / "adapter", settings, max_steps=steps_per_iteration, progress=False
                )
                adapter = folder / "adapter"
                result.train_steps, result.train_seconds, result.losses = trained.steps, trained.seconds, trained.losses
            if eval_tasks:
                engine = CausalTextModel(model, adapter=adapter, threads=threads)
                evaluator = HFPlanner(
                    model="student",
                    engine=as_engine(engine),
                    constrained=True,
                    max_new_tokens=max_new_tokens,
                    include_history=include_history,
                    system_turn=system_turn,
                )
                evaluated = setting.model_copy(
                    update={"planner": student_config(model, adapter, max_new_tokens, include_history, system_turn)}
                )
                result.eval_episodes, result.eval_successes, _ = _episodes(
                    sim, evaluator, [known[t] for t in eval_tasks], 0, evaluated
                )
            result.seconds = time.perf_counter() - started
            results.append(result)
            log.info(
                "dagger iteration %d: %d/%d student episodes solved, %d new pairs (%d in D), eval %d/%d",
                i,
                successes,
                episodes,
                len(rows),
                len(aggregate),
                result.eval_successes,
                result.eval_episodes,
            )
            (target / "dagger.json").write_text(
                json.dumps(
                    {
                        "model": str(model),
                        "preset": settings.name,
                        "tasks": list(tasks),
                        "eval_tasks": list(eval_tasks),
                        "iterations": [r.__dict__ for r in results],
                    },
                    indent=2,
                )
                + "\n",
                encoding="utf-8",
            )
    finally:
        sim.shutdown()
    return results
