"""Tokens a fresh-chat planning round must compute anew: the part of its prompt after the longest token prefix it
shares with the previous round's prompt (what llama.cpp's prefix reuse cannot keep, ``-p include_history=false``);
with ``--time-episodes N``, also what such rounds cost SmolLM2-135M on llama.cpp.

Run: ``.venv/bin/python -m benchmarks.bench_prompt_prefix DATA_DIR [DATA_DIR ...] [--episodes 150]
[--time-episodes N]``

Each ``DATA_DIR`` is a built SFT set (``homie data build sft``); the rounds of an episode are its samples in round
order (consecutive samples of successful rounds; a failed round is not a sample). Prompts are rendered by
SmolLM2's chat template and tokenised with its tokenizer (:func:`homiebot.training.data_check.load_tokenizer`).
Prints, per set, the median and mean of the new tokens per round and the median prompt length.

``--time-episodes N`` plays the first N episodes' prompts, round after round, through the bundled SmolLM2 on the
planner's llama.cpp runtime with its defaults (Q8_0 weights, prefix reuse on, one thread: what ``homie run
--planner hf --model smollm2 -p runtime=llama_cpp -p include_history=false -p constrained=true`` runs), each round
answered greedily under the planner's grammar (EMMOE's actions and models; as targets, every name the prompt
writes, since a sample does not carry the scene's list), and prints the median CPU seconds of a round (this
process, ``time.process_time``: on one thread, what the round costs an idle core), of its prompt evaluation
alone, its wall seconds, the new prompt tokens llama.cpp computed and the answer tokens. The first round of an
episode starts from the previous episode's cache, as a planner worker's next episode does. The answers are the
base model's: a trained model's differ, so compare the prompt part across sets, and the whole round within one.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from pathlib import Path
from typing import Any

from homiebot.training.data_check import load_tokenizer, read_sft_dataset

Episode = list[tuple[tuple[str, str], ...]]  # the rounds' prompts, (role, text) per message, in round order

#: The words of a prompt that may name a target (a constrained answer's targets are the names the prompt writes).
_NAME = re.compile(r"[a-z][a-z0-9_]*")


def episodes_of(folder: Path) -> dict[str, Episode]:
    """The SFT set's samples grouped by episode, each episode's prompts in round order."""
    samples, _ = read_sft_dataset(folder)
    rounds: dict[str, list[tuple[int, tuple[tuple[str, str], ...]]]] = {}
    for sample in samples:
        episode, _, index = sample.id.rpartition("_subtask")
        if index.isdigit():
            rounds.setdefault(episode, []).append((int(index), sample.messages))
    return {episode: [messages for _, messages in sorted(found)] for episode, found in rounds.items()}


def new_tokens(tokenizer: Any, episodes: list[Episode]) -> tuple[list[int], list[int]]:
    """Per round after an episode's first: the tokens after the prefix shared with the previous round's prompt,
    and the whole prompt's tokens."""
    new: list[int] = []
    whole: list[int] = []
    for rounds in episodes:
        previous: list[int] | None = None
        for messages in rounds:
            text = tokenizer.apply_chat_template(
                [{"role": r, "content": t} for r, t in messages], tokenize=False, add_generation_prompt=True
            )
            ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
            if previous is not None:
                shared = 0
                while shared < min(len(ids), len(previous)) and ids[shared] == previous[shared]:
                    shared += 1
                new.append(len(ids) - shared)
                whole.append(len(ids))
            previous = ids
    return new, whole


def timed_rounds(engine: Any, episodes: list[Episode], max_new_tokens: int) -> dict[str, float]:
    """Every round of ``episodes`` answered by ``engine`` in order (module docstring); medians per round."""
    from homiebot.planner.constrained import AnswerConstraint
    from homiebot.planner.messages import ChatMessage

    cpu: list[float] = []
    prompt_cpu: list[float] = []
    wall: list[float] = []
    computed: list[int] = []
    answer: list[int] = []
    for rounds in episodes:
        for messages in rounds:
            user = messages[-1][1]
            targets = sorted(set(_NAME.findall(user)))
            grammar = AnswerConstraint.build(targets=targets, max_new_tokens=max_new_tokens).grammar()
            conversation = [ChatMessage(role, text) for role, text in messages]  # type: ignore[arg-type]
            started, started_cpu = time.perf_counter(), time.process_time()
            engine.generate([conversation], grammars=[grammar], max_new_tokens=max_new_tokens)
            cpu.append(time.process_time() - started_cpu)
            wall.append(time.perf_counter() - started)
            stats = engine.last_stats
            computed.append(stats.prompt_tokens - stats.reused_tokens)
            answer.append(stats.completion_tokens)
            if stats.prompt_cpu_seconds is not None:
                prompt_cpu.append(stats.prompt_cpu_seconds)
    return {
        "rounds": len(cpu),
        "cpu_s": statistics.median(cpu),
        "prompt_cpu_s": statistics.median(prompt_cpu) if prompt_cpu else float("nan"),
        "wall_s": statistics.median(wall),
        "computed_tokens": statistics.median(computed),
        "answer_tokens": statistics.median(answer),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="+", type=Path, help="built SFT sets")
    parser.add_argument("--episodes", type=int, default=150, help="episodes per set (the first, by id)")
    parser.add_argument("--tokenizer", default="smollm2")
    parser.add_argument("--time-episodes", type=int, default=0, help="episodes per set played on llama.cpp")
    parser.add_argument("--max-new-tokens", type=int, default=160, help="the planner's answer cap")
    args = parser.parse_args()
    tokenizer = load_tokenizer(args.tokenizer)
    engine = None
    if args.time_episodes:
        from homiebot.planner.models import bundled_model
        from homiebot.planner.text_lm import TextLanguageModel, TextModelConfig

        model = bundled_model("smollm2")
        engine = TextLanguageModel(TextModelConfig(model, runtime="llama_cpp", threads=1))  # type: ignore[arg-type]
    try:
        for folder in args.data:
            found = episodes_of(folder)
            chosen = [found[e] for e in sorted(found)[: args.episodes]]
            new, whole = new_tokens(tokenizer, chosen)
            print(
                f"{folder}: {len(new)} rounds after the first; new tokens per round median "
                f"{statistics.median(new):.1f}, mean {statistics.mean(new):.1f}; whole prompt median "
                f"{statistics.median(whole):.0f}",
                flush=True,
            )
            if engine is not None:
                timed = timed_rounds(engine, chosen[: args.time_episodes], args.max_new_tokens)
                print(
                    f"  llama.cpp, 1 thread, {timed['rounds']:.0f} rounds of {args.time_episodes} episodes: median "
                    f"{timed['cpu_s']:.3f} s CPU per round ({timed['prompt_cpu_s']:.3f} s of it the prompt), "
                    f"{timed['wall_s']:.3f} s wall; {timed['computed_tokens']:.0f} prompt tokens computed, "
                    f"{timed['answer_tokens']:.0f} answer tokens",
                    flush=True,
                )
    finally:
        if engine is not None:
            engine.close()


if __name__ == "__main__":
    main()
