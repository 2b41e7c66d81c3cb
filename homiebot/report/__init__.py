"""Self-contained HTML reports of episode records and evaluation directories (docs/reports.md).

:func:`write_report` looks at a directory and writes the page that fits it: an episode record (it holds
``summary.json``) or an evaluation directory (it holds ``eval.json``).
"""

from __future__ import annotations

from pathlib import Path

from homiebot.report.episode import REPORT_FILE, ReportError, write_episode_report

__all__ = ["REPORT_FILE", "ReportError", "write_report"]


def write_report(
    directory: str | Path, out: str | Path | None = None, *, embed: bool = True, episodes: bool = True,
    plots: bool = True,
) -> list[Path]:
    """Write the report of ``directory``; return the pages written, the main one first.

    ``embed``: an episode page carries its images as data URIs (one movable file); ``episodes``: an evaluation
    page also writes every episode's page; ``plots``: an evaluation page draws and embeds the plots.
    Raises :class:`ReportError` when ``directory`` is neither a record nor an evaluation.
    """
    from homiebot.data.record import SUMMARY_FILE
    from homiebot.eval.runner import EVAL_FILE

    root = Path(directory).expanduser()
    if not root.is_dir():
        raise ReportError(f"{root} is not a directory")
    if (root / EVAL_FILE).is_file():
        from homiebot.report.evaluation import write_evaluation_report

        pages = write_evaluation_report(root, out, episodes=episodes, plots=plots)
        return [pages.index, *pages.episode_pages]
    if (root / SUMMARY_FILE).is_file():
        return [write_episode_report(root, out, embed=embed)]
    raise ReportError(f"{root} is neither an episode record ({SUMMARY_FILE}) nor an evaluation directory ({EVAL_FILE})")
