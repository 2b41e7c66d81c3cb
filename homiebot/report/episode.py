"""The HTML page of one episode record (the layout of homiebot/data/record.py; docs/reports.md).

What it shows, from the record's files alone: the outcome and the episode's metrics (its verdict, TP and which
nodes of each keypath the rounds matched, EMMOE section 2.3 / appendix C; PARTNR's percent complete, category
and failure explanation when the record keeps its states), the top-down map with the robot's path
(``topdown.png``), the scene's world graph with what the episode touched, and a round-by-round timeline: the
four views the planner saw (and, for a physical skill, the arm reaching: ``reaching.jsonl``'s frames from the head
and overview cameras, homiebot/sim/mujoco/motion_views.py), its whole answer, the parsed subtask and model, the feedback code and message, the
inventory before and after, and the world description when one was sent. A played two-agent episode
(``homie play``) adds the person's rounds from ``play.json`` to the timeline, each after the robot's round of
the same lock-step round.

Decision: the metrics need the task's keypaths and the scene's name table. Inside an evaluation directory
they come from the snapshot in ``eval.json`` (what the evaluation scored); for a lone record, from the task
library and the scene file. The verdict in the title and the outcome is computed from the record's files as
``homie metrics`` computes it (:func:`homiebot.eval.verdict.score_record`), so the page, ``summary.json``
and ``homie metrics`` never disagree. A free-text episode (no task) has no TP and no verdict.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from homiebot.data.record import (
    ROUNDS_FILE,
    TOPDOWN_FILE,
    VIDEO_FILE,
    RecordError,
    read_episode,
    read_motion_views,
    read_summary,
    view_filename,
)
from homiebot.eval.keypaths import NameResolver, matched_prefix, parse_keypath, steps_of, task_progress
from homiebot.eval.partnr.states import StatesError
from homiebot.eval.verdict import Verdict, recorded_verdict, score_record, verdict_of
from homiebot.files import atomic_write_text
from homiebot.report.graph import final_placements, world_graph_svg
from homiebot.report.html import code_badge, esc, image_src, page, table
from homiebot.report.shown import shown_feedback, shown_inventory, shown_model
from homiebot.sim.scene import SceneError, SceneSpec, load_scene
from homiebot.tasks.partnr.language import EvaluationError
from homiebot.tasks.suite import TaskError, TaskSpec, get_task
from homiebot.types import VIEW_NAMES, Trajectory

log = logging.getLogger(__name__)

#: The page's file name inside a record directory.
REPORT_FILE = "report.html"


class ReportError(RuntimeError):
    """A report cannot be written; the message names the path and what is wrong."""


@dataclass(frozen=True)
class EpisodeContext:
    """What scores an episode: its task (keypaths) and the scene's name resolver; the scene for the graph."""

    task: TaskSpec | None
    resolver: NameResolver | None
    scene: SceneSpec | None


@dataclass(frozen=True)
class EpisodeMetrics:
    tp: str | None  # exact fraction, e.g. "3/4"
    tp_percent: float | None
    best_keypath: int | None
    matched: tuple[int, ...]  # matched prefix length per keypath
    keypaths: tuple[tuple[str, ...], ...]
    pc: float | None  # PARTNR's percent complete, when the record keeps its states
    verdict: Verdict | None = None  # None: not computable here (no task, or the scene's names are missing)
    category: str | None = None  # PARTNR's task category, when the states were scored
    explanation: str = ""  # PARTNR's failure explanation


def standalone_context(summary: dict[str, Any]) -> EpisodeContext:
    """Task and names for a record outside an evaluation: the task library and the scene file."""
    from homiebot.eval.runner import resolver_for, scene_name_rows

    scene: SceneSpec | None = None
    resolver: NameResolver | None = None
    try:
        scene = load_scene(summary["scene"])
        resolver = resolver_for(scene_name_rows(summary["scene"]))
    except SceneError as err:
        log.warning("no world graph or names for this record: %s", err)
    task = None
    if summary.get("task"):
        try:
            task = get_task(summary["task"])
        except TaskError as err:
            log.warning("no metrics for this record: %s", err)
    return EpisodeContext(task, resolver, scene)


