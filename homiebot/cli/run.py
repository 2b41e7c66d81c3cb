"""``homie run`` (one HomieBot episode, recorded) and ``homie tasks`` (the built-in task ids).

Exit codes: 0 the episode ran and its record was written (whether or not the task succeeded: the summary
says so); 1 the episode stopped on an infrastructure error (planner or simulator failure; the record holds
the error); 2 bad input (unknown task, scene or planner, free text for a planner that needs a goal,
an output directory that cannot be written, bad options). Messages go to stderr.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any

import typer

from homiebot.cli.failures import EXIT_ENVIRONMENT, check_output
from homiebot.cli.failures import report as _fail
from homiebot.config import (
    GRAPH_BUILDERS,
    MAX_ROUNDS,
    DecodeMode,
    NoiseMode,
    PerceptionMode,
    choices,
    decode_mode,
    perception_mode,
)

log = logging.getLogger(__name__)


def _parse_options(pairs: list[str]) -> dict[str, Any]:
    """``-p key=value`` planner options as typed; the planner's constructor types the values
    (:func:`homiebot.planner.registry.planner_options`). A malformed pair is a ``PlannerError`` (one line, exit 2)."""
    from homiebot.planner.registry import parse_planner_options

    return dict(parse_planner_options(pairs))


def task_expert(task_id: str) -> str:
    """The expert ``--planner expert`` plays on ``task_id``: its suite's (:func:`homiebot.eval.manifest.task_expert`)."""
    from homiebot.eval.manifest import task_expert as suite_task_expert

    return suite_task_expert(task_id)


def _round_table(trajectory: Any) -> Any:
    from rich.markup import escape
    from rich.table import Table

    from homiebot.report.shown import shown_feedback, shown_inventory, shown_model  # EMMOE's "None" in words

    table = Table(title=escape(f"{trajectory.task_id or 'free text'}: {trajectory.instruction}"), show_lines=False)
    for column in ("#", "subtask", "model", "code", "feedback", "inventory"):
        table.add_column(column, overflow="fold")
    for r in trajectory.rounds:
        style = None if r.feedback.success else "yellow"
        table.add_row(
            str(r.index),
            escape(r.subtask_text),  # "[Go to, fridge]" is not rich markup
            escape(shown_model(r.output.model)),
            r.feedback.code.value,
            escape(shown_feedback(r.feedback.message, r.feedback.code.value)),
            escape(shown_inventory(r.feedback.inventory)),
            style=style,
        )
    return table


