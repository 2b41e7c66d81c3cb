"""A learned Go to served closed-loop (homiebot/skills/learned_goto.py) on held-out placements, against the scripted
Go to from the same start: outcome, EMMOE code, steps, and the wall time of a control step.

Run: ``PYTHONPATH=. HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 MUJOCO_GL=egl .venv/bin/python -m benchmarks.bench_learned_goto
--policy RUN/policy [--seeds 1000000,1000001] [--budget 600] [--slot NoMaD] [--no-scripted] [--json OUT.json]``, or
``--replay DATA`` instead of ``--policy``: each seed's recorded velocities from a ``homie data skills --skill go_to``
data set (of those seeds) sent through the slot in the policy's place, the command path's own ceiling (a policy that
reproduced the demonstrations exactly would do this well).

Each seed is set up as ``homie data skills --skill go_to`` sets up its episode (homiebot/data/skill_datasets.py: the
task and scene the seed draws, the Go to target, the arm tucked, the base driven to a jittered start pose near another
piece of furniture); the target is then reached once by the policy through
:class:`~homiebot.skills.physical.PhysicalSkillSet` with the policy in ``--slot`` (the planner's call:
``run(Action.GO_TO, slot, target)``), and, unless ``--no-scripted``, the seed is set up again and the scripted Go to
runs from the same start (``run(Action.GO_TO, "oracle", target)``: the NavigateToPose skill). Evaluation seeds
(>= 1000000, ``EVAL_SEED_BASE``) are placements no training data set holds. One execution per seed (no executor
retries). Reported per seed: each skill's status and message and the EMMOE code the executor would answer with once
its tries are spent; for the policy its steps, simulated seconds, the distance from the goal pose where it ended, and
wall milliseconds per control step (rendering the head camera, the policy, the base's motion), with the observation's
and the policy's shares. The summary gives both success rates and the median and 90th percentile of the control step.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--policy", type=Path)
    source.add_argument("--replay", type=Path, help="a go_to data set: its recorded velocities in the policy's place")
    parser.add_argument("--seeds", default="1000000,1000001,1000002")
    parser.add_argument("--budget", type=int, default=None, help="control steps (default: the skill's, 600)")
    parser.add_argument("--slot", default="NoMaD")
    parser.add_argument("--no-scripted", dest="scripted", action="store_false", help="skip the scripted Go to")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    import numpy as np

    from homiebot.data.skill_datasets import DEFAULT_SIZE, EpisodeSkipped, SkillEpisodes, emmoe_code
    from homiebot.skills.learned_goto import GO_TO_STEP_BUDGET, LearnedGoTo
    from homiebot.skills.physical import PhysicalSkillSet
    from homiebot.types import Action

    t0 = time.perf_counter()
    replay = _Replay(args.replay) if args.replay is not None else None
    learned = LearnedGoTo(args.slot, args.policy, step_budget=args.budget or GO_TO_STEP_BUDGET, policy=replay)
    load_s = time.perf_counter() - t0
    runner = SkillEpisodes("go_to", learned.size or DEFAULT_SIZE)
    rows = []
    skipped: list[dict[str, object]] = []
    step_ms: list[float] = []

    def start(seed: int):  # type: ignore[no-untyped-def]
        plan, _spec = runner.plan(seed)
        skills = PhysicalSkillSet(runner.sim, seed=seed, learned={learned.slot: learned})
        pose = runner._start_pose(skills, plan, np.random.default_rng([seed, 20261130, 1]))  # the recorder's start
        return plan, skills, pose

    try:
        for seed in (int(s) for s in args.seeds.split(",")):
            if replay is not None:
                replay.episode(seed)
            try:
                plan, skills, pose = start(seed)
            except EpisodeSkipped as skip:  # as the recorder does: no episode on this seed, not in the success rate
                skipped.append({"seed": seed, "skipped": str(skip)})
                print(json.dumps(skipped[-1]), flush=True)
                continue
            started = time.perf_counter()
            result = skills.run(Action.GO_TO, learned.slot, plan.target)
            wall = time.perf_counter() - started
            log, goal = learned.last, learned.goal
            end = runner.sim.state().robot
            steps = log.steps if log is not None else 0
            if log is not None and steps:
                step_ms.append(1000 * log.wall_seconds / steps)
            row = {
                "seed": seed, "task": plan.task_id, "scene": plan.scene, "target": plan.target,
                "start": [round(pose.x, 3), round(pose.y, 3), round(pose.yaw, 3)],
                "goal": [round(goal.x, 3), round(goal.y, 3), round(goal.yaw, 3)] if goal is not None else None,
                "status": result.status.value, "code": emmoe_code(Action.GO_TO, result).value, "detail": result.detail,
                "steps": steps, "sim_s": round(log.sim_seconds, 2) if log else 0.0, "wall_s": round(wall, 2),
                "off_m": round(math.hypot(goal.x - end.x, goal.y - end.y), 3) if goal is not None else None,
                "path_m": round(result.path_length, 2),
                "wall_ms_per_step": round(1000 * (log.wall_seconds if log else wall) / max(steps, 1), 1),
                "policy_ms_per_step": round(1000 * log.policy_seconds / max(steps, 1), 1) if log else None,
                "observe_ms_per_step": round(1000 * log.observe_seconds / max(steps, 1), 1) if log else None,
            }
            if args.scripted:
                plan, skills, _pose = start(seed)
                scripted = skills.run(Action.GO_TO, "oracle", plan.target)
                row.update({"scripted_status": scripted.status.value,
                            "scripted_code": emmoe_code(Action.GO_TO, scripted).value,
                            "scripted_detail": scripted.detail, "scripted_path_m": round(scripted.path_length, 2)})
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        learned.close()
        runner.close()
    summary: dict[str, object] = {
        "policy": str(args.policy or f"replay of {args.replay}"), "slot": learned.slot, "budget": learned.step_budget, "load_s": round(load_s, 2),
        "seeds": len(rows), "successes": sum(r["status"] == "success" for r in rows),
        "step_ms_median": round(float(np.median(step_ms)), 1) if step_ms else None,
        "step_ms_p90": round(float(np.percentile(step_ms, 90)), 1) if step_ms else None,
        "rows": rows, "skipped": skipped,
    }
    if args.scripted:
        summary["scripted_successes"] = sum(r["scripted_status"] == "success" for r in rows)
    line = f"{summary['successes']}/{len(rows)} reached by the {learned.slot} policy"
    if args.scripted:
        line += f", {summary['scripted_successes']}/{len(rows)} by the scripted Go to"
    line += f" ({len(skipped)} seeds skipped: no episode starts there)"
    print(f"{line}; control step median {summary['step_ms_median']} ms (p90 {summary['step_ms_p90']}); policy loaded "
          f"in {load_s:.1f} s", file=sys.stderr)
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=1))
    return 0


class _Replay:
    """A data set's recorded velocities, one episode at a time, with SkillPolicy's inputs, reset and act."""

    def __init__(self, root: Path) -> None:
        import glob

        import pyarrow.parquet as pq

        from homiebot.skills.learned import PolicyInputs

        info = json.loads((root / "meta" / "info.json").read_text())
        side = int(info["features"]["observation.images.head"]["shape"][0])
        self.inputs = PolicyInputs("replay", {"head": (3, side, side), "goal": (3, side, side)}, 3, None, 2, 1)
        self.seeds = {int(e["seed"]): int(e["episode_index"]) for e in
                      (json.loads(line) for line in (root / "meta" / "homiebot_episodes.jsonl").read_text().splitlines())}
        self.actions: dict[int, list[list[float]]] = {}
        for name in sorted(glob.glob(str(root / "data" / "*" / "*.parquet"))):
            table = pq.read_table(name, columns=["episode_index", "action"]).to_pydict()
            for episode, action in zip(table["episode_index"], table["action"], strict=True):
                self.actions.setdefault(int(episode), []).append(action)
        self.current: list[list[float]] = []
        self.step = 0

    def episode(self, seed: int) -> None:
        if seed not in self.seeds:
            raise SystemExit(f"--replay: the data set has no episode of seed {seed}")
        self.current = self.actions[self.seeds[seed]]

    def reset(self) -> None:
        self.step = 0

    def act(self, images, state, env_state=None):  # type: ignore[no-untyped-def]
        import numpy as np

        action = self.current[min(self.step, len(self.current) - 1)]
        self.step += 1
        return np.asarray(action, dtype=float)


if __name__ == "__main__":
    sys.exit(main())
