"""Evaluation reports laid out like the EMMOE paper's tables (2, 3, 4, H3-H8), as Markdown, JSON and plots.

:func:`build_report` turns episode scores and the evaluation's setting into one JSON-ready dictionary;
:func:`render_markdown` prints it as tables; :func:`write_report` writes ``report.json``, ``report.md`` and
the plots (``plots/errors.png``: error shares in successful vs failed trajectories, like figure 3;
``plots/attributes.png``: SR per task attribute; ``plots/actions.png``: table 4 against the paper) with
temp-file + ``os.replace`` so a reader never sees half a report.

Percentages are printed with two decimals as in the paper; "n/a" marks an undefined ratio (division by 0).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from homiebot.config import PerceptionMode
from homiebot.eval.metrics import (
    ERROR_CODES,
    ERROR_FAMILIES,
    EpisodeScore,
    action_table,
    attribute_table,
    error_table,
    split_summaries,
    summarize,
)
from homiebot.files import atomic_write_text, publish

#: Table 4 of the paper (P and SR per action, %), the target of the ``emmoe`` noise preset's calibration.
PAPER_TABLE4: dict[str, dict[str, float]] = {
    "Go to": {"p": 38.49, "sr": 45.32},
    "Pick": {"p": 49.77, "sr": 22.45},
    "Put": {"p": 7.30, "sr": 40.97},
    "Open": {"p": 3.32, "sr": 43.13},
    "Close": {"p": 1.11, "sr": 36.45},
}
#: Column labels of table 4 (the paper calls Put "Place" there).
TABLE4_LABELS = {"Go to": "Go to", "Pick": "Pick", "Put": "Place (Put)", "Open": "Open", "Close": "Close"}
_TABLE_KEYS = [c for fam, codes in ERROR_FAMILIES.items() for c in (*codes, fam)] + ["All"]


#: The top-level ``summary`` of report.json: EMMOE's table 2 metrics (section 5.1) and the goal check's SR.
SUMMARY_KEYS = ("sr", "plwsr", "tp", "ser", "srr", "goal_sr")


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.2f}"


def wilson_interval(successes: int, trials: int, z: float = 1.96) -> tuple[float, float] | None:
    """95% Wilson score interval of a binomial proportion (used to judge the noise calibration)."""
    if trials == 0:
        return None
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _per_task(scores: Sequence[EpisodeScore]) -> list[dict[str, Any]]:
    by_task: dict[str, list[EpisodeScore]] = {}
    for s in scores:
        by_task.setdefault(s.task_id, []).append(s)
    rows = []
    for task_id in sorted(by_task):
        runs = sorted(by_task[task_id], key=lambda s: s.run)
        rows.append(
            {
                "task_id": task_id,
                "split": runs[0].split,
                "attributes": list(runs[0].attributes),
                "runs": len(runs),
                "successes": sum(s.success for s in runs),
                "tp": [s.tp_exact for s in runs],
                "rounds": [s.rounds for s in runs],
                "goal_satisfied": [s.goal_satisfied for s in runs],
                "ended": [s.ended for s in runs],
                "infra_errors": [s.infra_error for s in runs if s.infra_error],
            }
        )
    return rows


def build_report(scores: Sequence[EpisodeScore], setting: dict[str, Any],
                 partnr: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every figure of the paper's tables from the episode scores, as plain JSON data; ``partnr``: PARTNR's
    figures of the same episodes (:func:`homiebot.eval.partnr.report.partnr_data`), kept as ``partnr``."""
    scores = sorted(scores, key=lambda s: (s.task_id, s.run))
    actions = action_table(scores)
    calibration = {}
    for row in actions:
        interval = wilson_interval(row.successes, row.attempts)
        paper = PAPER_TABLE4[row.action]["sr"] / 100
        calibration[row.action] = {
            "paper_sr": paper,
            "measured_sr": row.sr,
            "ci95": interval,
            "within_ci95": None if interval is None else interval[0] <= paper <= interval[1],
        }
    table2 = summarize(scores).to_json()
    return {
        # The headline figures first, so a script (or `jq .summary`) need not know the paper's table numbers.
        "summary": {"episodes": table2["n"], **{key: table2[key] for key in SUMMARY_KEYS}},
        "setting": setting,
        "table2": table2,
        "table3": {split: summary.to_json() for split, summary in split_summaries(scores).items()},
        "table4": [row.__dict__ for row in actions],
        "table4_calibration": calibration,
        "errors_successful": error_table(scores, successful=True).to_json(),  # tables H3 and H5
        "errors_failed": error_table(scores, successful=False).to_json(),  # tables H4 and H6
        "tableH8": [row.__dict__ for row in attribute_table(scores)],
        "per_task": _per_task(scores),
        **({} if partnr is None else {"partnr": partnr}),
    }


