"""``homie eval --agents robot+human``: PARTNR's collaboration evaluation (paper §4.2, tables 2 and 12) on the
PARTNR-style suite, a robot and a human in lock-step rounds against the single-agent run of the same task.

For every task and run the robot-and-human episode runs in the one loop (centralized or decentralized,
:mod:`homiebot.multiagent.pair`), and the same task runs again with the robot's planner alone (the baseline of
PARTNR's "1.3x the steps of a single agent"). Per episode (``episodes.jsonl``, one JSON line each, ``kind`` pair
or single):

* success and percent complete from PARTNR's evaluation function over the states after every action (state 0
  after the reset; in a pair, one state after each agent's action, the robot's first in a round);
* steps: lock-step rounds (a round is both agents' actions; a single agent's round is one action) and the
  simulated time (the skills' nominal durations; in a pair an agent's clock waits for the slower one at the
  start of each round, as PARTNR's agents act at the same time);
* per-agent action counts (executed subtasks: not Wait, End or an unparseable answer), planning cycles (the
  loop's rounds, or the LLM calls of a ReAct planner);
* PARTNR A.12's task offloading and extraneous effort over both agents (:mod:`homiebot.multiagent.measures`),
  and exploration (actions before the first successful Pick).

"Collaboration tasks" are the suite's tasks whose propositions the expert split gives both agents a share of
(:func:`collaboration_tasks`): a task of one object and no state change has nothing to divide. The summary
(``collaboration.json``) and ``report.md`` lay the figures out as PARTNR's tables 2 and 12. A rerun of the same
command skips the episodes already in ``episodes.jsonl``.

With ``--perception privileged|conceptgraph`` each agent of a pair has its own world graph
(:mod:`homiebot.agent.agent_graphs`), and the single agent its one graph; the simulators render and the
planners read their graph's description.
"""

from __future__ import annotations

import json
import logging
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from homiebot.agent.build import build_episode
from homiebot.agent.observers import ObserverBase
from homiebot.config import PerceptionMode
from homiebot.config.collaboration import CollaborationConfig
from homiebot.config.planners import validation_message
from homiebot.config.run import RunConfig
from homiebot.files import atomic_write_json, atomic_write_text
from homiebot.multiagent.centralized import AgentRole
from homiebot.multiagent.measures import AgentEvent, collaboration_measures
from homiebot.multiagent.pair import MODES, Facet
from homiebot.multiagent.react_pair import CentralizedReAct
from homiebot.multiagent.split import split_propositions
from homiebot.planner.base import Planner
from homiebot.planner.react import ReActPlanner
from homiebot.tasks.partnr.convert import task_function
from homiebot.tasks.partnr.language import EvaluationFunction, task_category
from homiebot.tasks.partnr.tracker import evaluate_states
from homiebot.tasks.suite import TaskSpec
from homiebot.types import Observation, RoundRecord, Trajectory, WorldState, casefold_words

log = logging.getLogger(__name__)

EPISODES_FILE = "episodes.jsonl"
SETTINGS_FILE = "settings.json"
SUMMARY_FILE = "collaboration.json"
REPORT_FILE = "report.md"
#: What ``--agents`` accepts (PARTNR's pair; a single robot is plain ``homie eval``).
AGENTS = "robot+human"
_NOT_ACTIONS = ("wait", "end")


class CollaborationError(ValueError):
    """Bad input for a collaboration evaluation (one line, for the CLI)."""




def pinned_settings(settings: CollaborationConfig) -> dict[str, Any]:
    """What ``settings.json`` pins: the configuration, and, for a run of the bundled text model (the ReAct planner's
    default, or named in the options), how that model runs, as ``homie eval`` does (greedy answers differ between
    runtimes, so episodes of two runtimes are not mixed in one table)."""
    from homiebot.planner.models import runs_text_runtime, text_runtime_defaults

    wanted = settings.pinned()
    if "react" in (settings.planner_robot, settings.planner_human) or runs_text_runtime(settings.given_options()):
        wanted["model_runtime"] = text_runtime_defaults()
    return wanted


