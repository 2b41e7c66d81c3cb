"""``homie data corrections``: DAgger's data set for a chat-trained student, in the SFT episode form.

The student (a planner that plans in the text mode's growing chat, e.g. the shipped ``homiebot-smollm2``) plays
EMMOE-100 tasks on seeds no evaluation plays, with the skills' noise when asked (``--noise emmoe``: EMMOE table 4's
execution failures, the states a noiseless collection never reaches); at every round the training expert
(:class:`~homiebot.planner.perturbed.PromptBoundExpertPlanner`, whose answer is a function of the prompt) answers
the same state. This is DAgger's data aggregation (Ross, Gordon and Bagnell 2011, "A Reduction of Imitation
Learning and Structured Prediction to No-Regret Online Learning", algorithm 3.1 with beta 0: the learner acts,
the expert labels what it visited).

Decisions:

* **The loss is supervised** (classic DAgger), not EMMA's DPO (``homie train dagger``): the rows continue the
  student's own SFT run (``homie train sft --init-adapter``), so the result stays one LoRA adapter of the shipped
  size, and no reference model is loaded.
* **The row is the student's chat as it was sent**, so the model learns in the context it acted in: its own
  earlier answers stay in the chat even where the expert disagreed (they were what the executor ran and what the
  feedback reports on). A row ends at a round where the student and the expert disagree (subtask or model), with
  the expert's answer as the last turn. Learned in it: that answer, and the student's answers since the previous
  disagreement that the expert agreed with (its label there, learned once and at no extra forward pass). The
  student's disagreeing answers are context only.
* **At most ``max_per_episode`` rows per episode** (the first disagreements): a student stuck in a loop disagrees
  in every later round with almost the same prompt; a few of them carry the lesson, and each row costs a forward
  pass over the chat so far.
* **Replay** (``replay``): episodes of the SFT set the student was trained on are added to the rows so that the
  continued training does not forget the states the student already handles.

**Takeover episodes** (``takeover``, ``homie data corrections --takeover K``): a row above ends at the expert's one
answer to a disagreement, so the data never show a recovery played through from a state the student's own mistake
made; trained on them, the student corrects the named round and then gives up (docs/results, the DAgger pages). With
``takeover``, the student's first ``K`` disagreeing answers are executed, and from its next disagreement on the
expert's answers are (in the rounds between, the student and the expert agree: either one's answer is the same
subtask): the expert-gated intervention of HG-DAgger (Kelly, Sidrane, Driggs-Campbell and Kochenderfer 2019,
"HG-DAgger: Interactive Imitation Learning with Human Experts", section III), with the training expert as the gate.
Decisions:

* **One row per episode**: the whole chat, the student's executed mistakes as context only, every other answer
  learned (the student's agreeing ones, then the expert's). The student is still asked every round after the
  takeover, so that the chat is exactly the one it would be sent, and told to keep the expert's executed answer in
  its place (:meth:`~homiebot.planner.base.Planner.adopt_answer`); the row checks that its chat holds the executed
  answers.
* **A disagreeing End is never executed** (it would end the episode with nothing to recover): the expert takes over
  at that round.
* **Only solved episodes give a row** (a failed recovery is no demonstration), and only those with an executed
  mistake (an episode the student solved without one teaches what the student already does; one where it recovered
  from its mistake by itself is kept).
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.prompt import AnswerFormat, parse_output, split_subtask
from homiebot.training.emmoe import decision_answer
from homiebot.training.episodes import TrainingDataError

if TYPE_CHECKING:
    from homiebot.tasks.suite import TaskSpec

log = logging.getLogger(__name__)

#: Per episode: ``episodes/<task>/run<r>/corrections.json`` (written whole; a collection resumes past it).
EPISODE_FILE = "corrections.json"
MANIFEST_FILE = "collect.json"  #: the settings; a rerun with other settings is refused
STATS_FILE = "sft.json"
#: The student's scene seeds default past the expert collections' (10-21) and the validation set's (30-32) and
#: clear of every evaluation seed: 22-29 are DAgger's (``homie train dagger`` uses them too).
CORRECTIONS_SEED_OFFSET = 22


@dataclass(frozen=True)
class LabelledRound:
    """One round the student played: the chat it was sent (role, content), its answer and the expert's."""

    messages: tuple[tuple[str, str], ...]
    student: str
    expert: str
    agree: bool
    student_subtask: str
    expert_subtask: str
    #: The answer the loop executed: the student's, or with a takeover the expert's label.
    executed: str = ""
    #: Whether the executed answer is the student's disagreeing one (context only in a row).
    executed_mistake: bool = False


