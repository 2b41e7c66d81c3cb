"""The one ``main`` every long-running node shares: logging, rclpy init, a single-threaded executor, clean exit.

Single-threaded on purpose: the sim bridge's OpenGL context belongs to the thread that made it current, and
rclpy's action client races under a multi-threaded executor (docs/ros.md).

Shutdown on a signal (:class:`ShutdownSignals`): a terminal's Ctrl-C under ``ros2 launch`` reaches a node twice,
once from the terminal (SIGINT to the whole process group) and once from launch, which forwards SIGINT to each
process it started; the second one used to land in ``destroy_node`` as a ``KeyboardInterrupt`` traceback and exit
-2. The first SIGINT or SIGTERM now ends the spin (rclpy's own handlers, installed by ``rclpy.init`` on top of
these, also wake the executor and shut the context down), and every later one is ignored while the node shuts
down (and while Python finalizes), so the process exits 0 without a traceback.
"""

from __future__ import annotations

import faulthandler
import logging
import signal
from collections.abc import Callable
from types import FrameType

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node

#: The signals that end a node: Ctrl-C and a supervisor's or launch's SIGTERM.
SHUTDOWN_SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: Seconds a node's teardown may take before it writes every thread's stack to its stderr (its log under
#: ``homie up``). A clean teardown takes well under a second; the supervisor SIGKILLs a node 13 s after its SIGINT
#: (homiebot.ros.supervisor), and a dump before that says where a hung one was stuck.
TEARDOWN_STACK_DUMP_S = 6.0


class ShutdownSignals:
    """SIGINT / SIGTERM handling of a node process: the first one raises ``KeyboardInterrupt`` in the main thread
    (which ends the spin), the later ones only count. Install it before ``rclpy.init`` so that rclpy's handlers,
    which wake the executor and shut its context down, chain to it."""

    def __init__(self) -> None:
        self.received = 0

    @property
    def requested(self) -> bool:
        return self.received > 0

    def install(self) -> ShutdownSignals:
        for sig in SHUTDOWN_SIGNALS:
            signal.signal(sig, self._handle)
        return self

    def quiet(self) -> None:
        """The node is shutting down (for any reason): from now on the signals are ignored. Ignored, not only
        counted: Python's finalization puts a handled signal back to its default action (which would end the
        process with -2 after a clean shutdown) but leaves an ignored one ignored."""
        for sig in SHUTDOWN_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        # Ignored signals cannot end a teardown that hangs (in the middleware, say); only SIGKILL does, and leaves
        # no trace. The standard library's watchdog leaves one: every thread's stack, if the process still runs.
        faulthandler.dump_traceback_later(TEARDOWN_STACK_DUMP_S, exit=False)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received += 1
        if self.received == 1:
            raise KeyboardInterrupt


def spin_node(make_node: Callable[[], Node], args: list[str] | None = None) -> None:
    """Build the node after ``rclpy.init`` and spin it until Ctrl-C, SIGTERM or an external shutdown."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    signals = ShutdownSignals().install()
    node: Node | None = None
    try:
        rclpy.init(args=args)
        node = make_node()
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        if not signals.requested:
            raise
        # A signal shut the context down while the node was being built: that is a shutdown, not a failure.
    finally:
        signals.quiet()
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