class _ActionStates(ObserverBase):
    """The world (seen from the robot, as the evaluation function reads it) after every agent's action, in order."""

    def __init__(self, state_now: Callable[[], WorldState]) -> None:
        self.state_now = state_now
        self.states: list[WorldState] = []
        self.events: list[tuple[int, RoundRecord]] = []

    def on_start(self, trajectory: Trajectory, state: WorldState, observation: Observation | None) -> None:
        self.states = [self.state_now()]
        self.events = []

    def on_round(self, record: RoundRecord, seen: Observation | None, state: WorldState) -> None:
        self.states.append(self.state_now())
        self.events.append((0, record))

    def on_partner_round(self, record: RoundRecord, seen: Observation | None, state: WorldState) -> None:
        self.states.append(self.state_now())
        self.events.append((record.agent, record))


def _is_action(record: RoundRecord) -> bool:
    subtask = record.output.subtask
    return subtask is not None and casefold_words(subtask.action) not in _NOT_ACTIONS


def _is(record: RoundRecord, action: str) -> bool:
    subtask = record.output.subtask
    return subtask is not None and casefold_words(subtask.action) == action


def collaboration_tasks(tasks: Sequence[TaskSpec], function_of: Callable[[TaskSpec], EvaluationFunction]) -> list[TaskSpec]:
    """The tasks whose propositions the expert split gives both agents a share of."""
    chosen = []
    for task in tasks:
        if task.evaluation is None:
            continue
        share = split_propositions(function_of(task))
        if share[AgentRole.ROBOT] and share[AgentRole.HUMAN]:
            chosen.append(task)
    return chosen


def why_not_collaboration(task: TaskSpec, function_of: Callable[[TaskSpec], EvaluationFunction]) -> str:
    """Why :func:`collaboration_tasks` leaves ``task`` out, in words for the refusal of a task named on the command
    line."""
    if task.evaluation is None:
        return "it has no PARTNR evaluation function to split between the agents"
    share = split_propositions(function_of(task))
    alone = AgentRole.ROBOT if share[AgentRole.ROBOT] else AgentRole.HUMAN
    count = len(share[alone])
    what = "its one proposition" if count == 1 else f"all {count} of its propositions"
    return f"the expert split gives the {alone.name.lower()} {what}, the other agent nothing to do"


def _llm_calls(planner: Planner) -> int | None:
    """PARTNR's planning cycles of one agent's planner: a ReAct planner's model calls; a centralized brain's calls
    once, through the robot's facet (one brain answers for both); None for planners that count nothing."""
    if isinstance(planner, Facet):
        if planner.role is not AgentRole.ROBOT:
            return None
        brain = planner.brain
        return brain.llm_calls if isinstance(brain, CentralizedReAct) else brain.planning_cycles
    return planner.llm_calls if isinstance(planner, ReActPlanner) else None


def score(task: TaskSpec, function: EvaluationFunction, kind: str, run: int, observer: _ActionStates,
          trajectory: Trajectory, sim_time: float, planners: Sequence[Planner], wall_s: float) -> dict[str, Any]:
    """One episode's line of ``episodes.jsonl`` (module docstring)."""
    result = evaluate_states(function, observer.states)
    pcs = result.progress[1:] if len(result.progress) == len(observer.states) else []
    events = [
        AgentEvent(AgentRole(agent), pc, succeeded=record.feedback.success and _is_action(record),
                   is_place=_is(record, "put"))
        for (agent, record), pc in zip(observer.events, pcs, strict=False)
    ]
    measures = collaboration_measures(events, initial_pc=result.progress[0] if result.progress else 0.0)
    actions = {role.name.lower(): 0 for role in AgentRole}
    succeeded = {role.name.lower(): 0 for role in AgentRole}
    for agent, record in observer.events:
        name = AgentRole(agent).name.lower()
        if _is_action(record):
            actions[name] += 1
            if record.feedback.success:
                succeeded[name] += 1
    exploration = None
    for position, (_, record) in enumerate(observer.events):
        if record.feedback.success and _is(record, "pick"):
            exploration = position
            break
    cycles = [c for c in (_llm_calls(p) for p in planners) if c is not None]
    return {
        "task_id": task.id,
        "category": task_category(function),
        "run": run,
        "kind": kind,
        "success": bool(result.success),
        "pc": result.percent_complete,
        "rounds": max(len(trajectory.rounds), len(trajectory.partner_rounds)),
        "sim_time_s": sim_time,
        "actions": actions,
        "successful_actions": succeeded,
        "planning_cycles": sum(cycles) if cycles else len(trajectory.rounds) + len(trajectory.partner_rounds),
        "task_offloading": measures.task_offloading if kind == "pair" else None,
        "extraneous_effort": measures.extraneous_effort,
        "exploration_actions": exploration,
        # What each agent did, in execution order: [agent, subtask, feedback code] (the record of the episode).
        "steps": [[agent, record.subtask_text, record.feedback.code.value] for agent, record in observer.events],
        "ended": trajectory.ended,
        "error": trajectory.error,
        "wall_s": wall_s,
    }


