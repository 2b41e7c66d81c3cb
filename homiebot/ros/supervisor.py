"""``homie up``: bring up the HomieBot graph as separate node processes and keep it up.

``ros2 launch homie sim.launch.py`` needs ``launch`` / ``launch_ros``, which are not on PyPI. This supervisor
brings up the same graph from the same files (``launch/config/graph.yaml`` for the processes,
``launch/config/homie.yaml`` for their parameters) with the venv's python, and does what launch would:

* starts the nodes in the graph's order, each in its own process group, with the ROS 2 overlay environment
  (:func:`homiebot.ros.environment.overlay_environment`) and ``--ros-args --params-file ... -p name:=value``;
* restarts a node that died, by its policy (``never`` / ``on-failure`` / ``always``, at most
  ``max_restarts`` times), and shuts the graph down when a ``required`` node stopped for good;
* shuts down cleanly on request (Ctrl-C / SIGTERM handled by the caller): SIGINT to every node in reverse
  order (rclpy's own clean shutdown), SIGTERM after ``stop_timeout_s``, SIGKILL as the last resort;
* asks the kernel to end the children if the supervisor itself dies (``PR_SET_PDEATHSIG``), so no orphan
  node keeps a DDS domain busy;
* before the first start, removes the Fast DDS shared-memory files that killed processes left in /dev/shm
  (:mod:`homiebot.ros.shm`; a few milliseconds), when the graph's Fast DDS uses shared memory.

A hand-written supervisor rather than a library: the process semantics (ROS arguments, the graph file,
restart policies, rclpy's SIGINT shutdown) are this project's, and the standard library's ``subprocess``
covers the rest. It needs no rclpy itself.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from homiebot.files import load_yaml
from homiebot.process import die_with_parent
from homiebot.ros.environment import overlay_environment, repository_root
from homiebot.ros.shm import DEFAULT_SHM_DIR, ShmDirectoryError, clean_stale_segments, fastdds_uses_shm

log = logging.getLogger(__name__)

LAUNCH_DIR = repository_root() / "launch"
DEFAULT_GRAPH = LAUNCH_DIR / "config" / "graph.yaml"
DEFAULT_PARAMS = LAUNCH_DIR / "config" / "homie.yaml"
#: The graph of a two-agent episode (PARTNR's robot and human): the standard graph, the sim bridge with the human,
#: and the human's three executors remapped into /human (docs/ros.md, "Two agents").
PAIR_GRAPH = LAUNCH_DIR / "config" / "graph_pair.yaml"
#: The graph on a real robot: no sim bridge, the wait for the robot profile's interfaces (docs/robots.md).
ROBOT_GRAPH = LAUNCH_DIR / "config" / "graph_robot.yaml"


class GraphConfigError(ValueError):
    """graph.yaml or homie.yaml is missing or invalid; the message names the file and the field."""


class NodeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    package: str
    executable: str
    module: str = Field(description="python -m MODULE starts the node")
    restart: Literal["never", "on-failure", "always"] = "on-failure"
    max_restarts: int = Field(3, ge=0)
    required: bool = False
    nice: int = Field(0, ge=0, le=19, description="Scheduling niceness (homie up only): for nodes off the planner's path")
    remaps: list[str] = Field(default_factory=list, description="ROS remapping rules FROM:=TO (--ros-args -r), e.g. "
                              "__node:=human_executor, /navigate:=/human/navigate: the same node in another agent's place")
    parameters: dict[str, Any] = Field(default_factory=dict, description="Parameters this graph sets on the node "
                                       "(-p, after the params file, before the caller's overrides)")


class GraphSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    nodes: list[NodeSpec] = Field(min_length=1)

    def node(self, name: str) -> NodeSpec:
        for spec in self.nodes:
            if spec.name == name:
                return spec
        raise GraphConfigError(f"no node named {name!r} in the graph; nodes: {', '.join(n.name for n in self.nodes)}")


def _load_yaml(path: Path) -> Any:
    try:
        return load_yaml(path.read_text())
    except FileNotFoundError:
        raise GraphConfigError(f"{path}: file not found") from None
    except yaml.YAMLError as err:
        raise GraphConfigError(f"{path}: not valid YAML: {err}") from None


def load_graph(path: str | os.PathLike[str] = DEFAULT_GRAPH) -> GraphSpec:
    path = Path(path)
    try:
        graph = GraphSpec.model_validate(_load_yaml(path))
    except ValidationError as err:
        details = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()[:10])
        raise GraphConfigError(f"{path}: {details}") from None
    names = [n.name for n in graph.nodes]
    if len(set(names)) != len(names):
        raise GraphConfigError(f"{path}: node names must be unique, got {names}")
    return graph


def check_params_file(path: str | os.PathLike[str], graph: GraphSpec) -> dict[str, dict[str, Any]]:
    """Validate the params file's shape (``node: {ros__parameters: {...}}``) and return it; a section for a
    node that is not in the graph is an error (a typo would otherwise be ignored silently)."""
    path = Path(path)
    data = _load_yaml(path)
    if not isinstance(data, dict):
        raise GraphConfigError(f"{path}: expected a mapping of node names")
    known = {n.name for n in graph.nodes}
    if Path(DEFAULT_GRAPH).is_file():  # a subset of the standard graph may share the standard params file
        known |= {n.name for n in GraphSpec.model_validate(_load_yaml(Path(DEFAULT_GRAPH))).nodes}
    params: dict[str, dict[str, Any]] = {}
    for node, section in data.items():
        if node not in known:
            raise GraphConfigError(f"{path}: section {node!r} is not a node of the graph ({', '.join(sorted(known))})")
        if not isinstance(section, dict) or set(section) != {"ros__parameters"} or not isinstance(section["ros__parameters"], dict):
            raise GraphConfigError(f"{path}: section {node!r} must hold exactly one mapping 'ros__parameters'")
        params[node] = section["ros__parameters"]
    return params


def ros_parameter_argument(name: str, value: Any) -> str:
    """``name:=value`` for ``--ros-args -p``: the value is YAML; strings are quoted so that "true" or "7"
    stay strings (JSON's quoting is valid YAML)."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (int, float)):
        text = repr(value)
    elif isinstance(value, (list, tuple)):
        text = "[" + ", ".join(json.dumps(v) for v in value) + "]"
    else:
        text = json.dumps(str(value))
    return f"{name}:={text}"


def _child_setup(nice: int):  # the returned function runs in the child between fork and exec
    supervisor_pid = os.getpid()

    def setup() -> None:
        # SIGTERM, not SIGKILL: a node left by a dead supervisor still shuts its middleware down cleanly.
        die_with_parent(signal.SIGTERM, parent_pid=supervisor_pid)
        if nice:
            os.nice(nice)

    return setup


@dataclass
class NodeProcess:
    spec: NodeSpec
    popen: subprocess.Popen | None = None
    restarts: int = 0
    exit_codes: list[int] = field(default_factory=list)
    finished: bool = False  # stopped for good (no restart will follow)
    log_path: Path | None = None

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None


@dataclass(frozen=True)
class SupervisorEvent:
    node: str
    kind: Literal["started", "exited", "restarting", "gave_up"]
    detail: str = ""


class Supervisor:
    """Start, watch, restart and stop the graph's node processes (see the module docstring)."""

    def __init__(
        self,
        graph: GraphSpec,
        params_file: str | os.PathLike[str] = DEFAULT_PARAMS,
        *,
        overrides: Mapping[str, Mapping[str, Any]] | None = None,
        env: Mapping[str, str] | None = None,
        log_dir: str | os.PathLike[str] | None = None,
        python: str = sys.executable,
        stop_timeout_s: float = 10.0,
        restart_delay_s: float = 0.5,
        on_event: Callable[[SupervisorEvent], None] | None = None,
        shm_dir: str | os.PathLike[str] | None = DEFAULT_SHM_DIR,
    ) -> None:
        self.graph = graph
        self.params_file = Path(params_file).resolve()
        check_params_file(self.params_file, graph)
        self.overrides = {k: dict(v) for k, v in (overrides or {}).items()}
        for node in self.overrides:
            graph.node(node)  # unknown node names are errors
        self.env = dict(env) if env is not None else overlay_environment()
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self.python = python
        self.stop_timeout_s = stop_timeout_s
        self.restart_delay_s = restart_delay_s
        self.on_event = on_event
        self.processes = {spec.name: NodeProcess(spec) for spec in graph.nodes}
        self._log_handles: dict[str, Any] = {}
        #: Where stale Fast DDS shared-memory files are removed at start (None: leave shared memory alone).
        self.shm_dir = Path(shm_dir) if shm_dir is not None else None

    # ------------------------------------------------------------------------------------ lifecycle

    def command(self, spec: NodeSpec) -> list[str]:
        arguments = [self.python, "-m", spec.module, "--ros-args", "--params-file", str(self.params_file)]
        for rule in spec.remaps:
            arguments += ["-r", rule]
        for name, value in {**spec.parameters, **self.overrides.get(spec.name, {})}.items():
            arguments += ["-p", ros_parameter_argument(name, value)]
        return arguments

    def _emit(self, node: str, kind, detail: str = "") -> None:
        event = SupervisorEvent(node, kind, detail)
        log.info("%s %s %s", node, kind, detail)
        if self.on_event is not None:
            self.on_event(event)

    def _spawn(self, process: NodeProcess) -> None:
        spec = process.spec
        stdout: Any = None
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            process.log_path = self.log_dir / f"{spec.name}.log"
            handle = self._log_handles.get(spec.name)
            if handle is None:
                handle = self._log_handles[spec.name] = open(process.log_path, "ab")
            stdout = handle
        process.popen = subprocess.Popen(
            self.command(spec),
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.STDOUT if stdout is not None else None,
            start_new_session=True,  # a terminal's Ctrl-C reaches the supervisor only; it stops the nodes in order
            preexec_fn=_child_setup(spec.nice),
        )
        self._emit(spec.name, "started", f"pid {process.popen.pid}")

    def start(self) -> None:
        self.clean_shared_memory()
        for process in self.processes.values():
            self._spawn(process)

    def clean_shared_memory(self) -> None:
        """Remove what killed Fast DDS processes left in ``shm_dir`` (segments whose lock no live process
        holds), so that a machine where nodes were SIGKILLed does not fill its /dev/shm run after run. Never
        fails the start: a problem is logged."""
        if self.shm_dir is None or not fastdds_uses_shm(self.env):
            return
        try:
            report = clean_stale_segments(self.shm_dir)
        except (ShmDirectoryError, OSError) as err:
            log.warning("shared memory not cleaned: %s", err)
            return
        log.info("shared memory: removed %d stale Fast DDS segments/ports (%d files, %.1f MiB) in %s, %d in use (%.0f ms)",
                 len(report.removed), len(report.files_removed), report.bytes_freed / 2**20, report.directory,
                 len(report.in_use), report.elapsed_s * 1000)
        for error in report.errors:
            log.warning("shared memory: %s", error)

    def poll(self) -> list[SupervisorEvent]:
        """Reap exited nodes and restart them by policy. Returns what happened."""
        events: list[SupervisorEvent] = []
        for process in self.processes.values():
            if process.finished or process.popen is None or process.popen.poll() is None:
                continue
            code = process.popen.returncode
            process.exit_codes.append(code)
            spec = process.spec
            how = f"exit code {code}" if code >= 0 else f"signal {signal.Signals(-code).name}"
            events.append(SupervisorEvent(spec.name, "exited", how))
            self._emit(spec.name, "exited", how)
            wants_restart = spec.restart == "always" or (spec.restart == "on-failure" and code != 0)
            if wants_restart and process.restarts < spec.max_restarts:
                process.restarts += 1
                detail = f"restart {process.restarts}/{spec.max_restarts} after {how}"
                events.append(SupervisorEvent(spec.name, "restarting", detail))
                self._emit(spec.name, "restarting", detail)
                time.sleep(self.restart_delay_s)
                self._spawn(process)
            else:
                process.finished = True
                if wants_restart:
                    detail = f"gave up after {process.restarts} restarts"
                    events.append(SupervisorEvent(spec.name, "gave_up", detail))
                    self._emit(spec.name, "gave_up", detail)
        return events

    def required_finished(self) -> NodeProcess | None:
        """The first required node that stopped for good (the graph cannot go on without it)."""
        for process in self.processes.values():
            if process.spec.required and process.finished:
                return process
        return None

    def run(self, should_stop: Callable[[], bool], poll_interval_s: float = 0.1, timeout_s: float | None = None) -> NodeProcess | None:
        """Watch the graph until ``should_stop()``, a required node stopped for good, or ``timeout_s``.
        Returns the required node that ended the run, if one did. Does not stop the graph: call :meth:`stop`."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not should_stop():
            self.poll()
            finished = self.required_finished()
            if finished is not None:
                return finished
            if deadline is not None and time.monotonic() > deadline:
                return None
            time.sleep(poll_interval_s)
        return None

    def stop(self) -> dict[str, int | None]:
        """SIGINT every running node in reverse start order, then SIGTERM / SIGKILL stragglers.
        Returns each node's last exit code."""
        running = [p for p in reversed(list(self.processes.values())) if p.running]
        for process in running:
            self._signal(process, signal.SIGINT)
        deadline = time.monotonic() + self.stop_timeout_s
        for sig, wait_until in ((signal.SIGTERM, deadline), (signal.SIGKILL, deadline + 3.0)):
            for process in running:
                remaining = wait_until - time.monotonic()
                try:
                    process.popen.wait(timeout=max(remaining, 0.0))  # type: ignore[union-attr]
                except subprocess.TimeoutExpired:
                    log.warning("%s did not stop in time: %s", process.spec.name, sig.name)
                    self._signal(process, sig)
        for process in running:
            process.popen.wait()  # type: ignore[union-attr]
            process.finished = True
        for handle in self._log_handles.values():
            handle.close()
        self._log_handles.clear()
        return {name: (p.popen.returncode if p.popen is not None else None) for name, p in self.processes.items()}

    @staticmethod
    def _signal(process: NodeProcess, sig: signal.Signals) -> None:
        try:
            os.killpg(process.popen.pid, sig)  # type: ignore[union-attr]
        except ProcessLookupError:
            pass

    def __enter__(self) -> Supervisor:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()
