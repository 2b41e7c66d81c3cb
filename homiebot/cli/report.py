"""``homie report DIR``: the HTML page of an episode record or an evaluation directory (docs/reports.md)."""

from __future__ import annotations

from pathlib import Path

import typer

from homiebot.cli.failures import EXIT_ENVIRONMENT, check_output, fail


def register(app: typer.Typer) -> None:
    """Add ``homie report``."""

    @app.command("report")
    def report_command(
        directory: Path = typer.Argument(..., help="An episode record (homie run --out) or an evaluation directory (homie eval --out)."),
        out: Path = typer.Option(None, "--out", "-o", help="Write the main page here instead of DIR/report.html."),
        embed: bool = typer.Option(True, "--embed/--link", help="Episode page: images inside the page (default) or linked beside it."),
        episodes: bool = typer.Option(True, "--episodes/--no-episodes", help="Evaluation: also write each episode's page."),
        plots: bool = typer.Option(True, "--plots/--no-plots", help="Evaluation: draw and embed the plots."),
        screenshot: Path = typer.Option(None, "--screenshot", help="Also save a full-page PNG of the main page (headless Chromium)."),
    ) -> None:
        """Write a self-contained HTML report (no network): an episode's timeline, or an evaluation's tables."""
        from homiebot.report import ReportError, write_report

        if not directory.is_dir():
            fail(f"{directory} is not a directory (give an episode record or an evaluation directory)")
        if out is not None:
            check_output(out, directory=False)
        if screenshot is not None:
            check_output(screenshot, option="--screenshot", directory=False)
        try:
            pages = write_report(directory, out, embed=embed, episodes=episodes, plots=plots)
        except ReportError as err:
            fail(str(err))
        extra = f" (+ {len(pages) - 1} episode pages)" if len(pages) > 1 else ""
        typer.echo(f"report: {pages[0]}{extra}")
        if screenshot is not None:
            from homiebot.report.browser import BrowserError, browser_missing, screenshot_page

            missing = browser_missing()
            if missing:
                fail(f"no screenshot: {missing}")
            try:
                typer.echo(f"screenshot: {screenshot_page(pages[0], screenshot)}")
            except BrowserError as err:
                fail(f"no screenshot: {err}", EXIT_ENVIRONMENT)