class ExpertLabeller(Planner):
    """Acts with ``student``; the ``expert`` answers every state too (privileged, so that it receives the state
    and the goal; the student gets what the loop gives a planner like it: the state when it reads one, never the
    goal). The student's exact chat comes from the request's ``model_calls`` (what the hf planner reports)."""

    name = "corrections"
    privileged = True
    accepts_free_text = False

    def __init__(self, student: Planner, expert: Planner, takeover: int | None = None) -> None:
        if takeover is not None and takeover < 1:
            raise TrainingDataError(f"--takeover must be >= 1 (the student's executed mistakes), got {takeover}")
        if takeover is not None and not student.adopts_answers:
            raise TrainingDataError(
                f"planner {student.name!r} cannot keep another answer in its chat; takeover episodes need one that does"
            )
        self.student = student
        self.expert = expert
        #: Execute this many of the student's disagreeing answers, then the expert's (module docstring); None: the
        #: student acts throughout.
        self.takeover = takeover
        # The loop parses answers in the student's format (a subtask-only answer is not F1).
        self.answer_format = student.answer_format
        self.rounds: list[LabelledRound] = []
        #: The round (1-based) from which the expert acted; None: the student acted throughout.
        self.taken_over_at: int | None = None

    def reset(self, task: str, seed: int = 0) -> None:
        self.rounds = []
        self.taken_over_at = None
        self.student.reset(task, seed)
        self.expert.reset(task, seed)

    def plan(self, request: PlanRequest) -> str:
        seen = replace(
            request,
            world_state=request.world_state if self.student.reads_state else None,
            goal=None,
            perceived_names=None,
            evaluation=None,
        )
        answer = str(self.student.plan(seen))
        if not seen.model_calls:
            raise TrainingDataError(f"planner {self.student.name!r} reports no model call; it cannot be a student")
        sent = seen.model_calls[-1].messages
        expert_request = replace(request, model_calls=[])
        expert = parse_output(str(self.expert.plan(expert_request)))
        if expert.subtask is None:
            raise TrainingDataError(f"the expert's answer does not parse: {expert.raw!r}")
        label = decision_answer(expert.subtask, expert.model)
        mine = parse_output(answer, self.answer_format)
        agree = (
            mine.subtask is not None
            and mine.subtask == expert.subtask
            and (mine.model == expert.model or expert.subtask.action.strip().lower() == "end")
        )
        executed, mistake = answer, not agree
        if self.takeover is not None and not agree:
            mistakes = sum(r.executed_mistake for r in self.rounds)
            gives_up = mine.subtask is None or mine.subtask.action.strip().lower() == "end"
            if self.taken_over_at is None and (gives_up or mistakes >= self.takeover):
                self.taken_over_at = len(self.rounds) + 1
        if self.taken_over_at is not None:
            executed, mistake = label, False
            self.student.adopt_answer(label)
        self.rounds.append(
            LabelledRound(
                tuple((m.role, m.text) for m in sent),
                answer,
                label,
                agree,
                mine.subtask.text() if mine.subtask is not None else "(unparsed)",
                expert.subtask.text(),
                executed,
                mistake,
            )
        )
        return executed

    def close(self) -> None:
        self.student.close()