def episode_metrics(trajectory: Trajectory, summary: dict[str, Any], context: EpisodeContext,
                    record_dir: Path | None = None) -> EpisodeMetrics:
    """The page's figures; with ``record_dir`` the verdict and PARTNR's figures from its files (module docstring)."""
    if context.task is None or context.resolver is None:
        # Nothing to score by here: the verdict the record was written with, if any.
        return EpisodeMetrics(None, None, None, (), (), None, recorded_verdict(summary))
    keypaths = tuple(tuple(path) for path in context.task.keypaths)
    progress = task_progress(keypaths, trajectory.rounds, context.resolver)
    steps = steps_of(trajectory.rounds)
    matched = tuple(matched_prefix(parse_keypath(path), steps, context.resolver) for path in keypaths)
    verdict, partnr = None, None
    if record_dir is not None:
        try:
            score, partnr = score_record(record_dir, trajectory, context.task, context.resolver, run=trajectory.seed)
        except (StatesError, EvaluationError, OSError, ValueError, KeyError, TypeError) as err:
            raise ReportError(f"{record_dir}: its PARTNR files are damaged ({err})") from None
        verdict = verdict_of(score, partnr)
    return EpisodeMetrics(str(progress.value), 100 * float(progress.value), progress.best_keypath, matched, keypaths,
                          partnr.pc if partnr is not None else None, verdict,
                          partnr.category if partnr is not None else None,
                          partnr.explanation if partnr is not None and not partnr.success else "")


def _read_round_lines(record_dir: Path) -> list[dict[str, Any]]:
    """The rounds' raw JSON (fields beyond the RoundRecord, such as a world description, are kept)."""
    lines = (record_dir / ROUNDS_FILE).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _yes_no(value: Any) -> str:
    if value is None:
        return '<span class="muted">n/a</span>'
    return '<span class="ok">yes</span>' if value else '<span class="fail">no</span>'


def _success(metrics: EpisodeMetrics) -> str:
    verdict = metrics.verdict
    if verdict is None or verdict.success is None:
        return _yes_no(None)
    return f'{_yes_no(verdict.success)} <span class="muted">({esc(verdict.reason())})</span>'


def _outcome(summary: dict[str, Any], trajectory: Trajectory, metrics: EpisodeMetrics,
             partner_rounds: Sequence[dict[str, Any]], play: dict[str, Any] | None) -> str:
    rounds = f"{len(trajectory.rounds)}: " + " ".join(
        f'<a href="#round{r.index}" title="{esc(r.subtask_text)}">{code_badge(r.feedback.code.value)}</a>'
        for r in trajectory.rounds
    )
    rows = [
        ("task", esc(summary.get("task") or "free text")),
        ("scene", esc(summary.get("scene"))),
        ("planner", esc(summary.get("planner"))),
    ]
    if play is not None:
        rows.append(("played at the keyboard", f"the {esc(play.get('role'))} (ended by {esc(play.get('ended_by'))})"))
    rows += [
        ("run seed / scene seed", f"{esc(summary.get('seed'))} / {esc(summary.get('scene_seed'))}"),
        ("success", _success(metrics)),
        ("ended with [End]", _yes_no(summary.get("ended"))),
        ("final-state goal check", _yes_no(summary.get("goal_satisfied"))),
        ("rounds" if not partner_rounds else "robot rounds", rounds),
    ]
    if partner_rounds:
        who = esc(summary.get("partner_planner") or (play or {}).get("player") or "partner")
        rows.append((f"human rounds ({who})", f"{len(partner_rounds)}: " + " ".join(
            f'<a href="#{_PARTNER}{r["round"]}" title="{esc(r.get("subtask_text"))}">{code_badge(r["error_code"])}</a>'
            for r in partner_rounds
        )))
    rows += [
        ("path length", f"{trajectory.path_length:.2f} m"),
        ("wall time", f"{trajectory.wall_time_s:.2f} s"),
        ("TP", "n/a (no task)" if metrics.tp is None else f"{metrics.tp_percent:.2f}% ({esc(metrics.tp)})"),
    ]
    if metrics.pc is not None:
        pc = f"{100 * float(metrics.pc):.2f}%"
        if metrics.category:
            pc += f" (PARTNR category: {esc(metrics.category)})"
        rows.append(("PC", pc))
    if metrics.explanation:
        rows.append(("PARTNR explanation", esc(metrics.explanation)))
    if trajectory.error:
        rows.append(("infrastructure error", f'<span class="fail">{esc(trajectory.error)}</span>'))
    return '<section id="outcome"><h2>Outcome</h2>' + table(["", ""], rows, escape=False) + _keypaths(metrics) + "</section>"


