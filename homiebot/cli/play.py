"""``homie play``: a person at the keyboard plays one agent of a task's episode (docs/play.md): by default PARTNR's
human partner, beside a planner that drives the robot, in the loop's lock-step rounds (PARTNR paper, section 5:
people in the loop); with ``--as robot`` the only agent of an EMMOE-style episode.

Exit codes, as for ``homie run``: 0 the episode ran and its record was written (finished, failed or quit by the
person: the summary and ``play.json`` say which); 1 the episode stopped on an infrastructure error; 2 bad input
(unknown task, role or planner, an output directory that cannot be written, bad options). Messages go to stderr.
"""

from __future__ import annotations

import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import typer

from homiebot.cli.failures import EXIT_ENVIRONMENT, check_output
from homiebot.cli.failures import report as _fail

log = logging.getLogger(__name__)

ROLES = ("robot", "human")


def register(app: typer.Typer) -> None:
    """Add ``homie play``."""

    @app.command("play")
    def play_command(
        task_id: str = typer.Option(..., "--task", "-t", help="A built-in task id (`homie tasks`)."),
        role: str = typer.Option("human", "--as", help="Which agent the person plays: human (PARTNR's partner, beside a planner that drives the robot) or robot (the only agent)."),
        planner: str | None = typer.Option(None, "--planner", help="The planner that drives the robot while the person plays the human (default: expert)."),
        out: Path | None = typer.Option(None, "--out", "-o", help="Episode record directory (default: runs/play/TASK-DATE-TIME)."),
        views: Path | None = typer.Option(None, "--views", help="Keep each round's views image here (default: a temporary folder, removed at the end; the record keeps the views)."),
        preview: bool | None = typer.Option(None, "--preview/--no-preview", help="Draw the views in the terminal (default: when the terminal has colour)."),
        seed: int = typer.Option(0, "--seed", help="Run index: the scene is reset with the task's seed + this."),
        max_rounds: int = typer.Option(20, "--max-rounds", min=1, help="Round limit (paper: 20)."),
        noise: str = typer.Option("off", "--noise", help="Execution noise of the skill layer: off, or emmoe (EMMOE table 4 success rates)."),
        video: bool = typer.Option(True, "--video/--no-video", help="Write episode.mp4 into the record."),
        report: bool = typer.Option(True, "--report/--no-report", help="Write the episode's HTML page OUT/report.html at the end."),
    ) -> None:
        """Play one agent of a task's episode at the keyboard; the episode is recorded like any other."""
        from homiebot.sim.scene import SceneError, load_scene
        from homiebot.tasks.suite import TaskError, get_task

        try:
            task = get_task(task_id)
        except TaskError as err:
            raise _fail(str(err)) from None
        if role not in ROLES:
            raise _fail(f"unknown --as {role!r}; choose robot or human")
        if role == "robot" and planner is not None:
            raise _fail("--planner drives the robot while you play the human; with --as robot you are the robot")
        robot_planner = planner or "expert"
        if role == "human":
            from homiebot.config.planners import ConfigError, planner_config
            from homiebot.planner.registry import PlannerError, planner_class

            try:  # installed, and configured with its defaults (a planner that needs options is refused here)
                planner_class(robot_planner)
                planner_config(robot_planner)
            except (PlannerError, ConfigError, ImportError) as err:
                raise _fail(str(err)) from None
        try:
            load_scene(task.scene)
        except SceneError as err:
            raise _fail(str(err)) from None
        if out is None:
            out = Path("runs") / "play" / f"{task.id}-{time.strftime('%Y%m%d-%H%M%S')}"
        check_output(out)
        if views is not None:
            check_output(views, option="--views")
        from homiebot.skills import preset_name

        try:
            preset_name(noise, what="--noise")
        except ValueError as err:
            raise _fail(str(err)) from None
        from homiebot.data.record import EpisodeRecorder, RecordError

        try:
            recorder = EpisodeRecorder(out, video=video)
        except RecordError as err:
            raise _fail(str(err)) from None
        from homiebot.play.screen import logs_to_file

        # Log lines would draw over the screen: while it is up they go to a file beside the record.
        log_file = out.with_name(f"{out.name}.log")
        with logs_to_file(log_file):
            outcome = _play(task, role, robot_planner, recorder, views, preview, seed, max_rounds, noise, video, report,
                            log_file)
        _finish(outcome, report, log_file)


