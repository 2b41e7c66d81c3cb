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

Prints the median and p90 of the rounds' CPU and wall seconds, the median answer tokens, the split of a round (the new
prompt tokens' evaluation, llama.cpp's own timing, and the rest: the answer's evaluations, the grammar, the chat's
rendering), and per task SR and rounds. With ``--versus`` it also prints the median of the rounds' own ratios (the
same rounds are played by both configurations when they are teacher-forced), steadier than the medians' ratio on a
machine whose load changes between the two configurations' turns.
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


class _Timed:
    """One planner configuration: its planner, its rounds' CPU and wall seconds, its answers."""

    def __init__(self, options: dict[str, Any], teacher_forced: bool) -> None:
        from homiebot.config.planners import planner_config
        from homiebot.planner.registry import build_planner

        self.planner: Any = build_planner(planner_config("hf", {"model": NAME, "torch_threads": 1, **options}))
        self.cpu_s: list[float] = []
        self.wall_s: list[float] = []
        self.tokens: list[int] = []
        self.answers: list[str] = []
        #: Per round, the prompt tokens not reused from the cache and the CPU seconds of evaluating them (the
        #: llama.cpp runtime's own split, TextLanguageModel.last_stats).
        self.new_tokens: list[int] = []
        self.prompt_cpu_s: list[float] = []
        #: Per round, the evaluations after the prompt's (the answer's steps) and the CPU seconds of the rest of the
        #: round (the round less the prompt's evaluation: the answer's steps, the grammar, the chat's rendering).
        self.answer_evaluations: list[int] = []
        self.rest_cpu_s: list[float] = []
        plan = self.planner.plan

        def timed(request: Any) -> str:
            wall, cpu = time.perf_counter(), time.process_time()
            answer = plan(request)
            self.cpu_s.append(time.process_time() - cpu)
            self.wall_s.append(time.perf_counter() - wall)
            self.tokens.extend(g.completion_tokens for g in self.planner.last_generations)
            self.answers.append(str(answer))
            stats = self.planner.engine.last_stats
            if stats is not None and stats.prompt_cpu_seconds is not None:
                self.new_tokens.append(stats.prompt_tokens - stats.reused_tokens)
                self.prompt_cpu_s.append(stats.prompt_cpu_seconds)
                self.rest_cpu_s.append(self.cpu_s[-1] - stats.prompt_cpu_seconds)
                backend = getattr(self.planner.engine, "backend", None)
                if isinstance(getattr(backend, "evaluations", None), int):
                    self.answer_evaluations.append(backend.evaluations - 1)
            return str(answer)

        self.planner.plan = timed  # the loop calls plan(); plan_batch is not used for one episode at a time
        self.player: Any = _TeacherForced(self.planner) if teacher_forced else self.planner
        self.tasks: list[dict[str, Any]] = []


def _episodes(tasks: list[str], max_rounds: int, teacher_forced: bool, configs: list[dict[str, Any]]) -> list[_Timed]:
    """Every task played once with each configuration, the configurations taking turns task by task (so that both
    meet the same load on a shared machine)."""
    from homiebot.agent.loop import EpisodeConfig, run_episode
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task

    played = [_Timed(options, teacher_forced) for options in configs]
    sim = make_simulator("mujoco", render=False)
    try:
        for task_id in tasks:
            task = get_task(task_id)
            for one in played:
                trajectory = run_episode(sim, one.player, task=task, seed=task.seed,
                                         config=EpisodeConfig(render=False, max_rounds=max_rounds))
                one.tasks.append({"task": task_id, "rounds": len(trajectory.rounds),
                                  "success": bool(trajectory.goal_satisfied)})
    finally:
        sim.shutdown()
        for one in played:
            one.planner.close()
    return played


def _option(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), json.loads(value) if value.strip() in ("true", "false") or value.strip().isdigit() else value


