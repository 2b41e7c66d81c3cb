"""How every ``homie`` command fails: one line on stderr and an exit code, never a traceback for what a user
caused or what the machine lacks (docs/cli.md, "Errors and exit codes").

* exit 2, **bad input**: a bad name or option, a missing or malformed input file, an output path that cannot
  be written (read-only file system, no permission, under ``/proc``), a model path that does not load;
* exit 1, **environment**: an unreachable planner server, a full disk, a missing renderer or ROS install;
* exit 130: interrupted (Ctrl-C, or SIGTERM: :func:`sigterm_as_interrupt`).

:func:`guard_command` wraps every command callback (``homiebot.cli.build_app`` applies it to all of them),
so a new command gets the same behaviour without code of its own. Errors are matched by the qualified name
of their class (walking the class's bases), which keeps ``homie --help`` from importing MuJoCo, torch or
rclpy just to know the classes. An exception of any other class is a bug: it keeps its traceback.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import select
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import typer
from typer.core import TyperGroup

EXIT_ENVIRONMENT = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

#: Error classes a user causes by what they typed or pointed at.
BAD_INPUT_ERRORS = frozenset({
    "homiebot.agent.build.EpisodeBuildError",
    "homiebot.agent.loop.EpisodeSetupError",
    "homiebot.config.planners.ConfigError",
    "homiebot.data.record.RecordError",
    "homiebot.eval.keypaths.KeypathError",
    "homiebot.eval.manifest.EvalError",
    "homiebot.tasks.suite.TaskError",
    "homiebot.perception.emmoe_names.NameDictError",
    "homiebot.perception.world_graph.GraphSchemaError",
    "homiebot.planner.constrained.ConstraintError",
    "homiebot.planner.hf_backend.PlannerLoadError",
    "homiebot.planner.messages.MessageFormatError",
    "homiebot.planner.models.ModelNotInstalledError",
    "homiebot.planner.registry.PlannerError",
    "homiebot.report.episode.ReportError",
    "homiebot.ros.bag.BagError",
    "homiebot.ros.convert.ConversionError",
    "homiebot.ros.supervisor.GraphConfigError",
    "homiebot.sim.mujoco.urdf.UrdfError",
    "homiebot.sim.scene.SceneError",
    "homiebot.skills.skillset.UnservedModelError",
    "pydantic_core._pydantic_core.ValidationError",
})
#: Error classes that say the machine or a service it needs is not in a state to run the command.
ENVIRONMENT_ERRORS = frozenset({
    "homiebot.eval.pool.WorkerSetupError",
    "homiebot.planner.batching.BatcherClosed",
    "homiebot.planner.hf_backend.PlannerBackendError",
    "homiebot.report.browser.BrowserError",
    "homiebot.ros.calls.CallFailed",
    "homiebot.ros.calls.CallTimeout",
    "homiebot.ros.environment.RosEnvironmentError",
    "homiebot.ros.shm.ShmDirectoryError",
    "homiebot.sim.mujoco.rendering.RendererUnavailable",
    "homiebot.textworld.alfworld.AlfworldUnavailable",
})
#: ``OSError`` numbers that mean "this path cannot be used as given" (the user picks another path).
PATH_ERRNOS = frozenset({
    errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EEXIST,
    errno.ENAMETOOLONG, errno.ELOOP, errno.EXDEV,
})


class CommandFailed(Exception):
    """Raised by a command for its own checks: ``message`` is the line to print, ``code`` the exit status."""

    def __init__(self, message: str, code: int = EXIT_BAD_INPUT) -> None:
        super().__init__(message)
        self.code = code


def _qualified_names(err: BaseException) -> list[str]:
    return [f"{cls.__module__}.{cls.__qualname__}" for cls in type(err).__mro__]


#: The temporaries that make writes atomic, named after their target (``tempfile.mkstemp``/``mkdtemp`` add 8 random
#: characters): ``.NAME.tmp-XXXXXXXX`` and ``.NAME.old-XXXXXXXX`` folders, ``.NAME.XXXXXXXX`` files (optionally
#: with the target's suffix or ``.tmp``). An error names the user's path, never one of these.
_TEMPORARY_NAME = re.compile(r"^\.(?P<stem>.+?)\.(?:tmp-|old-)?[a-z0-9_]{8}(?P<suffix>\.[A-Za-z0-9]+)?$")


def user_path(path: object) -> str:
    """``path`` with every atomic-write temporary in it replaced by the name it stands for (``/proc/.x.tmp-ab12cd34``
    -> ``/proc/x``)."""
    text = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else str(path)
    parts = []
    for part in text.split(os.sep):
        found = _TEMPORARY_NAME.match(part)
        if found is None:
            parts.append(part)
            continue
        suffix = found.group("suffix") or ""
        parts.append(found.group("stem") + ("" if suffix == ".tmp" else suffix))
    return os.sep.join(parts)


def _os_error_line(err: OSError) -> tuple[int, str]:
    where = f" {user_path(err.filename)}" if err.filename is not None else ""
    if err.filename2 is not None:
        where += f" -> {user_path(err.filename2)}"
    reason = err.strerror or str(err)
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        what = f" writing{where}" if where else ""
        return EXIT_ENVIRONMENT, f"no space left on the device{what}; nothing half-written was kept; free some space and run the command again"
    if err.errno in PATH_ERRNOS:
        return EXIT_BAD_INPUT, f"cannot use{where}: {reason}"
    return EXIT_ENVIRONMENT, f"{reason}{':' + where if where else ''}"


def classify(err: BaseException) -> tuple[int, str] | None:
    """``(exit code, one line)`` for an error a user or the machine caused; None for a bug."""
    if isinstance(err, CommandFailed):
        return err.code, str(err)
    for name in _qualified_names(err):
        if name in ENVIRONMENT_ERRORS:
            return EXIT_ENVIRONMENT, _first_line(err)
        if name in BAD_INPUT_ERRORS:
            return EXIT_BAD_INPUT, _first_line(err)
    if isinstance(err, OSError):
        return _os_error_line(err)
    return None


def _first_line(err: BaseException) -> str:
    """The message on one line (pydantic's and some libraries' messages span several)."""
    text = " ".join(line.strip() for line in str(err).splitlines() if line.strip())
    return text or type(err).__name__


def report(message: str, code: int = EXIT_BAD_INPUT) -> typer.Exit:
    """Print ``error: message`` on stderr and return the :class:`typer.Exit` to raise (``raise report(...)``)."""
    typer.secho(f"error: {message}", fg="red", err=True)
    return typer.Exit(code)


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """Print ``error: message`` on stderr and exit with ``code``."""
    raise report(message, code)


def check_output(path: Path, *, option: str = "--out", directory: bool = True) -> Path:
    """Refuse an output path that cannot be written, before the command does any work.

    Probes the nearest folder that exists with a temporary directory it removes again, so what the kernel
    refuses (read-only file system, no permission, ``/proc``, a full disk) is found whoever runs the command
    (``os.access`` says yes to root on most of these). Creates nothing that stays. ``directory``: the path
    is a directory to create or reuse; else a file (an existing directory there is refused).
    """
    target = Path(path).expanduser().absolute()
    if directory and target.exists() and not target.is_dir():
        fail(f"{option} {target} exists and is not a directory")
    if not directory and target.is_dir():
        fail(f"{option} {target} is a directory; give a file name")
    folder = target if directory and target.is_dir() else target.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        fail(f"cannot write {option} {target}: {folder} is not a directory")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".homie-probe-", dir=folder))
    except OSError as err:
        code, _ = _os_error_line(err)
        fail(f"cannot write {option} {target}: {err.strerror or err}", code)
    return target


F = TypeVar("F", bound=Callable[..., Any])


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe or socket whose reader has closed it (poll reports an error on the writing end),
    as opposed to a broken pipe to some other process or server the command talks to."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no real stdout (a test runner's buffer), or no poll here
        return False


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While a command runs, SIGTERM (``kill``, ``timeout``, a scheduler ending a job) ends it the way Ctrl-C does:
    its cleanup runs (no staging folder or half-written output stays behind) and it exits 130. Only in the process
    that installed it: a forked child (a multiprocessing worker) that inherits the handler takes SIGTERM's default
    action, so terminating a worker still ends it at once. The caller's handler is put back afterwards."""
    if threading.current_thread() is not threading.main_thread():  # handlers can only be set from the main thread
        yield
        return
    owner = os.getpid()

    def interrupt(signum: int, _frame: Any) -> None:
        if os.getpid() != owner:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def guard_command(callback: F) -> F:
    """Wrap a command callback: mapped errors become one line and their exit code; Ctrl-C (and SIGTERM:
    :func:`sigterm_as_interrupt`) one line, 130; a reader that closes our stdout early (``homie tasks | head -1``) ends
    the command quietly with 0."""

    @functools.wraps(callback)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            with sigterm_as_interrupt():
                result = callback(*args, **kwargs)
            sys.stdout.flush()  # what is still buffered meets a closed pipe here, not in Python's exit
            return result
        except BrokenPipeError as err:
            if not _stdout_reader_gone():  # a pipe to another process or a server: the environment's error
                code, line = _os_error_line(err)
                raise report(line, code) from None
            # The reader of our output left (`homie tasks | head -1`): end quietly, as Unix tools do. Python's own
            # flush at exit would meet the same closed pipe, so stdout goes to /dev/null from here on.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
            raise typer.Exit(0) from None
        except (typer.Exit, typer.Abort, typer.BadParameter):
            # typer's own control flow: it prints these itself. typer >= 0.29 vendors click, so click's classes are
            # not these and click is no dependency of ours (the core install has no click).
            raise
        except KeyboardInterrupt:
            # Commands that can resume catch it themselves and raise CommandFailed with the resume command.
            raise report("interrupted", EXIT_INTERRUPTED) from None
        except Exception as err:
            mapped = classify(err)
            if mapped is None:
                raise
            code, line = mapped
            raise report(line, code) from None

    return guarded  # type: ignore[return-value]