def episode_rows(rounds: Sequence[LabelledRound], episode_id: str, max_rows: int) -> list[dict[str, Any]]:
    """The SFT rows of one played episode (module docstring): one per disagreement, at most ``max_rows``."""
    rows: list[dict[str, Any]] = []
    learned_until = 0  # rounds before this index have had their agreeing answers learned in an earlier row
    for index, labelled in enumerate(rounds):
        if labelled.agree:
            continue
        if len(rows) == max_rows:
            break
        messages = [{"role": role, "content": text} for role, text in labelled.messages]
        flags = [rounds[k].agree and k >= learned_until for k in range(index)]
        if sum(1 for m in messages if m["role"] == "assistant") != len(flags):
            raise TrainingDataError(
                f"{episode_id}: round {index + 1}'s chat holds another number of answers than the rounds before it "
                "(a student that does not keep one growing chat per episode cannot give episode rows)"
            )
        messages.append({"role": "assistant", "content": labelled.expert})
        rows.append(
            {"id": f"{episode_id}_r{index + 1}", "variant": 0, "messages": messages, "answer_loss": [*flags, True]}
        )
        learned_until = index + 1
    return rows


def takeover_row(rounds: Sequence[LabelledRound], episode_id: str) -> dict[str, Any]:
    """The SFT row of one takeover episode (module docstring): the last round's chat and its executed answer, every
    executed answer learned except the student's mistakes."""
    if not rounds:
        raise TrainingDataError(f"{episode_id}: no round was played")
    last = rounds[-1]
    messages = [{"role": role, "content": text} for role, text in last.messages]
    kept = [m["content"] for m in messages if m["role"] == "assistant"]
    if kept != [r.executed for r in rounds[:-1]]:
        raise TrainingDataError(
            f"{episode_id}: the student's chat does not hold the answers executed before round {len(rounds)} "
            "(a student that does not keep the adopted answers cannot give takeover rows)"
        )
    messages.append({"role": "assistant", "content": last.executed})
    return {
        "id": f"{episode_id}_takeover",
        "variant": 0,
        "messages": messages,
        "answer_loss": [not r.executed_mistake for r in rounds],
    }


@dataclass
class CorrectionsSummary:
    out: Path
    episodes: int = 0
    skipped: int = 0
    solved: int = 0
    rounds: int = 0
    disagreements: int = 0
    rows: int = 0
    replayed: int = 0
    answers_learned: int = 0
    #: Episodes in which the expert took over (``takeover``), of ``episodes`` + ``skipped`` recorded.
    taken_over: int = 0
    seconds: float = 0.0
    transitions: Counter[str] = field(default_factory=Counter)

    def lines(self) -> list[str]:
        common = ", ".join(f"{k} x{v}" for k, v in self.transitions.most_common(6)) or "none"
        return [
            f"{self.episodes} student episodes played ({self.skipped} already recorded), {self.solved} solved, "
            f"{self.rounds} rounds, {self.disagreements} disagree with the expert, in {self.seconds:.0f} s"
            + (f"; the expert took over in {self.taken_over}" if self.taken_over else ""),
            f"data set: {self.rows} correction rows + {self.replayed} replayed episodes, "
            f"{self.answers_learned} answers learned -> {self.out / 'data'}",
            f"most common corrections (student -> expert action): {common}",
        ]


def _tasks(suite: str, split: str, task_ids: Sequence[str] | None) -> list[TaskSpec]:
    from homiebot.tasks.suite import load_suite

    if split not in ("train", "test", "all"):
        raise TrainingDataError(f"unknown split {split!r}; use train, test or all")
    everything = load_suite(suite).tasks
    if not task_ids:
        return [t for t in everything if split in ("all", t.split)]
    known = {t.id: t for t in everything}
    missing = [t for t in task_ids if t not in known]
    if missing:
        raise TrainingDataError(f"unknown task id(s): {', '.join(missing)}")
    return [known[t] for t in task_ids]


