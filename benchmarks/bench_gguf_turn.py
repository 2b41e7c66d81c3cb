"""What a planning round's two parts cost for GGUF models on llama.cpp, one thread: a user turn evaluated in one
batch after a cached context, and answer tokens evaluated one at a time (the greedy loop's steps).

Each file evaluates the same text's tokens (its own tokenizer's): ``--context`` tokens first (cached), then a batch of
``--turn`` tokens (timed), then ``--answer`` single tokens (timed). Process CPU seconds, so a busy machine's wait for
a core is not counted; compare files within one run.

Usage::

    python -m benchmarks.bench_gguf_turn MODEL.gguf [MODEL2.gguf ...] [--context 400 --turn 100 --answer 16]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

TEXT = "the robot goes to the fridge, opens it and picks up the green can for the kitchen counter. " * 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", type=Path, help="GGUF files.")
    parser.add_argument("--context", type=int, default=400)
    parser.add_argument("--turn", type=int, default=100)
    parser.add_argument("--answer", type=int, default=16)
    args = parser.parse_args()
    from llama_cpp import Llama

    for path in args.models:
        llm = Llama(model_path=str(path), n_ctx=4096, n_threads=1, n_threads_batch=1, verbose=False)
        try:
            tokens = llm.tokenize(TEXT.encode())[: args.context + args.turn + args.answer]
            llm.eval(tokens[: args.context])
            started = time.process_time()
            llm.eval(tokens[args.context : args.context + args.turn])
            turn = time.process_time() - started
            started = time.process_time()
            for token in tokens[args.context + args.turn :]:
                llm.eval([token])
            answer = time.process_time() - started
        finally:
            llm.close()
        print(f"{path.name} (vocabulary {llm.n_vocab()}): {args.turn}-token turn after {args.context} cached "
              f"{turn:.3f} s CPU; {args.answer} tokens one at a time {answer:.3f} s CPU")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
