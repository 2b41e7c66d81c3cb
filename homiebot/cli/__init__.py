"""The ``homie`` command line. Each area registers its commands from its own module (``register(app)``).

Heavy imports (MuJoCo, torch, rclpy) happen inside the commands, so ``homie --help`` stays fast.
"""

from __future__ import annotations

import importlib
import logging

import typer

from homiebot.logs import configure_logging

#: Modules that add commands to the ``homie`` app, in help order.
COMMAND_MODULES = (
    "homiebot.cli.run",  # homie run, homie tasks
    "homiebot.cli.sim",  # homie sim ...
    "homiebot.cli.eval",  # homie eval, homie metrics
    "homiebot.cli.perception",  # homie perception ...
    "homiebot.cli.ros",  # homie up, homie bag ...
    "homiebot.cli.report",  # homie report
    "homiebot.cli.muep",  # homie muep run / metrics / export
)


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="homie",
        help="HomieBot: household mobile manipulation with a VLM planner, on an embedded MuJoCo simulator.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @app.callback()
    def _root(verbose: bool = typer.Option(False, "--verbose", "-v", help="Debug logging.")) -> None:
        # Without --verbose a logged exception is one line; the command's error line says what to do.
        configure_logging(logging.DEBUG if verbose else logging.INFO, "%(asctime)s %(levelname)s %(name)s: %(message)s")

    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(app)
    return app


def main() -> None:
    build_app()()
