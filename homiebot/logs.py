"""Logging set-up for the command line and its worker processes.

Tracebacks in log lines are for developers: without ``--verbose`` a logged exception shows as its one-line
message (the command's own error line says what to do), with ``--verbose`` in full.
"""

from __future__ import annotations

import logging


class ConciseFormatter(logging.Formatter):
    """A formatter that appends ``: <exception message>`` instead of a traceback unless ``tracebacks``."""

    def __init__(self, fmt: str, *, tracebacks: bool) -> None:
        super().__init__(fmt)
        self.tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        if self.tracebacks or not record.exc_info:
            return super().format(record)
        exc = record.exc_info[1]
        # Format a copy without the exception, so other handlers of the same record still see it.
        plain = logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None})
        text = super().format(plain)
        return f"{text}: {type(exc).__name__}: {exc}" if exc is not None else text


#: HTTP clients that log every request at INFO ("HTTP Request: GET .../models 200"): a command's own lines say what
#: happened, so these speak only at WARNING unless ``--verbose`` asks for DEBUG.
#: PyOpenGL (imported by MuJoCo under MUJOCO_GL=egl) says at INFO that its optional C accelerator is not installed.
CHATTY_LIBRARIES = ("httpx", "httpx2", "httpcore", "openai", "OpenGL.acceleratesupport")


def configure_logging(level: int, fmt: str, *, tracebacks: bool | None = None) -> None:
    """Log to stderr at ``level``; tracebacks only when asked (by default: at DEBUG level)."""
    handler = logging.StreamHandler()
    handler.setFormatter(ConciseFormatter(fmt, tracebacks=level <= logging.DEBUG if tracebacks is None else tracebacks))
    logging.basicConfig(level=level, handlers=[handler])
    for name in CHATTY_LIBRARIES:
        logging.getLogger(name).setLevel(level if level <= logging.DEBUG else max(level, logging.WARNING))