def _figures(one: _Timed, teacher_forced: bool) -> dict[str, Any]:
    cpu, wall = one.cpu_s, one.wall_s
    return {
        "rounds": len(cpu),
        "median_cpu_s": round(statistics.median(cpu), 3), "p90_cpu_s": round(_quantile(cpu, 0.9), 3),
        "median_wall_s": round(statistics.median(wall), 3), "p90_wall_s": round(_quantile(wall, 0.9), 3),
        "first_round_cpu_s": round(cpu[0], 3),
        "median_answer_tokens": statistics.median(one.tokens) if one.tokens else None,
        "median_new_prompt_tokens": statistics.median(one.new_tokens) if one.new_tokens else None,
        "median_prompt_cpu_s": round(statistics.median(one.prompt_cpu_s), 3) if one.prompt_cpu_s else None,
        "median_rest_cpu_s": round(statistics.median(one.rest_cpu_s), 3) if one.rest_cpu_s else None,
        "mean_answer_evaluations": (round(statistics.mean(one.answer_evaluations), 2)
                                    if one.answer_evaluations else None),
        "agreed_with_expert": one.player.agreed if teacher_forced else None,
        "tasks": one.tasks,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="emmoe-001", help="Comma-separated EMMOE-100 task ids.")
    parser.add_argument("--max-rounds", type=int, default=20)
    parser.add_argument("--fresh-cache", action="store_true", help="Build the model in an empty cache first, timed.")
    parser.add_argument("--teacher-forced", action="store_true", help="The expert plays; the model answers each round.")
    parser.add_argument("--json", type=Path, default=None, help="Also write the figures here.")
    parser.add_argument("-p", dest="options", type=_option, action="append", default=[],
                        help="A planner option KEY=VALUE (e.g. jump_forward=false), for every configuration.")
    parser.add_argument("--versus", type=_option, action="append", default=[],
                        help="Also play every task with this option changed (KEY=VALUE), taking turns task by task, "
                        "and print the ratio of the medians and whether the answers were the same.")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    base = dict(args.options)
    configs = [base] + ([{**base, **dict(args.versus)}] if args.versus else [])
    with tempfile.TemporaryDirectory(prefix="bench-shipped-") as scratch:
        if args.fresh_cache:
            os.environ["HOMIEBOT_CACHE_DIR"] = scratch
        figures: dict[str, Any] = {"model": NAME, **_build(args.fresh_cache)}
        played = _episodes([t.strip() for t in args.tasks.split(",") if t.strip()], args.max_rounds,
                           args.teacher_forced, configs)
    figures.update({"load_average": os.getloadavg()[0], "teacher_forced": args.teacher_forced,
                    "options": base, **_figures(played[0], args.teacher_forced)})
    if len(played) > 1:
        figures["versus"] = {"options": configs[1], **_figures(played[1], args.teacher_forced),
                             "same_answers": played[0].answers == played[1].answers}
        if len(played[0].cpu_s) == len(played[1].cpu_s):
            # The same rounds in both (teacher-forced, or the same answers): each round's ratio, then their median,
            # which a load that changes between the two configurations' turns moves less than the medians' ratio.
            figures["versus"]["median_paired_ratio"] = round(statistics.median(
                v / b for b, v in zip(played[0].cpu_s, played[1].cpu_s, strict=True)), 3)
            if len(played[0].rest_cpu_s) == len(played[1].rest_cpu_s) == len(played[0].cpu_s):
                figures["versus"]["median_paired_rest_ratio"] = round(statistics.median(
                    v / b for b, v in zip(played[0].rest_cpu_s, played[1].rest_cpu_s, strict=True)), 3)
    for label, row in [("", figures), ("versus ", figures.get("versus"))]:
        if row is None:
            continue
        print(f"{label}{NAME} {row['options'] or ''}: {row['rounds']} rounds on 1 thread; planning round median "
              f"{row['median_cpu_s']} s CPU (p90 {row['p90_cpu_s']}), {row['median_wall_s']} s wall "
              f"(p90 {row['p90_wall_s']}); first round {row['first_round_cpu_s']} s CPU; median answer "
              f"{row['median_answer_tokens']} tokens; the new prompt tokens: median {row['median_new_prompt_tokens']}, "
              f"evaluated in {row['median_prompt_cpu_s']} s CPU; the rest of the round (the answer's steps) median "
              f"{row['median_rest_cpu_s']} s CPU, {row['mean_answer_evaluations']} evaluations after the prompt's (mean)")
        if args.teacher_forced:
            print(f"  teacher-forced by the expert: the model chose the expert's subtask in {row['agreed_with_expert']} "
                  f"of {row['rounds']} rounds")
        for task in row["tasks"]:
            print(f"  {task['task']}: {'success' if task['success'] else 'failure'} in {task['rounds']} rounds")
    if "versus" in figures:
        versus = figures["versus"]
        print(f"versus / base, median CPU per round: {versus['median_cpu_s'] / figures['median_cpu_s']:.3f}; "
              f"the same answers in every round: {versus['same_answers']}")
        if "median_paired_ratio" in versus:
            print(f"versus / base, the median of the rounds' own ratios: {versus['median_paired_ratio']:.3f} "
                  f"(the rest of the round, after the prompt's evaluation: {versus.get('median_paired_rest_ratio')})")
    print(f"load average {figures['load_average']:.1f}")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
