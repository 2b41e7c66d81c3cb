"""Overhead of the failure-recovery wrapper itself, without model time (target: <= 2 ms per round).

Run: ``.venv/bin/python -m benchmarks.bench_recovery [--tasks 10] [--rounds 20] [--repeats 5]``

For EMMOE-100 tasks, the real privileged world state of each task's scene (the embedded MuJoCo simulator,
reset with the task's seed) stands in the requests; the base planner is a scripted one and the stage model a
:class:`~homiebot.recovery.llm.ScriptedLLM` that answers at once, so what is timed is the wrapper: reading
the feedback, the control flow, the scene representation, rendering the prompts, building the grammars,
parsing the answers, formatting the subtask. Every round is made to fail (the worst case: a full stage 1-2-3
chain with three prompts, or one CoT prompt), with stage answers that insert one step. Reported: median and
p95 of ``plan()`` per round minus the scripted base planner's own time (measured the same way), for
``none``, ``cot`` and ``cmfr`` (stages 1-4 with search).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence

from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.messages import ChatMessage
from homiebot.recovery.llm import ScriptedLLM
from homiebot.recovery.planner import RecoveryPlanner
from homiebot.types import EMMOE_ACTIONS, EMMOE_MODELS, WorldState

TARGET_MS = 2.0
FAILURE = "Unable to pick, the subtask is too difficult to perform"


class _Base(Planner):
    """A base planner that picks the task's first mentioned object every round (its time is subtracted)."""

    name = "bench-base"

    def __init__(self, target: str) -> None:
        self.answer = f"Analysis: pick it\nSubtask: [Pick, {target}]\nModel: RT-1-X"

    def plan(self, request: PlanRequest) -> str:
        return self.answer


def _responder(target: str, place: str) -> ScriptedLLM:
    def respond(messages: Sequence[ChatMessage]) -> str:
        text = messages[-1].text
        if "Is this step" in text or "still need this step" in text:
            return json.dumps({"reason": "the task needs it", "important": True})
        if "Some steps work only" in text:
            return json.dumps({"reason": "nothing is missing", "missing": False, "steps": []})
        if "Think step by step" in text:
            return json.dumps({"reasoning": "open it first", "action": "insert", "steps": [f"[Open, {place}]"]})
        return json.dumps({"reason": "use the place", "steps": [f"[Go to, {place}]"]})

    return ScriptedLLM(responder=respond, keep_prompts=False)


def _request(task: str, state: WorldState, feedback: str, round_index: int) -> PlanRequest:
    return PlanRequest(system_prompt="", instruction="", images=[], task=task, round_index=round_index,
                       feedback=feedback, actions=EMMOE_ACTIONS, models=EMMOE_MODELS, world_state=state)


def _time_rounds(planner: Planner, task: str, state: WorldState, rounds: int) -> list[float]:
    planner.reset(task, seed=0)
    times = []
    for i in range(rounds):
        request = _request(task, state, "None" if i == 0 else FAILURE, i + 1)
        started = time.perf_counter()
        planner.plan(request)
        times.append(time.perf_counter() - started)
    return times


def _fmt(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    return (f"median {statistics.median(ordered) * 1e3:.3f} ms, mean {statistics.fmean(ordered) * 1e3:.3f} ms, "
            f"p95 {ordered[int(0.95 * (len(ordered) - 1))] * 1e3:.3f} ms (n={len(ordered)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10, help="EMMOE-100 tasks (their scenes' real states)")
    parser.add_argument("--rounds", type=int, default=20, help="rounds per episode (EMMOE: 20)")
    parser.add_argument("--repeats", type=int, default=5, help="episodes per task and mode")
    args = parser.parse_args()

    from homiebot.eval.tasks import load_suite
    from homiebot.recovery.scene import mentioned_names
    from homiebot.sim.base import make_simulator

    sim = make_simulator("mujoco", render=False)
    cases = []
    for task in list(load_suite("emmoe100").tasks)[: args.tasks]:
        sim.reset(task.scene, task.seed)
        state = sim.state()
        names = mentioned_names(state, [task.instruction]) or sorted(state.entities)[:2]
        cases.append((task.instruction, state, names[0], names[-1]))
    sim.shutdown()
    print(f"{len(cases)} tasks, {args.rounds} rounds, {args.repeats} episodes each; entities per state: "
          f"{statistics.median(len(c[1].entities) for c in cases):.0f} (median)")
    base_times: list[float] = []
    for instruction, state, target, _ in cases:
        for _ in range(args.repeats):
            base_times += _time_rounds(_Base(target), instruction, state, args.rounds)
    base = statistics.median(base_times)
    for mode in ("none", "cot", "cmfr"):
        times: list[float] = []
        calls = 0
        for instruction, state, target, place in cases:
            for _ in range(args.repeats):
                llm = None if mode == "none" else _responder(target, place)
                planner = RecoveryPlanner(_Base(target), mode=mode, llm=llm, search=True, stages="1,2,3,4")  # type: ignore[arg-type]
                times += [t - base for t in _time_rounds(planner, instruction, state, args.rounds)]
                calls += planner.stats.llm_calls
        rounds = len(times)
        median_ms = statistics.median(times) * 1e3
        verdict = "within" if median_ms <= TARGET_MS else "OVER"
        print(f"{mode:5s}: wrapper overhead per round {_fmt(times)}; {calls / rounds:.2f} stage calls per round; "
              f"{verdict} the {TARGET_MS:g} ms target")


if __name__ == "__main__":
    main()
