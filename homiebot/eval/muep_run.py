"""Run the MuEP-style suite with a text agent on either engine, write the records, report MuEP's table.

Engines: ``sim`` plays the parallel text world of the embedded simulator (:mod:`homiebot.textworld.world`);
``alfworld`` exports every task as an ALFWorld game folder and plays it through alfworld's TextWorld
environment (:mod:`homiebot.textworld.alfworld`). Agents: ``expert`` (on ``sim`` the privileged
:class:`~homiebot.eval.muep_suite.TextExpert`; on ``alfworld`` ALFWorld's own planner expert, Fast Downward's
plan), ``searching-expert`` (``sim`` only: :class:`~homiebot.eval.muep_suite.SearchingTextExpert`, which searches
for what it has not seen), ``random`` (uniform over the admissible commands) and ``smollm2`` (a bundled language model in MuEP's
text mode, :mod:`homiebot.eval.muep_lm`). All run under MuEP's protocol (30 steps, AA / ABAB early stop).
On ``sim`` the agent takes the text, the four rendered views, or both (:class:`~homiebot.eval.muep_suite.Observe`);
ALFWorld's engine has text only. ``episodes.jsonl`` holds one record per task; :func:`recompute` rebuilds the table from
it alone, under either convention (docs/muep.md).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from homiebot.eval.muep import Convention, MuepEpisode, RepetitionStop, format_table, muep_table
from homiebot.eval.muep_suite import (
    AlfredTask,
    MuepObservation,
    Observe,
    RandomTextAgent,
    SearchingTextExpert,
    TextAgent,
    TextExpert,
    run_text_episode,
)
from homiebot.sim.base import Simulator
from homiebot.textworld.world import NOTHING_HAPPENS, Phrasing

log = logging.getLogger(__name__)

ENGINES: tuple[str, ...] = ("sim", "alfworld")
#: smollm2: the bundled model in MuEP's text mode; hf: the text planner's model (--model) in the episode chat form
#: (homiebot.eval.muep_chat). Both play the simulator's text world only.
#: searching-expert: the expert that fetches only what an observation has named (it searches first).
AGENTS: tuple[str, ...] = ("expert", "searching-expert", "random", "smollm2", "hf")
EPISODES_FILE = "episodes.jsonl"


class WorkerFailed(RuntimeError):
    """A worker process of a run with ``workers`` > 1 failed or died (the message says which and how)."""


@dataclass(frozen=True)
class EpisodeRecord:
    episode: MuepEpisode
    engine: str
    agent: str
    phrasing: str
    transcript: tuple[tuple[str, str], ...]
    seconds: float
    observe: str = Observe.TEXT.value  # what the agent was given (text, images, both)
    options: dict[str, Any] = field(default_factory=dict)  # the hf agent's model options (--model, --adapter, -p)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, line: str) -> EpisodeRecord:
        data = json.loads(line)
        ep = data["episode"]
        episode = MuepEpisode(**{**ep, "actions": tuple(ep["actions"]), "valid": tuple(ep["valid"])})
        return cls(
            episode,
            data["engine"],
            data["agent"],
            data["phrasing"],
            tuple(tuple(t) for t in data["transcript"]),
            data["seconds"],
            data.get("observe", Observe.TEXT.value),  # records written before the modes were text
            data.get("options", {}),
        )


def check_run(agent: str, engine: str, observe: Observe | str = Observe.TEXT) -> None:
    """Refuse a combination that cannot run, before anything is written (ValueError with one line)."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; choose {', '.join(ENGINES)}")
    if agent not in AGENTS:
        raise ValueError(f"unknown agent {agent!r}; choose {', '.join(AGENTS)}")
    mode = observe.value if isinstance(observe, Observe) else observe
    if mode not in {o.value for o in Observe}:
        raise ValueError(f"unknown observation mode {mode!r}; choose {', '.join(o.value for o in Observe)}")
    if engine == "alfworld" and agent in ("searching-expert", "smollm2", "hf"):
        raise ValueError(f"the {agent} agent plays the simulator's text world only (--engine sim)")
    if agent == "hf" and mode != Observe.TEXT.value:
        raise ValueError("the hf agent reads the text observation only (--observe text)")
    if engine == "alfworld" and mode != Observe.TEXT.value:
        raise ValueError(f"ALFWorld's engine has no images: --observe {mode} needs --engine sim")


