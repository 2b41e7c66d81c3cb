"""A learned Pick served closed-loop (homiebot/skills/learned_skill.py) on held-out placements: outcome, EMMOE code,
steps and wall time per step.

Run: ``PYTHONPATH=. HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 MUJOCO_GL=egl .venv/bin/python -m benchmarks.bench_learned_pick
--policy RUN/policy [--seeds 1000000,1000001] [--budget 300] [--slot RT-1-X] [--json OUT.json]``

Each seed is set up as ``homie data skills`` sets up its episode (homiebot/data/skill_datasets.py: the task and scene
the seed draws, the Pick target, the arm tucked, the base driven to a jittered start pose near the target), and the
target is then picked once by the policy through :class:`~homiebot.skills.physical.PhysicalSkillSet` with the policy
in ``--slot`` (the planner's call: ``run(Action.PICK, slot, target)``). Evaluation seeds (>= 1000000) are placements
no training data set holds. One execution per seed (no executor retries). Reported per seed: the skill's status and
message, the EMMOE code the executor would answer with once its tries are spent, the policy's steps, simulated seconds,
and wall seconds per step (observation rendering, the policy, the physics and the final tuck all included), with the
observation's and the policy's shares.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", type=Path, required=True)
    parser.add_argument("--seeds", default="1000000,1000001,1000002")
    parser.add_argument("--budget", type=int, default=300)
    parser.add_argument("--slot", default="RT-1-X")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    import numpy as np

    from homiebot.data.skill_datasets import DEFAULT_SIZE, EpisodeSkipped, SkillEpisodes, emmoe_code
    from homiebot.skills.learned_skill import LearnedArmSkill
    from homiebot.skills.physical import PhysicalSkillSet
    from homiebot.types import Action

    t0 = time.perf_counter()
    learned = LearnedArmSkill(args.slot, args.policy, step_budget=args.budget)
    load_s = time.perf_counter() - t0
    runner = SkillEpisodes("pick", learned.size or DEFAULT_SIZE)
    rows = []
    skipped: list[dict[str, object]] = []
    try:
        for seed in (int(s) for s in args.seeds.split(",")):
            try:
                plan, _spec = runner.plan(seed)
                skills = PhysicalSkillSet(runner.sim, seed=seed, learned={learned.slot: learned})
                rng = np.random.default_rng([seed, 20261130, 1])
                start = runner._start_pose(skills, plan, rng)  # the recorder's start pose for this seed
            except EpisodeSkipped as skip:  # as the recorder does: no episode on this seed, not in the success rate
                skipped.append({"seed": seed, "skipped": str(skip)})
                print(json.dumps(skipped[-1]), flush=True)
                continue
            started = time.perf_counter()
            result = skills.run(Action.PICK, args.slot, plan.target)
            wall = time.perf_counter() - started
            log = learned.last
            steps = log.steps if log is not None else 0
            row = {
                "seed": seed, "task": plan.task_id, "scene": plan.scene, "target": plan.target,
                "start": [round(start.x, 3), round(start.y, 3), round(start.yaw, 3)],
                "status": result.status.value, "code": emmoe_code(Action.PICK, result).value, "detail": result.detail,
                "steps": steps, "sim_s": round(log.sim_seconds, 2) if log else 0.0, "wall_s": round(wall, 2),
                "wall_ms_per_step": round(1000 * (log.wall_seconds if log else wall) / max(steps, 1), 1),
                "policy_ms_per_step": round(1000 * log.policy_seconds / max(steps, 1), 1) if log else None,
                "observe_ms_per_step": round(1000 * log.observe_seconds / max(steps, 1), 1) if log else None,
                "held": runner.sim.state().held,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        learned.close()
        runner.close()
    summary = {"policy": str(args.policy), "slot": args.slot, "budget": args.budget, "load_s": round(load_s, 2),
               "successes": sum(r["status"] == "success" for r in rows), "seeds": len(rows), "rows": rows,
               "skipped": skipped}
    print(f"{summary['successes']}/{len(rows)} picked ({len(skipped)} seeds skipped: no episode starts there); "
          f"policy loaded in {load_s:.1f} s", file=sys.stderr)
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
