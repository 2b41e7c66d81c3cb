"""``homie up`` (bring up the ROS 2 graph), ``homie bag`` (record, play, inspect and replay rosbag2 files) and
``homie ros`` (maintenance: ``clean-shm`` removes the shared-memory files of killed Fast DDS processes).

Exit codes: 0 success (``up``: the episode ran to End or the round limit; the result says whether the task
succeeded); 1 the graph or the episode failed (a node gave up, the planner hit an error, a bag could not be
written); 2 bad input (unknown task, bad config file, missing or corrupt bag, bad option); 3 a node did not
answer within its deadline (the planner's timeout); 130 interrupted (Ctrl-C / SIGTERM), after a clean
shutdown. Messages go to stderr.

The commands that talk ROS 2 (``up``, ``bag record``, ``bag play``, ``bag replay``) need the overlay built by
``scripts/setup_ros.sh``; they re-execute themselves once with its environment when it is not sourced.
``bag info`` and ``ros clean-shm`` read files only.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from pathlib import Path
from typing import Any

import typer

from homiebot.cli.failures import EXIT_ENVIRONMENT, EXIT_INTERRUPTED, check_output
from homiebot.cli.failures import report as _fail
from homiebot.cli.options import (
    ModelOptions,
    RecoveryOptions,
    articulation_option,
    deprecated,
    hidden,
    out_option,
    parse_articulation,
    skill_model_option,
    skills_option,
)
from homiebot.config import PerceptionMode, SkillsMode, choices, decode_mode, perception_mode
from homiebot.ros.shm import DEFAULT_MIN_AGE_S, DEFAULT_SHM_DIR

log = logging.getLogger(__name__)

EXIT_FAILED = EXIT_ENVIRONMENT
EXIT_TIMEOUT = 3


def _need_overlay() -> None:
    from homiebot.ros.environment import RosEnvironmentError, reexec_with_overlay

    try:
        reexec_with_overlay()
    except RosEnvironmentError as err:
        raise _fail(str(err), EXIT_FAILED) from None


def _need_bag(bag: Path) -> None:
    """A missing bag is bad input (exit 2), said before the ROS environment is looked for."""
    if not bag.exists():
        raise _fail(f"no bag at {bag} (give a bag directory or its .mcap file)")


class _StopFlag:
    """Ctrl-C / SIGTERM -> a flag the main loop polls, so shutdown happens in order, not mid-call."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signal_name: str | None = None
        self._previous: dict[signal.Signals, Any] = {}

    def __enter__(self) -> _StopFlag:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *_exc: object) -> None:
        # Put the caller's handlers back: the commands also run in-process (the Python API, CliRunner), where a
        # handler left behind would swallow the caller's Ctrl-C. The flag keeps what it saw.
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()

    def _handle(self, signum, _frame) -> None:
        self.signal_name = signal.Signals(signum).name
        self.event.set()

    def __call__(self) -> bool:
        return self.event.is_set()


def _result_table(result: dict[str, Any], human: bool = False) -> Any:
    """The rounds of ``homie up``'s result file as a table: the robot's, or the human's of a two-agent episode
    (``partner_rounds``)."""
    from rich.markup import escape
    from rich.table import Table

    from homiebot.report.shown import shown_feedback, shown_inventory, shown_model

    table = Table(title=escape(f"{result.get('task_id') or 'free text'}: {result.get('instruction', '')}"))
    for column in ("#", "subtask", "model", "code", "feedback", "inventory", "ms"):
        table.add_column(column, overflow="fold")
    for r in result.get("partner_rounds" if human else "rounds", []):
        table.add_row(
            # "[pick, mug]" is not rich markup: subtasks and messages are printed as they are.
            str(r["index"]), escape(r["subtask"]), shown_model(r["model"]), r["code"],
            escape(shown_feedback(r["message"], r["code"])), shown_inventory(r["inventory"]),
            f"{r['timings'].get('round_s', 0.0) * 1000:.0f}", style=None if r["code"] == "OK" else "yellow",
        )
    return table


#: Why ``homie up`` refuses --perception with two agents (docs/ros.md, "Two agents"). PARTNR's decentralized agents
#: each keep their own world graph; the graph's one perception node is the robot's (it reads /homie/views and serves
#: the robot's executor), so the human would plan and ground on the scene's names while the robot grounds on what
#: it saw. The in-process loop gives each agent its own graph (homiebot/agent/agent_graphs.py).
PAIR_PERCEPTION_REFUSAL = (
    "--perception with two agents: the graph's one perception node sees through the robot's cameras only "
    "(/homie/views) and grounds only the robot's executor, so the human would act on the scene's names; a world graph "
    "per agent runs in-process: homie eval --agents robot+human --perception privileged|conceptgraph (docs/ros.md, "
    "\"Two agents\")"
)