def run_pair(sim: Any, task: TaskSpec, run: int, robot: Planner, human: Planner,
             settings: CollaborationConfig | None = None) -> tuple[dict[str, Any], Trajectory]:
    """One robot-and-human episode of ``task`` on ``sim`` (built with ``human=True``), with the episode settings of
    ``settings`` (default: 20 rounds, no noise, no perception). With perception each agent has its own world graph
    (:mod:`homiebot.agent.agent_graphs`); the simulator must render."""
    config = (settings or CollaborationConfig(suite="")).run_config(task.id, run, pair=True)
    return _run_scored(sim, task, run, "pair", (robot, human), config)


def run_single(sim: Any, task: TaskSpec, run: int, planner: Planner,
               settings: CollaborationConfig | None = None) -> tuple[dict[str, Any], Trajectory]:
    """The same task with the robot alone (the baseline), on a simulator without the human."""
    config = (settings or CollaborationConfig(suite="")).run_config(task.id, run, pair=False)
    return _run_scored(sim, task, run, "single", (planner,), config)


def _run_scored(sim: Any, task: TaskSpec, run: int, kind: str, planners: Sequence[Planner],
                config: RunConfig) -> tuple[dict[str, Any], Trajectory]:
    """Run one episode, built by the one build path (:func:`homiebot.agent.build.build_episode`) on the caller's
    simulator and planners (the robot is ``planners[0]``, a pair's human ``planners[1]``), and score it over the
    state after every agent's action; the task's evaluation function is built on the episode's first state (what
    the loop's reset gave)."""
    observer = _ActionStates(sim.state)
    started = time.perf_counter()
    partner = planners[1] if len(planners) > 1 else None
    trajectory = build_episode(config, task=task, simulator=sim, planner=planners[0], partner=partner,
                               observers=[observer]).run()
    if not observer.states:  # the loop's reset failed: there is no episode to score
        raise RuntimeError(trajectory.error or f"{task.id}: the episode never started")
    function = task_function(task, observer.states[0])
    line = score(task, function, kind, run, observer, trajectory, sim.sim_time, planners, time.perf_counter() - started)
    return line, trajectory


# ------------------------------------------------------------------------------------------------ summary


def _stats(values: Sequence[float | int | None]) -> dict[str, float | int | None]:
    present = [float(v) for v in values if v is not None]
    mean = statistics.fmean(present) if present else None
    sem = statistics.stdev(present) / len(present) ** 0.5 if len(present) > 1 else None
    return {"mean": mean, "sem": sem, "n": len(present)}