def _play(task: Any, role: str, robot_planner: str, recorder: Any, views: Path | None, preview: bool | None,
          seed: int, max_rounds: int, noise: str, video: bool, report: bool, log_file: Path) -> Any:
    from rich.console import Console
    from rich.markup import escape

    from homiebot.agent.build import build_simulator
    from homiebot.eval.partnr.recording import StatesFileRecorder, simulator_clock
    from homiebot.play.episode import play_config, play_episode
    from homiebot.play.episode import robot_planner as make_robot
    from homiebot.play.keyboard import KeyboardPlanner
    from homiebot.play.screen import PlayScreen

    console = Console(highlight=False)
    views_dir = views if views is not None else Path(tempfile.mkdtemp(prefix="homie-play-views-"))
    views_dir.mkdir(parents=True, exist_ok=True)
    screen = PlayScreen(console, views_dir, preview=preview, role=role, task_id=task.id)
    person = KeyboardPlanner(sys.stdin, screen)
    robot, robot_setting = make_robot(robot_planner, task) if role == "human" else (None, None)
    config = play_config(task, role=role, robot=robot_setting, seed=seed, max_rounds=max_rounds, noise=noise,
                         video=video, report=report)
    console.print(f"You play the {role} in {task.id} ({task.scene}); type help for the commands, quit to stop.")
    console.print(f"Log lines go to {escape(str(log_file))} while you play (warnings still show here).",
                  soft_wrap=True)
    # The simulator is the build path's (with the human when the person plays it), made here so that the states
    # recorder reads its clock.
    sim = build_simulator(config.simulator)
    try:
        states = StatesFileRecorder(recorder, task=task, clock=simulator_clock(sim))
        if robot is not None:
            console.print(f"The robot is driven by the {robot.name} planner; you act after it in every round.")
        return play_episode(config, person, recorder, robot=robot, simulator=sim, observers=[states, screen])
    finally:
        if robot is not None:
            robot.close()
        sim.shutdown()
        if views is None:
            shutil.rmtree(views_dir, ignore_errors=True)


def _finish(outcome: Any, report: bool, log_file: Path) -> None:
    from rich.console import Console
    from rich.markup import escape

    from homiebot.eval.verdict import outcome_text

    console = Console(highlight=False)
    trajectory = outcome.trajectory
    # The record's own verdict (the suite's evaluation): what summary.json, the page and homie metrics say.
    verdict = outcome_text(outcome.record)
    if outcome.ended_by == "user":
        verdict = f"you quit in round {outcome.quit_round} (recorded as ended by the user); {verdict}"
    rounds = f"{len(trajectory.rounds)} rounds"
    if trajectory.partner_rounds:
        rounds = f"{len(trajectory.rounds)} robot rounds and {len(trajectory.partner_rounds)} of yours"
    console.print(f"{verdict}: {rounds}, path {trajectory.path_length:.1f} m; "
                  f"record: {escape(str(outcome.record))} (the views of round N: subtaskN_front.png ...)", soft_wrap=True)
    if log_file.is_file():
        if log_file.stat().st_size:
            console.print(f"log: {escape(str(log_file))}", soft_wrap=True)
        else:
            log_file.unlink()
    if report:
        from homiebot.report import ReportError, write_report

        try:
            (page,) = write_report(outcome.record)
        except ReportError as err:
            raise _fail(f"the record is kept but its report was not written: {err}", code=EXIT_ENVIRONMENT) from None
        console.print(f"report: {escape(str(page))}", soft_wrap=True)
    if trajectory.error:
        raise _fail(trajectory.error, code=EXIT_ENVIRONMENT)
