"""The shipped model's planning round (``--planner hf --model homiebot-smollm2``) on one core, and its first-use build.

Plays EMMOE-100 episodes (``--tasks``, run 0's evaluation seed, ``--max-rounds``) in this process with the planner
the name configures (its defaults: constrained, the subtask-only answer, the growing chat without a system turn, on
llama.cpp with prefix reuse) and one thread (``torch_threads=1``). Each round's ``plan`` call is timed twice: wall
seconds, and this process's CPU seconds (``time.process_time``; one thread, so on a machine whose cores other jobs
keep busy the CPU time is what the round costs on an idle core, while the wall time includes the wait for a core).
The answer's token count is the runtime's own.

``--teacher-forced`` drives each episode by the data's expert (``homie data collect --planner expert``'s
prompt-bound expert) instead of the model: every round the model answers its prompt as above (timed), then its
answer in the chat is replaced by the expert's, without the Analysis line (the thoughtless training samples' form),
and the expert's subtask is executed. The rounds are then those of a whole successful episode, whatever the model
answers (an early checkpoint may end a task in its first round), and the next prompt's prefix reuse loses the
answer's tokens as it would after a different answer. It also counts the rounds whose subtask the model chose as
the expert did.

``--fresh-cache`` first builds the model in an empty model cache (a temporary ``HOMIEBOT_CACHE_DIR``) and prints the
build's wall and CPU seconds (the float folder of the bundled GGUF, the adapter merged and exported, the Q8_0
re-encoding: :mod:`homiebot.planner.shipped`); without it the user's cache is used (built there on first use).

Usage::

    python -m benchmarks.bench_shipped                                  # emmoe-001, 20 rounds
    python -m benchmarks.bench_shipped --tasks emmoe-001,emmoe-024 --fresh-cache --json out.json

Prints the median and p90 of the rounds' CPU and wall seconds, the median answer tokens, and per task SR and rounds.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

NAME = "homiebot-smollm2"


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _build(fresh: bool) -> dict[str, float]:
    from homiebot.planner.shipped import shipped_gguf, shipped_model

    model = shipped_model(NAME)
    assert model is not None
    wall, cpu = time.perf_counter(), time.process_time()
    path = shipped_gguf(model)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{'built' if fresh else 'found'} {path.name} ({path.stat().st_size / 1e6:.0f} MB) in {wall:.1f} s wall, "
          f"{cpu:.1f} s CPU of this process (the Q8_0 re-encoding runs in a child)")
    return {"build_wall_s": round(wall, 2), "build_cpu_s": round(cpu, 2)}


class _TeacherForced:
    """The expert plays; the model answers every round first (module docstring, ``--teacher-forced``)."""

    privileged = True

    def __init__(self, planner: Any) -> None:
        from homiebot.planner.perturbed import PromptBoundExpertPlanner

        self.hf = planner
        self.expert = PromptBoundExpertPlanner()
        self.name = "teacher-forced"
        self.answer_format = planner.answer_format
        self.agreed = 0

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.hf, attr)

    def reset(self, task: str, seed: int = 0) -> None:
        self.expert.reset(task, seed)
        self.hf.reset(task, seed)

    def plan(self, request: Any) -> str:
        from dataclasses import replace

        from homiebot.planner.messages import ChatMessage
        from homiebot.planner.prompt import parse_output

        answer = self.hf.plan(replace(request, goal=None, perceived_names=None, evaluation=None))
        expert = parse_output(self.expert.plan(request))
        assert expert.subtask is not None
        decision = f"Subtask: {expert.subtask.text()}\nModel: {'None' if expert.subtask.is_end else expert.model}"
        self.agreed += parse_output(answer, self.answer_format).subtask == expert.subtask
        self.hf._transcript.turns[-1] = ChatMessage("assistant", decision)
        return decision


def _episodes(tasks: list[str], max_rounds: int, teacher_forced: bool) -> dict[str, Any]:
    from homiebot.agent.loop import EpisodeConfig, run_episode
    from homiebot.config.planners import planner_config
    from homiebot.planner.registry import build_planner
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task

    planner: Any = build_planner(planner_config("hf", {"model": NAME, "torch_threads": 1}))
    cpu_s: list[float] = []
    wall_s: list[float] = []
    tokens: list[int] = []
    plan = planner.plan

    def timed(request: Any) -> str:
        wall, cpu = time.perf_counter(), time.process_time()
        answer = plan(request)
        cpu_s.append(time.process_time() - cpu)
        wall_s.append(time.perf_counter() - wall)
        tokens.extend(g.completion_tokens for g in planner.last_generations)
        return str(answer)

    planner.plan = timed  # the loop calls plan(); plan_batch is not used for one episode at a time
    player: Any = _TeacherForced(planner) if teacher_forced else planner
    per_task = []
    sim = make_simulator("mujoco", render=False)
    try:
        for task_id in tasks:
            task = get_task(task_id)
            trajectory = run_episode(sim, player, task=task, seed=task.seed,
                                     config=EpisodeConfig(render=False, max_rounds=max_rounds))
            per_task.append({"task": task_id, "rounds": len(trajectory.rounds), "success": bool(trajectory.goal_satisfied)})
    finally:
        sim.shutdown()
        planner.close()
    agreed = player.agreed if teacher_forced else None
    return {"rounds": len(cpu_s), "cpu_s": cpu_s, "wall_s": wall_s, "answer_tokens": tokens, "tasks": per_task,
            "agreed_with_expert": agreed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="emmoe-001", help="Comma-separated EMMOE-100 task ids.")
    parser.add_argument("--max-rounds", type=int, default=20)
    parser.add_argument("--fresh-cache", action="store_true", help="Build the model in an empty cache first, timed.")
    parser.add_argument("--teacher-forced", action="store_true", help="The expert plays; the model answers each round.")
    parser.add_argument("--json", type=Path, default=None, help="Also write the figures here.")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory(prefix="bench-shipped-") as scratch:
        if args.fresh_cache:
            os.environ["HOMIEBOT_CACHE_DIR"] = scratch
        figures: dict[str, Any] = {"model": NAME, **_build(args.fresh_cache)}
        played = _episodes([t.strip() for t in args.tasks.split(",") if t.strip()], args.max_rounds,
                           args.teacher_forced)
    cpu, wall = played["cpu_s"], played["wall_s"]
    figures.update({
        "rounds": played["rounds"],
        "median_cpu_s": round(statistics.median(cpu), 3), "p90_cpu_s": round(_quantile(cpu, 0.9), 3),
        "median_wall_s": round(statistics.median(wall), 3), "p90_wall_s": round(_quantile(wall, 0.9), 3),
        "first_round_cpu_s": round(cpu[0], 3),
        "median_answer_tokens": statistics.median(played["answer_tokens"]) if played["answer_tokens"] else None,
        "load_average": os.getloadavg()[0],
        "teacher_forced": args.teacher_forced,
        "agreed_with_expert": played["agreed_with_expert"],
        "tasks": played["tasks"],
    })  # fmt: skip
    print(f"{NAME}: {figures['rounds']} rounds on 1 thread; planning round median {figures['median_cpu_s']} s CPU "
          f"(p90 {figures['p90_cpu_s']}), {figures['median_wall_s']} s wall (p90 {figures['p90_wall_s']}); "
          f"first round {figures['first_round_cpu_s']} s CPU; median answer {figures['median_answer_tokens']} tokens; "
          f"load average {figures['load_average']:.1f}")
    if args.teacher_forced:
        print(f"  teacher-forced by the expert: the model chose the expert's subtask in {played['agreed_with_expert']} "
              f"of {figures['rounds']} rounds")
    for row in played["tasks"]:
        print(f"  {row['task']}: {'success' if row['success'] else 'failure'} in {row['rounds']} rounds")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