def summarize(lines: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per kind (pair, single): PARTNR table 2's and table 12's figures; and the pair against the single agent
    over the episodes both finished (same task and run)."""
    out: dict[str, Any] = {}
    for kind in ("pair", "single"):
        rows = [line for line in lines if line["kind"] == kind]
        if not rows:
            continue
        out[kind] = {
            "episodes": len(rows),
            "sr": _stats([1.0 if r["success"] else 0.0 for r in rows]),
            "pc": _stats([r["pc"] for r in rows]),
            "rounds": _stats([r["rounds"] for r in rows]),
            "sim_time_s": _stats([r["sim_time_s"] for r in rows]),
            "planning_cycles": _stats([r["planning_cycles"] for r in rows]),
            "task_offloading": _stats([r["task_offloading"] for r in rows if r["success"]]),
            "extraneous_effort": _stats([r["extraneous_effort"] for r in rows if r["success"]]),
            "exploration_actions": _stats([r["exploration_actions"] for r in rows]),
            "robot_actions": _stats([r["actions"]["robot"] for r in rows]),
            "human_actions": _stats([r["actions"]["human"] for r in rows]),
            "errors": sum(1 for r in rows if r["error"]),
        }
    pairs = {(r["task_id"], r["run"]): r for r in lines if r["kind"] == "pair"}
    singles = {(r["task_id"], r["run"]): r for r in lines if r["kind"] == "single"}
    common = sorted(set(pairs) & set(singles))
    if common:
        def ratio(key: str) -> float | None:
            num = sum(pairs[k][key] for k in common)
            den = sum(singles[k][key] for k in common)
            return num / den if den else None

        out["pair_vs_single"] = {
            "episodes": len(common),
            "rounds_ratio": ratio("rounds"),
            "sim_time_ratio": ratio("sim_time_s"),
            "actions_ratio": (sum(sum(pairs[k]["actions"].values()) for k in common)
                              / max(1, sum(sum(singles[k]["actions"].values()) for k in common))),
        }
    return out


def _times(ratio: float | None) -> str:
    """A pair/single ratio; None when the single agent's total is 0 (e.g. no simulated time: every round failed
    before acting, as SmolLM2's F1 rounds do)."""
    return "n/a (the single agent's total is 0)" if ratio is None else f"x{ratio:.2f}"


def _fmt(stat: dict[str, Any] | None, digits: int = 2, pct: bool = False) -> str:
    if not stat or stat.get("mean") is None:
        return "n/a"
    scale = 100.0 if pct else 1.0
    text = f"{stat['mean'] * scale:.{digits}f}"
    if stat.get("sem") is not None:
        text += f" ± {stat['sem'] * scale:.{digits}f}"
    return text


def report_markdown(settings: CollaborationConfig, summary: dict[str, Any], tasks: int, runs: int) -> str:
    """PARTNR's tables 2 and 12 in our columns (rounds and simulated time for its simulation steps)."""
    label = {"pair": f"{settings.mode.capitalize()} pair ({settings.planner_robot} + {settings.planner_human})",
             "single": f"Single agent ({settings.planner_robot})"}
    lines = [
        f"# Collaboration: {settings.mode}, robot {settings.planner_robot}, human {settings.planner_human}",
        "",
        f"Suite {settings.suite}, {tasks} collaboration task(s) x {runs} run(s), noise {settings.noise}, "
        f"round limit {settings.max_rounds}"
        + (f", a world graph per agent ({settings.perception})" if settings.perception != PerceptionMode.OFF else "")
        + ". Mean ± standard error.",
        "",
        "## Table 2 layout (PARTNR: Sim steps | SR | PC | Planning cycles)",
        "",
        "| Method | Control | Rounds | Sim time (s) | SR (%) | PC | Planning cycles |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind in ("single", "pair"):
        s = summary.get(kind)
        if s is None:
            continue
        control = "Single agent" if kind == "single" else settings.mode.capitalize()
        lines.append(f"| {label[kind]} | {control} | {_fmt(s['rounds'])} | {_fmt(s['sim_time_s'], 1)} | "
                     f"{_fmt(s['sr'], 1, pct=True)} | {_fmt(s['pc'])} | {_fmt(s['planning_cycles'])} |")
    lines += [
        "",
        "## Table 12 layout (PARTNR: Sim steps | Task offloading | Extraneous effort | Exploration efficiency)",
        "",
        "| Setting | Rounds | Sim time (s) | Task offloading | Extraneous effort | Actions before first pick |"
        " Robot actions | Human actions |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind in ("pair", "single"):
        s = summary.get(kind)
        if s is None:
            continue
        offload = _fmt(s["task_offloading"]) if kind == "pair" else "–"
        lines.append(f"| {label[kind]} | {_fmt(s['rounds'])} | {_fmt(s['sim_time_s'], 1)} | {offload} | "
                     f"{_fmt(s['extraneous_effort'], 3)} | {_fmt(s['exploration_actions'])} | "
                     f"{_fmt(s['robot_actions'])} | {_fmt(s['human_actions'])} |")
    versus = summary.get("pair_vs_single")
    if versus:
        lines += [
            "",
            f"Pair against the single agent over {versus['episodes']} common episode(s): rounds "
            f"{_times(versus['rounds_ratio'])}, simulated time {_times(versus['sim_time_ratio'])}, executed actions "
            f"{_times(versus['actions_ratio'])} (PARTNR: decentralized LLM pairs took 1.3x the simulation steps of a "
            f"single agent).",
        ]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------ runner


@dataclass
class CollabOutcome:
    out_dir: Path
    finished: int
    skipped: int
    summary: dict[str, Any]
    wall_s: float


def _read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def run_collaboration(settings: CollaborationConfig, out: Path, tasks: Sequence[TaskSpec], runs: int,
                      make_pair: Callable[[], tuple[Planner, Planner]], make_single: Callable[[], Planner],
                      progress: Callable[[str], None] | None = None) -> CollabOutcome:
    """Run every (task, run) as a pair and alone, append the lines to ``episodes.jsonl``, write the summary and
    the report. Episodes already in ``episodes.jsonl`` are skipped (resume); the settings must match the ones
    the folder was started with (``settings.json``)."""
    from homiebot.sim.mujoco.backend import MujocoSimulator

    out.mkdir(parents=True, exist_ok=True)
    pinned = out / SETTINGS_FILE
    wanted = pinned_settings(settings)
    if pinned.is_file():
        before = json.loads(pinned.read_text(encoding="utf-8"))
        if before != wanted:
            changed = sorted(k for k in wanted if before.get(k) != wanted[k])
            raise CollaborationError(f"{out} holds a run with other settings ({', '.join(changed)}); use another --out")
    else:
        pinned.write_text(json.dumps(wanted, indent=1) + "\n", encoding="utf-8")
    episodes = out / EPISODES_FILE
    lines = _read_lines(episodes)
    done = {(line["task_id"], line["run"], line["kind"]) for line in lines}
    started = time.perf_counter()
    finished = skipped = 0
    # Perception fuses the rendered views (the segmentation and depth of each agent's four cameras).
    render = settings.perception != PerceptionMode.OFF
    pair_sim = MujocoSimulator(render=render, human=True)
    solo_sim = MujocoSimulator(render=render)
    try:
        for task in tasks:
            for run in range(runs):
                for kind in ("pair", "single"):
                    if (task.id, run, kind) in done:
                        skipped += 1
                        continue
                    if kind == "pair":
                        robot, human = make_pair()
                        line, _ = run_pair(pair_sim, task, run, robot, human, settings)
                        for planner in {id(robot): robot, id(human): human}.values():
                            planner.close()
                    else:
                        single = make_single()
                        line, _ = run_single(solo_sim, task, run, single, settings)
                        single.close()
                    with episodes.open("a", encoding="utf-8") as handle:
                        handle.write(json.dumps(line) + "\n")
                    lines.append(line)
                    finished += 1
                    if progress is not None:
                        progress(f"{task.id} run {run} {kind}: success {line['success']}, PC {line['pc']:.2f}, "
                                 f"{line['rounds']} rounds")
    finally:
        pair_sim.shutdown()
        solo_sim.shutdown()
    summary = write_summary(settings, lines, runs, out)
    return CollabOutcome(out, finished, skipped, summary, time.perf_counter() - started)


def write_summary(settings: CollaborationConfig, lines: Sequence[dict[str, Any]], runs: int, out: Path) -> dict[str, Any]:
    """Write ``collaboration.json`` and ``report.md`` of ``lines`` into ``out`` (each whole or not at all)."""
    summary = summarize(lines)
    atomic_write_json(out / SUMMARY_FILE, summary, indent=1)
    task_count = len({line["task_id"] for line in lines})
    atomic_write_text(out / REPORT_FILE, report_markdown(settings, summary, task_count, runs))
    return summary


def is_collaboration_run(directory: Path) -> bool:
    """Whether ``directory`` was written by ``homie eval --agents`` (its pinned settings name both agents' planners)."""
    pinned = directory / SETTINGS_FILE
    if not (pinned.is_file() and (directory / EPISODES_FILE).is_file()):
        return False
    try:
        settings = json.loads(pinned.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(settings, dict) and {"planner_robot", "planner_human", "mode"} <= set(settings)


def rewrite_report(directory: Path, report_dir: Path | None = None) -> tuple[dict[str, Any], str]:
    """``homie metrics`` on a collaboration folder: the summary and ``report.md`` recomputed from its
    ``episodes.jsonl`` and ``settings.json`` alone, written into ``report_dir`` (default ``directory``).
    Returns the summary and the report's text."""
    try:
        pinned = json.loads((directory / SETTINGS_FILE).read_text(encoding="utf-8"))
        lines = _read_lines(directory / EPISODES_FILE)
    except (OSError, ValueError) as err:
        raise CollaborationError(f"{directory} is not a readable collaboration run: {err}") from None
    # settings.json pins more than the settings (how a bundled model ran; a folder written before the settings
    # were typed, its planner_options); the report needs only the names, the mode and the episode settings.
    report_fields = ("suite", "mode", "planner_robot", "planner_human", "max_rounds", "noise", "perception")
    known = {name: pinned[name] for name in report_fields if name in pinned}
    try:
        settings = CollaborationConfig.model_validate(known)
    except ValidationError as err:
        raise CollaborationError(f"{directory / SETTINGS_FILE}: {validation_message(err)}") from None
    runs = 1 + max((int(line["run"]) for line in lines), default=-1)
    target = directory if report_dir is None else report_dir
    summary = write_summary(settings, lines, runs, target)
    return summary, (target / REPORT_FILE).read_text(encoding="utf-8")


def cli_run(out: Path, *, agents: str, suite: str, mode: str, planner_robot: str, planner_human: str,
            options: dict[str, Any], runs: int, split: str, task_ids: list[str] | None, max_rounds: int,
            noise: str, refused: Sequence[str] = (), progress: Callable[[str], None] | None = None,
            perception: str = PerceptionMode.OFF.value) -> CollabOutcome:
    """``homie eval --agents robot+human``: checks the input (every refusal is one line, before any file is
    written), picks the collaboration tasks and runs them (:func:`run_collaboration`)."""
    from homiebot.multiagent.pair import pair_planners, single_planner
    from homiebot.sim.mujoco.backend import MujocoSimulator
    from homiebot.tasks.suite import TaskError, load_suite

    if agents != AGENTS:
        raise CollaborationError(f"--agents must be {AGENTS} (a single robot is homie eval without --agents), not {agents!r}")
    if refused:
        raise CollaborationError(f"--agents does not take {', '.join(refused)} (docs/collaboration.md)")
    if runs < 1 or max_rounds < 1:
        raise CollaborationError("--runs and --max-rounds must be >= 1")
    if mode not in MODES:
        raise CollaborationError(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
    if perception not in {m.value for m in PerceptionMode}:
        raise CollaborationError(f"--perception must be one of {', '.join(m.value for m in PerceptionMode)}, "
                                 f"not {perception!r}")
    try:  # the pair's model planner typed by its class (a bad option is one line, before any file)
        settings = CollaborationConfig.from_options(
            options=options, suite=suite, mode=mode, planner_robot=planner_robot, planner_human=planner_human,
            max_rounds=max_rounds, noise=noise, perception=perception)
    except ValidationError as err:
        raise CollaborationError(validation_message(err)) from None
    try:  # the one resolver of every command's --suite (homiebot.tasks.suite.resolve_suite)
        tasks = load_suite(suite).tasks
    except TaskError as err:
        raise CollaborationError(f"{err}; --agents runs on --suite partnr") from None
    if not any(t.evaluation is not None for t in tasks):
        raise CollaborationError(f"suite {suite!r} has no PARTNR evaluation functions; --agents runs on --suite partnr")
    if split != "all":
        tasks = [t for t in tasks if t.split == split]
    if task_ids is not None:
        known = {t.id for t in tasks}
        unknown = [t for t in task_ids if t not in known]
        if unknown:
            raise CollaborationError(f"unknown task id(s) in split {split}: {', '.join(unknown[:5])}")
        tasks = [t for t in tasks if t.id in set(task_ids)]
    try:  # build the planners once here, so that a bad name or option is refused before any file exists
        for planner in {*pair_planners(settings), single_planner(settings)}:
            planner.close()
    except (ValueError, KeyError, TypeError) as err:
        raise CollaborationError(str(err).strip("'\"")) from None
    probe = MujocoSimulator(render=False)
    try:
        def function_of(task: TaskSpec) -> EvaluationFunction:
            probe.reset(task.scene, seed=task.seed)
            return task_function(task, probe.state())

        chosen = collaboration_tasks(tasks, function_of)
        chosen_ids = {t.id for t in chosen}
        left_out = [t for t in tasks if t.id not in chosen_ids]
        if task_ids is not None and left_out:  # named tasks are run or refused, never dropped
            reasons = "; ".join(f"{t.id}: {why_not_collaboration(t, function_of)}" for t in left_out)
            raise CollaborationError(f"not a collaboration task (--agents runs only those): {reasons}")
    finally:
        probe.shutdown()
    if not chosen:
        raise CollaborationError("none of the chosen tasks is a collaboration task (the expert split gives one agent everything)")
    return run_collaboration(settings, out, chosen, runs, lambda: pair_planners(settings),
                             lambda: single_planner(settings), progress=progress)