def _keypaths(metrics: EpisodeMetrics) -> str:
    if not metrics.keypaths:
        return ""
    out = ["<h3>Keypaths (matched nodes shaded; TP is the best ratio)</h3>"]
    for i, (path, matched) in enumerate(zip(metrics.keypaths, metrics.matched, strict=False)):
        nodes = " &rarr; ".join(
            f'<span class="{"hit" if j < matched else "miss"}">{esc(node)}</span>' for j, node in enumerate(path)
        )
        best = " <b>(best)</b>" if i == metrics.best_keypath else ""
        out.append(f'<div class="kp">{i + 1}. {matched}/{len(path)}{best}: {nodes}</div>')
    return "".join(out)


def _views(record_dir: Path, page_dir: Path, index: int, embed: bool) -> str:
    cells = []
    for view in VIEW_NAMES:
        path = record_dir / view_filename(index, view)
        if path.is_file():
            cells.append(
                f'<div class="view" data-view="{view}"><img alt="{view} view, round {index}" '
                f'src="{image_src(path, page_dir, embed)}"><span>{view}</span></div>'
            )
        else:
            cells.append(f'<div class="view missing" data-view="{view}">{view}: not recorded</div>')
    return f'<div class="views">{"".join(cells)}</div>'


#: The reaching views' cameras, in the order a moment shows them (homiebot/sim/mujoco/motion_views.py).
REACH_CAMERAS = ("head", "overview")


def _reaching(moments: Sequence[dict[str, Any]], record_dir: Path, page_dir: Path, embed: bool, index: int) -> str:
    """Round ``index``'s reaching views (``reaching.jsonl``): per moment the head camera above the overview camera,
    what had just happened and when; nothing when the round has none."""
    cells = []
    for moment in moments:
        views = moment.get("views") or {}
        label = str(moment.get("label", ""))
        images = "".join(
            f'<img alt="{camera} camera, round {index}: {esc(label)}" data-camera="{camera}" '
            f'src="{image_src(record_dir / views[camera], page_dir, embed)}">'
            for camera in (*REACH_CAMERAS, *sorted(set(views) - set(REACH_CAMERAS)))
            if camera in views and (record_dir / views[camera]).is_file()
        )
        if not images:
            continue
        stamp = moment.get("stamp")
        when = f'<br><span class="muted">t = {float(stamp):.1f} s</span>' if stamp is not None else ""
        cells.append(f'<figure class="reach">{images}<figcaption>{esc(label)}{when}</figcaption></figure>')
    if not cells:
        return ""
    return (f'<div class="reaching"><div class="muted">the arm reaching: head camera above, overview camera below, '
            f'at the end of each arm and gripper goal</div><div class="strip">{"".join(cells)}</div></div>')