def _click_exception_class() -> type[Exception]:
    """click's ``ClickException`` as this typer raises it: its own vendored copy from typer 0.29 on, click's before.
    Found through ``typer.BadParameter``, a subclass of it in both, so that neither module is imported by name."""
    for cls in typer.BadParameter.__mro__:
        if cls.__name__ == "ClickException":
            return cls
    return typer.BadParameter


def usage_line(err: Exception) -> str:
    """A usage error (missing option, wrong type, unknown option or command) as one line that names the command's
    help."""
    format_message = getattr(err, "format_message", None)
    message = " ".join((format_message() if callable(format_message) else str(err)).split()).rstrip(".")
    if message[1:2].islower():  # "Missing option" -> "missing option", but not "HOST" or "URL"
        message = message[:1].lower() + message[1:]
    path = getattr(getattr(err, "ctx", None), "command_path", None)
    return f"{message} (see {path} --help)" if path else message


def usage_help(err: Exception) -> str:
    """The help text a ``NoArgsIsHelpError`` carries (its message is the command's help)."""
    format_message = getattr(err, "format_message", None)
    return str(format_message()) if callable(format_message) else str(err)


class OneLineErrorGroup(TyperGroup):
    """The ``homie`` group: a usage error that click finds before a command runs (a missing ``--out``, a value of
    the wrong type, an unknown option or command) is one ``error:`` line and exit 2, as every refusal of
    :func:`guard_command` is, where typer would draw a usage box over several lines. Callers that ask for
    ``standalone_mode=False`` get click's behaviour unchanged."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        def call(standalone: bool) -> Any:
            return super(OneLineErrorGroup, self).main(
                args, prog_name, complete_var, standalone_mode=standalone, windows_expand_args=windows_expand_args,
                **extra,
            )

        if not standalone_mode:
            return call(False)
        try:
            result = call(False)
        except _click_exception_class() as err:
            code = getattr(err, "exit_code", EXIT_BAD_INPUT)
            if type(err).__name__ == "NoArgsIsHelpError":  # `homie` or `homie sim` alone: the help, as typer shows it
                typer.echo(usage_help(err))
                sys.exit(code)
            typer.secho(f"error: {usage_line(err)}", fg="red", err=True)
            sys.exit(code)
        except typer.Abort:
            typer.secho("error: aborted", fg="red", err=True)
            sys.exit(EXIT_ENVIRONMENT)
        # Without standalone mode click returns the command's value, or the code of a typer.Exit it raised.
        sys.exit(result if isinstance(result, int) else 0)
