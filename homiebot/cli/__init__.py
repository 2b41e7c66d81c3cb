"""The ``homie`` command line. Each area registers its commands from its own module (``register(app)``).

Heavy imports (MuJoCo, torch, rclpy) happen inside the commands, so ``homie --help`` stays fast.
"""

from __future__ import annotations

import importlib
import logging

import typer

from homiebot.cli.failures import OneLineErrorGroup, guard_command
from homiebot.logs import configure_logging

#: Modules that add commands to the ``homie`` app, in help order.
COMMAND_MODULES = (
    "homiebot.cli.run",  # homie run, homie tasks
    "homiebot.cli.play",  # homie play
    "homiebot.cli.sim",  # homie sim ...
    "homiebot.cli.eval",  # homie eval, homie metrics
    "homiebot.cli.perception",  # homie perception ...
    "homiebot.cli.ros",  # homie up, homie bag ...
    "homiebot.cli.report",  # homie report
    "homiebot.cli.muep",  # homie muep export / compare (run, metrics: deprecated)
    "homiebot.cli.data",  # homie data collect / export / build
    "homiebot.cli.train",  # homie train sft / dpo
)


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="homie",
        help="HomieBot: household mobile manipulation with a VLM planner, on an embedded MuJoCo simulator.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        cls=OneLineErrorGroup,  # usage errors (a missing option, a bad value) are one line too
    )

    @app.callback()
    def _root(
        verbose: bool = typer.Option(False, "--verbose", "-v", help="Debug logging."),
        version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                     help="Print the installed homiebot version and exit."),
    ) -> None:
        # Without --verbose a logged exception is one line; the command's error line says what to do.
        configure_logging(logging.DEBUG if verbose else logging.INFO, "%(asctime)s %(levelname)s %(name)s: %(message)s")

    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(app)
    _guard_commands(app)
    return app


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            installed = version("homiebot")
        except PackageNotFoundError:  # run from a source tree without installing
            from homiebot import __version__ as installed
        typer.echo(f"homie {installed}")
        raise typer.Exit()


def _guard_commands(app: typer.Typer) -> None:
    """Give every command, in every sub-app, the one error behaviour of :mod:`homiebot.cli.failures`."""
    for command in app.registered_commands:
        if command.callback is not None:
            command.callback = guard_command(command.callback)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            _guard_commands(group.typer_instance)


def main() -> None:
    build_app()()
