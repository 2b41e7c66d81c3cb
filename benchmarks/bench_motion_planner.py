"""The physical skills' joint-space motion planner (homiebot/skills/physical/motion.py) on the EMMOE-100 Picks whose
straight arm motions collide: time and samples per plan, over several seeds, and the collision check's cost.

Run: ``.venv/bin/python -m benchmarks.bench_motion_planner [--seeds N] [--cases task:object,...] [--out FILE]``

For each case the scene is reset, the physical Go to brings the base to the object, and the physical Pick runs with
the planner's seed set; every call of the planner is recorded (found or not, samples, wall seconds, CPU seconds,
waypoints). Wall seconds are what the planner's time budget counts; CPU seconds (this process) are what the plan
costs on a machine that other jobs share. The collision check (the arm's link points against the world graph's
boxes, the check the planner calls for every configuration it tests) is timed on 2,000 random configurations of the
first case. A search that cannot succeed (in the first case's scene, from the tuck to the tuck turned 1 rad, with
the shoulder's pan between 0.4 and 0.6 rad also refused) times the whole sample budget.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.skills.physical import PhysicalSkillSet, manipulation, sim_arm_setup
from homiebot.skills.physical.manipulation import Obstacles
from homiebot.skills.physical.motion import MotionPlan, PlannerSettings, plan_motion
from homiebot.tasks.suite import get_task
from homiebot.types import Action

#: EMMOE-100 Picks that failed with "no collision-free arm motion" before the planner (the 2026-11-28 run).
CASES = ("emmoe-038:red_box_2", "emmoe-032:pudding_box")


@dataclasses.dataclass
class PlanRecord:
    case: str
    seed: int
    found: bool
    samples: int
    wall_s: float
    cpu_s: float
    waypoints: int
    picked: bool


def run_case(sim: MujocoSimulator, case: str, seed: int) -> list[PlanRecord]:
    task_id, obj = case.split(":")
    task = get_task(task_id)
    sim.reset(task.scene, seed=task.seed)
    arm = dataclasses.replace(sim_arm_setup(), planner=PlannerSettings(seed=seed))
    skills = PhysicalSkillSet(sim, arm=arm)
    if not skills.run(Action.GO_TO, "oracle", obj).success:
        raise RuntimeError(f"{case}: Go to failed")
    plans: list[tuple[MotionPlan, float]] = []
    real = manipulation.plan_motion

    def timed(*args: Any, **kwargs: Any) -> MotionPlan:
        cpu = time.process_time()
        plan = real(*args, **kwargs)
        plans.append((plan, time.process_time() - cpu))
        return plan

    manipulation.plan_motion = timed
    try:
        picked = skills.run(Action.PICK, "oracle", obj).success
    finally:
        manipulation.plan_motion = real
    return [PlanRecord(case, seed, p.found, p.samples, p.seconds, cpu, len(p.waypoints or ()), picked) for p, cpu in plans]


def check_cost(sim: MujocoSimulator, case: str, n: int = 2000) -> tuple[float, float]:
    """CPU ms per configuration: the link points, and the points against the boxes."""
    task_id, obj = case.split(":")
    task = get_task(task_id)
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim)
    skills.run(Action.GO_TO, "oracle", obj)
    kinematics = skills.manipulation.kinematics
    obstacles = Obstacles.of(sim.state(), {obj})
    rng = np.random.default_rng(0)
    qs = [rng.uniform(kinematics.lower, kinematics.upper) for _ in range(n)]
    cpu = time.process_time()
    points = [kinematics.link_points(q) for q in qs]
    link_ms = (time.process_time() - cpu) / n * 1e3
    cpu = time.process_time()
    for p in points:
        obstacles.hit(p)
    return link_ms, (time.process_time() - cpu) / n * 1e3


def failed_search_cost(sim: MujocoSimulator, case: str, seeds: int) -> list[tuple[int, float, float]]:
    """(samples, wall s, CPU s) of searches that cannot succeed, one per seed (module docstring)."""
    task_id, obj = case.split(":")
    task = get_task(task_id)
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim)
    skills.run(Action.GO_TO, "oracle", obj)
    m = skills.manipulation
    scene_clear = m._clear(Obstacles.of(sim.state(), {obj}))
    pan = m.kinematics.joints.index(m.setup.pan_joint)

    def clear(q: tuple[float, ...]) -> bool:
        return not 0.4 < q[pan] < 0.6 and scene_clear(q)

    start = m.kinematics.vector(m.setup.tuck)
    goal = start.copy()
    goal[pan] = 1.0
    out = []
    for seed in range(seeds):
        cpu = time.process_time()
        plan = plan_motion(start, goal, clear, m.kinematics.lower, m.kinematics.upper,
                           settings=PlannerSettings(seed=seed))
        assert not plan.found, "the pan band cuts every path"
        out.append((plan.samples, plan.seconds, time.process_time() - cpu))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="planner seeds per case (0..N-1)")
    parser.add_argument("--cases", default=",".join(CASES), help="task:object pairs, comma-separated")
    parser.add_argument("--out", type=Path, default=None, help="write every plan's record as JSON here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    sim = MujocoSimulator(render=False)
    records: list[PlanRecord] = []
    try:
        cases = args.cases.split(",")
        for case in cases:
            for seed in range(args.seeds):
                records.extend(run_case(sim, case, seed))
        link_ms, hit_ms = check_cost(sim, cases[0])
        failed = failed_search_cost(sim, cases[0], min(args.seeds, 3))
    finally:
        sim.shutdown()
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps([dataclasses.asdict(r) for r in records], indent=1))
    console = Console(width=150)
    table = Table(title=f"motion planner: plans during the physical Pick, {args.seeds} seeds per case")
    for column in ("case", "plans", "found", "picked (of seeds)", "samples median (max)", "wall s median (max)",
                   "CPU s median (max)", "waypoints median"):
        table.add_column(column, justify="right")
    for case in args.cases.split(","):
        mine = [r for r in records if r.case == case]
        if not mine:
            table.add_row(case, "0", "", "", "", "", "", "")
            continue
        picked = len({r.seed for r in mine if r.picked})
        table.add_row(
            case, str(len(mine)), str(sum(r.found for r in mine)), f"{picked}/{args.seeds}",
            f"{statistics.median(r.samples for r in mine):.0f} ({max(r.samples for r in mine)})",
            f"{statistics.median(r.wall_s for r in mine):.2f} ({max(r.wall_s for r in mine):.2f})",
            f"{statistics.median(r.cpu_s for r in mine):.2f} ({max(r.cpu_s for r in mine):.2f})",
            f"{statistics.median(r.waypoints for r in mine):.0f}",
        )
    console.print(table)
    console.print(f"collision check per configuration (CPU): link points {link_ms:.3f} ms, against the boxes "
                  f"{hit_ms:.3f} ms")
    console.print("searches that cannot succeed (whole budget): " + ", ".join(
        f"{samples} samples in {wall:.2f} s wall / {cpu:.2f} s CPU" for samples, wall, cpu in failed))


if __name__ == "__main__":
    main()
