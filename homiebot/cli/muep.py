"""``homie muep``: the MuEP-style suite in the parallel text world or on the real ALFWorld engine (docs/muep.md)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import typer

from homiebot.cli.failures import EXIT_INTERRUPTED, check_output
from homiebot.cli.failures import report as _fail


def _interrupted() -> typer.Exit:
    """Ctrl-C: the episodes played so far are kept in episodes.jsonl and the same command plays the rest."""
    command = shlex.join(["homie", *sys.argv[1:]])
    return _fail(f"interrupted; to resume, run the same command again: {command}", EXIT_INTERRUPTED)


def eval_muep(
    out: Path,
    planner: str,
    observe: str | None,
    split: str,
    task_ids: list[str] | None,
    options: dict[str, object],
    ignored: dict[str, bool],
) -> None:
    """``homie eval --suite muep``: the MuEP-style suite through :func:`homiebot.eval.muep_run.run_suite`
    (MuEP's text protocol and table, not EMMOE's loop). ``planner``: expert, random or smollm2; planner
    options ``engine`` (sim or alfworld) and ``phrasing``; ``split``: all, seen or unseen; ``ignored``: the
    EMMOE options the user set away from their defaults (refused: they mean nothing here)."""
    from homiebot.eval.muep_run import balanced_order, check_run, run_suite
    from homiebot.eval.muep_suite import load_suite
    from homiebot.sim.scene import SceneError
    from homiebot.textworld.alfworld import AlfworldUnavailable
    from homiebot.textworld.world import Phrasing

    set_options = sorted(name for name, changed in ignored.items() if changed)
    if set_options:
        verb = "is not an option" if len(set_options) == 1 else "are not options"
        raise _fail(f"{', '.join(set_options)} {verb} of --suite muep (docs/muep.md; homie muep run --help)")
    unknown = sorted(set(options) - {"engine", "phrasing"})
    if unknown:
        raise _fail(f"unknown planner option(s) for --suite muep: {', '.join(unknown)} (known: engine, phrasing)")
    engine, phrasing = str(options.get("engine", "sim")), str(options.get("phrasing", "alfworld"))
    try:
        check_run(planner, engine, observe or "text")
    except ValueError as err:
        raise _fail(str(err)) from None
    if phrasing not in {p.value for p in Phrasing}:
        raise _fail(f"unknown phrasing {phrasing!r}; choose alfworld or papers")
    if split not in ("seen", "unseen", "all"):
        raise _fail(f"unknown split {split!r} for --suite muep; choose seen, unseen or all")
    try:
        tasks = balanced_order([t for t in load_suite() if split in ("all", t.split)])
        if task_ids is not None:
            known = {t.id for t in tasks}
            missing = [t for t in task_ids if t not in known]
            if missing:
                raise _fail(f"unknown MuEP task id(s) in split {split}: {', '.join(missing[:5])}")
            tasks = [t for t in tasks if t.id in set(task_ids)]
        check_output(out)
        run_suite(tasks, planner, engine, out, phrasing, observe=observe or "text")
    except (SceneError, AlfworldUnavailable, ValueError) as err:
        raise _fail(str(err)) from None
    except KeyboardInterrupt:
        raise _interrupted() from None
    typer.echo((out / "report.md").read_text())


def metrics_muep(directory: Path, report_dir: Path | None = None, convention: str = "tables") -> None:
    """``homie metrics`` on a MuEP run directory: MuEP's table recomputed from ``episodes.jsonl`` alone, written
    to ``report.md`` (in ``report_dir`` when given) and printed."""
    from homiebot.eval.muep import Convention
    from homiebot.eval.muep_run import load_records, write_report

    try:
        records = load_records(directory)
    except (FileNotFoundError, ValueError) as err:
        raise _fail(str(err)) from None
    target = report_dir if report_dir is not None else directory
    check_output(target)
    target.mkdir(parents=True, exist_ok=True)
    typer.echo(write_report(records, target, Convention(convention)))


def register(app: typer.Typer) -> None:
    muep = typer.Typer(
        help="MuEP-style evaluation: ALFWorld's six task types in the text world or ALFWorld's engine.",
        no_args_is_help=True,
    )
    app.add_typer(muep, name="muep")

    @muep.command("run")
    def run_command(
        out: Path = typer.Option(..., "--out", "-o", help="Directory for episodes.jsonl and report.md."),
        agent: str = typer.Option("expert", help="expert, random, or smollm2 (text mode; --engine sim)."),
        engine: str = typer.Option("sim", help="sim (the simulator's text world) or alfworld (ALFWorld's engine)."),
        observe: str = typer.Option(
            "text", help="What the agent is given on --engine sim: text, images (the four views) or both."
        ),
        phrasing: str = typer.Option(
            "alfworld", help="alfworld (ALFWorld 0.4: move X to Y) or papers (put X in/on Y)."
        ),
        split: str = typer.Option(
            "all", help="seen, unseen or all (with --alfworld-data: the data's split, e.g. valid_unseen)."
        ),
        limit: int = typer.Option(
            0, help="Play only the first N tasks, taken in turns over the types and splits (0: all)."
        ),
        suite: Path = typer.Option(None, help="A suite file (default: the built-in muep.yaml)."),
        alfworld_data: Path = typer.Option(
            None, "--alfworld-data", help="Play the games of your own ALFWorld data directory instead."
        ),
    ) -> None:
        """Play the suite and print MuEP's table (SR, IS, GCS, LC, RDI per task type). An --out directory with
        episodes of the same settings is resumed (rerun the same command to complete a run cut short)."""
        from homiebot.eval.muep_run import balanced_order, check_run, run_alfworld_data, run_suite
        from homiebot.eval.muep_suite import SUITE_PATH, load_suite
        from homiebot.sim.scene import SceneError
        from homiebot.textworld.alfworld import AlfworldUnavailable
        from homiebot.textworld.world import Phrasing

        try:
            check_run(agent, "alfworld" if alfworld_data is not None else engine, observe)
        except ValueError as err:
            raise _fail(str(err)) from None
        if phrasing not in {p.value for p in Phrasing}:
            raise _fail(f"unknown phrasing {phrasing!r}; choose alfworld or papers")
        if limit < 0:
            raise _fail("--limit must be >= 0")
        check_output(out)
        try:
            if alfworld_data is not None:
                chosen = None if split == "all" else split
                run_alfworld_data(alfworld_data, agent, out, chosen, limit or None)
            else:
                if split not in ("seen", "unseen", "all"):
                    raise _fail(f"unknown split {split!r}; choose seen, unseen or all")
                tasks = balanced_order([t for t in load_suite(suite or SUITE_PATH) if split in ("all", t.split)])
                run_suite(tasks[: limit or None], agent, engine, out, phrasing, observe=observe)
        except (SceneError, FileNotFoundError, AlfworldUnavailable, ValueError) as err:
            raise _fail(str(err)) from None
        except KeyboardInterrupt:
            if alfworld_data is not None:  # ALFWorld data runs are not resumed: plain "interrupted" (exit 130)
                raise
            raise _interrupted() from None
        typer.echo((out / "report.md").read_text())

    @muep.command("metrics")
    def metrics_command(
        run_dir: Path = typer.Argument(
            ..., help="A directory written by homie muep run, or by homie eval (EMMOE-100)."
        ),
        convention: str = typer.Option(
            "tables", help="tables (MuEP's tables, default) or prose (the paper's formulas)."
        ),
    ) -> None:
        """Recompute MuEP's table from episodes.jsonl alone."""
        from homiebot.eval.muep import Convention
        from homiebot.eval.muep_run import recompute

        if convention not in {c.value for c in Convention}:
            raise _fail(f"unknown convention {convention!r}; choose tables or prose")
        try:
            typer.echo(recompute(run_dir, convention))
        except (FileNotFoundError, ValueError) as err:
            raise _fail(str(err)) from None

    @muep.command("compare")
    def compare_command(
        run_dirs: list[Path] = typer.Argument(
            ..., help="Directories written by homie muep run (or homie eval --suite muep)."
        ),
        convention: str = typer.Option(
            "tables", help="tables (MuEP's tables, default) or prose (the paper's formulas)."
        ),
        common: bool = typer.Option(False, "--common/--all", help="Only the tasks every run played."),
    ) -> None:
        """Runs side by side: MuEP's overall row of each split per run (markdown)."""
        from homiebot.eval.muep import Convention
        from homiebot.eval.muep_run import compare

        if convention not in {c.value for c in Convention}:
            raise _fail(f"unknown convention {convention!r}; choose tables or prose")
        try:
            typer.echo(compare(run_dirs, convention, common))
        except (FileNotFoundError, ValueError) as err:
            raise _fail(str(err)) from None

    @muep.command("export")
    def export_command(
        out: Path = typer.Option(
            ..., "--out", "-o", help="Directory for the game folders (valid_seen/, valid_unseen/)."
        ),
        phrasing: str = typer.Option("alfworld", help="alfworld or papers (the grammar's put command)."),
        suite: Path = typer.Option(None, help="A suite file (default: the built-in muep.yaml)."),
    ) -> None:
        """Write every task of the suite as an ALFWorld game folder (playable with --alfworld-data)."""
        from homiebot.eval.muep_run import export_suite
        from homiebot.eval.muep_suite import SUITE_PATH, load_suite
        from homiebot.sim.scene import SceneError
        from homiebot.textworld.alfworld import AlfworldUnavailable

        if phrasing not in ("alfworld", "papers"):
            raise _fail(f"unknown phrasing {phrasing!r}; choose alfworld or papers")
        check_output(out)
        try:
            files = export_suite(load_suite(suite or SUITE_PATH), out, phrasing)
        except (SceneError, AlfworldUnavailable) as err:
            raise _fail(str(err)) from None
        typer.echo(f"{len(files)} game folders under {out}")
