"""A reader that closes ``homie``'s output early (``homie tasks | head -1``) ends the command quietly with exit 0,
as Unix tools do (docs/cli.md, "Errors and exit codes"); a broken pipe to anything else is still an error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from homiebot.cli.failures import EXIT_ENVIRONMENT, guard_command

HOMIE = str(Path(sys.executable).with_name("homie"))


@pytest.mark.slow
@pytest.mark.parametrize("args", [["tasks"], ["tasks", "--suite", "muep"], ["sim", "scenes"]])
def test_output_into_a_closed_pipe_ends_quietly_with_0(args: list[str], tmp_path: Path) -> None:
    # The reader is gone before the first line: every write meets the closed pipe, whatever the timing.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([HOMIE, *args], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120,
                              cwd=tmp_path)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (0, "")


@pytest.mark.slow
def test_head_of_the_task_list(tmp_path: Path) -> None:
    done = subprocess.run(["bash", "-c", f"set -o pipefail; {HOMIE} tasks | head -1"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "demo-drawer\n", "")


def test_a_broken_pipe_to_another_process_is_still_an_error() -> None:
    # A command whose own stdout is fine but whose pipe to a server or worker broke: the environment, exit 1.
    app = typer.Typer()

    @app.command()
    def talk() -> None:
        raise BrokenPipeError(32, "Broken pipe")

    @app.command()
    def other() -> None:  # a second command, so that typer keeps the command names
        pass

    app.registered_commands[0].callback = guard_command(talk)
    done = CliRunner().invoke(app, ["talk"])
    assert done.exit_code == EXIT_ENVIRONMENT
    assert done.output.strip() == "error: Broken pipe"
