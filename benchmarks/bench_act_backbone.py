"""Where an ACT skill policy's network step goes on one CPU core, and what the image backbone alone costs: the floor
under the 20 ms policy-step target (docs/results/skills.md, "Policy step time").

Run: ``PYTHONPATH=. HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.bench_act_backbone --policy
RUN/policy [--repeats 30] [--sizes 64,80,96,128] [--json OUT.json]``

Measured in one process, interleaved round by round so that a shared machine's load falls on every row alike (read the
rows as ratios of each other):

* ``chunk``: the policy's ``predict_action_chunk`` on one observation (what runs once per ``n_action_steps``);
* ``backbone_per_camera``: the policy's own backbone, one pass per camera (what LeRobot's ACT does);
* ``backbone_batched``: the same backbone, the cameras stacked into one batch;
* ``bf16_chunk``: the chunk under ``torch.autocast("cpu", dtype=torch.bfloat16)`` (oneDNN's bf16 kernels, AMX where
  the CPU has it), with the largest difference of its actions from float32's;
* ``resnet18_<px>``: torchvision's ResNet-18 trunk (no pooling or classifier, random weights: latency does not depend
  on the weights' values) on one image of each size: what any ACT with LeRobot's smallest backbone pays per camera.

With ``--against OTHER`` (another ACT folder, e.g. the one-camera 64-px recipe against the two-camera 96-px one) the
rows are taken for both policies in the same rounds (``OTHER``'s prefixed ``against_``), plus ``act_step`` for each:
one served chunk step, ``reset()`` then ``act()`` (LeRobot's preprocessing, the network, the postprocessing), what a
control loop waits for once per ``n_action_steps``; the output adds each row's ratio to the other policy's. Every row
is given as wall time and as the thread's CPU time (``cpu_ms_median``: on a loaded machine the wall time holds the
scheduler's waits, the CPU time mostly not).
``--no-bf16`` leaves the bf16 row out.

The policy's weights are whatever the folder holds; an untrained policy of the same configuration times the same.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any


def _timed(call: Callable[[], Any]) -> tuple[float, float]:
    """Wall seconds and this thread's CPU seconds of one call (one torch thread: the work is this thread's, so its CPU
    time leaves out the waits of a loaded machine's scheduler)."""
    tick, cpu = time.perf_counter(), time.thread_time()
    call()
    return time.perf_counter() - tick, time.thread_time() - cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", type=Path, required=True, help="a LeRobot ACT policy folder")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--sizes", default="64,80,96,128", help="square image sizes for the bare ResNet-18 rows")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--against", type=Path, default=None, help="a second ACT policy folder, timed in the same rounds")
    parser.add_argument("--no-bf16", dest="bf16", action="store_false", help="leave the bf16 row out")
    args = parser.parse_args(argv)

    import numpy as np
    import torch
    import torchvision

    from homiebot.skills.learned import IMAGE_PREFIX, SkillPolicy

    rng = np.random.default_rng(0)

    def rows(folder: Path, prefix: str) -> tuple[dict[str, Callable[[], Any]], Any] | None:
        """The timed calls of one policy folder, and its inputs (None: not an ACT policy)."""
        policy = SkillPolicy(folder, threads=1)
        if policy.inputs.policy_type != "act":
            print(f"{folder}: an ACT policy is needed (this one is {policy.inputs.policy_type!r})", file=sys.stderr)
            return None
        images = {name: rng.integers(0, 256, (h, w, c), dtype=np.uint8) for name, (c, h, w) in policy.inputs.images.items()}
        state = rng.normal(size=policy.inputs.state_size).astype(np.float32) if policy.inputs.state_size else None
        env = rng.normal(size=policy.inputs.env_state_size).astype(np.float32) if policy.inputs.env_state_size else None
        batch = policy.preprocess(policy.observation(images, state, env))
        cameras = [batch[IMAGE_PREFIX + name] for name in policy.inputs.images]
        network = policy.policy
        backbone = network.model.backbone

        def chunk() -> Any:
            return network.predict_action_chunk(batch)

        def chunk_bf16() -> Any:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return network.predict_action_chunk(batch)

        def act_step() -> Any:
            policy.reset()
            return policy.act(images, state, env)

        calls: dict[str, Callable[[], Any]] = {
            "chunk": chunk,
            "backbone_per_camera": lambda: [backbone(image) for image in cameras],
            "backbone_batched": lambda: backbone(torch.cat(cameras)),
        }
        if args.bf16:
            calls["bf16_chunk"] = chunk_bf16
        if args.against is not None:
            calls["act_step"] = act_step
        return {prefix + name: call for name, call in calls.items()}, (policy, chunk, chunk_bf16)

    first = rows(args.policy, "")
    if first is None:
        return 2
    calls, (policy, chunk, chunk_bf16) = first
    other_inputs = None
    if args.against is not None:
        second = rows(args.against, "against_")
        if second is None:
            return 2
        calls.update(second[0])
        other_inputs = second[1][0].inputs
    trunk = torch.nn.Sequential(*list(torchvision.models.resnet18().children())[:-2]).eval()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    bare = {size: torch.rand(1, 3, size, size) for size in sizes}
    for size in sizes:
        calls[f"resnet18_{size}px"] = partial(trunk, bare[size])
    times: dict[str, list[float]] = {name: [] for name in calls}
    cpu_times: dict[str, list[float]] = {name: [] for name in calls}
    with torch.inference_mode():
        reference = chunk().float()
        bf16_difference = float((chunk_bf16().float() - reference).abs().max()) if args.bf16 else None
        for call in calls.values():  # one-time costs (allocations, kernel selection) before the timed rounds
            call()
        for _ in range(args.repeats):
            for name, call in calls.items():
                wall, cpu = _timed(call)
                times[name].append(wall)
                cpu_times[name].append(cpu)
    medians = {name: 1000 * statistics.median(values) for name, values in times.items()}
    result: dict[str, Any] = {
        "policy": str(args.policy),
        "cameras": {name: list(shape) for name, shape in policy.inputs.images.items()},
        "threads": torch.get_num_threads(),
        "repeats": args.repeats,
        "ms_median": {name: round(value, 2) for name, value in medians.items()},
        "cpu_ms_median": {name: round(1000 * statistics.median(values), 2) for name, values in cpu_times.items()},
        "bf16_max_action_difference": None if bf16_difference is None else round(bf16_difference, 5),
    }
    if other_inputs is not None:
        result["against"] = str(args.against)
        result["against_cameras"] = {name: list(shape) for name, shape in other_inputs.images.items()}
        # Each of the first policy's rows over the same row of the other (the machine's load falls on both alike).
        result["ratio_to_against"] = {name: round(medians[name] / medians["against_" + name], 3)
                                      for name in medians if "against_" + name in medians}
        cpu = {name: statistics.median(values) for name, values in cpu_times.items()}
        result["cpu_ratio_to_against"] = {name: round(cpu[name] / cpu["against_" + name], 3)
                                          for name in cpu if "against_" + name in cpu}
    print(json.dumps(result, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
