"""``homie run`` (one HomieBot episode, recorded) and ``homie tasks`` (the built-in task ids).

Exit codes: 0 the episode ran and its record was written (whether or not the task succeeded: the summary
says so); 1 the episode stopped on an infrastructure error (planner or simulator failure; the record holds
the error); 2 bad input (unknown task, scene or planner, free text for a planner that needs a goal,
an output directory that cannot be written, bad options). Messages go to stderr.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from homiebot.cli.failures import EXIT_ENVIRONMENT, check_output
from homiebot.cli.failures import report as _fail
from homiebot.cli.options import (
    ModelOptions,
    RecoveryOptions,
    articulation_option,
    deprecated,
    hidden,
    noise_option,
    parse_articulation,
    perception_option,
    simulator_option,
    skill_model_option,
    skills_option,
)
from homiebot.config import (
    GRAPH_BUILDERS,
    MAX_ROUNDS,
    PerceptionMode,
    SkillsMode,
    choices,
    decode_mode,
    perception_mode,
)
from homiebot.config.run import parse_skill_models

if TYPE_CHECKING:  # the command's modules are imported when it runs (homie --help stays light)
    from homiebot.agent.observers import EpisodeObserver
    from homiebot.data.record import EpisodeRecorder
    from homiebot.sim.base import Simulator
    from homiebot.tasks.suite import TaskSpec

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


def _config_file(path: Path) -> dict[str, Any]:
    """The run configuration ``--config`` names (:func:`homiebot.config.run.run_config_json`); an evaluation's
    eval.json written before it kept its ``run`` gives the one its settings describe."""
    import json

    from homiebot.config.planners import ConfigError
    from homiebot.config.run import run_config_json

    try:
        return dict(run_config_json(path))
    except ConfigError as err:
        refusal = err
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise refusal from None
    if not isinstance(data, dict) or not isinstance(data.get("settings"), dict):
        raise refusal
    from pydantic import ValidationError

    from homiebot.config.planners import validation_message
    from homiebot.eval.manifest import EvalSettings

    try:
        return EvalSettings.model_validate(data["settings"]).run_config().dump()
    except ValidationError as err:
        raise ConfigError(f"{path}: its settings do not validate ({validation_message(err)})") from None


def states_judge(recorder: EpisodeRecorder, task: TaskSpec | None, simulator: Simulator | None) -> EpisodeObserver:
    """The observer that keeps an episode record's states and gives its verdict, clocked by the simulator's nominal
    time where it keeps one (:class:`homiebot.eval.partnr.recording.StatesFileRecorder`)."""
    from homiebot.eval.partnr.recording import StatesFileRecorder, simulator_clock

    return StatesFileRecorder(recorder, task=task, clock=simulator_clock(simulator))


def _given(**values: object) -> dict[str, object]:
    """The options the command line gave (typer leaves the others ``None``)."""
    return {key: value for key, value in values.items() if value is not None}


def _run_planner(
    held: dict[str, Any],
    task_id: str | None,
    planner: str | None,
    options: dict[str, object],
    adapter: Path | None,
    recovery: str | None,
    recovery_stages: str | None,
    recovery_search: bool | None,
) -> dict[str, Any]:
    """The run's planner configuration (JSON form) from ``--config``'s (``held``, may be empty) and the command
    line's planner options, which win: another ``--planner`` replaces the file's planner and its options, the same
    planner keeps them under the command line's. ``--recovery`` wraps the planner; a file's wrapper is kept (its
    stages and search overridden by ``--recovery-stages`` / ``--recovery-search``) unless ``--recovery`` is given."""
    from homiebot.cli.train_adapter import AdapterOptionError, adapter_option
    from homiebot.planner.registry import configure_planner
    from homiebot.recovery.cli import recovery_config

    file_planner: dict[str, Any] = dict(held.get("planner") or {})
    file_wrapper = file_planner if file_planner.get("name") == "recovery" else None
    file_base: dict[str, Any] = dict(file_wrapper["base"]) if file_wrapper is not None else file_planner
    name = planner or file_base.get("name") or "expert"
    if name == "expert" and task_id is not None:
        name = task_expert(task_id)
    merged: dict[str, object] = {k: v for k, v in file_base.items() if k != "name"} if name == file_base.get("name") else {}
    merged.update(options)
    try:
        merged.update(adapter_option(adapter, name, merged))
    except AdapterOptionError as err:
        raise _fail(str(err)) from None
    base = configure_planner(name, merged)
    if recovery is None and file_wrapper is not None:
        wrapper = {**file_wrapper, "base": base.model_dump(mode="json")}
        if recovery_stages is not None:
            wrapper["stages"] = recovery_stages
        if recovery_search is not None:
            wrapper["search"] = recovery_search
        return wrapper
    try:  # --recovery wraps the planner (the stages and search checked as homie eval and homie up check them)
        return recovery_config(base, recovery, recovery_stages, recovery_search).model_dump(mode="json")
    except ValueError as err:
        raise _fail(str(err)) from None


def register(app: typer.Typer) -> None:
    """Add ``homie run`` and ``homie tasks``."""

    @app.command("run")
    def run_command(
        instruction: str | None = typer.Argument(None, help="A free-text instruction (instead of --task)."),
        task_id: str | None = typer.Option(None, "--task", "-t", help="A built-in task id (`homie tasks`)."),
        scene: str | None = typer.Option(None, "--scene", "-s", help="Scene for a free-text instruction (or to override the task's)."),
        out: Path = typer.Option(..., "--out", "-o", help="Episode record directory (an earlier record there is replaced)."),
        config_file: Path | None = typer.Option(None, "--config", help="Repeat a recorded run's settings: a record's summary.json or an evaluation's eval.json (or a run configuration's JSON); the options given here win."),
        planner: str | None = typer.Option(None, "--planner", help="Planner name (homiebot.planner.registry); default and expert: the task's suite's expert (partnr_expert for a PARTNR-style task, else expert)."),
        seed: int | None = typer.Option(None, "--seed", help="Run index: the scene is reset with the task's seed + this (free text: this; default 0)."),
        simulator: str | None = simulator_option(),
        backend: str | None = hidden("--backend"),
        max_rounds: int | None = typer.Option(None, "--max-rounds", min=1, help=f"Round limit (paper: {MAX_ROUNDS})."),
        render: bool | None = typer.Option(None, "--render/--no-render", help="Render the four views every round (default on; with --skills physical also the arm's reaching views, docs/robots.md)."),
        video: bool | None = typer.Option(None, "--video/--no-video", help="Write episode.mp4 (default on)."),
        noise: str | None = noise_option(),
        skills: str | None = skills_option(),
        skill_model: list[str] = skill_model_option(),
        articulation: str | None = articulation_option(),
        strict_models: bool | None = typer.Option(None, "--strict-models/--lenient-models", help="F1 when the model does not serve the action (default lenient)."),
        base_url: str | None = ModelOptions.base_url(),
        model: str | None = ModelOptions.model(),
        adapter: Path | None = ModelOptions.adapter(),
        api_key_env: str | None = ModelOptions.api_key_env(),
        constrained: bool | None = ModelOptions.constrained(),
        decode: str | None = ModelOptions.decode(),
        planner_option: list[str] = ModelOptions.options(),
        perception: str | None = perception_option(),
        describe_world: bool | None = typer.Option(None, "--describe-world/--no-describe-world", help="With --perception: give model planners PARTNR's text world description (EMMOE forbids it; off by default)."),
        report: bool | None = typer.Option(None, "--report/--no-report", help="Write the episode's HTML page OUT/report.html at the end (docs/reports.md; default on)."),
        live: bool = typer.Option(False, "--live", help="Serve the episode live to the Foxglove app over its WebSocket protocol (docs/reports.md)."),
        live_port: int = typer.Option(8765, "--live-port", min=0, max=65535, help="--live: the port on 127.0.0.1 (0: a free one, logged)."),
        live_wait: float = typer.Option(0.0, "--live-wait", min=0, help="--live: wait up to SECONDS for a viewer before the first round."),
        live_hold: float = typer.Option(0.0, "--live-hold", min=0, help="--live: keep serving the last state up to SECONDS after the end (until the viewers leave)."),
        recovery: str | None = RecoveryOptions.recovery(),
        recovery_stages: str | None = RecoveryOptions.stages(),
        recovery_search: bool | None = RecoveryOptions.search(),
    ) -> None:
        """Run one HomieBot episode (planner -> executor -> skills -> simulator) and record it into OUT."""
        from homiebot.agent.build import EpisodeBuildError, build_episode, check_episode
        from homiebot.agent.loop import EpisodeSetupError
        from homiebot.config.planners import ConfigError
        from homiebot.config.run import run_config
        from homiebot.planner.registry import PlannerError, check_planner_config, parse_planner_options
        from homiebot.recovery.cli import write_episode_stats

        simulator = deprecated("--backend", "--simulator", backend, simulator)
        # Everything is checked before anything is written: a refused start leaves no record behind; the whole
        # configuration is validated once (homiebot.config.run), the command line's options winning over --config's.
        try:
            held: dict[str, Any] = _config_file(config_file) if config_file is not None else {}
        except ConfigError as err:
            raise _fail(f"--config: {err}") from None
        partner = held.get("partner")
        if partner is not None:  # homie play's human, the graph's pair: their planners are made there
            named = partner.get("planner") if isinstance(partner, dict) else partner
            raise _fail(f"--config: {config_file} is a two-agent run (a partner {named!r}); "
                        "homie run runs the robot alone: repeat it with homie eval --agents robot+human, "
                        "homie up sim --partner-planner or homie play")
        if planner is None and dict(held.get("planner") or {}).get("name") == "keyboard":
            raise _fail(f"--config: {config_file} was played at the keyboard; repeat it with homie play, "
                        "or give --planner")
        if task_id is not None and instruction is not None:
            raise _fail("give either --task ID or a free-text INSTRUCTION (with --scene)")
        if task_id is not None:
            held.update(task=task_id, instruction=None)
        elif instruction is not None:
            held.update(task=None, instruction=instruction)
        if held.get("task") is None and held.get("instruction") is None:
            raise _fail("give either --task ID or a free-text INSTRUCTION (with --scene)")
        if instruction is not None and not instruction.strip():
            raise _fail("the instruction is empty")
        if held.get("instruction") is not None and scene is None and held.get("scene") is None:
            raise _fail("a free-text instruction needs --scene NAME")
        if task_id is not None and scene is None:
            held["scene"] = None  # another task: its own scene, not the file's
        if (live_wait or live_hold) and not live:
            raise _fail("--live-wait and --live-hold are options of --live")
        for value, parse in ((perception, perception_mode), (decode, decode_mode)):
            if value is not None:
                try:
                    parse(value)
                except ValueError as err:
                    raise _fail(str(err)) from None
        if skills is not None and skills not in {m.value for m in SkillsMode}:
            raise _fail(f"--skills {skills!r}: use {choices(SkillsMode)}")
        try:
            skill_models = parse_skill_models(skill_model, skills or dict(held.get("skills") or {}).get("mode"))
            parse_articulation(articulation, skills or dict(held.get("skills") or {}).get("mode"))
        except ValueError as err:
            raise _fail(str(err)) from None
        if noise is not None:
            from homiebot.skills import preset_name

            try:
                preset_name(noise, what="--noise")
            except ValueError as err:
                raise _fail(str(err)) from None
        perception_held = dict(held.get("perception") or {})
        if describe_world and (perception or perception_held.get("mode", PerceptionMode.OFF.value)) == PerceptionMode.OFF:
            raise _fail(f"--describe-world needs --perception {' or '.join(GRAPH_BUILDERS)}")
        check_output(out)
        try:
            named = _given(base_url=base_url, model=model, api_key_env=api_key_env, constrained=constrained,
                           decode=decode)
            options: dict[str, object] = {**parse_planner_options(planner_option), **named}  # a flag given wins over -p
            held["planner"] = _run_planner(held, held.get("task"), planner, options, adapter, recovery,
                                           recovery_stages, recovery_search)
        except PlannerError as err:
            raise _fail(str(err)) from None
        held.update(_given(scene=scene, seed=seed, max_rounds=max_rounds))
        sections = {
            "simulator": _given(backend=simulator, render=render),
            "skills": _given(noise=noise, mode=skills, models=skill_models or None, articulation=articulation),
            "executor": _given(strict_models=strict_models),
            "perception": _given(mode=perception, describe_world=describe_world),
            "recording": _given(video=video, report=report),
        }
        for section, values in sections.items():
            held[section] = {**dict(held.get(section) or {}), **values}
        try:
            config = run_config(held)
            task = check_episode(config)
            # The planner's look at what it needs outside the process (exit 1 when its server does not answer).
            check_planner_config(config.planner)
        except (ConfigError, EpisodeBuildError, PlannerError) as err:
            raise _fail(str(err)) from None

        from rich.console import Console
        from rich.markup import escape
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(stderr=True)
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
        try:
            # states.jsonl (+ evaluation.json for a task): PARTNR's PC from the record alone (docs/partnr.md), and
            # the record's verdict; a free-text instruction keeps its states (no function to score them by).
            episode = build_episode(config, out=out, task=task, observers=observers, judge=states_judge)
        except EpisodeBuildError as err:
            for observer in observers:
                observer.stop()
            raise _fail(str(err)) from None
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
                progress_task = bar.add_task("starting", total=config.max_rounds)

                def on_round(record: Any, limit: int) -> None:
                    bar.update(
                        progress_task,
                        completed=record.index,
                        description=escape(f"{record.subtask_text} -> {record.feedback.code.value}"),
                    )

                trajectory = episode.run(progress=on_round)
                bar.update(progress_task, total=len(trajectory.rounds) or 1, completed=len(trajectory.rounds) or 1)
        except EpisodeSetupError as err:
            raise _fail(str(err)) from None
        finally:
            episode.close()
            for observer in observers:
                observer.stop()

        record_dir = episode.recorder.out_dir if episode.recorder is not None else Path(out)
        Console().print(_round_table(trajectory))
        stats = write_episode_stats(episode.planner, record_dir)
        if stats is not None:
            Console().print(f"recovery statistics: {stats}")
        from homiebot.eval.verdict import outcome_text

        verdict = outcome_text(record_dir)  # the record's own verdict, as homie metrics gives it
        Console().print(
            f"{verdict}: {len(trajectory.rounds)} rounds, path {trajectory.path_length:.1f} m, "
            f"{trajectory.wall_time_s:.2f} s; record: {record_dir}"
        )
        if config.recording.report:
            from homiebot.report import ReportError, write_report

            try:
                (page,) = write_report(record_dir)
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
        if resolved == MUEP_SUITE:  # ALFWorld's task types, in their own format (homie eval --suite muep; docs/muep.md)
            from homiebot.eval.muep_suite import load_suite as load_muep_suite

            ids = [task.id for task in load_muep_suite()]
        else:
            ids = [task.id for task in (load_suite(resolved).tasks if resolved else all_tasks())]
        for task_id in ids:
            typer.echo(task_id)
