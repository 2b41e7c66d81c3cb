"""``homie eval`` (run or resume an EMMOE-100 evaluation) and ``homie metrics`` (recompute its report)."""

from __future__ import annotations

import json
import logging
import shlex
import sys
from pathlib import Path
from typing import Any

import typer

from homiebot.cli.failures import EXIT_ENVIRONMENT, EXIT_INTERRUPTED, check_output, report
from homiebot.cli.options import (
    ModelOptions,
    RecoveryOptions,
    articulation_option,
    deprecated,
    hidden,
    noise_option,
    out_option,
    parse_articulation,
    partner_planner_option,
    perception_option,
    planner_option,
    skill_model_option,
    skills_option,
)
from homiebot.config import MAX_ROUNDS, NoiseMode, PerceptionMode, SkillsMode, decode_mode
from homiebot.config.run import parse_skill_models

log = logging.getLogger(__name__)


def _parse_options(pairs: list[str]) -> dict[str, Any]:
    """``-p key=value`` planner options as typed (:func:`homiebot.planner.registry.parse_planner_options`; the
    planner's constructor types the values). A malformed pair is a ``PlannerError`` (one line, exit 2)."""
    from homiebot.planner.registry import parse_planner_options

    return dict(parse_planner_options(pairs))


def _task_list(values: list[str]) -> list[str] | None:
    ids = [t.strip() for v in values for t in v.split(",") if t.strip()]
    return ids or None


def _limited(suite: str, split: str, task_ids: list[str] | None, limit: int, stratified: int = 0) -> list[str] | None:
    """``--limit N``: the first N tasks of the selection (the suite's order); ``--stratified N``: N spread over its
    strata (homiebot.eval.manifest.stratified_tasks); as explicit ids (pinned in eval.json)."""
    if not limit and not stratified:
        return task_ids
    from homiebot.eval.manifest import EvalError, select_tasks, stratified_tasks

    if limit and stratified:
        raise report("--limit and --stratified both choose a subset: give one")
    try:
        selection = select_tasks(suite, split, task_ids)
        chosen = stratified_tasks(selection, stratified) if stratified else selection[:limit]
        return [task.id for task in chosen]
    except EvalError as err:
        raise report(str(err)) from None