def _round(data: dict[str, Any], record_dir: Path, page_dir: Path, embed: bool, who: str | None = None,
           moments: Sequence[dict[str, Any]] = ()) -> str:
    """One round of the timeline; ``who``: the agent, for the partner's rounds of a two-agent episode (their
    views are not recorded)."""
    index = int(data["round"])
    inventory_before = shown_inventory(data.get("inventory_before", []))
    inventory_after = shown_inventory(data.get("inventory", []))
    grounded = data.get("grounded_subtask")
    lines = [
        f"<h3>{esc(who) + ', round' if who else 'Round'} {index}: {esc(data.get('subtask_text'))}</h3>",
        f"<div>model <b>{esc(shown_model(data.get('model')))}</b>; {code_badge(data['error_code'])} "
        f"{esc(shown_feedback(data.get('feedback'), data['error_code']))} "
        f"<span class=\"muted\">({esc(data.get('attempts', 0))} tries)</span></div>",
    ]
    if data.get("parse_error"):
        lines.append(f'<div class="fail">not parsed: {esc(data["parse_error"])}</div>')
    if grounded:
        text = ", ".join(str(v) for v in (grounded.get("action"), grounded.get("target"), grounded.get("place")) if v)
        lines.append(f"<div>grounded as [{esc(text)}]</div>")
    lines.append(
        f"<div>inventory {esc(inventory_before)} &rarr; {esc(inventory_after)}; "
        f"base moved {float(data.get('path_length_m', 0.0)):.2f} m</div>"
    )
    lines.append(f"<div>planner's answer:</div><pre class=\"answer\">{esc(data.get('raw_output', ''))}</pre>")
    if data.get("world_description"):
        lines.append(
            f"<details open><summary>world description sent</summary><pre>{esc(data['world_description'])}</pre></details>"
        )
    lines.append(f"<details><summary>instruction</summary><pre>{esc(data.get('instruction', ''))}</pre></details>")
    if who is not None:
        return (
            f'<div class="round partner" id="{_PARTNER}{index}" data-code="{esc(data["error_code"])}">'
            f'<div class="muted">the {esc(who)}\'s views are not recorded</div><div>{"".join(lines)}</div></div>'
        )
    return (
        f'<div class="round" id="round{index}" data-code="{esc(data["error_code"])}">'
        f"<div>{_views(record_dir, page_dir, index, embed)}{_reaching(moments, record_dir, page_dir, embed, index)}</div>"
        f"<div>{''.join(lines)}</div></div>"
    )


#: The anchor prefix of the partner's rounds (``#human-round3``).
_PARTNER = "human-round"


def _play_file(record_dir: Path) -> dict[str, Any] | None:
    """``play.json`` of a played episode (homiebot/play/episode.py), None for any other record."""
    from homiebot.data.record import PLAY_FILE

    path = record_dir / PLAY_FILE
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else None