def _sim_agent(name: str, options: Mapping[str, Any] | None = None) -> TextAgent:
    """The agent ``name``; ``options``: the hf agent's (its model's, :meth:`ChatTextAgent.from_options`)."""
    if name == "hf":
        from homiebot.eval.muep_chat import ChatTextAgent

        return ChatTextAgent.from_options(options or {})
    if name == "expert":
        return TextExpert()
    if name == "searching-expert":
        return SearchingTextExpert()
    if name == "random":
        return RandomTextAgent()
    if name == "smollm2":
        from homiebot.eval.muep_lm import LanguageModelTextAgent

        return LanguageModelTextAgent.bundled(name)
    raise ValueError(f"unknown agent {name!r}; known: {', '.join(AGENTS)}")


def run_suite(
    tasks: Sequence[AlfredTask],
    agent: str,
    engine: str,
    out_dir: Path,
    phrasing: Phrasing | str = Phrasing.ALFWORLD,
    sim: Simulator | None = None,
    observe: Observe | str = Observe.TEXT,
    agent_options: Mapping[str, Any] | None = None,
    workers: int = 1,
) -> list[EpisodeRecord]:
    """Play every task; ``out_dir`` receives ``episodes.jsonl``, ``report.md`` (and ``games/`` for ALFWorld).
    ``observe``: what the agent is given on ``sim`` (the images modes render the four views every step).
    ``agent_options``: the hf agent's model options (each record keeps them; a resumed run must give the same).
    ``workers``: processes that play the tasks side by side, each with its own simulator and agent (a model agent
    loads its model in each; ``sim`` is then not used); records are written as they come, in the order played.

    A directory that already holds episodes of the same agent, engine, phrasing and mode is resumed: its
    tasks are not played again and the report covers them all (a run cut short is completed by the same
    command); episodes of other settings are refused (ValueError), before anything is played."""
    check_run(agent, engine, observe)
    if workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
    phrasing, observe = Phrasing(phrasing), Observe(observe)
    options = {k: (str(v) if isinstance(v, Path) else v) for k, v in sorted((agent_options or {}).items())}
    previous = _previous_records(out_dir, engine, agent, phrasing.value, observe.value, options)
    done = {r.episode.task_id for r in previous}
    if done:
        log.info(
            "%s: %d episode(s) already played, %d to play", out_dir, len(done), sum(t.id not in done for t in tasks)
        )
    tasks = [t for t in tasks if t.id not in done]
    out_dir.mkdir(parents=True, exist_ok=True)
    records: list[EpisodeRecord] = list(previous)
    play = _Play(agent, engine, out_dir, phrasing.value, observe.value, options)
    with (out_dir / EPISODES_FILE).open("a") as sink:

        def keep(record: EpisodeRecord) -> None:
            sink.write(record.to_json() + "\n")
            sink.flush()  # a run cut short keeps what it played
            records.append(record)

        if workers > 1 and len(tasks) > 1:
            _play_in_workers(play, tasks, min(workers, len(tasks)), keep)
        else:
            play.run(tasks, keep, sim)
    write_report(records, out_dir)
    return records


@dataclass(frozen=True)
class _Play:
    """What one process needs to play tasks (picklable: a worker process receives it)."""

    agent: str
    engine: str
    out_dir: Path
    phrasing: str
    observe: str
    options: dict[str, Any]

    def run(self, tasks: Sequence[AlfredTask], keep: Callable[[EpisodeRecord], None], sim: Simulator | None = None) -> None:
        """Play ``tasks`` in order on ``sim`` (a fresh simulator when None), handing each record to ``keep``."""
        if not tasks:
            return
        observe, phrasing = Observe(self.observe), Phrasing(self.phrasing)
        own_sim = sim is None
        if sim is None:
            from homiebot.sim.mujoco.backend import MujocoSimulator

            sim = MujocoSimulator(render=observe.with_images)
        text_agent = _sim_agent(self.agent, self.options) if self.engine == "sim" else None  # one for every episode
        try:
            for task in tasks:
                started = time.perf_counter()
                if text_agent is not None:
                    played = run_text_episode(sim, task, text_agent, phrasing, mode=observe)
                    episode, transcript = played.episode, played.transcript
                else:
                    episode, transcript = play_alfworld(sim, task, self.agent, self.out_dir / "games" / task.id, phrasing)
                seconds = time.perf_counter() - started
                keep(EpisodeRecord(episode, self.engine, self.agent, phrasing.value, transcript, seconds, observe.value,
                                   self.options))
        finally:
            if own_sim:
                sim.shutdown()
            close = getattr(text_agent, "close", None)  # only model agents hold resources
            if close is not None:
                close()


