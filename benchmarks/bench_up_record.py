"""Recorded ``homie up`` episodes in a row: does every bag hold the episode's world graph and one time base?

Runs ``homie up sim --task TASK --record`` RUNS times (each ``nice -n 10``) and reads each bag with rosbags:
the world graphs perception published (the last one must have a TARGET_CATEGORY object ``in`` the RECEPTACLE),
every header stamp per topic (monotonic, within 0 .. the last /clock), the bag's size and the run's wall time.
One JSON line per run, then a summary. BENCHMARKS.md ("Recorded homie up episodes under load").

    source scripts/ros_env.sh && MUJOCO_GL=egl .venv/bin/python -m benchmarks.bench_up_record --runs 10 --out /tmp/up
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def check_run(run: Path, category: str, receptacle: str) -> dict[str, Any]:
    from rosbags.rosbag2 import Reader

    from homiebot.ros.bag import typestore_for

    store = typestore_for()
    stamps: dict[str, list[float]] = {}
    graphs = []
    with Reader(run / "bag") as reader:
        for connection, _, data in reader.messages():
            msg = store.deserialize_cdr(data, connection.msgtype)
            headers = [getattr(msg, "header", None), *(t.header for t in getattr(msg, "transforms", None) or [])]
            values = [h.stamp.sec + h.stamp.nanosec * 1e-9 for h in headers if h is not None]
            if hasattr(msg, "clock"):
                values.append(msg.clock.sec + msg.clock.nanosec * 1e-9)
            stamps.setdefault(connection.topic, []).extend(values)
            if connection.topic == "/perception/world_graph":
                graphs.append(msg)
    clock = stamps.get("/clock") or [0.0]
    bad = sorted(t for t, v in stamps.items() if v and (v != sorted(v) or min(v) < 0 or max(v) > clock[-1]))
    last = graphs[-1] if graphs else None
    names = {n.id: (n.name, n.category) for n in last.nodes} if last is not None else {}
    placed = any(names.get(e.source, ("", ""))[1] == category and e.relation == "in"
                 and receptacle in names.get(e.target, ("", ""))[0] for e in (last.edges if last is not None else []))
    result = json.loads((run / "result.json").read_text())
    return {"run": run.name, "goal": result["goal_satisfied"], "rounds": len(result["rounds"]), "graphs": len(graphs),
            "objects_in_last_graph": len(names), "placed": placed, "stamp_problems": bad, "clock_end": clock[-1],
            "bag_mb": round(sum(p.stat().st_size for p in (run / "bag").iterdir()) / 2**20, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--task", default="emmoe-084")
    parser.add_argument("--category", default="tuna_fish_can")
    parser.add_argument("--receptacle", default="kitchen_drawer")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    homie = str(Path(sys.executable).with_name("homie"))
    rows = []
    for index in range(1, args.runs + 1):
        run = args.out / f"up{index}"
        shutil.rmtree(run, ignore_errors=True)
        started = time.monotonic()
        done = subprocess.run(["nice", "-n", "10", homie, "up", "sim", "--task", args.task, "--record", "--out", str(run)],
                              check=False, capture_output=True, text=True)
        row = {"exit": done.returncode, "wall_s": round(time.monotonic() - started, 1),
               "load_1min": float(Path("/proc/loadavg").read_text().split()[0])}
        if done.returncode == 0:
            row.update(check_run(run, args.category, args.receptacle))
        print(json.dumps(row), flush=True)
        rows.append(row)
    good = [r for r in rows if r["exit"] == 0 and r.get("goal") and r.get("placed") and not r.get("stamp_problems")]
    print(json.dumps({"runs": len(rows), "all_checks_pass": len(good),
                      "bag_mb": [min(r.get("bag_mb", 0) for r in rows), max(r.get("bag_mb", 0) for r in rows)],
                      "wall_s": [min(r["wall_s"] for r in rows), max(r["wall_s"] for r in rows)]}))
    return 0 if len(good) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