def register(app: typer.Typer) -> None:
    """Add ``homie run`` and ``homie tasks``."""

    @app.command("run")
    def run_command(
        instruction: str | None = typer.Argument(None, help="A free-text instruction (instead of --task)."),
        task_id: str | None = typer.Option(None, "--task", "-t", help="A built-in task id (`homie tasks`)."),
        scene: str | None = typer.Option(None, "--scene", help="Scene for a free-text instruction (or to override the task's)."),
        out: Path = typer.Option(..., "--out", "-o", help="Episode record directory (an earlier record there is replaced)."),
        planner: str | None = typer.Option(None, "--planner", help="Planner name (homiebot.planner.registry); default and expert: the task's suite's expert (partnr_expert for a PARTNR-style task, else expert)."),
        seed: int = typer.Option(0, "--seed", help="Run index: the scene is reset with the task's seed + this (free text: this)."),
        backend: str = typer.Option("mujoco", "--backend", help="Simulator backend."),
        max_rounds: int = typer.Option(MAX_ROUNDS, "--max-rounds", min=1, help=f"Round limit (paper: {MAX_ROUNDS})."),
        render: bool = typer.Option(True, "--render/--no-render", help="Render the four views every round."),
        video: bool = typer.Option(True, "--video/--no-video", help="Write episode.mp4."),
        noise: str = typer.Option(NoiseMode.OFF.value, "--noise", help="Execution noise of the skill layer: off, or emmoe (EMMOE table 4 success rates)."),
        strict_models: bool = typer.Option(False, "--strict-models/--lenient-models", help="F1 when the model does not serve the action."),
        base_url: str | None = typer.Option(None, "--base-url", help="Model planners: OpenAI-compatible server URL."),
        model: str | None = typer.Option(None, "--model", help="Model planners: model name."),
        adapter: Path | None = typer.Option(None, "--adapter", help="hf planner: a LoRA adapter folder (homie train sft|dpo) on --model's folder (docs/training.md)."),
        api_key_env: str | None = typer.Option(None, "--api-key-env", help="Model planners: environment variable holding the API key."),
        constrained: bool | None = typer.Option(None, "--constrained/--no-constrained", help="Model planners: constrained decoding."),
        decode: str | None = typer.Option(None, "--decode", help=f"hf planner: greedy decoding loop, {choices(DecodeMode)} (default {DecodeMode.AUTO})."),
        planner_option: list[str] = typer.Option([], "--planner-option", "-p", help="Other planner option key=value (repeatable)."),
        perception: str = typer.Option(PerceptionMode.OFF.value, "--perception", help=f"World graph: {choices(PerceptionMode)} (off: ground through the scene's names)."),
        describe_world: bool = typer.Option(False, "--describe-world/--no-describe-world", help="With --perception: give model planners PARTNR's text world description (EMMOE forbids it; off by default)."),
        report: bool = typer.Option(True, "--report/--no-report", help="Write the episode's HTML page OUT/report.html at the end (docs/reports.md)."),
        live: bool = typer.Option(False, "--live", help="Serve the episode live to the Foxglove app over its WebSocket protocol (docs/reports.md)."),
        live_port: int = typer.Option(8765, "--live-port", min=0, max=65535, help="--live: the port on 127.0.0.1 (0: a free one, logged)."),
        live_wait: float = typer.Option(0.0, "--live-wait", min=0, help="--live: wait up to SECONDS for a viewer before the first round."),
        live_hold: float = typer.Option(0.0, "--live-hold", min=0, help="--live: keep serving the last state up to SECONDS after the end (until the viewers leave)."),
        recovery: str | None = typer.Option(None, "--recovery", help="Failure recovery around the planner: cmfr, cot or none (docs/recovery.md)."),
        recovery_stages: str | None = typer.Option(None, "--recovery-stages", help="--recovery cmfr: its stages, e.g. 1,2 (default 1,2,3,4)."),
        recovery_search: bool | None = typer.Option(None, "--recovery-search/--no-recovery-search", help="--recovery: object search from the places the task names (default on)."),
    ) -> None:
        """Run one HomieBot episode (planner -> executor -> skills -> simulator) and record it into OUT."""
        from homiebot.agent.loop import EpisodeConfig, EpisodeSetupError, run_episode
        from homiebot.data.record import EpisodeRecorder
        from homiebot.planner.registry import (
            PlannerError,
            check_planner,
            free_text_planners,
            make_planner,
            planner_class,
        )
        from homiebot.sim.base import available_backends
        from homiebot.sim.scene import SceneError, load_scene
        from homiebot.tasks.suite import TaskError, get_task

        # Everything is checked before anything is written: a refused start leaves no record behind.
        if (task_id is None) == (instruction is None):
            raise _fail("give either --task ID or a free-text INSTRUCTION (with --scene)")
        task = None
        if task_id is not None:
            try:
                task = get_task(task_id)
            except TaskError as err:
                raise _fail(str(err)) from None
        elif not instruction or not instruction.strip():
            raise _fail("the instruction is empty")
        elif scene is None:
            raise _fail("a free-text instruction needs --scene NAME")
        if (live_wait or live_hold) and not live:
            raise _fail("--live-wait and --live-hold are options of --live")
        scene_name = scene or (task.scene if task else "")
        if planner is None or planner == "expert":
            planner = task_expert(task.id) if task is not None else "expert"
        check_output(out)
        if backend == "mujoco":
            try:
                load_scene(scene_name)
            except SceneError as err:
                raise _fail(str(err)) from None
        elif backend not in available_backends():
            raise _fail(f"unknown simulator backend {backend!r}; available: {', '.join(available_backends())}")
        try:
            cls = planner_class(planner)
        except (PlannerError, ImportError) as err:
            raise _fail(str(err)) from None
        if task is None and not cls.accepts_free_text:
            takers = ", ".join(free_text_planners()) or "none installed"
            raise _fail(
                f"planner {planner!r} needs a built-in task with a goal specification (use --task ID); "
                f"planners that take a free-text instruction: {takers}"
            )
        if decode is not None:
            try:
                decode_mode(decode)
            except ValueError as err:
                raise _fail(str(err)) from None
        options = _parse_options(planner_option)
        named = {"base_url": base_url, "model": model, "api_key_env": api_key_env, "constrained": constrained,
                 "decode": decode}
        options.update({key: value for key, value in named.items() if value is not None})  # a flag not given leaves -p's
        from homiebot.cli.train_adapter import AdapterOptionError, adapter_option

        try:
            options.update(adapter_option(adapter, planner, options))
        except AdapterOptionError as err:
            raise _fail(str(err)) from None
        from homiebot.skills import SkillSet, preset_name

        try:
            preset = preset_name(noise, what="--noise")
        except ValueError as err:
            raise _fail(str(err)) from None
        try:
            perception_mode(perception)
        except ValueError as err:
            raise _fail(str(err)) from None
        if describe_world and perception == PerceptionMode.OFF:
            raise _fail(f"--describe-world needs --perception {' or '.join(GRAPH_BUILDERS)}")
        from homiebot.recovery.cli import recovery_planner, write_episode_stats

        # Typed options and a look at the planner's server (exit 1 when it does not answer), before any file.
        options = check_planner(planner, options)
        try:  # --recovery wraps the planner and its options
            planner, options = recovery_planner(planner, options, recovery, recovery_stages, recovery_search)
        except ValueError as err:
            raise _fail(str(err)) from None
        try:
            the_planner = make_planner(planner, **options)
        except PlannerError as err:
            raise _fail(str(err)) from None
        recorder = EpisodeRecorder(out, images=render, video=video and render)

        def skills(sim: Any, scene_seed: int) -> SkillSet:
            return SkillSet(sim, noise=preset, seed=scene_seed)

        perception_factory: Any = None
        if perception != PerceptionMode.OFF:
            from homiebot.perception.world_model import PerceptionConfig, WorldModel

            perception_config = PerceptionConfig.model_validate({"builder": perception, "describe_world": describe_world})
            perception_factory = functools.partial(WorldModel, config=perception_config)

        from rich.console import Console
        from rich.markup import escape
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from homiebot.sim.base import make_simulator

        console = Console(stderr=True)
        from homiebot.eval.partnr.recording import StatesFileRecorder, simulator_clock
        from homiebot.tasks.suite import task_actions  # PARTNR-style tasks switch and clean

        config = EpisodeConfig(max_rounds=max_rounds, render=render, strict_models=strict_models,
                               actions=task_actions(task))
        observers: list[Any] = []
        if live:
            from homiebot.live import FoxgloveLiveView, LiveViewConfig, live_missing

            missing = live_missing()
            if missing:
                raise _fail(f"--live: {missing}")
            try:
                view = FoxgloveLiveView(LiveViewConfig(port=live_port, wait_for_viewer_s=live_wait, hold_s=live_hold)).start()
            except Exception as err:  # the SDK raises its own error type for a port in use
                raise _fail(f"--live: cannot serve on 127.0.0.1:{live_port}: {err}") from None
            console.print(f"live view: ws://127.0.0.1:{view.port} (Foxglove app: Open connection, layout docs/foxglove/)")
            observers.append(view)
        sim = make_simulator(backend, render=render) if backend == "mujoco" else make_simulator(backend)
        try:
            with Progress(
                TextColumn("[bold]round"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.description}"),
                console=console,
                transient=False,
            ) as bar:
                progress_task = bar.add_task("starting", total=max_rounds)

                def on_round(record: Any, limit: int) -> None:
                    bar.update(
                        progress_task,
                        completed=record.index,
                        description=escape(f"{record.subtask_text} -> {record.feedback.code.value}"),
                    )

                trajectory = run_episode(
                    sim,
                    the_planner,
                    task=task,
                    instruction=instruction,
                    scene=scene_name,
                    seed=seed,
                    config=config,
                    recorder=recorder,
                    progress=on_round,
                    skills=skills,
                    perception=perception_factory,
                    # states.jsonl (+ evaluation.json for a task): PARTNR's PC from the record alone
                    # (docs/partnr.md); a free-text instruction keeps its states (no function to score them by).
                    observers=[*observers, StatesFileRecorder(recorder, task=task, clock=simulator_clock(sim))],
                )
                bar.update(progress_task, total=len(trajectory.rounds) or 1, completed=len(trajectory.rounds) or 1)
        except EpisodeSetupError as err:
            raise _fail(str(err)) from None
        finally:
            sim.shutdown()
            the_planner.close()
            for observer in observers:
                observer.stop()

        Console().print(_round_table(trajectory))
        stats = write_episode_stats(the_planner, recorder.out_dir)
        if stats is not None:
            Console().print(f"recovery statistics: {stats}")
        from homiebot.eval.verdict import outcome_text

        verdict = outcome_text(recorder.out_dir)  # the record's own verdict, as homie metrics gives it
        Console().print(
            f"{verdict}: {len(trajectory.rounds)} rounds, path {trajectory.path_length:.1f} m, "
            f"{trajectory.wall_time_s:.2f} s; record: {recorder.out_dir}"
        )
        if report:
            from homiebot.report import ReportError, write_report

            try:
                (page,) = write_report(recorder.out_dir)
            except ReportError as err:
                raise _fail(f"the record is kept but its report was not written: {err}", code=EXIT_ENVIRONMENT) from None
            Console().print(f"report: {page}")
        if trajectory.error:
            raise _fail(trajectory.error, code=EXIT_ENVIRONMENT)

    @app.command("tasks")
    def tasks_command(
        suite: str | None = typer.Option(None, "--suite", help="Only this suite, by any name homie eval --suite takes "
                                         "(default: the tasks homie run --task plays)."),
    ) -> None:
        """List the built-in task ids, one per line."""
        from homiebot.tasks.suite import MUEP_SUITE, TaskError, all_tasks, load_suite, resolve_suite

        try:
            resolved = resolve_suite(suite) if suite else None
        except TaskError as err:
            raise _fail(str(err)) from None
        if resolved == MUEP_SUITE:  # ALFWorld's task types, in their own format (homie muep run --help)
            from homiebot.eval.muep_suite import load_suite as load_muep_suite

            ids = [task.id for task in load_muep_suite()]
        else:
            ids = [task.id for task in (load_suite(resolved).tasks if resolved else all_tasks())]
        for task_id in ids:
            typer.echo(task_id)
