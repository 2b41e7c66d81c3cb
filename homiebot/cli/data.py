"""``homie data ...``: training data from episode records (docs/training.md).

* ``homie data collect --out DIR``: expert (or perturbed-expert) episodes of a suite's split, recorded;
* ``homie data export --from RUNS --out RAW``: EMMOE's raw per-task layout (``info.txt`` + views);
* ``homie data build sft|dpo --from RUNS --out DIR``: the SFT or DPO data set, with counts per kind.
"""

from __future__ import annotations

from pathlib import Path

import typer

from homiebot.cli.failures import check_output, fail


def register(app: typer.Typer) -> None:
    """Add ``homie data``."""
    data_app = typer.Typer(
        help="Training data from episode records: collect, export, build sft|dpo.", no_args_is_help=True
    )
    app.add_typer(data_app, name="data")

    @data_app.command("build")
    def build_command(
        kind: str = typer.Argument(..., help="sft or dpo."),
        runs: list[Path] = typer.Option(
            ..., "--from", help="Episode records: an evaluation directory, a record, or a folder of them (repeatable)."
        ),
        out: Path = typer.Option(..., "--out", "-o", help="New (or empty) output folder."),
        prompt_format: str = typer.Option(
            "runtime", "--prompt-format", help="runtime (the prompt the loop sends) or paper (EMMOE appendix F.1)."
        ),
        rewrites: int = typer.Option(
            3, "--rewrites", help="Rewritten versions of every trajectory besides the original (EMMOE: 3)."
        ),
        split: str = typer.Option("train", "--split", help="train, test, validation or all."),
        system_prompt: bool = typer.Option(
            True, "--system-prompt/--no-system-prompt", help="runtime format: the system information as a system turn."
        ),
        text_observation: bool = typer.Option(
            False,
            "--text-observation",
            help="runtime format: the text planning mode's prompt (text-only models): its system information and "
            "the world description before each instruction, as homie run --planner hf -p include_history=false sends.",
        ),
        recorded_input: bool = typer.Option(
            True,
            "--recorded-input/--no-recorded-input",
            help="runtime format: a round whose record holds its model input (a model planner's episode) is trained "
            "on exactly the chat its model was sent; --no-recorded-input rebuilds the prompt from the instruction.",
        ),
        images: bool = typer.Option(True, "--images/--no-images", help="Link the recorded views into OUT/images."),
        replan_exec: bool = typer.Option(
            False, "--replan-from-execution-errors", help="Also pair E1/E2 failures with their re-plans."
        ),
        thoughtless: bool = typer.Option(
            False, "--thoughtless", help="SFT answers without the Analysis line (PARTNR's action-only samples)."
        ),
        rewriter: str = typer.Option(
            "template", "--rewriter", help="template (offline) or server (an OpenAI-compatible chat server)."
        ),
        rewrite_model: str = typer.Option("gpt-4o", "--rewrite-model", help="--rewriter server: the model name."),
        rewrite_url: str = typer.Option(None, "--rewrite-base-url", help="--rewriter server: the server's base URL."),
        rewrite_cache: Path = typer.Option(
            None, "--rewrite-cache", help="--rewriter server: the JSON cache (default OUT/../rewrites.json)."
        ),
    ) -> None:
        """Build EMMOE's SFT set or its DPO pairs (re-plan, model change, order change, action change)."""
        from homiebot.training.build import BuildOptions, build, check_out_dir
        from homiebot.training.episodes import TrainingDataError
        from homiebot.training.rewrite import Rewriter, ServerRewriter, TemplateRewriter

        if kind not in ("sft", "dpo"):
            fail(f"unknown data kind {kind!r}; use sft or dpo")
        if prompt_format not in ("runtime", "paper"):
            fail(f"unknown --prompt-format {prompt_format!r}; use runtime or paper")
        if rewriter not in ("template", "server"):
            fail(f"unknown --rewriter {rewriter!r}; use template or server")
        check_output(out)  # before the records are read: an output that cannot be written costs no work
        try:
            check_out_dir(out)
            chosen: Rewriter = TemplateRewriter()
            server: ServerRewriter | None = None
            if rewriter == "server":
                cache = rewrite_cache or out.expanduser().absolute().parent / "rewrites.json"
                chosen = server = ServerRewriter(rewrite_model, cache, base_url=rewrite_url)
            options = BuildOptions(
                prompt_format=prompt_format,  # type: ignore[arg-type]
                rewrites=rewrites,
                split=split,
                system_prompt=system_prompt,
                text_observation=text_observation,
                recorded_input=recorded_input,
                images=images,
                replan_from_execution_errors=replan_exec,
                thoughtless=thoughtless,
            )
            stats = build(runs, out, kind, options, chosen)  # type: ignore[arg-type]
            if server is not None:
                server.save()
        except (TrainingDataError, ValueError) as err:
            fail(str(err))
        for line in stats.lines():
            typer.echo(line)
        typer.echo(f"written to {out} in {stats.seconds:.1f} s")

    @data_app.command("export")
    def export_command(
        runs: list[Path] = typer.Option(..., "--from", help="Episode records (repeatable)."),
        out: Path = typer.Option(..., "--out", "-o", help="New (or empty) output folder."),
        split: str = typer.Option("train", "--split", help="train, test, validation or all."),
    ) -> None:
        """Write EMMOE's raw layout: OUT/<split>/<task>_run<r>/info.txt and the views (appendix B.3)."""
        from homiebot.training.episodes import TrainingDataError
        from homiebot.training.export import export_raw

        check_output(out)  # before the records are read
        try:
            count = export_raw(runs, out, split=split)
        except TrainingDataError as err:
            fail(str(err))
        typer.echo(f"{count} episodes exported to {out}")

    @data_app.command("collect")
    def collect_command(
        out: Path = typer.Option(..., "--out", "-o", help="New (or empty) output folder: OUT/episodes/<task>/run<r>/."),
        planner: str = typer.Option(
            "perturbed-expert",
            "--planner",
            help="expert or perturbed-expert (decision errors injected, then re-planned).",
        ),
        split: str = typer.Option("train", "--split", help="train, test or all."),
        runs: int = typer.Option(
            1, "--runs", help="Episodes per task (run r uses seed task.seed + r + --seed-offset)."
        ),
        seed_offset: int = typer.Option(0, "--seed-offset", help="Added to every seed (new seeds for training data)."),
        inject: float = typer.Option(
            0.04, "--inject", help="perturbed-expert: probability of a decision error per round."
        ),
        tasks: str = typer.Option(None, "--tasks", help="Comma-separated task ids (default: the whole split)."),
        images: bool = typer.Option(False, "--images", help="Render and store the four views per round (slower)."),
    ) -> None:
        """Record expert episodes of EMMOE-100 as training data, in this process (one simulator)."""
        from homiebot.training.collect import collect_episodes
        from homiebot.training.episodes import TrainingDataError

        try:
            summary = collect_episodes(
                out,
                planner=planner,
                split=split,
                runs=runs,
                seed_offset=seed_offset,
                inject=inject,
                task_ids=tasks.split(",") if tasks else None,
                images=images,
            )
        except (TrainingDataError, ValueError) as err:
            fail(str(err))
        for line in summary.lines():
            typer.echo(line)