def collect_corrections(
    out: str | Path,
    *,
    model: str = "homiebot-smollm2",
    split: str = "train",
    task_ids: Sequence[str] | None = None,
    runs: int = 1,
    seed_offset: int = CORRECTIONS_SEED_OFFSET,
    noise: str = "emmoe",
    max_per_episode: int = 3,
    max_rounds: int = 20,
    replay: str | Path | None = None,
    replay_episodes: int = 0,
    suite: str = "emmoe100",
    takeover: int | None = None,
) -> CorrectionsSummary:
    """Play the student, label its states, write ``OUT/data/train.parquet`` (module docstring).

    Several processes may share ``out`` with disjoint ``task_ids`` and the same settings; each writes the data set
    from every episode recorded in ``out`` when it ends, so the last one to end writes them all. A rerun with
    another ``runs`` or other tasks plays what is not recorded yet, and the data set again holds every episode
    recorded."""
    from homiebot.agent.build import build_episode, build_simulator
    from homiebot.config.planners import HFPlannerConfig, PromptBoundExpertConfig
    from homiebot.config.run import RunConfig, SimulatorConfig, SkillsConfig
    from homiebot.files import atomic_write_text
    from homiebot.planner.perturbed import expert_for_data
    from homiebot.planner.registry import build_planner
    from homiebot.skills.noise import preset_name
    from homiebot.training.collect import check_seeds

    if runs < 1:
        raise TrainingDataError(f"--runs must be >= 1, got {runs}")
    if takeover is not None and takeover < 1:
        raise TrainingDataError(f"--takeover must be >= 1 (the student's executed mistakes), got {takeover}")
    if max_per_episode < 1:
        raise TrainingDataError(f"--max-per-episode must be >= 1, got {max_per_episode}")
    if replay_episodes < 0 or (replay_episodes and replay is None):
        raise TrainingDataError("--replay-episodes needs --replay DIR and a count of 0 or more")
    tasks = _tasks(suite, split, task_ids)
    check_seeds(tasks, seed_offset, runs, suite)
    try:
        noise_preset = preset_name(noise, "--noise")
    except ValueError as err:
        raise TrainingDataError(str(err)) from None
    student_config = HFPlannerConfig(model=model, constrained=True)
    replay_rows = (
        _replay_rows(Path(replay), replay_episodes, student_config.compact_turns)
        if replay is not None and replay_episodes
        else []
    )
    if student_config.answer_format is not AnswerFormat.SUBTASK or not student_config.include_history:
        raise TrainingDataError(
            f"model {model!r}: the corrections are for a student trained on the growing chat with subtask-only "
            "answers (the shipped model's options)"
        )
    setting = RunConfig(
        max_rounds=max_rounds,
        simulator=SimulatorConfig(render=False),
        skills=SkillsConfig(noise=noise_preset),
    )
    root = Path(out).expanduser().absolute()
    manifest = root / MANIFEST_FILE
    # Not "runs" nor "tasks": a rerun may play more or fewer; the data set holds every episode recorded in OUT.
    settings = {
        "model": model,
        "seed_offset": seed_offset,
        "noise": noise_preset,
        # a takeover episode gives one row whatever this says, so it is not recorded as if it applied
        "max_per_episode": None if takeover is not None else max_per_episode,
        "max_rounds": max_rounds,
        "replay": None if replay is None else str(Path(replay).expanduser().absolute()),
        "replay_episodes": replay_episodes,
        "suite": suite,
        # only when set, so that a collection recorded before the option existed still resumes
        **({"takeover": takeover} if takeover is not None else {}),
    }
    if root.exists() and not root.is_dir():
        raise TrainingDataError(f"output {root} exists and is not a folder")
    ours = {MANIFEST_FILE, STATS_FILE, "episodes", "data"}
    if root.is_dir() and any(p.name not in ours and not p.name.startswith(".") for p in root.iterdir()):
        raise TrainingDataError(f"output {root} exists, is not empty and is not a corrections collection")
    root.mkdir(parents=True, exist_ok=True)
    _claim(manifest, settings)
    summary = CorrectionsSummary(root)
    started = time.perf_counter()
    student = build_planner(student_config)
    labeller = ExpertLabeller(student, expert_for_data(PromptBoundExpertConfig()), takeover=takeover)
    sim = build_simulator(setting.simulator)
    try:
        for run in range(runs):
            for task in tasks:
                record = root / "episodes" / task.id / f"run{run}" / EPISODE_FILE
                if record.is_file():
                    summary.skipped += 1
                    continue
                config = setting.model_copy(update={"task": task.id, "seed": seed_offset + run})
                trajectory = build_episode(config, task=task, simulator=sim, planner=labeller).run()
                solved = bool(trajectory.ended and trajectory.goal_satisfied)
                episode_id = f"{task.id}_seed{task.seed + seed_offset + run}"
                if takeover is None:
                    rows = episode_rows(labeller.rounds, episode_id, max_per_episode)
                elif solved and (labeller.taken_over_at is not None or any(r.executed_mistake for r in labeller.rounds)):
                    rows = [takeover_row(labeller.rounds, episode_id)]
                else:
                    rows = []
                expert_from = labeller.taken_over_at or len(labeller.rounds) + 1  # the first round the expert acted
                entry = {
                    "task": task.id,
                    "seed": task.seed + seed_offset + run,
                    "solved": solved,
                    "rounds": [
                        {
                            "student": r.student_subtask,
                            "expert": r.expert_subtask,
                            "agree": r.agree,
                            "acted": "expert" if index + 1 >= expert_from else "student",
                        }
                        for index, r in enumerate(labeller.rounds)
                    ],
                    "taken_over_at": labeller.taken_over_at,
                    "codes": [r.feedback.code.value for r in trajectory.rounds],
                    "rows": rows,
                }
                record.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_text(record, json.dumps(entry, ensure_ascii=False) + "\n")
                summary.episodes += 1
                log.info(
                    "%s: %s in %d rounds, %d disagreements, %d rows",
                    episode_id,
                    "solved" if solved else "failed",
                    len(labeller.rounds),
                    sum(not r.agree for r in labeller.rounds),
                    len(rows),
                )
    finally:
        sim.shutdown()
        labeller.close()
    _write_data(root, replay_rows, summary)
    summary.seconds = time.perf_counter() - started
    return summary


