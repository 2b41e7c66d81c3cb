"""A learned skill policy's step latency on the CPU (homiebot/skills/learned.py; the target: at most 20 ms a step on
one core).

Run: ``PYTHONPATH=. HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.bench_skill_policy --policy
RUN/policy --data DATASET [--steps 200] [--threads 1] [--json OUT.json]``

Loads the policy folder (``homie train skill``'s ``OUT/policy``, or any LeRobot folder with the same inputs) with
:class:`~homiebot.skills.learned.SkillPolicy`, then feeds it the data set's frames in order, one ``act`` call each
(LeRobot's ``select_action`` behind the data set's pre- and post-processing), and times every call. ACT predicts a
chunk and returns one action a call: the network runs on every ``n_action_steps``-th call (a "chunk step"), the other
calls pop the queue. Reported: the median and 95th percentile of all calls, of the chunk steps alone (the worst step
a control loop sees), and the mean per step (the budget a control loop at the data's rate spends). Latency does not
depend on the weights' values, so an untrained policy of the same configuration measures the same.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", type=Path, required=True, help="a LeRobot policy folder")
    parser.add_argument("--data", type=Path, required=True, help="a skill data set with the policy's inputs")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    import numpy as np
    import torch
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from homiebot.skills.learned import ENV_STATE, IMAGE_PREFIX, STATE, SkillPolicy

    started = time.perf_counter()
    policy = SkillPolicy(args.policy, threads=args.threads)
    load_s = time.perf_counter() - started
    dataset = LeRobotDataset("homiebot/skill", root=args.data, video_backend="pyav")
    frames = []
    for i in range(min(args.steps, len(dataset))):
        frame = dataset[i]
        images = {key[len(IMAGE_PREFIX):]: (frame[key].numpy().transpose(1, 2, 0) * 255).round().astype(np.uint8)
                  for key in frame if key.startswith(IMAGE_PREFIX)}
        frames.append((images, frame[STATE].numpy() if STATE in frame else None,
                       frame[ENV_STATE].numpy() if ENV_STATE in frame else None))
    policy.reset()
    policy.act(*frames[0])  # the first call pays one-time costs (allocations); timed calls start afresh
    policy.reset()
    times: list[float] = []
    for images, state, env_state in frames:
        tick = time.perf_counter()
        action = policy.act(images, state, env_state)
        times.append(time.perf_counter() - tick)
    every = policy.inputs.n_action_steps
    chunk = times[::every]
    result = {
        "policy": str(args.policy),
        "policy_type": policy.inputs.policy_type,
        "images": {k: list(v) for k, v in policy.inputs.images.items()},
        "action_size": len(action),
        "n_action_steps": every,
        "parameters": sum(p.numel() for p in policy.policy.parameters()),
        "threads": torch.get_num_threads(),
        "steps": len(times),
        "load_s": round(load_s, 3),
        "step_ms_median": round(1000 * statistics.median(times), 3),
        "step_ms_p95": round(1000 * _percentile(times, 0.95), 3),
        "step_ms_mean": round(1000 * statistics.fmean(times), 3),
        "chunk_step_ms_median": round(1000 * statistics.median(chunk), 3),
        "chunk_step_ms_p95": round(1000 * _percentile(chunk, 0.95), 3),
        "chunk_step_ms_max": round(1000 * max(chunk), 3),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
