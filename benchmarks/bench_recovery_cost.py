"""What a failure-recovery episode costs with the CPU SmolLM2, and where the time goes.

Run: ``nice -n 10 .venv/bin/python -m benchmarks.bench_recovery_cost --task emmoe-001 --stages 1,2,3 --no-search
[--noise emmoe] [--rounds 20] [--shared-cache] [--json FILE]``

One EMMOE-100 episode in this process, exactly as ``homie eval --planner recovery -p base=hf -p
'base_options={"model": "smollm2", "constrained": true}' -p mode=cmfr ...`` runs it (the same planner
options, the task's scene seed, the noise preset seeded with it), with every call of both language-model
engines counted from the engine's own :class:`~homiebot.planner.text_lm.CallStats`: prompt tokens, how many of
them came from the key/value cache (``reused``), answer tokens, and this process's CPU seconds for the whole
call and for evaluating the new prompt tokens alone. Reported separately for the base planner's calls and the
recovery stages' calls, beside the model load and the rest of the episode (simulator, executor, wrapper).

``--no-memory`` asks the model every stage question, also one it answered before in the episode (the recovery
planner's ``memory=false``: the behaviour before :class:`~homiebot.recovery.llm.AnswerMemory`).
``--shared-cache`` asks the stages on the base planner's own engine instance (``own_cache=false``: one
key/value cache for both), the configuration before the recovery engine got its own instance.

The trajectory's fingerprint (subtasks, codes, every stage answer) is printed and written to ``--json``, so
two runs of different code can be checked to decide the same things.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class EngineCost:
    """The sum over one engine's calls."""

    calls: int = 0
    prompt_tokens: int = 0
    reused_tokens: int = 0
    evaluated_tokens: int = 0  # prompt tokens not taken from the cache
    completion_tokens: int = 0
    cpu_s: float = 0.0
    prompt_cpu_s: float = 0.0
    wall_s: float = 0.0
    per_call: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)  # each call's exact prompt text

    def add(self, stats: Any) -> None:
        self.calls += 1
        self.prompt_tokens += stats.prompt_tokens
        self.reused_tokens += stats.reused_tokens
        self.evaluated_tokens += stats.prompt_tokens - stats.reused_tokens
        self.completion_tokens += stats.completion_tokens
        self.cpu_s += stats.cpu_seconds
        self.prompt_cpu_s += stats.prompt_cpu_seconds or 0.0
        self.wall_s += stats.seconds
        self.per_call.append({"prompt": stats.prompt_tokens, "reused": stats.reused_tokens,
                              "completion": stats.completion_tokens, "cpu_s": round(stats.cpu_seconds, 4),
                              "prompt_cpu_s": round(stats.prompt_cpu_seconds or 0.0, 4)})

    def summary(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k not in ("per_call", "prompts")}
        for k in ("cpu_s", "prompt_cpu_s", "wall_s"):
            out[k] = round(out[k], 2)
        return out


class _Counter:
    """Sums every call of the engines it wraps into ``base`` or, while a stage call runs, ``stages``."""

    def __init__(self) -> None:
        self.base, self.stages = EngineCost(), EngineCost()
        self.in_stage = False

    def wrap_engine(self, engine: Any) -> None:
        """Wrap ``engine.generate`` (an instance attribute: only this engine) to see each call's stats."""
        generate: Callable[..., Any] = engine.generate

        def counted(conversations: Any, **options: Any) -> Any:
            result = []
            for conversation in conversations:  # one call each, so each call's stats are seen
                result += generate([conversation], **options)
                cost = self.stages if self.in_stage else self.base
                cost.add(engine.last_stats)
                cost.prompts.append(engine.last_prompt)
            return result

        engine.generate = counted

    def wrap_stage_llm(self, llm: Any) -> None:
        complete: Callable[..., Any] = llm.complete

        def flagged(*args: Any, **kwargs: Any) -> Any:
            self.in_stage = True
            try:
                return complete(*args, **kwargs)
            finally:
                self.in_stage = False

        llm.complete = flagged