# ------------------------------------------------------------------------------------------- markdown


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _error_share_row(table: dict[str, Any]) -> list[str]:
    return [pct(table["shares"][k]) for k in _TABLE_KEYS]


def _error_count_row(table: dict[str, Any]) -> list[str]:
    cells = []
    n_errors = table["n_errors"]
    for key in _TABLE_KEYS:
        if key == "All":
            cells.append(f"{n_errors}/{table['n_rounds']}")
        elif key in ERROR_FAMILIES:
            cells.append(f"{table['family_counts'][key]}/{n_errors}")
        else:
            cells.append(str(table["counts"][key]))
    return cells


def _summary_cells(summary: dict[str, Any]) -> list[str]:
    return [pct(summary[k]) for k in ("sr", "plwsr", "tp", "srr", "ser")]


def setting_label(setting: dict[str, Any], sep: str = ", ") -> str:
    """"expert planner, noise off" (+ ", perception conceptgraph" when the episodes used a world graph)."""
    label = f"{setting.get('planner', '?')} planner{sep}noise {setting.get('noise', '?')}"
    perception = setting.get("perception", PerceptionMode.OFF.value)
    return label if perception == PerceptionMode.OFF else f"{label}{sep}perception {perception}"


def render_markdown(report: dict[str, Any]) -> str:
    setting = report["setting"]
    t2 = report["table2"]
    label = setting_label(setting)
    out = [f"# {setting.get('suite', 'EMMOE-100')} evaluation: {label}", ""]
    out.append("## Setting\n")
    out.append(_table(["key", "value"], [[k, f"`{v}`"] for k, v in setting.items()]))
    out.append(
        "\nAll figures are percentages (n/a: undefined, a division by zero). SR: TP = 100% (paper, section 2.3); "
        "for a task with its own PARTNR evaluation function, that function's success (PC = 1, its temporal "
        "constraints included), the episode's one verdict. "
        "PLWSR weights each success by expert rounds / max(expert rounds, agent rounds); the expert is the "
        "expert planner without noise on the same task and seed. Definitions: `docs/evaluation.md`.\n"
    )
    out.append("## Table 2: overall\n")
    row = [label, str(t2["n"]), *_summary_cells(t2), pct(t2["goal_sr"]), f"{t2['mean_rounds'] or 0:.2f}"]
    out.append(_table(["Model", "episodes", "SR", "PLWSR", "TP", "SRR", "SER", "goal-check SR", "mean rounds"], [row]))
    out.append(
        f"\nCounts: {t2['n_success']} successes of {t2['n']}; {t2['n_ended']} trajectories end with End; "
        f"re-plans {t2['replans_success']} in successes / {t2['replans_all']} in all; "
        f"infrastructure errors {t2['n_infra_errors']}; successes without an expert reference {t2['n_missing_expert']}; "
        f"PLWSR by path length in metres {pct(t2['plwsr_path'])}.\n"
    )
    agreement = t2["goal_agreement"]
    out.append("### Success (SR) vs final-state goal check\n")
    out.append(
        _table(
            ["SR and goal", "SR only", "goal only", "neither", "no goal check"],
            [[str(agreement[k]) for k in ("both", "tp_only", "goal_only", "neither", "unchecked")]],
        )
    )
    t3 = report["table3"]  # train and test; validation too when the suite has one (metrics.split_summaries)
    *first, last = t3
    out.append(f"\n## Table 3: {', '.join(first)} and {last} split\n")
    out.append(
        _table(
            ["Model", "split", "episodes", "SR", "PLWSR", "TP", "SRR", "SER"],
            [[label, split, str(summary["n"]), *_summary_cells(summary)] for split, summary in t3.items()],
        )
    )
    out.append("\n## Table 4: low-level execution per action\n")
    rows4 = report["table4"]
    header = ["Metrics", *(TABLE4_LABELS[r["action"]] for r in rows4)]
    out.append(
        _table(
            header,
            [
                ["P", *(pct(r["p"]) for r in rows4)],
                ["SR (per try)", *(pct(r["sr"]) for r in rows4)],
                ["SR (per execution, 3 tries)", *(pct(r["sr_execution"]) for r in rows4)],
                ["Count (E1+E2)", *(f"{r['exec_errors']}/{r['total_exec_errors']}" for r in rows4)],
                ["successes / tries", *(f"{r['successes']}/{r['attempts']}" for r in rows4)],
                ["paper P", *(f"{PAPER_TABLE4[r['action']]['p']:.2f}" for r in rows4)],
                ["paper SR", *(f"{PAPER_TABLE4[r['action']]['sr']:.2f}" for r in rows4)],
            ],
        )
    )
    calibration = report["table4_calibration"]
    cal_cells = []
    for r in rows4:
        c = calibration[r["action"]]
        ci = c["ci95"]
        cal_cells.append("n/a" if ci is None else f"{100 * ci[0]:.1f}-{100 * ci[1]:.1f} ({'yes' if c['within_ci95'] else 'no'})")
    target = "the calibration target of this noise preset" if setting.get("noise") == "emmoe" else "for reference only"
    out.append(f"\nPer-try SR 95% Wilson interval (is the paper's SR inside? {target}): " + "; ".join(
        f"{TABLE4_LABELS[r['action']]} {cell}" for r, cell in zip(rows4, cal_cells, strict=False)
    ) + "\n")
    for title, key in (
        ("Table H3: error shares in successful trajectories", "errors_successful"),
        ("Table H4: error shares in failed trajectories", "errors_failed"),
    ):
        table = report[key]
        out.append(f"## {title}\n")
        out.append(f"{table['n_trajectories']} trajectories, {table['n_rounds']} rounds, {table['n_errors']} errors.\n")
        out.append(_table(["Model", *_TABLE_KEYS], [[label, *_error_share_row(table)]]))
        out.append("")
    for title, key in (
        ("Table H5: error counts in successful trajectories", "errors_successful"),
        ("Table H6: error counts in failed trajectories", "errors_failed"),
    ):
        out.append(f"## {title}\n")
        out.append(_table(["Model", *_TABLE_KEYS], [[label, *_error_count_row(report[key])]]))
        out.append("")
    out.append("## Table H8: SR per task attribute\n")
    h8 = report["tableH8"]
    out.append(
        _table(
            ["Model", *(r["attribute"] for r in h8)],
            [
                [label, *(pct(r["sr"]) for r in h8)],
                ["mean TP", *(pct(r["tp"]) for r in h8)],
                ["episodes", *(str(r["n"]) for r in h8)],
            ],
        )
    )
    failing = [t for t in report["per_task"] if t["successes"] < t["runs"]]
    out.append(f"\n## Tasks not solved in every run ({len(failing)} of {len(report['per_task'])})\n")
    if failing:
        out.append(
            _table(
                ["task", "split", "successes", "TP per run", "rounds per run", "goal check per run", "End per run"],
                [
                    [
                        t["task_id"],
                        t["split"],
                        f"{t['successes']}/{t['runs']}",
                        ", ".join(t["tp"]),
                        ", ".join(map(str, t["rounds"])),
                        ", ".join("n/a" if g is None else str(g) for g in t["goal_satisfied"]),
                        ", ".join(str(e) for e in t["ended"]),
                    ]
                    for t in failing
                ],
            )
        )
    else:
        out.append("None.")
    if report.get("plots"):
        out.append("\n## Plots\n")
        out += [f"![{name}]({path})" for name, path in report["plots"].items()]
    markdown = "\n".join(out) + "\n"
    if report.get("partnr") is not None:  # PARTNR's section after EMMOE's tables (docs/partnr.md, "Metrics")
        from homiebot.eval.partnr.report import partnr_markdown

        markdown = markdown.rstrip("\n") + "\n\n" + partnr_markdown(report["partnr"])
    return markdown


