"""The HTML page of an evaluation directory (homiebot/eval/runner.py's layout; docs/reports.md).

It holds: the paper-layout tables (the same Markdown that ``report.md`` holds, from
:func:`homiebot.eval.report.render_markdown`, PARTNR's section included, so the two never disagree), the plots
embedded, a sortable per-task table whose run cells link to each episode's page (a PARTNR task with its
category and PC, an EMMOE task with its attributes), and the failures grouped by EMMOE error code (every failed
round by its code, and every failed episode by the last error it met).

Every figure is recomputed from the records (:func:`homiebot.eval.runner.compute_scores`), like
``homie metrics``. Each episode page is written into its record directory with its images linked beside it
(an evaluation's records are already on disk; embedding 300 episodes' images would copy them).
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

from homiebot.data.record import read_episode
from homiebot.eval.metrics import ERROR_CODES, JUDGED_BY_PARTNR, EpisodeScore
from homiebot.eval.partnr.metrics import PartnrEpisode
from homiebot.eval.report import build_report, render_markdown, setting_label, write_plots
from homiebot.eval.runner import EPISODES_DIR, EvalError, compute_scores, load_manifest, resolver_for
from homiebot.eval.scoring import partnr_figures, report_setting
from homiebot.files import atomic_write_text
from homiebot.report.episode import REPORT_FILE, EpisodeContext, ReportError, write_episode_report
from homiebot.report.html import code_badge, esc, page, png_data_uri, table
from homiebot.sim.scene import SceneError, load_scene
from homiebot.tasks.suite import TaskSpec

log = logging.getLogger(__name__)

#: Failed rounds listed per error code (the count above the list is always complete).
MAX_LISTED_PER_CODE = 100


@dataclass
class _Failure:
    code: str
    episode: str  # "task/runN"
    link: str
    round: int
    subtask: str
    message: str
    episode_success: bool


@dataclass
class EvaluationPages:
    """What :func:`write_evaluation_report` wrote."""

    index: Path
    episode_pages: list[Path] = field(default_factory=list)


def _paper_tables(report: dict[str, Any]) -> str:
    markdown = render_markdown({k: v for k, v in report.items() if k != "plots"})
    # The Markdown's own title is the page's header; its tables become HTML tables.
    body = markdown.split("\n", 1)[1] if markdown.startswith("# ") else markdown
    html = MarkdownIt("commonmark", {"html": False}).enable("table").render(body)
    title = "Tables (EMMOE paper layout, then PARTNR's)" if "partnr" in report else "Tables (EMMOE paper layout)"
    return f'<section id="tables"><h2>{title}</h2>{html}</section>'


def _plots(report: dict[str, Any], out_dir: Path) -> str:
    plots = write_plots(report, out_dir)
    images = "".join(
        f'<h3>{esc(name)}</h3><img class="plot" alt="{esc(name)}" src="{png_data_uri((out_dir / path).read_bytes())}">'
        for name, path in plots.items()
    )
    return f'<section id="plots"><h2>Plots</h2>{images}</section>'


def _per_task(scores: list[EpisodeScore], links: dict[tuple[str, int], str],
              partnr: dict[tuple[str, int], PartnrEpisode]) -> str:
    """One row per task. A PARTNR task (its episodes scored by their states) shows PARTNR's attributes: its
    category (PARTNR table 13) and mean PC; an EMMOE task its attributes (EMMOE table H8), PC where its records
    keep states (their function is the converted goal). SR is the episodes' verdict either way."""
    by_task: dict[str, list[EpisodeScore]] = defaultdict(list)
    for s in scores:
        by_task[s.task_id].append(s)
    rows = []
    for task_id in sorted(by_task):
        runs = sorted(by_task[task_id], key=lambda s: s.run)
        n = len(runs)
        successes = sum(s.success for s in runs)
        mean_tp = 100 * sum(s.tp for s in runs) / n
        views = [partnr[(task_id, s.run)] for s in runs if (task_id, s.run) in partnr]
        mean_pc = f"{100 * sum(v.pc for v in views) / len(views):.2f}" if views else "n/a"
        if any(s.judged_by == JUDGED_BY_PARTNR for s in runs) and views:
            kind = f"PARTNR: {esc(views[0].category)}"
        else:
            kind = esc(" ".join(runs[0].attributes))
        mean_rounds = sum(s.rounds for s in runs) / n
        errors = sum(sum(s.errors.values()) for s in runs)
        goal = sum(bool(s.goal_satisfied) for s in runs)
        run_links = " ".join(
            f'<a class="{"ok" if s.success else "fail"}" href="{esc(links[(task_id, s.run)])}">run{s.run}</a>'
            if (task_id, s.run) in links
            else f"run{s.run}"
            for s in runs
        )
        sr = 100 * successes / n
        rows.append(
            [
                f"{esc(task_id)}",
                esc(runs[0].split),
                kind,
                f"{successes}/{n}",
                f"{sr:.2f}",
                f"{mean_tp:.2f}",
                mean_pc,
                f"{mean_rounds:.2f}",
                f"{goal}/{n}",
                str(errors),
                run_links,
            ]
        )
    header = [
        "task",
        "split",
        "attributes / category",
        "successes",
        "SR",
        "mean TP",
        "mean PC",
        "mean rounds",
        "goal check",
        "errors",
        "episodes",
    ]
    return (
        f'<section id="tasks"><h2>Per task ({len(rows)} tasks; click a column to sort)</h2>'
        + table(header, rows, css_class="sortable per-task", escape=False)
        + "</section>"
    )