def _print_summary(report: dict[str, Any], out_dir: Path | None, what: str | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    from homiebot.eval.report import pct, setting_label

    console = Console()
    t2 = report["table2"]
    setting = report["setting"]
    table = Table(title=f"{setting.get('suite', '?')}: {setting_label(setting)}")
    rows = [("all", t2), *report["table3"].items()]  # every split of the suite (validation for PARTNR's)
    split_width = max(len(name) for name, _ in rows)  # the split's name whole, also in an 80-column terminal
    for column in ("split", "episodes", "SR", "PLWSR", "TP", "SRR", "SER", "goal-check SR"):
        table.add_column(column, justify="right", min_width=split_width if column == "split" else None)
    for name, summary in rows:
        table.add_row(
            name,
            str(summary["n"]),
            *(pct(summary[k]) for k in ("sr", "plwsr", "tp", "srr", "ser", "goal_sr")),
        )
    console.print(table)
    if "partnr" in report:  # PARTNR's PC from the records' states (docs/partnr.md)
        from homiebot.eval.partnr.report import summary_line

        console.print(summary_line(report["partnr"]), highlight=False)
    missing = report["setting"].get("missing_episodes") or []
    if missing:
        console.print(f"[yellow]{len(missing)} episode(s) have no record yet: {', '.join(missing[:8])}"
                      f"{' ...' if len(missing) > 8 else ''}")
    if out_dir is not None:
        console.print(f"report: {out_dir / 'report.md'}")
    if what is not None:
        console.print(what)


def _print_recovery(summary: dict[str, Any] | None) -> None:
    if summary is not None:
        from homiebot.recovery.stats import summary_line

        typer.echo(summary_line(summary))


def _collaboration_metrics(directory: Path, report_dir: Path | None, as_json: bool) -> None:
    """``homie metrics`` on a ``homie eval --agents`` folder: its summary and report from its episodes alone."""
    from homiebot.multiagent.evaluate import CollaborationError, rewrite_report

    if report_dir is not None:
        check_output(report_dir)
    try:
        summary, markdown = rewrite_report(directory, report_dir)
    except CollaborationError as err:
        raise report(str(err)) from None
    typer.echo(json.dumps(summary, indent=1) if as_json else markdown)


def register(app: typer.Typer) -> None:
    """Add ``homie eval`` and ``homie metrics``."""

    @app.command("eval")
    def eval_command(
        out: Path = out_option("Evaluation directory (created; an existing one is resumed)."),
        suite: str = typer.Option("emmoe", "--suite", help="Task suite (emmoe = emmoe100)."),
        planner: str | None = planner_option("Planner name (homiebot.planner.registry); default the suite's expert (partnr_expert for --suite partnr, else expert); with --agents the robot's."),
        planner_option: list[str] = ModelOptions.options(),
        base_url: str = ModelOptions.base_url(),
        model: str = ModelOptions.model(),
        adapter: Path = ModelOptions.adapter(),
        api_key_env: str = ModelOptions.api_key_env(),
        constrained: bool = ModelOptions.constrained(),
        decode: str = ModelOptions.decode(),
        runs: int = typer.Option(3, "--runs", help="Runs per task (run r resets the scene with task seed + r)."),
        workers: int | None = typer.Option(
            None, "--workers", help="Worker processes (one simulator each); default 2, on --suite muep 1.",
            show_default=False,
        ),
        noise: str = noise_option(NoiseMode.OFF.value),
        skills: str = skills_option(SkillsMode.ORACLE.value),
        skill_model: list[str] = skill_model_option(),
        articulation: str | None = articulation_option(),
        split: str = typer.Option("all", "--split", help="all, train or test."),
        tasks: list[str] = typer.Option([], "--tasks", help="Task ids, comma-separated or repeated (default: all)."),
        limit: int = typer.Option(0, "--limit", min=0, help="Only the first N tasks of the selection (0: all); --suite muep takes them in turns over its types and splits."),
        stratified: int = typer.Option(0, "--stratified", min=0, help="Only N tasks of the selection, spread over its strata (split, horizon, kind of instruction) in proportion, at least one each (0: all)."),
        max_rounds: int = typer.Option(MAX_ROUNDS, "--max-rounds", help=f"Round limit per episode (paper: {MAX_ROUNDS})."),
        perception: str = perception_option(PerceptionMode.OFF.value),
        images: bool = typer.Option(False, "--images/--no-images", help="Store the four views per round in each record."),
        video: bool = typer.Option(False, "--video/--no-video", help="Store an episode.mp4 per record."),
        progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
        observe: str = typer.Option(None, "--observe", help="--suite muep: what the planner is given, text, images or both (docs/muep.md)."),
        backend: str = typer.Option("local", "--backend", help="Who runs the episodes: local (worker processes) or ray (Ray actors, here or on a cluster; docs/ray.md)."),
        address: str = typer.Option(None, "--address", help="--backend ray: auto (the cluster `ray start` runs here) or the head's HOST:PORT; default a private Ray instance on this machine."),
        model_actors: int = typer.Option(1, "--model-actors", help="--backend ray, --planner hf: shared copies of the model, each a Ray actor serving every worker's calls in batches (0: one copy per worker)."),
        model_gpus: float = typer.Option(0.0, "--model-gpus", help="--backend ray: GPUs each model actor declares (1: one model per GPU)."),
        html_report: bool = typer.Option(True, "--report/--no-report", help="Write the HTML report DIR/report.html and the episodes' pages at the end (docs/reports.md)."),
        recovery: str = RecoveryOptions.recovery(),
        recovery_stages: str = RecoveryOptions.stages(),
        recovery_search: bool = RecoveryOptions.search(),
        agents: str = typer.Option(None, "--agents", help="robot+human: PARTNR's collaboration evaluation on the suite's collaboration tasks, each against the robot alone (docs/collaboration.md)."),
        mode: str = typer.Option("decentralized", "--mode", help="--agents: centralized (one planner for both) or decentralized (one each)."),
        partner_planner: str | None = partner_planner_option("--agents: the human's planner (expert, react, scripted or a registry name; default expert)."),
        planner_robot: str | None = hidden("--planner-robot"),
        planner_human: str | None = hidden("--planner-human"),
    ) -> None:
        """Run the EMMOE-100 evaluation in parallel worker processes; rerun the same command to resume.
        ``--suite muep`` runs the MuEP-style suite instead (MuEP's runner; docs/muep.md)."""
        # homie run's planner options, the same keys as -p (pinned in eval.json like every planner option).
        named = {"base_url": base_url, "model": model, "api_key_env": api_key_env, "constrained": constrained,
                 "decode": decode}
        named = {key: value for key, value in named.items() if value is not None}
        planner = deprecated("--planner-robot", "--planner", planner_robot, planner)
        partner_planner = deprecated("--planner-human", "--partner-planner", planner_human, partner_planner)
        if partner_planner is not None and agents is None:
            raise report("--partner-planner is an option of --agents robot+human (the human's planner)")
        if decode is not None:
            try:
                decode_mode(decode)
            except ValueError as err:
                raise report(str(err)) from None
        from homiebot.tasks.suite import MUEP_SUITE
        from homiebot.tasks.suite import resolve_suite as suite_named

        suite_name = suite_named(suite)  # the one resolver of every command's --suite (an unknown name: exit 2)
        if agents is not None:  # PARTNR's robot and human: the collaboration runner (homiebot/multiagent/evaluate.py)
            from homiebot.multiagent.evaluate import CollaborationError, cli_run

            refused = {"--images": images, "--video": video, "--backend": backend != "local",
                       "--observe": observe is not None, "--recovery": recovery is not None,
                       "--adapter": adapter is not None, "--limit": limit != 0, "--stratified": stratified != 0,
                       "--skills": skills != SkillsMode.ORACLE, "--skill-model": bool(skill_model),
                       "--articulation": articulation is not None}
            check_output(out)
            try:
                outcome = cli_run(out, agents=agents, suite=suite, mode=mode, planner_robot=planner or "expert",
                                  planner_human=partner_planner or "expert", options={**_parse_options(planner_option), **named},
                                  runs=runs, split=split, task_ids=_task_list(tasks), max_rounds=max_rounds,
                                  noise=noise, refused=[name for name, given in refused.items() if given],
                                  perception=perception,
                                  progress=typer.echo if progress else None)
            except CollaborationError as err:
                raise report(str(err)) from None
            typer.echo(f"{outcome.finished} episode(s) run, {outcome.skipped} already done, {outcome.wall_s:.1f} s")
            typer.echo((outcome.out_dir / "report.md").read_text(encoding="utf-8"))
            return
        if planner is None or planner == "expert":
            # The suite's expert: `expert` names it on every suite, so --planner expert on the PARTNR-style suite is
            # partnr_expert (the goal expert cannot switch or clean; docs/partnr.md, "The PARTNR expert").
            from homiebot.eval.manifest import suite_expert

            planner = suite_expert(suite_name)
        from homiebot.cli.train_adapter import AdapterOptionError, adapter_option

        try:  # pinned in eval.json with the other planner options
            named.update(adapter_option(adapter, planner, {**_parse_options(planner_option), **named}))
        except AdapterOptionError as err:
            raise report(str(err)) from None
        if suite_name == MUEP_SUITE:  # MuEP's protocol and table, not EMMOE's loop: its own runner
            from homiebot.cli.muep import eval_muep

            eval_muep(out, planner, observe, split, _task_list(tasks), _parse_options(planner_option), limit, {
                "--runs": runs != 3, "--noise": noise != NoiseMode.OFF, "--max-rounds": max_rounds != MAX_ROUNDS,
                "--skills": skills != SkillsMode.ORACLE, "--skill-model": bool(skill_model), "--stratified": stratified != 0,
                "--articulation": articulation is not None,
                "--perception": perception != PerceptionMode.OFF, "--images": images, "--video": video,
                "--backend": backend != "local", "--address": address is not None,
                "--model-actors": model_actors != 1, "--model-gpus": model_gpus != 0.0,
                "--recovery": recovery is not None or recovery_stages is not None or recovery_search is not None,
            }, named, workers=workers or 1)
            return
        if observe is not None:
            raise report("--observe is an option of --suite muep (EMMOE's planners are given the four views)")
        from pydantic import ValidationError

        from homiebot.eval.runner import EvalSettings, resolve_suite, run_evaluation

        try:
            skill_models = parse_skill_models(skill_model, skills)
            parse_articulation(articulation, skills)
        except ValueError as err:
            raise report(str(err)) from None
        check_output(out)
        from homiebot.planner.registry import configure_planner
        from homiebot.recovery.cli import recovery_config, write_recovery_summary

        # The planner's configuration, typed by its class (an unknown key or a bad value is refused here, before
        # any file); the runner looks at the planner's server before it writes (homiebot.eval.runner.check_arguments).
        base = configure_planner(planner, {**_parse_options(planner_option), **named})
        try:  # --recovery wraps the planner's configuration (pinned whole in eval.json)
            planner_setting = recovery_config(base, recovery, recovery_stages, recovery_search,
                                              out.absolute() / "recovery")
        except ValueError as err:
            raise report(str(err)) from None
        from homiebot.planner.models import runs_text_runtime, text_runtime_defaults

        try:
            settings = EvalSettings(
                suite=resolve_suite(suite),
                planner=planner_setting,
                noise=noise,
                skills=skills,
                skill_models=skill_models,
                articulation=articulation,
                max_rounds=max_rounds,
                perception=perception,
                # The options as given (a default left alone does not name a bundled model: react's smollm2).
                model_runtime=text_runtime_defaults() if runs_text_runtime(planner_setting.given()) else None,
            )
        except ValidationError as err:
            details = "; ".join(f"--{'.'.join(str(p) for p in e['loc']).replace('_', '-')}: {e['msg']}" for e in err.errors())
            raise report(details) from None
        try:
            outcome = run_evaluation(
                settings,
                out,
                runs=runs,
                workers=workers if workers is not None else 2,
                split=split,
                task_ids=_limited(suite_name, split, _task_list(tasks), limit, stratified),
                images=images,
                video=video,
                progress=progress,
                backend=backend,
                address=address,
                model_actors=model_actors,
                model_gpus=model_gpus,
                articulation_given=articulation is not None,
            )
        except KeyboardInterrupt:
            # The workers ignore Ctrl-C and are ended by the pool; finished episodes are kept.
            raise report(f"interrupted; to resume, run the same command again: {shlex.join(['homie', *sys.argv[1:]])}",
                         EXIT_INTERRUPTED) from None
        typer.echo(
            f"{outcome.finished} episode(s) run, {outcome.skipped} already done, {outcome.total} in all, "
            f"{outcome.wall_s:.1f} s"
        )
        tables = json.loads((outcome.out_dir / "report.json").read_text())
        _print_summary(tables, outcome.out_dir)
        _print_recovery(write_recovery_summary(outcome.out_dir))
        if html_report:
            from homiebot.report import ReportError, write_report

            try:
                pages = write_report(outcome.out_dir)
            except ReportError as err:
                raise report(f"the evaluation is kept but its HTML report was not written: {err}", EXIT_ENVIRONMENT) from None
            typer.echo(f"HTML report: {pages[0]} (+ {len(pages) - 1} episode pages)")
        if outcome.failed_jobs:
            # Not results: nothing was stored for them, and the same command runs them later.
            typer.secho(
                f"{len(outcome.failed_jobs)} episode(s) could not run: {outcome.first_failure}", fg="red", err=True
            )
            typer.echo("nothing was stored for them; rerun the same command to run them", err=True)
            raise typer.Exit(1)

    @app.command("metrics")
    def metrics_command(
        directory: Path = typer.Argument(..., help="An evaluation directory (homie eval), an episode record (homie run --out) or a homie up sim --out directory."),
        out: Path | None = out_option("Write the report here instead of DIR.", required=False),
        report_dir: Path | None = hidden("--report-dir"),
        convention: str = typer.Option(None, "--convention", help="MuEP's table (of a MuEP run, or of a homie eval directory by task attribute): tables (MuEP's tables, default) or prose (the paper's formulas)."),
        as_json: bool = typer.Option(False, "--json", help="Print the report JSON instead of the summary table."),
        plots: bool = typer.Option(True, "--plots/--no-plots", help="Draw the plots."),
    ) -> None:
        """Recompute every figure of an evaluation from its episode records alone and rewrite its report."""
        from homiebot.eval.runner import EvalError, write_eval_report

        report_dir = deprecated("--report-dir", "--out", report_dir, out)
        if not directory.is_dir():
            raise report(f"{directory} is not a directory")
        muep_run = (directory / "episodes.jsonl").is_file() and not (directory / "results.jsonl").exists()
        if convention is not None and convention not in ("tables", "prose"):  # homiebot.eval.muep.Convention
            raise report(f"unknown convention {convention!r}; choose tables or prose")
        if convention is not None and not muep_run:  # MuEP's table of an EMMOE evaluation, by task attribute
            if not (directory / "results.jsonl").is_file():
                raise report(f"--convention: {directory} is neither a MuEP run nor a homie eval directory")
            from homiebot.eval.muep_run import recompute

            try:
                typer.echo(recompute(directory, convention))
            except ValueError as err:
                raise report(str(err)) from None
            return
        from homiebot.multiagent.evaluate import is_collaboration_run

        if is_collaboration_run(directory):  # homie eval --agents: PARTNR's tables 2 and 12 (docs/collaboration.md)
            _collaboration_metrics(directory, report_dir, as_json)
            return
        if muep_run:
            from homiebot.cli.muep import metrics_muep  # a MuEP run (homie eval --suite muep): MuEP's table

            metrics_muep(directory, report_dir, convention or "tables")
            return
        if report_dir is not None:
            check_output(report_dir)
        from homiebot.eval.record_metrics import find_record, records_report

        record = None if (directory / "eval.json").is_file() else find_record(directory)
        if record is not None:  # one episode: a homie run record or a homie up run directory
            from homiebot.eval.verdict import verdict_line

            try:
                written, verdicts = records_report([record], report_dir, plots=plots)
            except EvalError as err:
                raise report(str(err)) from None
            if as_json:
                typer.echo(json.dumps(written, indent=1))
            else:  # the episode's verdict, as its summary, page and homie run / play show it
                _print_summary(written, report_dir, what=f"episode record: {record}: {verdict_line(verdicts[0])}")
            return
        try:
            written = write_eval_report(directory, report_dir, plots=plots)
        except EvalError as err:
            raise report(str(err)) from None
        from homiebot.recovery.cli import write_recovery_summary

        recovery = write_recovery_summary(directory, report_dir)  # recovery.md / .json with --recovery
        if as_json:
            typer.echo(json.dumps(written if recovery is None else {**written, "recovery": recovery}, indent=1))
        else:
            _print_summary(written, Path(report_dir) if report_dir else directory)
            _print_recovery(recovery)