def _play_in_workers(
    play: _Play, tasks: Sequence[AlfredTask], workers: int, keep: Callable[[EpisodeRecord], None]
) -> None:
    """Deal the tasks round-robin to ``workers`` spawned processes (so each goes through the balanced order) and
    hand every record to ``keep`` as it arrives. A worker that fails ends the run with its error (WorkerFailed);
    what the others had played is kept, and the same command plays the rest.

    Written here rather than with multiprocessing.Pool: a pool's workers cannot each hold a simulator and a model
    across tasks without module-level state, and records must reach the parent one by one as they are played."""
    import multiprocessing
    import queue as queues

    context = multiprocessing.get_context("spawn")  # torch, MuJoCo and llama.cpp are not fork-safe
    results = context.Queue()
    shards = [list(tasks[i::workers]) for i in range(workers)]
    processes = [context.Process(target=_worker, args=(play, shard, results), daemon=True) for shard in shards]
    for process in processes:
        process.start()
    finished = 0
    try:
        while finished < len(processes):
            try:
                kind, payload = results.get(timeout=5.0)
            except queues.Empty:
                dead = [p for p in processes if p.exitcode not in (None, 0)]
                if dead:
                    raise WorkerFailed(f"a worker process died (exit code {dead[0].exitcode}); what was played is "
                                       "kept, the same command plays the rest") from None
                continue
            if kind == "record":
                keep(EpisodeRecord.from_json(payload))
            elif kind == "done":
                finished += 1
            else:
                raise WorkerFailed(f"a worker failed: {payload}; what was played is kept, the same command plays "
                                   "the rest")
    finally:
        for process in processes:
            if process.is_alive() and finished < len(processes):
                process.kill()
            process.join(timeout=30)


