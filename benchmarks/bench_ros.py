"""ROS 2 graph benchmark: per-round cost of the graph against the in-process loop, and MultiView latency.

    source scripts/ros_env.sh
    MUJOCO_GL=egl .venv/bin/python -m benchmarks.bench_ros [--episodes 5] [--messages 60] [--compare-transports]

1. **Per-round overhead.** The same tasks (demo-drawer, demo-green-can; expert planner; four 256x256
   views rendered every round) run in-process (:func:`homiebot.agent.loop.run_episode`) and through the
   graph brought up by :class:`homiebot.ros.supervisor.Supervisor` (six node processes over FastDDS on
   loopback, tasks sent on ``/homie/task``). A warm-up episode of each kind comes first (process start,
   DDS discovery, scene compile are not per-round costs). Per-round time is the planner side's
   ``round_s`` (request -> plan -> execute -> state -> render), measured the same way in both wirings.
   Goal: graph <= 1.2x in-process, or at most 20 ms more per round. The graph runs twice: whole (its
   perception node fuses every 2.9 MB MultiView off the planner's path, but on 2 cores it takes CPU from
   it) and without the perception node, which runs the same components as the in-process loop (planner,
   executor, skills, simulator; the loop's default is no perception).
2. **MultiView latency.** A second process converts an Observation of four 256x256 views to
   ``homie_msgs/MultiView`` and publishes it; this process receives it. Latency = receive time minus the
   header stamp written just before conversion (same clock), so it includes conversion, serialization, DDS
   transport and deserialization into the Python message. Measured with RGB only (what the planner takes)
   and with RGB + depth + segmentation (what perception and bags take).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

TASKS = ("demo-drawer", "demo-green-can")
console = Console()


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


# ------------------------------------------------------------------------------------------------ in-process


def in_process_rounds(episodes: int, progress: Progress) -> list[float]:
    from homiebot.agent.loop import run_episode
    from homiebot.planner.registry import make_planner
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task

    sim = make_simulator("mujoco")
    rounds: list[float] = []
    job = progress.add_task("in-process episodes", total=(episodes + 1) * len(TASKS))
    try:
        for repeat in range(episodes + 1):
            for task_id in TASKS:
                trajectory = run_episode(sim, make_planner("expert"), task=get_task(task_id), seed=0)
                assert trajectory.goal_satisfied, trajectory.error
                if repeat > 0:  # the first pass is the warm-up
                    rounds += [r.timings["round_s"] for r in trajectory.rounds]
                progress.advance(job)
    finally:
        sim.shutdown()
    return rounds


# ------------------------------------------------------------------------------------------------ graph


def graph_rounds(episodes: int, progress: Progress, profile: Path | None = None,
                 perception: bool = True) -> tuple[list[float], float]:
    import rclpy
    import rclpy.executors
    from homie_msgs.msg import EpisodeStatus, Task

    from homiebot.ros import convert
    from homiebot.ros.calls import EVENTS_QOS, LATCHED_QOS
    from homiebot.ros.environment import overlay_environment
    from homiebot.ros.supervisor import GraphSpec, Supervisor, load_graph

    domain = random.randint(100, 220)
    os.environ["ROS_DOMAIN_ID"] = str(domain)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    work = Path(tempfile.mkdtemp(prefix="bench_ros_"))
    result_path = work / "result.json"
    env = overlay_environment()
    env.update(ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    if profile is not None:
        env["FASTRTPS_DEFAULT_PROFILES_FILE"] = str(profile)
    graph = load_graph()
    if not perception:  # the components the in-process loop runs: planner, executor, skills, simulator
        graph = GraphSpec(nodes=[n for n in graph.nodes if n.name != "perception"])
    supervisor = Supervisor(graph, overrides={"planner_node": {"result_path": str(result_path)}}, env=env,
                            log_dir=work / "logs")
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("bench_ros", context=context)
    task_pub = node.create_publisher(Task, "/homie/task", LATCHED_QOS)
    finals: list[EpisodeStatus] = []
    node.create_subscription(EpisodeStatus, "/homie/episode_status",
                             lambda m: finals.append(m) if m.state >= EpisodeStatus.ENDED else None, EVENTS_QOS)
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(node)
    def spin() -> None:
        try:
            while context.ok():
                executor.spin_once(timeout_sec=0.05)
        except (rclpy.executors.ExternalShutdownException, rclpy.executors.ShutdownException):
            pass  # the benchmark shut the context down

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    rounds: list[float] = []
    started = time.monotonic()
    label = Path(env.get("FASTRTPS_DEFAULT_PROFILES_FILE", "default")).name + ("" if perception else ", no perception node")
    job = progress.add_task(f"graph episodes ({label})",
                            total=(episodes + 1) * len(TASKS))
    try:
        supervisor.start()
        for repeat in range(episodes + 1):
            for task_id in TASKS:
                before = len(finals)
                result_path.unlink(missing_ok=True)
                task_pub.publish(convert.task_msg(task_id, _instruction(task_id), _scene(task_id), 0))
                deadline = time.monotonic() + 120
                while (len(finals) == before or not result_path.exists()) and time.monotonic() < deadline:
                    supervisor.poll()
                    time.sleep(0.02)
                result = json.loads(result_path.read_text())
                assert result["goal_satisfied"], (result["error"], (work / "logs").as_posix())
                if repeat > 0:
                    rounds += [r["timings"]["round_s"] for r in result["rounds"]]
                progress.advance(job)
    finally:
        supervisor.stop()
        rclpy.try_shutdown(context=context)
    return rounds, time.monotonic() - started


def _udp_profile() -> Path:
    from homiebot.ros.environment import repository_root

    return repository_root() / "launch" / "config" / "fastdds_udp.xml"


def _profile_in_use() -> str:
    from homiebot.ros.environment import overlay_environment

    return overlay_environment().get("FASTRTPS_DEFAULT_PROFILES_FILE", "default")


def _instruction(task_id: str) -> str:
    from homiebot.tasks.suite import get_task

    return get_task(task_id).instruction


def _scene(task_id: str) -> str:
    from homiebot.tasks.suite import get_task

    return get_task(task_id).scene


# ------------------------------------------------------------------------------------------------ MultiView latency


def _sender(count: int, depth: bool, period_s: float) -> None:
    """Child process: publish ``count`` MultiViews of four 256x256 views, stamped just before conversion."""
    import rclpy
    from homie_msgs.msg import MultiView

    from homiebot.ros import convert
    from homiebot.ros.calls import SENSOR_QOS
    from homiebot.types import CameraView, Observation, Pose2D

    rng = np.random.default_rng(0)
    views = {n: CameraView(n, rng.integers(0, 256, (256, 256, 3), dtype=np.uint8), rng.random((256, 256), dtype=np.float32),
                           rng.integers(0, 40, (256, 256), dtype=np.int32), 128.0, 128.0, 127.5, 127.5, np.eye(4))
             for n in ("front", "left", "back", "right")}
    rclpy.init()
    node = rclpy.create_node("multiview_sender")
    publisher = node.create_publisher(MultiView, "/bench/views", SENSOR_QOS)
    while publisher.get_subscription_count() == 0:
        time.sleep(0.05)
    time.sleep(0.5)
    for index in range(count):
        stamp = time.time()
        observation = Observation(views, {1: "cup"}, Pose2D(0.0, 0.0, 0.0), None, 0.0)
        msg = convert.observation_to_msg(observation, depth=depth, segmentation=depth)
        msg.header.stamp = convert.time_msg(stamp)
        msg.state_sequence = index
        publisher.publish(msg)
        time.sleep(period_s)
    time.sleep(0.5)
    rclpy.shutdown()


def multiview_latency(count: int, depth: bool, progress: Progress) -> tuple[list[float], int]:
    import rclpy
    import rclpy.executors
    from homie_msgs.msg import MultiView
    from rclpy.serialization import serialize_message

    from homiebot.ros import convert
    from homiebot.ros.calls import SENSOR_QOS

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("multiview_receiver", context=context)
    latencies: list[float] = []
    size = {"bytes": 0}

    def on_views(msg: MultiView) -> None:
        latencies.append(time.time() - convert.time_seconds(msg.header.stamp))
        if not size["bytes"]:
            size["bytes"] = len(serialize_message(msg))

    node.create_subscription(MultiView, "/bench/views", on_views, SENSOR_QOS)
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(node)
    sender = subprocess.Popen([sys.executable, "-m", "benchmarks.bench_ros", "--sender", str(count), "--depth" if depth else "--rgb-only"],
                              env=os.environ.copy())
    job = progress.add_task(f"MultiView {'RGB-D-seg' if depth else 'RGB'}", total=count)
    deadline = time.monotonic() + 60 + count
    while len(latencies) < count and time.monotonic() < deadline and sender.poll() is None:
        before = len(latencies)
        executor.spin_once(timeout_sec=0.05)
        progress.advance(job, len(latencies) - before)
    sender.wait(timeout=30)
    rclpy.try_shutdown(context=context)
    return latencies, size["bytes"]


# ------------------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=5, help="measured episodes per task and wiring (after one warm-up)")
    parser.add_argument("--messages", type=int, default=60, help="MultiView messages per variant")
    parser.add_argument("--sender", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--depth", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rgb-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--compare-transports", action="store_true",
                        help="also run the graph with launch/config/fastdds_udp.xml (Fast DDS's default transports)")
    args = parser.parse_args()
    if args.sender is not None:
        _sender(args.sender, args.depth, period_s=0.1)
        return
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ["ROS_DOMAIN_ID"] = str(random.randint(100, 220))
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"

    with Progress(console=console, transient=True) as progress:
        local = in_process_rounds(args.episodes, progress)
        graph, graph_wall = graph_rounds(args.episodes, progress)
        bare = graph_rounds(args.episodes, progress, perception=False)[0]
        udp = graph_rounds(args.episodes, progress, _udp_profile())[0] if args.compare_transports else None
        rgb, rgb_bytes = multiview_latency(args.messages, False, progress)
        full, full_bytes = multiview_latency(args.messages, True, progress)

    local_mean, graph_mean = statistics.mean(local), statistics.mean(graph)
    figures = {
        "rounds_measured": {"in_process": len(local), "graph": len(graph)},
        "round_ms": {
            "in_process": {"mean": local_mean * 1e3, "median": statistics.median(local) * 1e3, "p95": _percentile(local, 95) * 1e3},
            "graph": {"mean": graph_mean * 1e3, "median": statistics.median(graph) * 1e3, "p95": _percentile(graph, 95) * 1e3},
            "graph_without_perception_node": {"mean": statistics.mean(bare) * 1e3, "median": statistics.median(bare) * 1e3,
                                              "p95": _percentile(bare, 95) * 1e3},
        },
        "graph_over_in_process": graph_mean / local_mean,
        "overhead_ms_per_round": (graph_mean - local_mean) * 1e3,
        "overhead_ms_per_round_median": (statistics.median(graph) - statistics.median(local)) * 1e3,
        "overhead_ms_per_round_without_perception_node": (statistics.mean(bare) - local_mean) * 1e3,
        "multiview_rgb": {"bytes": rgb_bytes, "median_ms": statistics.median(rgb) * 1e3, "p95_ms": _percentile(rgb, 95) * 1e3, "n": len(rgb)},
        "multiview_rgbd_seg": {"bytes": full_bytes, "median_ms": statistics.median(full) * 1e3, "p95_ms": _percentile(full, 95) * 1e3, "n": len(full)},
        "load_average_1min": os.getloadavg()[0],
        "fastdds_profile": Path(_profile_in_use()).name,
    }
    if udp:
        figures["round_ms"]["graph_udp"] = {"mean": statistics.mean(udp) * 1e3, "median": statistics.median(udp) * 1e3,
                                            "p95": _percentile(udp, 95) * 1e3}
        figures["overhead_ms_per_round_udp"] = (statistics.mean(udp) - local_mean) * 1e3
    table = Table(title="ROS 2 graph vs in-process loop (expert planner, 4 x 256x256 views per round)")
    for column in ("figure", "value", "goal"):
        table.add_column(column)
    r = figures["round_ms"]
    table.add_row("round, in-process (mean / median / p95)", f"{r['in_process']['mean']:.1f} / {r['in_process']['median']:.1f} / {r['in_process']['p95']:.1f} ms", "")
    table.add_row("round, graph (mean / median / p95)", f"{r['graph']['mean']:.1f} / {r['graph']['median']:.1f} / {r['graph']['p95']:.1f} ms", "")
    ratio_ok = figures["graph_over_in_process"] <= 1.2 or figures["overhead_ms_per_round"] <= 20
    b = r["graph_without_perception_node"]
    table.add_row("round, graph without the perception node (what the in-process loop runs)",
                  f"{b['mean']:.1f} / {b['median']:.1f} / {b['p95']:.1f} ms", "")
    if udp:
        u = r["graph_udp"]
        table.add_row("round, graph over Fast DDS default transports (UDP loopback for large data)",
                      f"{u['mean']:.1f} / {u['median']:.1f} / {u['p95']:.1f} ms", "")
    table.add_row("graph / in-process", f"{figures['graph_over_in_process']:.2f}x", "<= 1.2x or <= 20 ms", style=None if ratio_ok else "red")
    table.add_row("overhead per round (mean / median)", f"{figures['overhead_ms_per_round']:.1f} / {figures['overhead_ms_per_round_median']:.1f} ms", "<= 20 ms")
    table.add_row("overhead per round, same components (no perception node)",
                  f"{figures['overhead_ms_per_round_without_perception_node']:.1f} ms", "<= 20 ms")
    table.add_row(f"MultiView RGB ({rgb_bytes / 1e6:.2f} MB) latency median / p95",
                  f"{figures['multiview_rgb']['median_ms']:.2f} / {figures['multiview_rgb']['p95_ms']:.2f} ms", "")
    table.add_row(f"MultiView RGB+depth+seg ({full_bytes / 1e6:.2f} MB) latency median / p95",
                  f"{figures['multiview_rgbd_seg']['median_ms']:.2f} / {figures['multiview_rgbd_seg']['p95_ms']:.2f} ms", "")
    table.add_row("1-minute load average", f"{figures['load_average_1min']:.1f}", "")
    console.print(table)
    console.print(f"Fast DDS profile: {figures['fastdds_profile']}")
    console.print(f"rounds measured: {len(local)} in-process, {len(graph)} graph; graph run {graph_wall:.1f} s incl. bring-up")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