# ---------------------------------------------------------------------------------------------- plots


def _save_figure(fig: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".png")
    os.close(fd)
    publish(tmp)  # mkstemp creates 0600; a report gets the umask's mode like any file the user writes
    try:
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_plots(report: dict[str, Any], out_dir: Path) -> dict[str, str]:
    """Error shares (figure 3 style), SR per attribute (H8) and table 4 against the paper."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    label = setting_label(report["setting"], sep=" / ")
    plots: dict[str, str] = {}

    fig, ax = plt.subplots(figsize=(8, 3.6))
    width = 0.4
    xs = range(len(ERROR_CODES))
    for offset, (key, name) in enumerate((("errors_successful", "successful"), ("errors_failed", "failed"))):
        table = report[key]
        values = [100 * (table["shares"][c] or 0.0) for c in ERROR_CODES]
        all_share = table["shares"]["All"]
        # No trajectories of this kind: no share to state ("n/a%" read like a broken figure).
        of_rounds = "no trajectories" if all_share is None else f"{pct(all_share)}% of rounds"
        ax.bar(
            [x + (offset - 0.5) * width for x in xs],
            values,
            width,
            label=f"{name} trajectories ({table['n_errors']} errors, {of_rounds})",
        )
    ax.set_xticks(list(xs), ERROR_CODES)
    # Shares are percentages: a fixed 0..100 axis (with no errors matplotlib centres an empty axis on 0, -0.04..0.04).
    ax.set_ylim(0, 100)
    if not any(report[key]["n_errors"] for key in ("errors_successful", "errors_failed")):
        ax.text(0.5, 0.5, "no errors in any round", transform=ax.transAxes, ha="center", va="center")
    ax.set_ylabel("share of errors (%)")
    ax.set_title(f"Error types ({label})")
    ax.legend(fontsize=8)
    _save_figure(fig, out_dir / "plots" / "errors.png")
    plt.close(fig)
    plots["error shares"] = "plots/errors.png"

    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    h8 = report["tableH8"]
    xs = range(len(h8))
    sr = [100 * (r["sr"] or 0.0) for r in h8]
    tp = [100 * (r["tp"] or 0.0) for r in h8]
    ax.bar([x - 0.2 for x in xs], sr, 0.4, color="tab:green", label="SR")
    ax.bar([x + 0.2 for x in xs], tp, 0.4, color="tab:olive", label="mean TP")
    for x, r, value in zip(xs, h8, sr, strict=False):
        ax.text(x - 0.2, value + 1, f"{pct(r['sr'])}\nn={r['n']}", ha="center", fontsize=7)
    ax.set_xticks(list(xs), [r["attribute"] for r in h8])
    ax.set_ylim(0, 118)
    ax.set_ylabel("%")
    ax.set_title(f"SR and TP per task attribute ({label})")
    ax.legend(fontsize=8, loc="upper right")
    _save_figure(fig, out_dir / "plots" / "attributes.png")
    plt.close(fig)
    plots["SR and TP per attribute"] = "plots/attributes.png"

    fig, ax = plt.subplots(figsize=(6, 3.2))
    rows4 = report["table4"]
    names = [TABLE4_LABELS[r["action"]] for r in rows4]
    xs = range(len(rows4))
    measured = [100 * (r["sr"] or 0.0) for r in rows4]
    intervals = [report["table4_calibration"][r["action"]]["ci95"] for r in rows4]
    errors = [
        [max(m - 100 * ci[0], 0.0) if ci else 0.0 for m, ci in zip(measured, intervals, strict=False)],  # float rounding at 0 / 1
        [max(100 * ci[1] - m, 0.0) if ci else 0.0 for m, ci in zip(measured, intervals, strict=False)],
    ]
    ax.bar([x - 0.2 for x in xs], measured, 0.4, yerr=errors, capsize=3, label="measured SR per try (95% CI)")
    ax.bar([x + 0.2 for x in xs], [PAPER_TABLE4[r["action"]]["sr"] for r in rows4], 0.4, label="paper table 4")
    ax.set_xticks(list(xs), names)
    ax.set_ylabel("SR (%)")
    ax.set_ylim(0, 110)
    ax.set_title(f"Low-level SR per action ({label})")
    ax.legend(fontsize=8)
    _save_figure(fig, out_dir / "plots" / "actions.png")
    plt.close(fig)
    plots["table 4 per action"] = "plots/actions.png"
    return plots


# ---------------------------------------------------------------------------------------------- files


def write_report(
    scores: Sequence[EpisodeScore], setting: dict[str, Any], out_dir: Path, *, plots: bool = True,
    partnr: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ``report.json``, ``report.md`` and (optionally) the plots under ``out_dir``; return the report.
    ``partnr``: PARTNR's figures of the same episodes (:func:`build_report`); also written as ``partnr.md`` and
    ``partnr.json``."""
    report = build_report(scores, setting, partnr)
    if plots and scores:
        report["plots"] = write_plots(report, out_dir)
    atomic_write_text(out_dir / "report.json", json.dumps(report, indent=1, sort_keys=False) + "\n")
    atomic_write_text(out_dir / "report.md", render_markdown(report))
    if partnr is not None:
        from homiebot.eval.partnr.report import partnr_markdown

        atomic_write_text(out_dir / "partnr.md", partnr_markdown(partnr))
        atomic_write_text(out_dir / "partnr.json", json.dumps(partnr, indent=1) + "\n")
    return report