def _check_pair(planner: str | None, partner: str | None, mode: str | None, options: dict[str, Any],
                recovery: str | None) -> None:
    """Two agents: the pair's planners are built once here (and closed), so that a bad name, mode or pairing
    is refused in one line before anything starts, as homie eval --agents does."""
    from homiebot.multiagent.pair import make_pair_planners

    if recovery is not None:
        raise _fail("--recovery wraps one agent's planner; it does not take --partner-planner / --mode")
    try:
        for built in make_pair_planners(mode or "decentralized", planner or "expert", partner or "expert", options):
            built.close()
    except (ValueError, KeyError, TypeError) as err:
        raise _fail(str(err).strip("'\"")) from None


#: The pair's planners that are not built from the registry with the planner options (homiebot.multiagent.pair._one).
_PAIR_OWN_PLANNERS = frozenset({"expert", "scripted"})


def _check_planner(name: str, options: dict[str, Any]) -> None:
    """A planner's configuration from its options and its cheap look outside the process (its server, its model
    folder): :func:`homiebot.planner.registry.configure_planner` and
    :func:`~homiebot.planner.registry.check_planner_config`, as homie run does it. A bad option is exit 2, a server
    that does not answer exit 1 (the backend's own error, mapped by homiebot.cli.failures)."""
    from homiebot.planner.registry import PlannerError, check_planner_config, configure_planner

    try:
        check_planner_config(configure_planner(name, options))
    except PlannerError as err:
        raise _fail(str(err)) from None


def _params_options(params: Path, planner_params: dict[str, Any]) -> dict[str, Any]:
    """The planner options of the planner node's parameter file (a JSON object in ``planner_options``)."""
    text = planner_params.get("planner_options") or "{}"
    try:
        options = json.loads(text) if isinstance(text, str) else text
    except json.JSONDecodeError as err:
        raise _fail(f"{params}: planner_node.planner_options is not JSON: {err}") from None
    if not isinstance(options, dict):
        raise _fail(f"{params}: planner_node.planner_options must be a JSON object")
    return options


def _serves_human(graph: Any) -> bool:
    """Whether a graph has PARTNR's human: a sim bridge with ``human: true`` (launch/config/graph_pair.yaml)."""
    return any(node.name == "sim_bridge" and bool(node.parameters.get("human")) for node in graph.nodes)


