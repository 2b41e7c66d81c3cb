"""``homie muep``: the MuEP-style suite in the parallel text world or on the real ALFWorld engine (docs/muep.md)."""

from __future__ import annotations

from pathlib import Path

import typer


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def register(app: typer.Typer) -> None:
    muep = typer.Typer(help="MuEP-style evaluation: ALFWorld's six task types in the text world or ALFWorld's engine.", no_args_is_help=True)
    app.add_typer(muep, name="muep")

    @muep.command("run")
    def run_command(
        out: Path = typer.Option(..., "--out", "-o", help="Directory for episodes.jsonl and report.md."),
        agent: str = typer.Option("expert", help="expert, random, or smollm2 (text mode; --engine sim)."),
        engine: str = typer.Option("sim", help="sim (the simulator's text world) or alfworld (ALFWorld's engine)."),
        phrasing: str = typer.Option("alfworld", help="alfworld (ALFWorld 0.4: move X to Y) or papers (put X in/on Y)."),
        split: str = typer.Option("all", help="seen, unseen or all (with --alfworld-data: the data's split, e.g. valid_unseen)."),
        limit: int = typer.Option(0, help="Play only the first N tasks (0: all)."),
        suite: Path = typer.Option(None, help="A suite file (default: the built-in muep.yaml)."),
        alfworld_data: Path = typer.Option(None, "--alfworld-data", help="Play the games of your own ALFWorld data directory instead."),
    ) -> None:
        """Play the suite and print MuEP's table (SR, IS, GCS, LC, RDI per task type)."""
        from homiebot.eval.muep_run import AGENTS, ENGINES, run_alfworld_data, run_suite
        from homiebot.eval.muep_suite import SUITE_PATH, load_suite
        from homiebot.sim.scene import SceneError
        from homiebot.textworld.alfworld import AlfworldUnavailable
        from homiebot.textworld.world import Phrasing

        if agent not in AGENTS:
            raise _fail(f"unknown agent {agent!r}; choose {', '.join(AGENTS)}")
        if engine not in ENGINES:
            raise _fail(f"unknown engine {engine!r}; choose {', '.join(ENGINES)}")
        if phrasing not in {p.value for p in Phrasing}:
            raise _fail(f"unknown phrasing {phrasing!r}; choose alfworld or papers")
        if limit < 0:
            raise _fail("--limit must be >= 0")
        try:
            if alfworld_data is not None:
                chosen = None if split == "all" else split
                run_alfworld_data(alfworld_data, agent, out, chosen, limit or None)
            else:
                if split not in ("seen", "unseen", "all"):
                    raise _fail(f"unknown split {split!r}; choose seen, unseen or all")
                tasks = [t for t in load_suite(suite or SUITE_PATH) if split in ("all", t.split)]
                run_suite(tasks[: limit or None], agent, engine, out, phrasing)
        except (SceneError, FileNotFoundError, AlfworldUnavailable, ValueError) as err:
            raise _fail(str(err)) from None
        typer.echo((out / "report.md").read_text())

    @muep.command("metrics")
    def metrics_command(
        run_dir: Path = typer.Argument(..., help="A directory written by homie muep run, or by homie eval (EMMOE-100)."),
        convention: str = typer.Option("tables", help="tables (MuEP's tables, default) or prose (the paper's formulas)."),
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

    @muep.command("export")
    def export_command(
        out: Path = typer.Option(..., "--out", "-o", help="Directory for the game folders (valid_seen/, valid_unseen/)."),
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
        try:
            files = export_suite(load_suite(suite or SUITE_PATH), out, phrasing)
        except (SceneError, AlfworldUnavailable) as err:
            raise _fail(str(err)) from None
        typer.echo(f"{len(files)} game folders under {out}")
