"""``homie muep``: the MuEP-style suite in the parallel text world or on the real ALFWorld engine (docs/muep.md)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import typer

from homiebot.cli.failures import EXIT_INTERRUPTED, check_output
from homiebot.cli.failures import report as _fail
from homiebot.cli.options import warn_deprecated

#: ``homie eval --suite muep``'s own options, given as ``-p key=value`` (the MuEP runner's, not a planner's):
#: the engine (sim: the simulator's text world; alfworld: ALFWorld's), the put command's phrasing, ALFWorld data
#: of one's own to play instead of the suite, and another suite file.
MUEP_OPTIONS = ("engine", "phrasing", "alfworld_data", "suite_file")


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
    limit: int,
    ignored: dict[str, bool],
    named: dict[str, object] | None = None,
    workers: int = 1,
) -> None:
    """``homie eval --suite muep``: the MuEP-style suite through :func:`homiebot.eval.muep_run.run_suite`
    (MuEP's text protocol and table, not EMMOE's loop). ``planner``: expert, random, smollm2 or hf; planner
    options ``engine`` (sim or alfworld) and ``phrasing``; ``split``: all, seen or unseen; ``ignored``: the
    EMMOE options the user set away from their defaults (refused: they mean nothing here); ``limit``: the first N
    tasks of the balanced order (0: all). ``named``: the model options given by name (``--model``, ``--adapter``,
    ``--constrained``): with ``--planner hf`` they and the other ``-p`` options load its model
    (:mod:`homiebot.eval.muep_chat`); with another planner they are refused. ``workers``: processes playing side by
    side (each with its own simulator and model)."""
    from homiebot.eval.muep_run import WorkerFailed, balanced_order, check_run, run_alfworld_data, run_suite
    from homiebot.eval.muep_suite import SUITE_PATH, load_suite
    from homiebot.sim.scene import SceneError
    from homiebot.textworld.alfworld import AlfworldUnavailable
    from homiebot.textworld.world import Phrasing

    set_options = sorted(name for name, changed in ignored.items() if changed)
    if set_options:
        verb = "is not an option" if len(set_options) == 1 else "are not options"
        raise _fail(f"{', '.join(set_options)} {verb} of --suite muep (docs/muep.md)")
    named = dict(named or {})
    agent_options: dict[str, object] = {}
    if planner == "hf":  # the model's options: by name and every -p that is not the runner's
        agent_options = {**{k: v for k, v in options.items() if k not in MUEP_OPTIONS}, **named}
        options = {k: v for k, v in options.items() if k in MUEP_OPTIONS}
    elif named:
        flags = ", ".join(f"--{key.replace('_', '-')}" for key in sorted(named))
        raise _fail(f"{flags}: options of --planner hf on --suite muep (docs/muep.md)")
    unknown = sorted(set(options) - set(MUEP_OPTIONS))
    if unknown:
        raise _fail(f"unknown planner option(s) for --suite muep: {', '.join(unknown)} (known: {', '.join(MUEP_OPTIONS)})")
    engine, phrasing = str(options.get("engine", "sim")), str(options.get("phrasing", "alfworld"))
    alfworld_data = Path(str(options["alfworld_data"])) if "alfworld_data" in options else None
    suite_file = Path(str(options["suite_file"])) if "suite_file" in options else SUITE_PATH
    if alfworld_data is not None:  # ALFWorld's own games: its engine, its split names (valid_unseen, ...)
        if task_ids is not None:
            raise _fail("--tasks picks tasks of the MuEP suite, not games of -p alfworld_data (use --limit)")
        if workers != 1:
            raise _fail("--workers is an option of the MuEP suite's tasks, not of -p alfworld_data's games")
        check_output(out)
        try:
            check_run(planner, "alfworld", observe or "text")
            run_alfworld_data(alfworld_data, planner, out, None if split == "all" else split, limit or None)
        except (FileNotFoundError, AlfworldUnavailable, ValueError) as err:
            raise _fail(str(err)) from None
        typer.echo((out / "report.md").read_text())
        return
    try:
        check_run(planner, engine, observe or "text")
        if planner == "hf":  # the model is there, before anything is written
            from homiebot.eval.muep_chat import ChatTextAgent

            ChatTextAgent.preflight(agent_options)
    except ValueError as err:
        raise _fail(str(err)) from None
    if phrasing not in {p.value for p in Phrasing}:
        raise _fail(f"unknown phrasing {phrasing!r}; choose alfworld or papers")
    if split not in ("seen", "unseen", "all"):
        raise _fail(f"unknown split {split!r} for --suite muep; choose seen, unseen or all")
    try:
        tasks = balanced_order([t for t in load_suite(suite_file) if split in ("all", t.split)])
        if task_ids is not None:
            known = {t.id for t in tasks}
            missing = [t for t in task_ids if t not in known]
            if missing:
                raise _fail(f"unknown MuEP task id(s) in split {split}: {', '.join(missing[:5])}")
            tasks = [t for t in tasks if t.id in set(task_ids)]
        tasks = tasks[: limit or None]  # --limit: the first N, in turns over the types and splits
        check_output(out)
        run_suite(tasks, planner, engine, out, phrasing, observe=observe or "text", agent_options=agent_options,
                  workers=workers)
    except (SceneError, FileNotFoundError, AlfworldUnavailable, ValueError, WorkerFailed) as err:
        raise _fail(str(err)) from None
    except KeyboardInterrupt:
        raise _interrupted() from None
    typer.echo((out / "report.md").read_text())


def metrics_muep(directory: Path, report_dir: Path | None = None, convention: str = "tables") -> None:
    """``homie metrics`` on a MuEP run directory: MuEP's table recomputed from ``episodes.jsonl`` alone, written
    to ``report.md`` (in ``report_dir`` when given) and printed."""
    from homiebot.eval.muep import Convention
    from homiebot.eval.muep_run import load_records, write_report

    if convention not in {c.value for c in Convention}:
        raise _fail(f"unknown convention {convention!r}; choose tables or prose")
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

    @muep.command("run", hidden=True)  # deprecated: homie eval --suite muep
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
        """Deprecated: homie eval --suite muep. Play the suite and print MuEP's table (SR, IS, GCS, LC, RDI per task
        type); an --out directory with episodes of the same settings is resumed."""
        replacement = shlex.join(
            ["homie", "eval", "--suite", "muep", "--out", str(out), "--planner", agent, "--observe", observe,
             "--split", split, "-p", f"engine={engine}", "-p", f"phrasing={phrasing}"]
            + (["--limit", str(limit)] if limit else [])
            + (["-p", f"suite_file={suite}"] if suite is not None else [])
            + (["-p", f"alfworld_data={alfworld_data}"] if alfworld_data is not None else [])
        )
        warn_deprecated("homie muep run", replacement)
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

    @muep.command("metrics", hidden=True)  # deprecated: homie metrics --convention
    def metrics_command(
        run_dir: Path = typer.Argument(
            ..., help="A directory written by homie eval --suite muep, or by homie eval (EMMOE-100)."
        ),
        convention: str = typer.Option(
            "tables", help="tables (MuEP's tables, default) or prose (the paper's formulas)."
        ),
    ) -> None:
        """Deprecated: homie metrics DIR --convention. Recompute MuEP's table from episodes.jsonl alone."""
        warn_deprecated("homie muep metrics", shlex.join(["homie", "metrics", str(run_dir), "--convention", convention]))
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
            ..., help="Directories written by homie eval --suite muep."
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