def _worker(play: _Play, tasks: list[AlfredTask], results: Any) -> None:
    """One worker process: play its tasks, send each record, then "done" (or the error that stopped it)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it ends the workers
    try:
        play.run(tasks, lambda record: results.put(("record", record.to_json())))
    except Exception as err:  # any failure is reported to the parent, which stops the run with it
        results.put(("error", f"{type(err).__name__}: {err}"))
        return
    results.put(("done", None))


def _previous_records(
    out_dir: Path, engine: str, agent: str, phrasing: str, observe: str, options: Mapping[str, Any] | None = None
) -> list[EpisodeRecord]:
    """The episodes ``out_dir`` already holds; ValueError when they were played with other settings (the hf
    agent's model options included)."""
    if not (out_dir / EPISODES_FILE).exists():
        return []
    records = load_records(out_dir)
    for record in records:
        if (record.engine, record.agent, record.phrasing, record.observe) != (engine, agent, phrasing, observe):
            raise ValueError(
                f"{out_dir} holds episodes of {record.agent} on {record.engine} ({record.phrasing} phrasing, observing "
                f"{record.observe}); give another --out to run {agent} on {engine} ({phrasing}, observing {observe})"
            )
        if options is not None and record.options != dict(options):
            raise ValueError(
                f"{out_dir} holds episodes of {record.agent} with the options {record.options}; give another --out to "
                f"run it with {dict(options)}"
            )
    return records


def balanced_order(tasks: Sequence[AlfredTask]) -> list[AlfredTask]:
    """The tasks in turns over (task type, split), MuEP's type order, seen before unseen: any first part of a run
    (``--limit``, or a run cut short) covers the types and splits evenly."""
    from homiebot.tasks.alfred import TASK_TYPES

    rank = {kind: i for i, kind in enumerate(TASK_TYPES)}
    groups: dict[tuple[int, str], list[AlfredTask]] = {}
    for task in tasks:
        groups.setdefault((rank.get(task.task_type, len(rank)), task.split), []).append(task)
    queues = [groups[key] for key in sorted(groups, key=lambda k: (k[0], k[1] != "seen", k[1]))]
    ordered: list[AlfredTask] = []
    for turn in range(max((len(q) for q in queues), default=0)):
        ordered += [q[turn] for q in queues if turn < len(q)]
    return ordered


def play_alfworld(
    sim: Simulator, task: AlfredTask, agent: str, folder: Path, phrasing: Phrasing | str = Phrasing.ALFWORLD
) -> tuple[MuepEpisode, tuple[tuple[str, str], ...]]:
    """Export the task from the simulator's start state and play it on ALFWorld's engine."""
    from homiebot.textworld.alfworld import export_game

    sim.reset(task.scene, seed=task.seed)
    exported = export_game(
        sim,
        task.task_type,
        task.object_type,
        task.receptacle_type,
        task.toggle_type,
        task.instruction,
        folder,
        phrasing=Phrasing(phrasing).value,
    )
    return play_game(exported.game_file, task, agent)


def play_game(game_file: Path, task: AlfredTask, agent: str) -> tuple[MuepEpisode, tuple[tuple[str, str], ...]]:
    """Play one ALFWorld game file (ours or ALFWorld's own) under MuEP's protocol."""
    from homiebot.textworld.alfworld import AlfworldGame

    game = AlfworldGame(game_file, expert=agent == "expert")
    policy = RepetitionStop()
    chooser = RandomTextAgent()
    chooser.rng.seed(task.id)
    transcript: list[tuple[str, str]] = []
    valid: list[bool] = []
    try:
        step = game.reset()
        won = step.won
        while not won:
            if agent == "expert":
                command = game.expert_plan[0] if game.expert_plan else None
            else:
                command = chooser.act(MuepObservation(Observe.TEXT, "", step.observation), list(step.admissible))
            if command is None or not policy.allows(command):
                break
            admissible = command in step.admissible
            step = game.step(command)
            transcript.append((command, step.observation))
            valid.append(admissible or step.observation != NOTHING_HAPPENS)
            won = step.won
        met, total = game.goal_conditions(task)
    finally:
        game.close()
    episode = MuepEpisode(
        task_type=task.task_type,
        success=won,
        goal_conditions_met=total if won else met,
        goal_conditions_total=total,
        actions=tuple(c for c, _ in transcript),
        valid=tuple(valid),
        split=task.split,
        stopped_on_repeat=policy.stopped == "repeat",
        task_id=task.id,
    )
    return episode, tuple(transcript)


def task_of_game(game_file: Path, split: str) -> AlfredTask:
    """The task of an ALFWorld game folder, from its ``traj_data.json`` (types lower-cased, as ALFWorld's
    templates write them)."""
    traj = json.loads((game_file.parent / "traj_data.json").read_text())
    params = traj["pddl_params"]
    return AlfredTask(
        id=f"{game_file.parent.parent.name}/{game_file.parent.name}",
        task_type=traj["task_type"],
        scene=str(traj.get("scene", {}).get("scene_name", "")),
        seed=0,
        split=split,
        object_type=params["object_target"].lower(),
        receptacle_type=params.get("parent_target", "").lower(),
        toggle_type=params.get("toggle_target", "").lower(),
    )


def run_alfworld_data(
    data_dir: Path, agent: str, out_dir: Path, split: str | None = None, limit: int | None = None
) -> list[EpisodeRecord]:
    """Play the games of an ALFWorld data directory (the user's download, or folders exported here) with
    ALFWorld's planner expert or the random agent; splits as the folders name them (``valid_seen``...)."""
    from homiebot.textworld.alfworld import find_games

    if agent not in AGENTS:
        raise ValueError(f"unknown agent {agent!r}; known: {', '.join(AGENTS)}")
    check_run(agent, "alfworld")
    games = list(find_games(data_dir, split))
    if limit is not None:
        games = games[:limit]
    if not games:
        raise FileNotFoundError(f"no playable ALFWorld game under {data_dir}" + (f" in split {split}" if split else ""))
    out_dir.mkdir(parents=True, exist_ok=True)
    records = []
    with (out_dir / EPISODES_FILE).open("w") as sink:
        for game_split, game_file in games:
            started = time.perf_counter()
            episode, transcript = play_game(game_file, task_of_game(game_file, game_split), agent)
            record = EpisodeRecord(episode, "alfworld", agent, "alfworld", transcript, time.perf_counter() - started)
            sink.write(record.to_json() + "\n")
            sink.flush()
            records.append(record)
    write_report(records, out_dir)
    return records


def export_suite(
    tasks: Sequence[AlfredTask], out_dir: Path, phrasing: Phrasing | str = Phrasing.ALFWORLD
) -> list[Path]:
    """Every task as an ALFWorld game folder, in ALFWorld's layout (``valid_seen/<id>/``, ``valid_unseen/<id>/``)."""
    from homiebot.sim.mujoco.backend import MujocoSimulator
    from homiebot.textworld.alfworld import export_game

    sim = MujocoSimulator(render=False)
    files = []
    try:
        for task in tasks:
            sim.reset(task.scene, seed=task.seed)
            folder = out_dir / f"valid_{task.split}" / task.id
            files.append(
                export_game(
                    sim,
                    task.task_type,
                    task.object_type,
                    task.receptacle_type,
                    task.toggle_type,
                    task.instruction,
                    folder,
                    phrasing=Phrasing(phrasing).value,
                ).game_file
            )
    finally:
        sim.shutdown()
    return files


def write_report(
    records: Sequence[EpisodeRecord], out_dir: Path, convention: Convention | str = Convention.TABLES
) -> str:
    """``report.md``: MuEP's table of these records (``convention``), and the time per episode."""
    if not records:
        text = "No episodes.\n"
    else:
        first = records[0]
        title = (
            f"{first.agent} on the {first.engine} engine ({first.phrasing} phrasing, observing {first.observe}), "
            f"{Convention(convention).value} convention"
        )
        seconds = sorted(r.seconds for r in records)
        text = format_table(muep_table([r.episode for r in records], convention), title)
        text += f"\n\n{len(records)} episodes; median {seconds[len(seconds) // 2]:.3f} s per episode.\n"
    (out_dir / "report.md").write_text(text)
    return text


def load_records(out_dir: Path | str) -> list[EpisodeRecord]:
    path = Path(out_dir) / EPISODES_FILE
    if not path.exists():
        raise FileNotFoundError(f"no {EPISODES_FILE} in {out_dir}")
    records = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(EpisodeRecord.from_json(line))
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{path}:{number}: not an episode record ({err})") from None
    return records


def recompute(out_dir: Path | str, convention: Convention | str = Convention.TABLES) -> str:
    """MuEP's table from ``episodes.jsonl`` alone (no rerun), or from a ``homie eval`` directory's records
    (EMMOE-100, grouped by attribute; :func:`homiebot.eval.muep.emmoe_episodes`)."""
    from homiebot.eval.muep import emmoe_episodes

    if not (Path(out_dir) / EPISODES_FILE).exists() and (Path(out_dir) / "results.jsonl").exists():
        episodes = emmoe_episodes(out_dir)
    else:
        episodes = [r.episode for r in load_records(out_dir)]
    return format_table(muep_table(episodes, convention), f"{Convention(convention).value} convention")


def compare(
    run_dirs: Sequence[Path | str], convention: Convention | str = Convention.TABLES, common: bool = False
) -> str:
    """Several runs side by side, one row per run: its setting, the number of episodes and MuEP's overall row of
    each split, and the median time per episode. ``common``: only the tasks every run played (two runs cut
    short at different points are then compared on the same tasks)."""
    runs = [(Path(d), load_records(d)) for d in run_dirs]
    if not runs:
        raise ValueError("give at least one run directory")
    empty = [str(d) for d, records in runs if not records]
    if empty:
        raise ValueError(f"no episodes in {', '.join(empty)}")
    if common:
        shared = set.intersection(*({r.episode.task_id for r in records} for _, records in runs))
        runs = [(d, [r for r in records if r.episode.task_id in shared]) for d, records in runs]
        if not shared:
            raise ValueError("the runs have no task in common")
    splits = sorted({r.episode.split for _, records in runs for r in records})
    header = "| run | agent | engine | observe | " + " | ".join(f"{s} N | SR | IS | GCS | LC | RDI" for s in splits)
    lines = [header + " | s per episode (median) |", "|" + "---|" * (5 + 6 * len(splits))]
    for folder, records in runs:
        first = records[0]
        table = muep_table([r.episode for r in records], convention)
        cells = []
        for split in splits:
            row = table.get(split, {}).get("overall")
            cells += [str(row.n), *row.cells()] if row is not None else ["0"] + ["-"] * 5
        seconds = sorted(r.seconds for r in records)
        lines.append(
            f"| {folder.name} | {first.agent} | {first.engine} | {first.observe} | "
            + " | ".join(cells)
            + f" | {seconds[len(seconds) // 2]:.2f} |"
        )
    return "\n".join(lines)