def fingerprint(trajectory: Any, stats: Any) -> dict[str, Any]:
    """What the episode decided: every round's subtask and code, and every stage answer."""
    rounds = [f"{r.subtask_text} {r.feedback.code.value}" for r in trajectory.rounds]
    answers = [f"{c.get('stage')}: {c.get('answer')}" for c in stats.calls]
    digest = hashlib.sha256(json.dumps([rounds, answers]).encode()).hexdigest()[:16]
    return {"rounds": rounds, "answers": answers, "sha256_16": digest}


def run(
    task_id: str, mode: str, stages: str, search: bool, noise: str, rounds: int, shared_cache: bool, memory: bool = True
) -> dict[str, Any]:
    from homiebot.agent.loop import EpisodeConfig, run_episode
    from homiebot.planner.registry import make_planner
    from homiebot.recovery.llm import EngineLLM
    from homiebot.recovery.planner import RecoveryPlanner
    from homiebot.sim.base import make_simulator
    from homiebot.skills import SkillSet, preset_name
    from homiebot.tasks.suite import get_task

    task = get_task(task_id)
    started_cpu = time.process_time()
    planner = make_planner(
        "recovery", base="hf", base_options={"model": "smollm2", "constrained": True}, mode=mode,
        stages=[int(s) for s in stages.split(",") if s], search=search, own_cache=not shared_cache,
        memory=memory,
    )
    assert isinstance(planner, RecoveryPlanner)
    sim = make_simulator("mujoco", render=False)
    load_cpu = time.process_time() - started_cpu
    counter = _Counter()
    base_engine = planner.inner.engine  # type: ignore[attr-defined]
    counter.wrap_engine(base_engine)
    if isinstance(planner.llm, EngineLLM):
        counter.wrap_stage_llm(planner.llm)
        if planner.llm.engine is not base_engine:
            counter.wrap_engine(planner.llm.engine)
    preset = preset_name(noise, what="--noise")
    started_cpu, started = time.process_time(), time.perf_counter()
    trajectory = run_episode(
        sim, planner, task=task, seed=0, config=EpisodeConfig(max_rounds=rounds),
        skills=lambda s, scene_seed: SkillSet(s, noise=preset, seed=scene_seed),
    )
    episode_cpu, episode_wall = time.process_time() - started_cpu, time.perf_counter() - started
    base_cost, stage_cost = counter.base, counter.stages
    stats = planner.stats
    sim.shutdown()
    planner.close()
    rest = episode_cpu - base_cost.cpu_s - stage_cost.cpu_s
    return {
        "task": task_id, "mode": mode, "stages": stages, "search": search, "noise": noise, "max_rounds": rounds,
        "cache": "shared" if shared_cache else "own", "memory": memory,
        "load_cpu_s": round(load_cpu, 2), "episode_cpu_s": round(episode_cpu, 2), "episode_wall_s": round(episode_wall, 2),
        "base": base_cost.summary(), "stages_llm": stage_cost.summary(), "rest_cpu_s": round(rest, 2),
        "stage_calls_recorded": stats.llm_calls, "remembered_calls": stats.remembered_calls,
        "goal_satisfied": trajectory.goal_satisfied,
        "fingerprint": fingerprint(trajectory, stats),
        "stage_per_call": stage_cost.per_call, "base_per_call": base_cost.per_call, "stage_prompts": stage_cost.prompts,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="emmoe-001")
    parser.add_argument("--mode", default="cmfr", choices=("cmfr", "cot", "none"))
    parser.add_argument("--stages", default="1,2,3")
    parser.add_argument("--search", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--noise", default="emmoe")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--shared-cache", action="store_true", help="stages on the base planner's engine instance")
    parser.add_argument("--memory", action=argparse.BooleanOptionalAction, default=True,
                        help="answer a repeated stage question from the episode's memory (--no-memory: ask every time)")
    parser.add_argument("--json", type=Path, help="write the full result (per call, fingerprint) here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    result = run(args.task, args.mode, args.stages, args.search, args.noise, args.rounds, args.shared_cache, args.memory)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    short = {k: v for k, v in result.items() if k not in ("stage_per_call", "base_per_call", "stage_prompts", "fingerprint")}
    print(json.dumps(short, indent=1))
    print("fingerprint", result["fingerprint"]["sha256_16"])


if __name__ == "__main__":
    main()