def register(app: typer.Typer) -> None:
    """Add ``homie up``, ``homie bag`` and ``homie ros``."""
    up_app = typer.Typer(help="Bring up the HomieBot ROS 2 graph (the same graph as `ros2 launch homie sim.launch.py`).",
                         no_args_is_help=True)
    bag_app = typer.Typer(help="Record, play, inspect and replay rosbag2 (MCAP) files of the graph.", no_args_is_help=True)
    ros_app = typer.Typer(help="ROS 2 maintenance on this machine.", no_args_is_help=True)
    app.add_typer(up_app, name="up")
    app.add_typer(bag_app, name="bag")
    app.add_typer(ros_app, name="ros")

    @up_app.command("sim")
    def up_sim(
        task_id: str | None = typer.Option(None, "--task", "-t", help="Built-in task id: run it to the end, then shut down."),
        instruction: str | None = typer.Argument(None, help="A free-text instruction (with --scene; instead of --task), as homie run takes it."),
        instruction_option: str | None = hidden("--instruction"),
        scene: str | None = typer.Option(None, "--scene", "-s", help="Scene (overrides the task's)."),
        planner: str | None = typer.Option(None, "--planner", help="Planner name (default: config/homie.yaml); with two agents the robot's (expert, react or a registry name)."),
        partner_planner: str | None = typer.Option(None, "--partner-planner", help="Two agents (PARTNR's human beside the robot, docs/ros.md): the human's planner (expert, react, scripted or a registry name); runs launch/config/graph_pair.yaml unless --graph names another graph with the human."),
        mode: str | None = typer.Option(None, "--mode", help="Two agents: decentralized (one planner each, default) or centralized (one planner for both)."),
        simulator: str | None = typer.Option(None, "--simulator", help="Simulator backend (default: config/homie.yaml)."),
        seed: int = typer.Option(0, "--seed", help="Run index: the scene seed is the task's seed + this."),
        noise: str | None = typer.Option(None, "--noise", help="Skill execution noise of the sim bridge: off, emmoe (EMMOE table 4) or a preset name (default: config/homie.yaml, noiseless)."),
        skills: str | None = skills_option(),
        articulation: str | None = articulation_option(),
        skill_model: list[str] = skill_model_option(),
        out: Path | None = typer.Option(None, "--out", "-o", help="Run directory (node logs, result.json, bag). Default runs/up-<time>."),
        params: Path | None = typer.Option(None, "--params", help="Node parameters (default launch/config/homie.yaml)."),
        graph_file: Path | None = typer.Option(None, "--graph", help="Node processes (default launch/config/graph.yaml)."),
        domain_id: int | None = typer.Option(None, "--domain-id", min=0, max=232, help="ROS_DOMAIN_ID for the graph."),
        localhost: bool = typer.Option(True, "--localhost/--network", help="Keep DDS discovery on this machine."),
        record: bool = typer.Option(False, "--record", help="Also record the graph's topics to <out>/bag (MCAP)."),
        timeout: float | None = typer.Option(None, "--timeout", min=1.0, help="Give up after this many seconds (exit 3)."),
        execute_timeout: float | None = typer.Option(None, "--execute-timeout", min=0.1, help="Planner's deadline per subtask (s)."),
        images: bool | None = typer.Option(None, "--images/--no-images", help="Keep the four views of every round in <out>/record (with --skills physical also the arm's reaching views, docs/robots.md). Default: on with --record, off without."),
        live: bool = typer.Option(False, "--live", help="The planner node serves the episode live to the Foxglove app (docs/reports.md)."),
        live_port: int = typer.Option(8765, "--live-port", min=1, max=65535, help="--live: the port on 127.0.0.1."),
        base_url: str | None = ModelOptions.base_url(),
        model: str | None = ModelOptions.model(),
        adapter: Path | None = ModelOptions.adapter(),
        api_key_env: str | None = ModelOptions.api_key_env(),
        constrained: bool | None = ModelOptions.constrained(),
        decode: str | None = ModelOptions.decode(),
        planner_option: list[str] = ModelOptions.options(),
        perception: str = typer.Option(PerceptionMode.OFF.value, "--perception", help=f"World graph the executor grounds through: {choices(PerceptionMode)} (off: the scene's names; otherwise the perception node's graph)."),
        recovery: str | None = RecoveryOptions.recovery(),
        recovery_stages: str | None = RecoveryOptions.stages(),
        recovery_search: bool | None = RecoveryOptions.search(),
        exit_when_done: bool = typer.Option(False, "--exit-when-done", help="Without --task: run the first task sent on /homie/task, then shut down (with --task or an INSTRUCTION the graph always does)."),
    ) -> None:
        """Start the node processes, run a task through the graph (or wait for tasks on /homie/task), shut down cleanly.

        With --task or an INSTRUCTION (or the first task on /homie/task with --exit-when-done) the episode's record
        (summary.json, rounds.jsonl, conversation.json; the views with --images) is written to <out>/record, as
        homie run writes it, for homie metrics and homie report."""
        from rich.console import Console

        from homiebot.ros.environment import RosEnvironmentError, find_overlay, overlay_environment
        from homiebot.ros.supervisor import DEFAULT_PARAMS, Supervisor
        from homiebot.tasks.suite import TaskError, get_task

        console = Console(stderr=True)
        instruction = deprecated("--instruction", "the INSTRUCTION argument", instruction_option, instruction)
        if instruction and not (scene or task_id):
            raise _fail("a free-text --instruction needs --scene")
        if noise is not None:
            from homiebot.skills import preset_name

            try:
                noise = preset_name(noise, what="--noise")
            except ValueError as err:
                raise _fail(str(err)) from None
        if skills is not None and skills not in {m.value for m in SkillsMode}:
            raise _fail(f"--skills {skills!r}: use {choices(SkillsMode)}")
        from homiebot.ros.policy_nodes import PolicyNodes

        try:  # each policy in its own node (docs/skills.md); its folder checked here, loaded by the node
            parse_articulation(articulation, skills)  # as homie run and homie eval refuse it (docs/robots.md)
            policies = PolicyNodes.checked(skill_model, skills)  # the launch file's skill_models:= checks the same
        except ValueError as err:
            raise _fail(str(err)) from None
        if task_id:
            try:
                get_task(task_id)
            except TaskError as err:
                raise _fail(str(err)) from None
        pair_names = {"expert", "react", "scripted"}  # names the pair knows beside the registry (multiagent.pair)
        for name in (planner, partner_planner):
            if name is not None and not (partner_planner is not None and name in pair_names):
                from homiebot.planner.registry import PlannerError, planner_class

                try:
                    planner_class(name)
                except PlannerError as err:
                    raise _fail(str(err)) from None
        try:
            perception_mode(perception)
            if decode is not None:
                decode_mode(decode)
        except ValueError as err:
            raise _fail(str(err)) from None
        from homiebot.cli.run import _parse_options

        options = _parse_options(planner_option)
        chosen = {"base_url": base_url, "model": model, "api_key_env": api_key_env, "constrained": constrained,
                  "decode": decode}
        options.update({key: value for key, value in chosen.items() if value is not None})
        from homiebot.cli.train_adapter import AdapterOptionError, adapter_option

        try:
            options.update(adapter_option(adapter, planner, options))
        except AdapterOptionError as err:
            raise _fail(str(err)) from None
        from homiebot.recovery.cli import recovery_planner

        try:  # refused here in one line; the planner node builds the same wrapper (homiebot.recovery.cli)
            recovery_planner(planner or "", options, recovery, recovery_stages, recovery_search)
        except ValueError as err:
            raise _fail(str(err)) from None
        from homiebot.ros.supervisor import (
            DEFAULT_GRAPH,
            PAIR_GRAPH,
            GraphConfigError,
            check_params_file,
            load_graph,
        )

        two_agents = partner_planner is not None or mode is not None
        try:  # a bad graph or parameter file is bad input, said before anything starts
            graph = load_graph(graph_file or (PAIR_GRAPH if two_agents else DEFAULT_GRAPH))
            graph = policies.with_nodes(graph)
            node_params = check_params_file(params or DEFAULT_PARAMS, graph)
        except GraphConfigError as err:
            raise _fail(str(err)) from None
        # The planner node's planner and options: these flags, else its parameter file's (launch/config/homie.yaml).
        planner_params = node_params.get("planner_node", {})
        robot_planner = planner or str(planner_params.get("planner") or "expert")
        if not two_agents and task_id and robot_planner == "expert":
            from homiebot.cli.run import task_expert

            robot_planner = task_expert(task_id)  # a PARTNR-style task's expert switches and cleans, as in homie run
        checked_options = options or _params_options(params or DEFAULT_PARAMS, planner_params)
        # Typed options and a look at each planner's server (exit 1 when it does not answer), before the run folder.
        if two_agents:
            for name in (robot_planner, partner_planner or "expert"):
                if name not in _PAIR_OWN_PLANNERS:
                    _check_planner(name, checked_options)
            _check_pair(planner, partner_planner, mode, options, recovery)
        else:
            _check_planner(robot_planner, checked_options)
        if two_agents and not _serves_human(graph):
            raise _fail(f"--partner-planner / --mode: the graph {graph_file} has no human (its sim_bridge needs "
                        f"human: true and the human's executors; launch/config/graph_pair.yaml has them)")
        if perception != PerceptionMode.OFF and (two_agents or _serves_human(graph)):
            raise _fail(PAIR_PERCEPTION_REFUSAL)
        if out is not None:
            check_output(out)
        if live:
            from homiebot.live import live_missing

            if live_missing():
                raise _fail(f"--live: {live_missing()}")
        try:
            env = overlay_environment(find_overlay())
        except RosEnvironmentError as err:
            raise _fail(str(err), EXIT_FAILED) from None
        if domain_id is not None:
            env["ROS_DOMAIN_ID"] = str(domain_id)
        if localhost:
            env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
        run_dir = out or Path("runs") / time.strftime("up-%Y%m%d-%H%M%S")
        run_dir.mkdir(parents=True, exist_ok=True)
        result_path = (run_dir / "result.json").resolve()
        result_path.unlink(missing_ok=True)

        # A recorded run is one a user will look at: its record keeps the views unless --no-images says otherwise.
        images = record if images is None else images
        planner_overrides: dict[str, Any] = {}
        if task_id or instruction or exit_when_done:
            planner_overrides.update(exit_when_done=True, result_path=str(result_path),
                                     record_dir=str((run_dir / "record").resolve()), record_images=images)
        if task_id or instruction:
            planner_overrides["seed"] = seed
        if options:
            planner_overrides["planner_options"] = json.dumps(options)
        if not two_agents:
            planner = robot_planner  # the task's suite's expert for expert (homiebot.cli.run.task_expert)
        for key, value in (("task", task_id), ("instruction", instruction), ("scene", scene), ("planner", planner),
                           ("execute_timeout_s", execute_timeout), ("recovery", recovery),
                           ("recovery_stages", recovery_stages), ("partner_planner", partner_planner), ("mode", mode)):
            if value is not None:
                planner_overrides[key] = value
        if recovery_search is not None:
            planner_overrides["recovery_search"] = "on" if recovery_search else "off"
        if record:
            planner_overrides["await_subscribers"] = 1  # the recorder: the bag then holds the whole episode
        if live:
            planner_overrides["live_port"] = live_port
            console.print(f"live view: ws://127.0.0.1:{live_port} (Foxglove app: Open connection, layout docs/foxglove/)")
        overrides: dict[str, dict[str, Any]] = {"planner_node": planner_overrides}
        bridge_overrides = {key: value for key, value in (("simulator", simulator), ("noise", noise)) if value}
        if bridge_overrides:
            overrides["sim_bridge"] = bridge_overrides
        if skills is not None:  # the bridge's robot and the executors that drive it (docs/robots.md)
            # The planner node only names the mode in the record's summary (its skills.mode), as homie run does.
            for name in ("sim_bridge", "nav_executor", "manip_executor", "planner_node"):
                if any(node.name == name for node in graph.nodes):
                    overrides.setdefault(name, {})["skills"] = skills
        if articulation is not None:  # how Open and Close run: the manipulation executor's skill servers (physical)
            # or the bridge's /sim/manipulate (oracle), whose skill set takes it too; the planner node records it
            # (docs/robots.md, "Physical skills through the ROS graph").
            for name in ("sim_bridge", "manip_executor", "planner_node"):
                if any(node.name == name for node in graph.nodes):
                    overrides.setdefault(name, {})["articulation"] = articulation
        # The bridge publishes the policies' cameras, the executors forward the slots' Picks and Go tos, the record
        # names the folders (skills.models), as the launch file's skill_models:= sets them.
        for name, given in policies.overrides().items():
            overrides.setdefault(name, {}).update(given)
        if images and any(node.name == "sim_bridge" for node in graph.nodes):
            # The physical skills' reaching views go into the record with the views (docs/robots.md); the bridge
            # renders them only in physical mode.
            overrides.setdefault("sim_bridge", {})["motion_views"] = True
        if perception != PerceptionMode.OFF:  # the executor grounds through perception's graph (ResolveTarget), as homie run does
            overrides["perception"] = {"builder": perception}
            overrides["executor"] = {"grounder": "perception"}
            if any(node.name == "sim_bridge" for node in graph.nodes):
                # Looks on arrival, as homie run takes them with perception (docs/ros.md, "Looks through the graph").
                planner_overrides["looks"] = True
            # A privileged planner speaks perception's names, as in one process (docs/ros.md, "Looks through the graph").
            planner_overrides["perceived_names"] = True
            if skills == SkillsMode.PHYSICAL.value:  # and the physical skills plan with perception's objects
                # (a policy node's stance and target box too, as the in-process slot reads the skills' world)
                policy_nodes = [node.name for node in graph.nodes if node.module == "executor_nodes.policy_node"]
                for name in ("nav_executor", "manip_executor", *policy_nodes):
                    overrides.setdefault(name, {})["perception_service"] = "/perception/perceive_world"
                    # ... and look before each read of it, as homie run does with the image-built graph.
                    overrides[name]["skill_looks"] = perception == PerceptionMode.CONCEPTGRAPH.value
        try:
            # Every other node of the graph is part of the episode: the planner waits for their ready handshake.
            planner_overrides["await_nodes"] = ",".join(n.name for n in graph.nodes if n.name != "planner_node")
            supervisor = Supervisor(
                graph, params or DEFAULT_PARAMS, overrides=overrides, env=env, log_dir=run_dir / "logs",
                on_event=lambda e: console.print(f"[dim]{e.node}[/dim] {e.kind} {e.detail}"),
            )
        except GraphConfigError as err:
            raise _fail(str(err)) from None

        with _StopFlag() as stop:
            recorder = None
            if record:
                import subprocess
                import sys

                ready = run_dir / ".recorder-ready"
                ready.unlink(missing_ok=True)
                recorder = subprocess.Popen(
                    [sys.executable, "-c", "from homiebot.cli import main; main()", "bag", "record", str(run_dir / "bag"),
                     "--overwrite", "--ready-file", str(ready)],
                    env=env, stdin=subprocess.DEVNULL, start_new_session=True,
                )
                # Start the nodes only once the recorder listens: the bag then holds the episode from its first message.
                deadline = time.monotonic() + 30.0
                while not ready.exists() and recorder.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.05)
                ready.unlink(missing_ok=True)
            console.print(f"[bold]homie up sim[/bold]: {len(graph.nodes)} nodes, logs in {run_dir / 'logs'}"
                          f" (ROS_DOMAIN_ID={env.get('ROS_DOMAIN_ID', '0')})")
            ended_by = None
            try:
                supervisor.start()
                ended_by = supervisor.run(stop, timeout_s=timeout)
            finally:
                codes = supervisor.stop()
                if recorder is not None:
                    recorder.send_signal(signal.SIGINT)
                    try:
                        recorder.wait(timeout=15)
                    except Exception:
                        recorder.kill()
        console.print("graph stopped: " + ", ".join(f"{n}={c}" for n, c in codes.items()))

        if stop():
            console.print(f"[yellow]interrupted ({stop.signal_name}); the graph was shut down cleanly[/yellow]")
            raise typer.Exit(EXIT_INTERRUPTED)
        if result_path.exists():
            result = json.loads(result_path.read_text())
            pair = "partner_rounds" in result  # a two-agent episode: both agents' rounds
            if pair:
                console.print(f"[bold]robot[/bold] ({result['planner']}): {len(result['rounds'])} rounds")
            console.print(_result_table(result))
            if pair:
                console.print(f"[bold]human[/bold] ({result['partner_planner']}): {len(result['partner_rounds'])} rounds")
                console.print(_result_table(result, human=True))
            rounds = (f"rounds={len(result['rounds'])}+{len(result['partner_rounds'])} (robot+human)" if pair
                      else f"rounds={len(result['rounds'])}")
            # The episode's one verdict, as homie run, homie metrics and the report show it: the record's
            # summary.json, which the planner node's states recorder judged (homiebot/eval/verdict.py).
            record_dir = run_dir / "record"
            if (record_dir / "summary.json").is_file():
                from homiebot.eval.verdict import outcome_text

                outcome = outcome_text(record_dir)
            else:
                outcome = "ended" if result["ended"] else "did not end"
            console.print(
                f"{outcome}: {rounds} path={result['path_length']:.2f} m wall={result['wall_time_s']:.2f} s  "
                f"-> {result_path}"
            )
            if (run_dir / "record" / "recovery.json").is_file():  # --recovery: the planner node wrote them
                console.print(f"recovery statistics: {run_dir / 'record' / 'recovery.json'}")
            if result.get("timed_out"):
                raise _fail(f"timeout: {result['error']}", EXIT_TIMEOUT)
            if result.get("error"):
                raise _fail(result["error"], EXIT_FAILED)
            return
        if ended_by is None and timeout is not None and (task_id or instruction or exit_when_done):
            raise _fail(f"no result within {timeout:.0f} s", EXIT_TIMEOUT)
        if ended_by is not None and ended_by.exit_codes and ended_by.exit_codes[-1] != 0:
            raise _fail(f"{ended_by.spec.name} stopped with exit code {ended_by.exit_codes[-1]} (log: {ended_by.log_path})", EXIT_FAILED)

    @up_app.command("robot")
    def up_robot(
        robot: str = typer.Option(..., "--robot", help="Robot profile: a built-in name (fetch, spot) or a YAML file (docs/robots.md)."),
        params: Path | None = typer.Option(None, "--params", help="Node parameters (default launch/config/homie.yaml)."),
        graph_file: Path | None = typer.Option(None, "--graph", help="Node processes (default launch/config/graph_robot.yaml)."),
        domain_id: int | None = typer.Option(None, "--domain-id", min=0, max=232, help="ROS_DOMAIN_ID of the robot's graph."),
        localhost: bool = typer.Option(False, "--localhost/--network", help="Discovery on this machine only, or (default) on the network the robot is on."),
        exit_when_done: bool = typer.Option(False, "--exit-when-done", help="Shut down once every interface of the profile is found."),
        timeout: float | None = typer.Option(None, "--timeout", min=1.0, help="Give up after this many seconds (exit 3)."),
    ) -> None:
        """Start the graph on a real robot: no simulator; wait for the robot's interfaces the profile names, one line
        per missing one (name and type), until Ctrl-C (or, with --exit-when-done, until all are found)."""
        from rich.console import Console

        from homiebot.config.robot import RobotProfileError, load_profile, profile_path
        from homiebot.ros.environment import RosEnvironmentError, find_overlay, overlay_environment
        from homiebot.ros.supervisor import DEFAULT_PARAMS, ROBOT_GRAPH, GraphConfigError, Supervisor, load_graph

        console = Console(stderr=True)
        try:
            profile = load_profile(robot)
        except RobotProfileError as err:
            raise _fail(str(err)) from None
        if profile.simulated:
            raise _fail(f"robot profile {profile.name!r} is the simulator's robot: run `homie up sim` for it")
        try:
            graph = load_graph(graph_file or ROBOT_GRAPH)
            graph.node("robot_interfaces")
            env = overlay_environment(find_overlay())
        except GraphConfigError as err:
            raise _fail(str(err)) from None
        except RosEnvironmentError as err:
            raise _fail(str(err), EXIT_FAILED) from None
        if domain_id is not None:
            env["ROS_DOMAIN_ID"] = str(domain_id)
        if localhost:
            env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
        overrides = {"robot_interfaces": {"robot": str(profile_path(robot).resolve()), "exit_when_done": exit_when_done}}
        try:
            # No log folder: the nodes write to this terminal, so the waiting lines are where the user looks.
            supervisor = Supervisor(graph, params or DEFAULT_PARAMS, overrides=overrides, env=env,
                                    on_event=lambda e: console.print(f"[dim]{e.node}[/dim] {e.kind} {e.detail}"))
        except GraphConfigError as err:
            raise _fail(str(err)) from None
        console.print(f"[bold]homie up robot[/bold] {profile.name}: {len(graph.nodes)} nodes, no simulator "
                      f"(ROS_DOMAIN_ID={env.get('ROS_DOMAIN_ID', '0')})")
        ended_by = None
        with _StopFlag() as stop:
            try:
                supervisor.start()
                ended_by = supervisor.run(stop, timeout_s=timeout)
            finally:
                codes = supervisor.stop()
        console.print("graph stopped: " + ", ".join(f"{n}={c}" for n, c in codes.items()))
        if stop():
            console.print(f"[yellow]interrupted ({stop.signal_name}); the graph was shut down cleanly[/yellow]")
            raise typer.Exit(EXIT_INTERRUPTED)
        if ended_by is None:
            raise _fail(f"not every interface of {profile.name!r} was found within {timeout:.0f} s", EXIT_TIMEOUT)
        if ended_by.exit_codes and ended_by.exit_codes[-1] != 0:
            raise _fail(f"{ended_by.spec.name} stopped with exit code {ended_by.exit_codes[-1]}", EXIT_FAILED)

    # ------------------------------------------------------------------------------------------ bags


    @bag_app.command("record")
    def bag_record(
        out: Path | None = out_option("Bag directory to create (rosbag2 with one MCAP file).", required=False),
        output: Path | None = typer.Argument(None, hidden=True, help="Deprecated: --out."),
        topics: list[str] | None = typer.Option(None, "--topic", help="Topics to record (repeatable). Default: every topic."),
        duration: float | None = typer.Option(None, "--duration", min=0.1, help="Stop after this many seconds."),
        until_end: bool = typer.Option(False, "--until-end", help="Stop when /homie/episode_status reports the episode over."),
        overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing bag at OUTPUT."),
        exclude_camera_topics: bool = typer.Option(False, "--no-camera-topics", help="Skip the per-camera image topics (MultiView still holds the views)."),
        ready_file: Path | None = typer.Option(None, "--ready-file", help="Create this file once the recorder listens."),
    ) -> None:
        """Record the graph's topics with raw (serialized) subscriptions into a rosbag2 MCAP bag."""
        output = deprecated("the OUTPUT argument", "--out", output, out)
        if output is None:
            raise _fail("give the bag directory to create: --out DIR")
        check_output(output)
        _need_overlay()
        from homiebot.ros.bag import BagError, record_bag

        with _StopFlag() as stop:
            try:
                summary = record_bag(output, topics=topics or None, duration_s=duration, until_episode_end=until_end,
                                     overwrite=overwrite, should_stop=stop, exclude_camera_topics=exclude_camera_topics,
                                     ready=ready_file.touch if ready_file is not None else None)
            except BagError as err:
                raise _fail(str(err), err.exit_code) from None
        typer.echo(f"recorded {summary.messages} messages on {len(summary.topics)} topics in {summary.duration_s:.2f} s -> {summary.path}")

    @bag_app.command("play")
    def bag_play(
        bag: Path = typer.Argument(..., help="Bag directory (or its .mcap file)."),
        rate: float = typer.Option(1.0, "--rate", min=0.01, help="Playback speed factor (original timing at 1.0)."),
        fast: bool = typer.Option(False, "--fast", help="Publish as fast as possible, ignoring the recorded timing."),
        topics: list[str] | None = typer.Option(None, "--topic", help="Only these topics (repeatable)."),
        wait_subscribers: float = typer.Option(1.0, "--wait", min=0.0, help="At most this many seconds to wait for subscribers; playback starts once every topic has one."),
    ) -> None:
        """Publish a bag's messages again, raw (no deserialization), with the original timing or as fast as possible."""
        _need_bag(bag)
        _need_overlay()
        from homiebot.ros.bag import BagError, play_bag

        with _StopFlag() as stop:
            try:
                summary = play_bag(bag, rate=None if fast else rate, topics=topics or None, wait_s=wait_subscribers, should_stop=stop)
            except BagError as err:
                raise _fail(str(err), err.exit_code) from None
        typer.echo(f"played {summary.messages} messages on {len(summary.topics)} topics in {summary.duration_s:.2f} s")
        if stop():
            raise typer.Exit(EXIT_INTERRUPTED)

    @bag_app.command("info")
    def bag_info(
        bag: Path = typer.Argument(..., help="Bag directory (or its .mcap file)."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    ) -> None:
        """Topics, types, message counts, duration, and the episode the bag holds."""
        from rich.console import Console
        from rich.table import Table

        from homiebot.ros.bag import BagError
        from homiebot.ros.bag import bag_info as read_info

        try:
            info = read_info(bag)
        except BagError as err:
            raise _fail(str(err), err.exit_code) from None
        if as_json:
            typer.echo(json.dumps(info.to_dict(), indent=2))
            return
        console = Console()
        table = Table(title=f"{info.path} ({info.storage}, {info.duration_s:.2f} s, {info.messages} messages)")
        for column in ("topic", "type", "messages", "Hz"):
            table.add_column(column)
        for topic in info.topics:
            table.add_row(topic.name, topic.msgtype, str(topic.count), f"{topic.frequency_hz:.1f}" if topic.frequency_hz else "-")
        console.print(table)
        if info.episode:
            console.print(f"episode: {json.dumps(info.episode)}")

    @bag_app.command("replay")
    def bag_replay(
        bag: Path = typer.Argument(..., help="A bag recorded during an episode (homie up sim --record)."),
        planner: str = typer.Option("expert", "--planner", help="Planner to check against the recorded rounds (with two agents the robot's)."),
        partner_planner: str | None = typer.Option(None, "--partner-planner", help="A bag of a two-agent episode: the human's planner (default expert); both agents' rounds are replayed."),
        mode: str | None = typer.Option(None, "--mode", help="A bag of a two-agent episode: decentralized (default) or centralized, as it was run."),
        planner_option: list[str] = typer.Option([], "--planner-option", "-p", help="Planner option key=value (repeatable), as homie run takes them; with two agents for both planners (e.g. script=... for a scripted human)."),
        out: Path | None = out_option("Write the per-round comparison as JSON.", required=False),
        min_agreement: float = typer.Option(0.0, "--min-agreement", min=0.0, max=1.0,
                                            help="Exit 1 when fewer rounds than this fraction agree (regression gate)."),
    ) -> None:
        """Offline regression: feed the recorded views, states and feedback to a planner, round by round, and
        compare its subtasks with the recorded ones. A bag of a two-agent episode (homie up sim --partner-planner)
        is replayed to a pair of planners, both agents' rounds in the loop's lock-step order."""
        from homiebot.cli.run import _parse_options

        options = _parse_options(planner_option)
        _need_bag(bag)
        if out is not None:
            check_output(out, directory=False)
        _need_overlay()
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table

        from homiebot.planner.registry import PlannerError, build_planner, configure_planner
        from homiebot.ros.bag import BagError
        from homiebot.ros.replay import holds_two_agents, replay_planner

        try:
            pair = holds_two_agents(bag)
        except BagError as err:
            raise _fail(str(err), err.exit_code) from None
        if not pair and (partner_planner is not None or mode is not None):
            raise _fail(f"--partner-planner / --mode: {bag} holds one agent's episode (no human rounds)")
        partner = None
        try:
            if pair:  # the pair's planners, as the planner node builds them (homiebot.multiagent.pair)
                from homiebot.multiagent.pair import make_pair_planners

                planner_obj, partner = make_pair_planners(mode or "decentralized", planner, partner_planner or "expert",
                                                          options)
            else:  # the planner's configuration, checked as homie run checks it, then built
                planner_obj = build_planner(configure_planner(planner, options))
        except (PlannerError, ValueError, KeyError, TypeError) as err:
            raise _fail(str(err).strip("'\"")) from None
        try:
            report = replay_planner(bag, planner_obj, partner=partner)
        except BagError as err:
            raise _fail(str(err), err.exit_code) from None
        agents = [("robot", planner, report.rounds)]
        if partner is not None:
            agents.append(("human", partner_planner or "expert", report.partner_rounds))
        console = Console()
        for agent, name, rounds in agents:
            agreeing = sum(r.agrees for r in rounds) / len(rounds) if rounds else 0.0
            table = Table(title=escape(f"replay of {bag} with {name}" + (f" ({agent})" if pair else "")))
            for column in ("#", "recorded", "replayed", "feedback"):
                table.add_column(column, overflow="fold")
            for r in rounds:
                table.add_row(str(r.index), escape(r.recorded), escape(r.replayed), r.feedback_code,
                              style=None if r.agrees else "yellow")
            console.print(table)
            who = f"the {agent}'s rounds with {name}" if pair else f"{name}"
            console.print(f"{who}: {agreeing:.0%} of {len(rounds)} rounds agree")
        if pair:
            console.print(f"both agents: {report.agreement:.0%} of {len(report.rounds) + len(report.partner_rounds)} rounds agree")
        if out is not None:
            from homiebot.files import atomic_write_json

            atomic_write_json(out, report.to_dict())
        if report.agreement < min_agreement:
            raise _fail(f"agreement {report.agreement:.2f} is below {min_agreement:.2f}", EXIT_FAILED)

    # ------------------------------------------------------------------------------------------ maintenance

    @ros_app.command("clean-shm")
    def ros_clean_shm(
        directory: Path = typer.Option(DEFAULT_SHM_DIR, "--dir", help="Where Fast DDS keeps its shared memory."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Only report what would be removed."),
        min_age: float = typer.Option(DEFAULT_MIN_AGE_S, "--min-age", min=0.0,
                                      help="Leave lock files younger than this (s) alone."),
        list_entries: bool = typer.Option(False, "--list", help="One row per segment / port instead of totals."),
    ) -> None:
        """Remove the shared-memory files that killed Fast DDS processes left behind.

        A segment or port is stale when no live process holds its lock file (the rule of `fastdds shm clean`);
        those of running participants are never touched. Exit 2 when DIR is missing, 1 when a file could not be
        removed."""
        from rich.console import Console
        from rich.table import Table

        from homiebot.ros.shm import ShmDirectoryError, clean_stale_segments

        try:
            report = clean_stale_segments(directory, dry_run=dry_run, min_age_s=min_age)
        except ShmDirectoryError as err:
            raise _fail(str(err)) from None
        verb = "to remove" if dry_run else "removed"
        groups = ((verb, report.removed), ("in use", report.in_use), ("kept", report.kept))
        if list_entries:
            table = Table(title=f"Fast DDS shared memory in {report.directory}")
            for column in ("entry", "kind", "action", "files", "KiB", "why"):
                table.add_column(column, overflow="fold")
            for action, entries in groups:
                for entry in entries:
                    table.add_row(entry.name, entry.kind, action, str(len(entry.files)),
                                  f"{entry.allocated_bytes / 1024:.0f}", entry.reason)
        else:
            table = Table(title=f"Fast DDS shared memory in {report.directory}"
                                + (" (dry run)" if dry_run else ""))
            for column in ("action", "state", "segments", "ports", "files", "MiB"):
                table.add_column(column, justify="left" if column in ("action", "state") else "right")
            for action, entries in groups:
                by_state: dict[str, list] = {}
                for entry in entries:
                    by_state.setdefault(entry.state.value, []).append(entry)
                for state, items in by_state.items():
                    table.add_row(
                        action, state, str(sum(e.kind == "segment" for e in items)),
                        str(sum(e.kind == "port" for e in items)), str(sum(len(e.files) for e in items)),
                        f"{sum(e.allocated_bytes for e in items) / 2**20:.1f}",
                    )
        Console().print(table)
        typer.echo(report.summary())
        if report.errors:
            raise _fail(f"{len(report.errors)} files could not be removed: " + "; ".join(report.errors[:5]), EXIT_FAILED)
