"""Tokens a fresh-chat planning round must compute anew: the part of its prompt after the longest token prefix it
shares with the previous round's prompt (what llama.cpp's prefix reuse cannot keep, ``-p include_history=false``).

Run: ``.venv/bin/python -m benchmarks.bench_prompt_prefix DATA_DIR [DATA_DIR ...] [--episodes 150]``

Each ``DATA_DIR`` is a built SFT set (``homie data build sft``); the rounds of an episode are its samples in round
order (consecutive samples of successful rounds; a failed round is not a sample). Prompts are rendered by
SmolLM2's chat template and tokenised with its tokenizer (:func:`homiebot.training.data_check.load_tokenizer`).
Prints, per set, the median and mean of the new tokens per round and the median prompt length.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from homiebot.training.data_check import load_tokenizer, read_sft_dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="+", type=Path, help="built SFT sets")
    parser.add_argument("--episodes", type=int, default=150, help="episodes per set (the first, by id)")
    parser.add_argument("--tokenizer", default="smollm2")
    args = parser.parse_args()
    tokenizer = load_tokenizer(args.tokenizer)
    for folder in args.data:
        samples, _ = read_sft_dataset(folder)
        episodes: dict[str, list[tuple[int, tuple[tuple[str, str], ...]]]] = {}
        for sample in samples:
            episode, _, index = sample.id.rpartition("_subtask")
            if index.isdigit():
                episodes.setdefault(episode, []).append((int(index), sample.messages))
        new: list[int] = []
        whole: list[int] = []
        for episode in sorted(episodes)[: args.episodes]:
            previous: list[int] | None = None
            for _, messages in sorted(episodes[episode]):
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
        print(
            f"{folder}: {len(new)} rounds after the first; new tokens per round median {statistics.median(new):.1f}, "
            f"mean {statistics.mean(new):.1f}; whole prompt median {statistics.median(whole):.0f}"
        )


if __name__ == "__main__":
    main()