def _claim(manifest: Path, settings: dict[str, Any]) -> None:
    """Write the collection's settings, or check them against those already there. Created whole and only if
    absent (a hard link of a finished temporary file), so that processes starting together on one ``out`` agree."""
    import os

    from homiebot.files import atomic_write_text

    staged = manifest.with_name(f".{manifest.name}.{os.getpid()}")
    atomic_write_text(staged, json.dumps(settings, indent=2) + "\n")
    try:
        os.link(staged, manifest)
    except FileExistsError:
        before = json.loads(manifest.read_text(encoding="utf-8"))
        if before != settings:
            raise TrainingDataError(
                f"{manifest.parent} holds a corrections collection with other settings ({manifest})"
            ) from None
    finally:
        staged.unlink(missing_ok=True)


def _replay_rows(data: Path, count: int, compact_turns: bool) -> list[dict[str, Any]]:
    """``count`` episode rows of an SFT episode set (``homie data build sft --episodes``), chosen with a fixed
    seed so that a rerun builds the same set. The set must be in the student's chat form: replaying compact turns
    to a student that reads the full turns (or the other way) would teach it a second prompt format, so the build
    options the set records (``stats.json``) are checked first."""
    from homiebot.training.build import DATA_FILE, STATS_FILE

    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise TrainingDataError("reading the replay set needs pyarrow: pip install -e '.[train]'") from None
    path = data.expanduser() / DATA_FILE if data.is_dir() else data.expanduser()
    if not path.is_file():
        raise TrainingDataError(f"--replay {data}: no data set (expected {DATA_FILE} from homie data build)")
    stats = data.expanduser() / STATS_FILE if data.is_dir() else None
    if stats is not None and stats.is_file():
        options = json.loads(stats.read_text(encoding="utf-8")).get("options", {})
        if bool(options.get("compact_turns", False)) != compact_turns:
            built = "compact" if options.get("compact_turns") else "full"
            wanted = "compact" if compact_turns else "full"
            raise TrainingDataError(
                f"--replay {data}: built with {built} chat turns, but the student reads {wanted} turns "
                f"(rebuild it with homie data build sft --episodes{' --compact-turns' if compact_turns else ''})"
            )
    table = pq.read_table(str(path))
    if "messages" not in table.column_names or "answer_loss" not in table.column_names:
        raise TrainingDataError(f"--replay {data}: not an episode data set (homie data build sft --episodes)")
    rows = table.select(["id", "messages", "answer_loss"]).to_pylist()
    if count > len(rows):
        raise TrainingDataError(f"--replay-episodes {count}: {data} holds only {len(rows)} episodes")
    chosen = random.Random(0).sample(rows, count)
    return [{**r, "id": f"replay:{r['id']}", "variant": 0} for r in chosen]