def _partner_rounds(play: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The person's rounds of a two-agent played episode, as ``rounds.jsonl`` lines (older ``play.json`` files
    kept only the short fields: the page shows what there is)."""
    rounds = []
    for data in (play or {}).get("partner_rounds") or []:
        rounds.append({**data, "subtask_text": data.get("subtask_text", data.get("subtask")),
                       "error_code": data.get("error_code", data.get("code", "OK"))})
    return rounds


def _timeline(rounds: Sequence[dict[str, Any]], partner_rounds: Sequence[dict[str, Any]], record: Path,
              page_dir: Path, embed: bool, who: str,
              moments: dict[int, list[dict[str, Any]]] | None = None) -> str:
    """The robot's rounds, each followed by the partner's round of the same lock-step round (the loop's order);
    ``moments``: the robot's reaching views by round."""
    by_round: dict[int, list[dict[str, Any]]] = {}
    for data in partner_rounds:
        by_round.setdefault(int(data["round"]), []).append(data)
    parts = []
    for data in rounds:
        parts.append(_round(data, record, page_dir, embed, moments=(moments or {}).get(int(data["round"]), ())))
        parts += [_round(p, record, page_dir, embed, who) for p in by_round.pop(int(data["round"]), [])]
    for index in sorted(by_round):  # the partner's rounds after the robot had ended
        parts += [_round(p, record, page_dir, embed, who) for p in by_round[index]]
    return "".join(parts)


def _map_and_graph(record_dir: Path, page_dir: Path, embed: bool, trajectory: Trajectory, context: EpisodeContext) -> str:
    topdown = record_dir / TOPDOWN_FILE
    map_html = (
        f'<div><h3>Top-down map and path</h3><img class="map" alt="top-down map" src="{image_src(topdown, page_dir, embed)}"></div>'
        if topdown.is_file()
        else '<div><h3>Top-down map</h3><p class="muted">not recorded</p></div>'
    )
    graph_html = '<div><h3>World graph</h3><p class="muted">scene file not found</p></div>'
    if context.scene is not None:
        named = {v for r in trajectory.rounds if r.output.subtask for v in (r.output.subtask.target, r.output.subtask.place) if v}
        named |= {v for r in trajectory.rounds if r.grounded for v in (r.grounded.target, r.grounded.place) if v}
        steps = [
            (r.output.subtask.action, (r.grounded or r.output.subtask).target, (r.grounded or r.output.subtask).place,
             r.feedback.success)
            for r in trajectory.rounds
            if r.output.subtask is not None
        ]
        svg = world_graph_svg(context.scene, named, final_placements(steps))
        graph_html = (
            "<div><h3>World graph (scene at the start; named entities marked, moved objects where the episode "
            f'left them)</h3><div class="graph">{svg}</div></div>'
        )
    return f'<section id="map"><h2>Map and world graph</h2><div class="pair">{map_html}{graph_html}</div></section>'


def render_episode(
    record_dir: str | Path, page_dir: str | Path | None = None, *, embed: bool = True, context: EpisodeContext | None = None
) -> str:
    """The episode page's HTML. ``page_dir``: where the page will live (relative image paths when not ``embed``)."""
    record = Path(record_dir)
    try:
        summary = read_summary(record)
        trajectory = read_episode(record)
        rounds = _read_round_lines(record)
        play = _play_file(record)
        moments = read_motion_views(record)
    except (RecordError, OSError, json.JSONDecodeError, KeyError) as err:
        raise ReportError(f"{record}: not a readable episode record ({err})") from None
    where = Path(page_dir) if page_dir is not None else record
    context = context or standalone_context(summary)
    metrics = episode_metrics(trajectory, summary, context, record)
    outcome = metrics.verdict.word if metrics.verdict is not None else "no verdict"
    title = f"{summary.get('task') or 'episode'} ({outcome}): {summary.get('planner')} planner"
    partner_rounds = _partner_rounds(play)
    # The person played the human beside the robot: their rounds are the partner's (homiebot/play/episode.py).
    who = "human (you)" if play is not None and play.get("role") == "human" else "human"
    timeline = _timeline(rounds, partner_rounds, record, where, embed, who, moments)
    video = ""
    if (record / VIDEO_FILE).is_file() and where.resolve() == record.resolve():
        video = f'<section id="video"><h2>Video</h2><video controls width="512" src="{VIDEO_FILE}"></video></section>'
    count = f"{len(rounds)} rounds" if not partner_rounds else \
        f"{len(rounds)} robot rounds, {len(partner_rounds)} {who} rounds"
    body = (
        _outcome(summary, trajectory, metrics, partner_rounds, play)
        + _map_and_graph(record, where, embed, trajectory, context)
        + f'<section id="timeline"><h2>Timeline ({count})</h2>{timeline or "<p>no rounds</p>"}</section>'
        + video
    )
    sections = [("outcome", "outcome"), ("map", "map and world graph"), ("timeline", "timeline")]
    if video:
        sections.append(("video", "video"))
    return page(title, str(summary.get("instruction", "")), body, sections)


def write_episode_report(
    record_dir: str | Path, out: str | Path | None = None, *, embed: bool = True, context: EpisodeContext | None = None
) -> Path:
    """Write the episode page (default ``<record>/report.html``) atomically; return its path."""
    record = Path(record_dir)
    target = Path(out) if out is not None else record / REPORT_FILE
    atomic_write_text(target, render_episode(record, target.parent, embed=embed, context=context))
    log.debug("episode report written to %s", target)
    return target


def round_failures(rounds: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rounds of a record whose feedback is not OK (for an evaluation's failures by code)."""
    return [r for r in rounds if r.get("error_code") != "OK"]