def _failures(failures: list[_Failure], failed_by_last: dict[str, list[tuple[str, str]]]) -> str:
    """Failed rounds by their feedback code (EMMOE appendix E.1), then failed episodes by the last error met."""
    by_code: dict[str, list[_Failure]] = defaultdict(list)
    for f in failures:
        by_code[f.code].append(f)
    out = [f'<section id="failures"><h2>Failures by error code ({len(failures)} failed rounds)</h2>']
    if not failures:
        out.append("<p>No round failed.</p>")
    for code in ERROR_CODES:
        listed = by_code.get(code, [])
        if not listed:
            continue
        episodes = len({f.episode for f in listed})
        in_failed = sum(not f.episode_success for f in listed)
        out.append(
            f'<h3 id="code-{code}">{code_badge(code)} {len(listed)} rounds in {episodes} episodes '
            f"({in_failed} of them in failed episodes)</h3>"
        )
        rows = [
            [
                f'<a href="{esc(f.link)}">{esc(f.episode)} round {f.round}</a>',
                esc(f.subtask),
                esc(f.message),
                "success" if f.episode_success else '<span class="fail">failure</span>',
            ]
            for f in listed[:MAX_LISTED_PER_CODE]
        ]
        out.append(table(["round", "subtask", "feedback", "episode"], rows, css_class="failures", escape=False))
        if len(listed) > MAX_LISTED_PER_CODE:
            out.append(f'<p class="muted">and {len(listed) - MAX_LISTED_PER_CODE} more</p>')
    total = sum(len(v) for v in failed_by_last.values())
    out.append(f"<h3>Failed episodes by the last error they met ({total})</h3>")
    rows = []
    for reason in sorted(failed_by_last, key=lambda r: (-len(failed_by_last[r]), r)):
        names = failed_by_last[reason]
        links = " ".join(f'<a href="{esc(link)}">{esc(name)}</a>' for name, link in names)
        label = code_badge(reason) if reason in ERROR_CODES else esc(reason)
        rows.append([label, str(len(names)), links])
    out.append(table(["last error", "episodes", ""], rows, escape=False) if rows else "<p>None.</p>")
    out.append("</section>")
    return "".join(out)


def write_evaluation_report(
    eval_dir: str | Path, out: str | Path | None = None, *, episodes: bool = True, plots: bool = True
) -> EvaluationPages:
    """Write ``<eval>/report.html`` (or ``out``) and, with ``episodes``, every episode's page; return the paths."""
    root = Path(eval_dir).expanduser().absolute()
    try:
        manifest = load_manifest(root)
        scored = compute_scores(root)
    except EvalError as err:
        raise ReportError(str(err)) from None
    target = Path(out).expanduser().absolute() if out is not None else root / REPORT_FILE
    tasks = {k: TaskSpec.model_validate(v) for k, v in manifest["tasks"].items()}
    resolvers = {scene: resolver_for(rows) for scene, rows in manifest["names"].items()}
    result = EvaluationPages(target)
    links: dict[tuple[str, int], str] = {}
    failures: list[_Failure] = []
    failed_by_last: dict[str, list[tuple[str, str]]] = defaultdict(list)
    success = {(s.task_id, s.run): s.success for s in scored.scores}
    for score in scored.scores:
        record = root / EPISODES_DIR / score.task_id / f"run{score.run}"
        name = f"{score.task_id}/run{score.run}"
        # Without episode pages the links open the record folders.
        link = Path(os.path.relpath(record / REPORT_FILE if episodes else record, target.parent)).as_posix()
        task = tasks[score.task_id]
        if episodes:
            try:
                scene = load_scene(task.scene)
            except SceneError:
                scene = None
            context = EpisodeContext(task, resolvers.get(task.scene), scene)
            result.episode_pages.append(write_episode_report(record, embed=False, context=context))
            links[(score.task_id, score.run)] = link
        trajectory = read_episode(record)
        last_error = None
        for r in trajectory.rounds:
            code = r.feedback.code.value
            if code != "OK":
                last_error = code
                failures.append(
                    _Failure(
                        code,
                        name,
                        f"{link}#round{r.index}",
                        r.index,
                        r.subtask_text,
                        r.feedback.message,
                        success[(score.task_id, score.run)],
                    )
                )
        if not score.success:
            reason = last_error or ("infrastructure error" if score.infra_error else "no error (wrong plan)")
            failed_by_last[reason].append((name, link))
    # The same report as report.md's (homiebot.eval.scoring.write_eval_report), PARTNR's figures included.
    report = build_report(scored.scores, report_setting(scored), partnr_figures(scored))
    body = _paper_tables(report)
    if plots and scored.scores:
        body += _plots(report, root)
    partnr = {(score.task_id, score.run): episode for score, episode in scored.partnr}
    body += _per_task(scored.scores, links, partnr) + _failures(failures, failed_by_last)
    title = f"{report['setting']['suite']} evaluation: {setting_label(report['setting'])}"
    sections = [
        ("tables", "tables"),
        *([("plots", "plots")] if plots and scored.scores else []),
        ("tasks", "per task"),
        ("failures", "failures by error code"),
    ]
    atomic_write_text(target, page(title, f"{root} ({len(scored.scores)} episodes)", body, sections))
    log.info("evaluation report written to %s (%d episode pages)", target, len(result.episode_pages))
    return result