def _write_data(root: Path, replay_rows: list[dict[str, Any]], summary: CorrectionsSummary) -> None:
    """Every recorded episode's rows and the replayed episodes as ``OUT/data/train.parquet`` (replaced whole),
    and their figures as ``OUT/sft.json``."""
    from homiebot.files import atomic_write_text, publish
    from homiebot.training.build import DATA_FILE, write_dataset

    rows: list[dict[str, Any]] = []
    played = solved = rounds = disagreements = taken_over = 0
    transitions: Counter[str] = Counter()
    learned_actions: Counter[str] = Counter()
    for record in sorted(root.glob(f"episodes/*/run*/{EPISODE_FILE}")):
        entry = json.loads(record.read_text(encoding="utf-8"))
        played += 1
        solved += int(entry["solved"])
        taken_over += int(entry.get("taken_over_at") is not None)
        rounds += len(entry["rounds"])
        for r in entry["rounds"]:
            if not r["agree"]:
                disagreements += 1
                transitions[f"{split_subtask(r['student']).action} -> {split_subtask(r['expert']).action}"] += 1
        rows.extend(entry["rows"])
    for row in rows:
        learned = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
        for text, flag in zip(learned, row["answer_loss"], strict=True):
            if flag:
                parsed = parse_output(text, AnswerFormat.SUBTASK)
                learned_actions[parsed.subtask.action if parsed.subtask is not None else "(unparsed)"] += 1
    summary.solved, summary.rounds, summary.disagreements = solved, rounds, disagreements
    summary.taken_over = taken_over
    summary.rows, summary.replayed, summary.transitions = len(rows), len(replay_rows), transitions
    summary.answers_learned = sum(learned_actions.values()) + sum(sum(r["answer_loss"]) for r in replay_rows)
    if not rows and not replay_rows:
        raise TrainingDataError(
            f"{root}: no rows to write (the student agreed with the expert everywhere, or, with --takeover, no "
            "episode with an executed mistake was solved)"
        )
    staging = Path(tempfile.mkdtemp(prefix=".data.tmp-", dir=root))
    try:
        publish(staging)
        write_dataset([*rows, *replay_rows], staging / DATA_FILE)
        target = root / Path(DATA_FILE).parent
        if target.exists():
            shutil.rmtree(target)
        (staging / Path(DATA_FILE).parent).rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    stats = {
        "kind": "sft",
        "form": "episodes",
        "student_episodes": played,
        "student_solved": solved,
        "rounds": rounds,
        "disagreements": disagreements,
        "taken_over_episodes": taken_over,
        "correction_rows": len(rows),
        "replayed_episodes": len(replay_rows),
        "answers_learned": summary.answers_learned,
        "corrections_by_action": dict(transitions.most_common()),
        "learned_actions_in_corrections": dict(learned_actions.most_common()),
    }
    atomic_write_text(root / STATS_FILE, json.dumps(stats, indent=2) + "\n")
