"""Overhead of the failure-recovery wrapper itself, without model time (target: <= 2 ms per round).

Run: ``.venv/bin/python -m benchmarks.bench_recovery [--tasks 10] [--rounds 20] [--repeats 5]``

For EMMOE-100 tasks, the real privileged world state of each task's scene (the embedded MuJoCo simulator,
reset with the task's seed) stands in the requests; the base planner is a scripted one and the stage model a
:class:`~homiebot.recovery.llm.ScriptedLLM` that answers at once, so what is timed is the wrapper: reading
the feedback, the control flow, the scene representation, rendering the prompts, building the grammars,
parsing the answers, formatting the subtask. Every round is made to fail (the worst case: a full stage 1-2-3
chain with three prompts, or one CoT prompt), with stage answers that insert one step. Reported: median and
p95 of ``plan()`` per round minus the scripted base planner's own time (measured the same way), for
``none``, ``cot`` and ``cmfr`` (stages 1-4 with search), in wall time and in the thread's CPU time (on a shared,
loaded machine the wall time's mean and tail are mostly other processes' turns).

``--stage-quality DIR`` measures instead what the real SmolLM2 answers in the stages: from the episode records
of a ``homie eval`` directory (e.g. the base planner alone), the first distinct failed rounds (up to three per
episode) with a code whose missing precondition the executor names (D1: go to the target first; L1: put the held object down; L2: pick the
object first; L3: open the place first), each replayed with its recorded world state through stages 1-3 on
SmolLM2-135M (llama.cpp, constrained). Reported per case: stage 1's verdict, stage 2's steps, whether they
contain the expected precondition (action and name), and the model seconds.
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


def _time_rounds(planner: Planner, task: str, state: WorldState, rounds: int, clock: str = "wall") -> list[float]:
    """Seconds per ``plan()``: wall time, or this thread's CPU time (``clock="cpu"``: what the wrapper itself
    computes, without the time other processes of a loaded machine take from it)."""
    timer = time.perf_counter if clock == "wall" else time.thread_time
    planner.reset(task, seed=0)
    times = []
    for i in range(rounds):
        request = _request(task, state, "None" if i == 0 else FAILURE, i + 1)
        started = timer()
        planner.plan(request)
        times.append(timer() - started)
    return times


def _fmt(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    return (f"median {statistics.median(ordered) * 1e3:.3f} ms, mean {statistics.fmean(ordered) * 1e3:.3f} ms, "
            f"p95 {ordered[int(0.95 * (len(ordered) - 1))] * 1e3:.3f} ms (n={len(ordered)})")


_EXPECTED = {"D1": "Go to", "L1": "Put", "L2": "Pick", "L3": "Open"}


def stage_quality(eval_dir: str, cases: int) -> None:
    """Replay recorded failures through the stages with the real SmolLM2 (see the module docstring)."""
    import json as _json
    from pathlib import Path

    from homiebot.eval.partnr.states import read_states
    from homiebot.planner.models import bundled_model
    from homiebot.planner.text_lm import TextLanguageModel, TextModelConfig
    from homiebot.recovery.llm import EngineLLM
    from homiebot.recovery.planner import _Chain
    from homiebot.types import ErrorCode, Subtask

    found = []
    for record in sorted(Path(eval_dir, "episodes").glob("*/run*")):
        states = read_states(record)
        rounds = [_json.loads(line) for line in (record / "rounds.jsonl").read_text().splitlines() if line.strip()]
        task = rounds[0]["instruction"].splitlines()[0].removeprefix("Task: ") if rounds else ""
        seen: set[tuple[str, str]] = set()
        for i, r in enumerate(rounds):
            code, sub = r.get("error_code"), r.get("subtask")
            if code in _EXPECTED and sub and states and i < len(states) and (r["subtask_text"], code) not in seen:
                seen.add((r["subtask_text"], code))
                found.append((record.parent.name, task, Subtask(sub["action"], sub.get("target"), sub.get("place")),
                              ErrorCode(code), r["feedback"], states[i], [x.get("subtask_text", "") for x in rounds[:i]]))
                if len(seen) >= 3:
                    break  # at most three distinct failures of each episode
    found = found[:cases]
    if not found:
        print(f"no D1/L1/L2/L3 failure in the records of {eval_dir}")
        return
    engine = TextLanguageModel(TextModelConfig(bundled_model("smollm2")))
    hits = important = with_steps = 0
    for task_id, task, subtask, code, message, state, before in found:
        planner = RecoveryPlanner(_Base("x"), llm=EngineLLM(engine), mode="cmfr", stages="1,2,3", search=False)
        planner.reset(task)
        planner.done_steps = [f"{t} done" for t in before[-6:]]
        request = _request(task, state, message, len(before) + 1)
        request.last_error = code
        started = time.perf_counter()
        planner._recover(_Chain(subtask, message, code), request)
        seconds = time.perf_counter() - started
        steps = [s.subtask.text() for s in planner.queue if s.origin == "precondition"]
        want = _EXPECTED[code.value]
        name = subtask.target if code.value in ("D1", "L2") else subtask.place if code.value == "L3" else state.held
        hit = any(s.subtask.action == want and (name is None or name in (s.subtask.target, s.subtask.place))
                  for s in planner.queue if s.origin == "precondition")
        important += planner.stats.unimportant == 0
        with_steps += bool(steps)
        hits += hit
        print(f"{task_id} {subtask.text()} {code.value}: stage 1 {'important' if planner.stats.unimportant == 0 else 'drop'}; "
              f"stage 2 {steps or 'none'}; expected [{want}, {name}]: {'yes' if hit else 'no'}; "
              f"stage 3 {[s.subtask.text() for s in planner.queue if s.origin == 'workaround'] or '-'}; {seconds:.1f} s")
    n = len(found)
    print(f"{n} failures: stage 1 important {important}/{n}; stage 2 proposed steps {with_steps}/{n}; "
          f"the expected precondition {hits}/{n}")
    engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage-quality", metavar="DIR", help="replay DIR's recorded failures through SmolLM2's stages")
    parser.add_argument("--cases", type=int, default=12, help="--stage-quality: failures to replay")
    parser.add_argument("--tasks", type=int, default=10, help="EMMOE-100 tasks (their scenes' real states)")
    parser.add_argument("--rounds", type=int, default=20, help="rounds per episode (EMMOE: 20)")
    parser.add_argument("--repeats", type=int, default=5, help="episodes per task and mode")
    args = parser.parse_args()
    if args.stage_quality:
        stage_quality(args.stage_quality, args.cases)
        return

    from homiebot.recovery.scene import mentioned_names
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import load_suite

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
    for clock in ("wall", "cpu"):
        base_times: list[float] = []
        for instruction, state, target, _ in cases:
            for _ in range(args.repeats):
                base_times += _time_rounds(_Base(target), instruction, state, args.rounds, clock)
        base = statistics.median(base_times)
        for mode in ("none", "cot", "cmfr"):
            times: list[float] = []
            calls = 0
            for instruction, state, target, place in cases:
                for _ in range(args.repeats):
                    llm = None if mode == "none" else _responder(target, place)
                    planner = RecoveryPlanner(_Base(target), mode=mode, llm=llm, search=True, stages="1,2,3,4")  # type: ignore[arg-type]
                    times += [t - base for t in _time_rounds(planner, instruction, state, args.rounds, clock)]
                    calls += planner.stats.llm_calls
            rounds = len(times)
            mean_ms = statistics.fmean(times) * 1e3
            verdict = "within" if mean_ms <= TARGET_MS else "OVER"
            print(f"{mode:5s} ({clock} time): wrapper overhead per round {_fmt(times)}; {calls / rounds:.2f} stage calls "
                  f"per round; mean {verdict} the {TARGET_MS:g} ms target")


if __name__ == "__main__":
    main()
