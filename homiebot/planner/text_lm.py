"""A text-only language model on the CPU, with the key/value cache reused across the rounds of an episode.

Serves the bundled GGUF models of :mod:`homiebot.planner.models` (``--planner hf --model smollm2``), and the GGUF
export of a trained folder (``--model FOLDER -p runtime=llama_cpp``, :mod:`homiebot.planner.gguf_export`), through
one of two runtimes behind one interface (``runtime=``, see docs/models.md for the measurements):

* ``"llama_cpp"``: llama-cpp-python, llama.cpp's own quantised kernels and its GBNF grammar sampler. Fast
  (about 17 ms per token for SmolLM2-135M on 2 cores) but PyPI ships only its source, which compiles in
  about 10 minutes; pip keeps the built wheel in its cache, so a machine builds it once.
* ``"transformers"``: transformers loads the same GGUF file through the ``gguf`` package (it dequantises the
  weights to float32 on load, about 30 s) and decodes with xgrammar's token masks. No compiler needed, so it
  is the path that always works; several times slower per token.
* ``"auto"`` (the default): llama.cpp when ``llama_cpp`` is importable, else transformers.

**Prefix reuse.** A planner's conversation grows at its end within an episode (the text planning mode of
:mod:`homiebot.planner.text_planning` appends each round's turn and answer), so each call's prompt starts
with the previous call's prompt and answer. Both runtimes keep the keys and values of the last sequence they
evaluated and compute only the tokens after the longest common prefix: llama.cpp does this itself
(``Llama.generate`` matches the prefix of its evaluated tokens); the transformers runtime crops its
``DynamicCache`` to the common prefix and lets ``generate`` continue from it. ``prefix_reuse=False`` turns it
off (for the benchmark's comparison). The cache is per process and holds one sequence: a call with an
unrelated conversation simply shares less (often only the system turn).

Both runtimes decode greedily unless a call asks for sampling (``do_sample``, ``temperature``, ``top_p``,
``seed``: the OpenAI-compatible server passes a request's); the answer ends at the model's end-of-turn token
or after ``max_new_tokens``.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import importlib.util
import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from homiebot.planner.hf_backend import Generation, PlannerLoadError
from homiebot.planner.messages import ChatMessage
from homiebot.planner.models import BundledModel, ModelFile, ModelNotInstalledError

log = logging.getLogger(__name__)

Runtime = Literal["auto", "llama_cpp", "transformers"]

#: The most CPU threads ``OMP_NUM_THREADS`` gives a bundled text model (:func:`default_threads`). llama.cpp splits each matrix product of a token
#: between its threads and joins them after every operation; SmolLM2-135M's products are small (576-wide), so
#: extra threads soon cost more in joins than they save. 2 threads gave a round 0.89 s against 1.49 s for 1 on
#: 2 idle cores (BENCHMARKS.md, "A bundled text model on the CPU"). More than 2 cores were not measured here:
#: the cap keeps a big machine from handing one small model dozens of threads that mostly wait.
MAX_DEFAULT_THREADS = 4


def _omp_threads(environ: Mapping[str, str]) -> int | None:
    """``OMP_NUM_THREADS`` as a count, None when unset or not a positive number. OpenMP's syntax allows a
    list for nested levels ("4,2"): the first is the outer level's count."""
    value = environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(value) if value.isdigit() and int(value) >= 1 else None


def default_threads(environ: Mapping[str, str] | None = None) -> int:
    """The runtime's threads when none are given (``-p torch_threads=`` wins over this): ``OMP_NUM_THREADS``
    when it is set (at most :data:`MAX_DEFAULT_THREADS`), else 1.

    One thread by default, whatever the process: llama.cpp's greedy answers depend on its thread count (the
    reductions are split differently), so a default that followed the cores or the number of ``homie eval``
    workers made the same task's answers differ between ``homie run``, ``--workers 1`` and ``--workers 2``, and
    between the local and the Ray backend (caught by tests/eval/test_ray_models.py). Records must not depend
    on how a run was spread. Two threads are faster on 2 idle cores (0.89 s against 1.49 s a round,
    BENCHMARKS.md): ask for them with ``-p torch_threads=2`` or ``OMP_NUM_THREADS=2``.
    """
    threads = _omp_threads(os.environ if environ is None else environ)
    return 1 if threads is None else min(MAX_DEFAULT_THREADS, threads)


def chat_stop_ids(tokenizer: Any) -> list[int]:
    """The tokens that end an answer: the tokenizer's end of sequence and the chat template's end of turn
    (``<|im_end|>`` in SmolLM2's ChatML template), when the vocabulary has it."""
    eos = tokenizer.eos_token_id
    stop_ids = [int(eos)] if eos is not None else []
    end_of_turn = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(end_of_turn, int) and end_of_turn not in stop_ids and end_of_turn != tokenizer.unk_token_id:
        stop_ids.append(end_of_turn)
    return stop_ids


@dataclass(frozen=True)
class TextModelConfig:
    """How to run a bundled text model (or a GGUF file exported from a trained folder, run the same way)."""

    model: BundledModel | ModelFile
    runtime: Runtime = "auto"
    #: CPU threads (llama.cpp ``n_threads``; ``torch.set_num_threads`` for transformers). None: the share
    #: of the cores this process may use (:func:`default_threads`: all of them up to 4 for one process, the
    #: worker's share under ``homie eval --workers N``). On 2 idle cores 2 threads make a round 1.7x faster
    #: than 1; on cores busy with other work a second thread mostly waits (BENCHMARKS.md), so ``homie eval``
    #: gives 2 workers on 2 cores one thread each.
    threads: int | None = None
    #: Context window in tokens (SmolLM2 was trained to 8,192).
    context_tokens: int = 8192
    prefix_reuse: bool = True
    #: llama.cpp only: greedy answers test the best token against the grammar before the whole vocabulary
    #: (``_LlamaCppBackend._greedy``; the same tokens, fewer grammar checks). False: llama-cpp-python's sampler.
    fast_greedy: bool = True
    #: llama.cpp greedy loop only: up to this many draft tokens per step, copied from where the last few
    #: tokens occurred before in the conversation (prompt lookup), evaluated in one batch with the current
    #: token and kept as far as greedy decoding would have chosen them (``_LlamaCppBackend._greedy``). 0: off.
    lookup_tokens: int = 0
    #: llama.cpp greedy loop with a grammar only: jump-forward decoding (:class:`_JumpForward`). Where the grammar
    #: allows one text only (``]\nModel: `` after a target, the rest of a name once its start is unique), its
    #: tokens are not chosen one by one: they are evaluated in one batch with the next chosen token, and the text
    #: that ends the answer is not evaluated at all (the next round's prompt holds it). False: every answer token
    #: is chosen and evaluated on its own (and ``lookup_tokens`` applies).
    jump_forward: bool = True
    #: With jump-forward only: two cuts of its evaluations (:class:`_JumpForward`, "Lookahead"). A token that the
    #: grammar leaves as the only choice is taken with the forced text instead of being chosen after an evaluation of
    #: its own, and the forced text's last token, which jump-forward gives back to be chosen, is evaluated with the text
    #: as a draft and kept when the model chooses it: 2.4 evaluations after the prompt's in a round of the shipped
    #: model instead of 3.9, the round about 5 % cheaper. Off by default: it evaluates some tokens in other batches
    #: than before, llama.cpp rounds a one-token evaluation differently from a batch, and a near tie can then go the
    #: other way (1 of 79 rounds of 10 noiseless EMMOE tasks; docs/results/planning-round-2026-11-30.md).
    forced_lookahead: bool = False
    #: llama.cpp only: how the weights are encoded for the kernels. ``"q8_0"``: the bundled file re-encoded
    #: once to 8-bit blocks (:func:`homiebot.planner.models.q8_0_copy`, kept in the user's cache), the default;
    #: ``"bundled"``: the file as shipped (4-bit Q4_1 for SmolLM2). Every Q4_1 weight is a 16-level value of
    #: its block, and Q8_0's 255 levels per block hold it to within 1/254 of the block's largest weight, so the
    #: model is the same up to rounding; for a :class:`ModelFile` (a trained folder's float32 export) ``"bundled"``
    #: runs the float32 file as written. llama.cpp's 8-bit kernels are the faster ones on x86 (a round 1.32 ->
    #: 1.01 CPU s with flash attention on, BENCHMARKS.md "A bundled text model on the CPU"). The transformers
    #: runtime always dequantises the bundled file.
    weights: Literal["q8_0", "bundled"] = "q8_0"
    #: llama.cpp only: its fused (flash) attention kernel. Off by default: on the CPU it made the evaluation of
    #: a round's new turn (about 55 tokens after 1,200 cached ones) 1.6-1.9x slower than the plain kernels
    #: (BENCHMARKS.md). Records made before this default (all SmolLM2 figures up to 2026-11-26 04:30 UTC)
    #: were decoded with ``weights="bundled", flash_attention=True``.
    flash_attention: bool = False


@dataclass(frozen=True)
class Sampling:
    """Greedy (``temperature`` None) or sampled decoding of one call."""

    temperature: float | None = None
    top_p: float = 1.0
    seed: int | None = None


GREEDY = Sampling()


@dataclass(frozen=True)
class CallStats:
    """What one call cost: how many prompt tokens came from the cache, and the seconds it took."""

    prompt_tokens: int
    reused_tokens: int
    completion_tokens: int
    seconds: float
    #: CPU seconds of this process (all threads) spent on the whole call, and on evaluating the new prompt
    #: tokens alone (llama.cpp's greedy loop; None where the runtime does not split them).
    cpu_seconds: float = 0.0
    prompt_cpu_seconds: float | None = None


class _Backend(Protocol):
    """A runtime: tokenises text and decodes greedily from a token prompt, reusing its cached prefix."""

    name: str
    chat_template: str

    def tokenize(self, text: str) -> list[int]: ...

    def decode(
        self, prompt: list[int], grammar: str | None, max_new_tokens: int, reuse: bool, sampling: Sampling
    ) -> tuple[list[int], int, bool]:
        """(answer token ids without the stop token, reused prompt tokens, whether a stop token ended it)."""
        ...

    def detokenize(self, tokens: list[int]) -> str: ...

    def check_grammar(self, grammar: str) -> None:
        """Raise ``ValueError`` when the runtime cannot use ``grammar``."""
        ...


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits.astype(np.float64) - float(np.max(logits))
    return shifted - float(np.log(np.exp(shifted).sum()))


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class _LlamaCppBackend:
    name = "llama_cpp"

    def __init__(self, path: Path, config: TextModelConfig) -> None:
        import llama_cpp
        from llama_cpp import Llama, LlamaGrammar

        self._llama_cpp = llama_cpp
        self._grammar_class = LlamaGrammar
        self._is_end_of_generation = llama_cpp.llama_vocab_is_eog
        if config.weights == "q8_0":
            from homiebot.planner.models import ModelCacheError, q8_0_copy

            try:
                path = q8_0_copy(path)
            except ModelCacheError as exc:
                raise PlannerLoadError(str(exc)) from None
        elif config.weights != "bundled":
            raise PlannerLoadError(f"unknown weights {config.weights!r}; choose q8_0 or bundled")
        self.llm = Llama(
            model_path=str(path),
            n_ctx=config.context_tokens,
            n_threads=config.threads or default_threads(),
            n_threads_batch=config.threads or default_threads(),
            flash_attn=config.flash_attention,
            verbose=False,
        )
        self.chat_template = str(self.llm.metadata.get("tokenizer.chat_template", ""))
        self.eos = int(self.llm.token_eos())
        self._grammars: dict[str, Any] = {}
        #: Grammar samplers of the greedy loop, by grammar text: parsed once, reset per call (an episode's
        #: rounds share one grammar while the grounded targets stay the same).
        self._samplers: dict[str, Any] = {}
        self.n_vocab = int(self.llm.n_vocab())
        self._one_candidate = (llama_cpp.llama_token_data * 1)()
        self._all_candidates = (llama_cpp.llama_token_data * self.n_vocab)()
        self._all_view: Any = None  # a numpy view of _all_candidates, made on first use
        self.prompt_cpu_seconds: float | None = None
        #: Greedy calls use the loop of :meth:`_greedy` (False: llama-cpp-python's ``generate``, for comparisons).
        self.fast_greedy = config.fast_greedy
        self.lookup_tokens = config.lookup_tokens
        #: Draft tokens evaluated and kept by the last greedy call (prompt lookup; for the benchmark).
        self.drafted = self.accepted = 0
        #: None: not made yet; False: off (the option, or xgrammar missing).
        self._jump: _JumpForward | None | Literal[False] = None if config.jump_forward else False
        self.forced_lookahead = config.forced_lookahead
        #: Tokens the grammar forced in the last greedy call, and how many single evaluations it made.
        self.forced = self.evaluations = 0

    def tokenize(self, text: str) -> list[int]:
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def detokenize(self, tokens: list[int]) -> str:
        return self.llm.detokenize(tokens).decode("utf-8", errors="replace")

    def check_grammar(self, grammar: str) -> None:
        # llama-cpp-python parses the grammar only when it builds its sampler, and adds a failed (NULL)
        # grammar sampler to the chain unchecked: parse it here first and refuse it with an error.
        sampler = self._llama_cpp.llama_sampler_init_grammar(self.llm._model.vocab, grammar.encode("utf-8"), b"root")
        if not sampler:
            raise ValueError("llama.cpp cannot parse the grammar (GBNF); its log names the error")
        self._llama_cpp.llama_sampler_free(sampler)

    def _grammar(self, text: str) -> Any:
        # Rounds of one episode often repeat their grammar (the grounded targets change only when perception
        # sees something new): a grammar checked once is kept.
        grammar = self._grammars.get(text)
        if grammar is None:
            self.check_grammar(text)
            if len(self._grammars) > 16:
                self._grammars.clear()
            grammar = self._grammars[text] = self._grammar_class.from_string(text, verbose=False)
        return grammar

    def _sampler(self, text: str) -> Any:
        sampler = self._samplers.get(text)
        if sampler is None:
            self.check_grammar(text)
            if len(self._samplers) > 16:
                self.free_samplers()
            sampler = self._llama_cpp.llama_sampler_init_grammar(self.llm._model.vocab, text.encode("utf-8"), b"root")
            self._samplers[text] = sampler
        else:
            self._llama_cpp.llama_sampler_reset(sampler)
        return sampler

    def free_samplers(self) -> None:
        for sampler in self._samplers.values():
            self._llama_cpp.llama_sampler_free(sampler)
        self._samplers.clear()

    def _allowed(self, sampler: Any, token: int, logit: float) -> bool:
        """Whether the grammar allows ``token`` next (the sampler masks a refused candidate to -inf)."""
        candidate: Any = self._one_candidate
        candidate[0].id, candidate[0].logit, candidate[0].p = token, logit, 0.0
        array = self._llama_cpp.llama_token_data_array(candidate, 1, -1, False)
        self._llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
        return bool(np.isfinite(candidate[0].logit))

    def _best_allowed(self, sampler: Any, logits: np.ndarray) -> int:
        """The highest-logit token the grammar allows (the whole vocabulary through the grammar's mask)."""
        if self._all_view is None:
            self._all_view = np.ctypeslib.as_array(self._all_candidates)
            self._all_view["id"] = np.arange(self.n_vocab, dtype=np.int32)
        view = self._all_view
        view["logit"] = logits
        view["p"] = 0.0
        array = self._llama_cpp.llama_token_data_array(self._all_candidates, self.n_vocab, -1, False)
        self._llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
        return int(view["id"][int(np.argmax(view["logit"]))])

    def _choose(self, sampler: Any, logits: np.ndarray) -> int:
        """The greedy token of ``logits`` that the grammar allows, accepted into the grammar's state."""
        token = int(np.argmax(logits))
        if sampler is not None:
            if not self._allowed(sampler, token, float(logits[token])):
                token = self._best_allowed(sampler, logits)
            self._llama_cpp.llama_sampler_accept(sampler, token)
        return token

    def _stops(self, token: int) -> bool:
        return token == self.eos or bool(self._is_end_of_generation(self.llm._model.vocab, token))

    def _last_logits(self) -> np.ndarray:
        lib = self._llama_cpp
        return np.ctypeslib.as_array(lib.llama_get_logits_ith(self.llm._ctx.ctx, -1), shape=(self.n_vocab,))

    def _eval_rows(self, tokens: list[int]) -> list[np.ndarray]:
        """Evaluate ``tokens`` after the cached ones in one batch and return the logits after each of them
        (llama-cpp-python's ``Llama.eval`` keeps only the last row unless the model was loaded with
        ``logits_all``, which would hold a row for every position of the context)."""
        llm, lib = self.llm, self._llama_cpp
        llm._ctx.kv_cache_seq_rm(-1, llm.n_tokens, -1)
        n_past = llm.n_tokens
        llm._batch.set_batch(batch=tokens, n_past=n_past, logits_all=True)
        llm._ctx.decode(llm._batch)
        llm.input_ids[n_past : n_past + len(tokens)] = tokens
        llm.n_tokens += len(tokens)
        return [
            np.ctypeslib.as_array(lib.llama_get_logits_ith(llm._ctx.ctx, i), shape=(self.n_vocab,))
            for i in range(len(tokens))
        ]

    def _eval_last(self, tokens: list[int], rows: int) -> list[np.ndarray]:
        """Evaluate ``tokens`` after the cached ones as ``Llama.eval`` does (the same batches of ``n_batch``) and
        return copies of the logits after each of the last ``rows`` of them (only those rows are computed by the
        output layer; :meth:`_eval_rows` computes every row's)."""
        llm, lib = self.llm, self._llama_cpp
        llm._ctx.kv_cache_seq_rm(-1, llm.n_tokens, -1)
        out: list[np.ndarray] = []
        first_wanted = len(tokens) - rows
        for start in range(0, len(tokens), llm.n_batch):
            batch = tokens[start : start + llm.n_batch]
            n_past = llm.n_tokens
            llm._batch.set_batch(batch=batch, n_past=n_past, logits_all=False)
            wanted = [i for i in range(len(batch)) if start + i >= first_wanted]
            for i in wanted:
                llm._batch.batch.logits[i] = True
            llm._ctx.decode(llm._batch)
            out += [
                np.ctypeslib.as_array(lib.llama_get_logits_ith(llm._ctx.ctx, i), shape=(self.n_vocab,)).copy()
                for i in wanted
            ]
            llm.input_ids[n_past : n_past + len(batch)] = batch
            llm.n_tokens += len(batch)
        return out

    @staticmethod
    def _lookup(context: np.ndarray, length: int, count: int, ngram: int = 3) -> list[int]:
        """Prompt lookup: the ``count`` tokens that followed the latest earlier occurrence of the last
        ``ngram`` tokens of ``context[:length]`` (none when they did not occur before). A planner's answers
        repeat the format, the models' and the targets' names of earlier answers, and a small model often
        repeats a whole earlier answer."""
        if count < 1 or length <= ngram:
            return []
        window = context[:length]
        key = window[length - ngram :]
        match = np.ones(length - ngram, dtype=bool)
        for j in range(ngram):
            match &= window[j : length - ngram + j] == key[j]
        hits = np.flatnonzero(match)
        if hits.size == 0:
            return []
        start = int(hits[-1]) + ngram
        return [int(t) for t in window[start : start + count]]

    def _greedy(
        self, prompt: list[int], grammar: str | None, max_new_tokens: int, reused: int
    ) -> tuple[list[int], bool]:
        """Greedy decoding without llama-cpp-python's sampler chain.

        llama.cpp's own samplers test every one of the 49,152 tokens against the grammar at each step (about
        12 ms a token here, BENCHMARKS.md). Greedy decoding needs only the best allowed token: the argmax of the
        logits is tested first and the whole vocabulary only when the grammar refuses it, which gives the same
        token (llama.cpp's ``common_sampler_sample`` does the same for its command-line tools; ggml-org/llama.cpp,
        common/sampling.cpp, "grammar_first").

        With ``lookup_tokens`` the loop drafts the tokens that followed the last few tokens where they occurred
        before (prompt lookup decoding, as transformers' ``prompt_lookup_num_tokens``), evaluates the current
        token and the draft in one batch, and keeps each drafted token only when it is the one greedy decoding
        chooses from the logits before it; the first refused one is replaced by that choice and the cache is cut
        back to it. A batch of tokens costs less per token than one token at a time (BENCHMARKS.md).
        """
        llm = self.llm
        sampler = self._sampler(grammar) if grammar else None
        llm.n_tokens = reused
        started = time.process_time()
        llm.eval(prompt[reused:])  # drops the cached keys and values after the reused prefix first
        self.prompt_cpu_seconds = time.process_time() - started
        self.drafted = self.accepted = 0
        context = np.zeros(len(prompt) + max_new_tokens, dtype=np.int64)
        context[: len(prompt)] = prompt
        tokens: list[int] = []
        token = self._choose(sampler, self._last_logits())
        while True:
            # ``token`` is chosen and accepted by the grammar, not yet evaluated.
            if self._stops(token):
                return tokens, True
            context[len(prompt) + len(tokens)] = token
            tokens.append(token)
            if len(tokens) >= max_new_tokens:
                return tokens, False
            draft = self._lookup(
                context, len(prompt) + len(tokens), min(self.lookup_tokens, max_new_tokens - len(tokens))
            )
            if not draft:
                llm.eval([token])
                token = self._choose(sampler, self._last_logits())
                continue
            rows = self._eval_rows([token, *draft])
            start = llm.n_tokens - len(rows)  # the position of ``token``
            self.drafted += len(draft)
            for i, drafted in enumerate(draft):
                token = self._choose(sampler, rows[i])
                if token != drafted:
                    llm.n_tokens = start + 1 + i  # the cache keeps what was verified; ``token`` comes next
                    break
                self.accepted += 1
                if self._stops(token):
                    return tokens, True
                context[len(prompt) + len(tokens)] = token
                tokens.append(token)
                if len(tokens) >= max_new_tokens:
                    return tokens, False
            else:
                token = self._choose(sampler, rows[-1])

    def _cached_prefix(self, prompt: list[int], reuse: bool) -> int:
        """How many leading tokens of ``prompt`` the KV cache already holds (llama-cpp-python's own record of it),
        at most all but the last, whose logits the caller needs; 0 after a reset when ``reuse`` is off."""
        llm = self.llm
        if not reuse:
            llm.reset()
        evaluated = list(llm._input_ids[: llm.n_tokens])
        return min(_common_prefix(evaluated, prompt), len(prompt) - 1)

    def score(self, prompt: list[int], continuations: Sequence[list[int]], reuse: bool) -> tuple[list[float], int]:
        """The sum of each continuation's token log-probabilities after ``prompt`` (the likelihood choice,
        :mod:`homiebot.planner.likelihood`), and the prompt tokens reused from the cache.

        The prompt is evaluated once. The continuations are taken in token order, so that one shares its longest
        prefix with the one before (``Subtask: [Go to,`` for every Go to): the cache keeps the previous one's
        tokens and the log-probabilities it gave, and only the tokens after the shared prefix are evaluated, in
        one batch. The cache is cut back to the prompt at the end; the next round's prompt extends it."""
        llm = self.llm
        reused = self._cached_prefix(prompt, reuse)
        llm.n_tokens = reused
        llm.eval(prompt[reused:])
        base = llm.n_tokens
        previous: list[int] = []
        # rows[i]: the log-probabilities of the token at position i of ``previous`` (after the prompt and
        # previous[:i]); rows[0] follows the prompt alone, so every continuation starts from it.
        rows: list[np.ndarray] = [_log_softmax(self._last_logits())]
        totals = [0.0] * len(continuations)
        for index in sorted(range(len(continuations)), key=lambda i: continuations[i]):
            tokens = continuations[index]
            shared = min(_common_prefix(previous, tokens), len(rows) - 1, len(tokens) - 1)
            llm.n_tokens = base + shared  # the cache holds previous[:shared], which is tokens[:shared]
            fresh = [_log_softmax(row) for row in self._eval_rows(tokens[shared:-1])] if len(tokens) - 1 > shared else []
            rows = rows[: shared + 1] + fresh
            totals[index] = float(sum(rows[i][token] for i, token in enumerate(tokens)))
            previous = tokens
        llm.n_tokens = base
        return totals, reused

    def _jump_forward(self) -> _JumpForward | None:
        """The jump-forward helper, made on first use; None when turned off or xgrammar is not installed."""
        if self._jump is None:
            if importlib.util.find_spec("xgrammar") is None:
                log.warning("xgrammar is not installed: answers are decoded without jump-forward (pip install xgrammar)")
                self._jump = False
            else:
                self._jump = _JumpForward(self)
        return self._jump or None

    def _greedy_jump(
        self, jump: _JumpForward, prompt: list[int], grammar: str, max_new_tokens: int, reused: int
    ) -> tuple[list[int], bool]:
        """Greedy decoding under ``grammar`` with jump-forward (:class:`_JumpForward`).

        Each step first takes the tokens the grammar forces (accepted without a choice), then evaluates what is
        pending (the prompt's new tokens in the first step; the last chosen token and the forced ones after it)
        in one batch, and chooses the best allowed token from the logits after it. When the forced text ends the
        answer (only a stop token may follow), the loop returns without evaluating it.

        With ``forced_lookahead`` (:class:`_JumpForward`, "Lookahead") the forced tokens include those the grammar
        leaves as the only choice, and the forced text's last token, given back to be chosen, is evaluated with the
        batch as a draft: the logits of the row before it choose the next token, and when that is the draft, the
        draft's own row gives the logits of the choice after it, with no evaluation of its own (a refused draft is
        cut from the cache again).
        """
        llm = self.llm
        matcher = jump.matcher(grammar)
        llm.n_tokens = reused
        pending = list(prompt[reused:])
        tokens: list[int] = []
        self.drafted = self.accepted = self.forced = self.evaluations = 0
        first = True
        ready: np.ndarray | None = None  # the logits after the cached sequence, when a kept draft's row gave them
        while True:
            forced, complete, draft = jump.forced(matcher, lookahead=self.forced_lookahead)
            self.forced += len(forced)
            tokens += forced
            if complete or len(tokens) >= max_new_tokens:
                return tokens[:max_new_tokens], complete and len(tokens) <= max_new_tokens
            pending += forced
            after_draft: np.ndarray | None = None
            if pending or ready is None:
                started = time.process_time()
                if draft is not None:
                    logits, after_draft = self._eval_last([*pending, draft], 2)
                    self.drafted += 1
                else:
                    llm.eval(pending)
                    logits = self._last_logits()
                self.evaluations += 1
                if first:
                    self.prompt_cpu_seconds = time.process_time() - started
                    first = False
                pending = []
            else:
                logits = ready
            ready = None
            token = jump.best_allowed(matcher, logits)
            kept = after_draft is not None and token == draft
            if after_draft is not None and not kept:
                llm.n_tokens -= 1  # the refused draft leaves the cache (the next evaluation overwrites it)
            if self._stops(token):
                return tokens, True
            tokens.append(token)
            if len(tokens) >= max_new_tokens:
                return tokens, False
            if kept:
                self.accepted += 1
                ready = after_draft  # the draft is in the cache: its row's logits choose the next token
            else:
                pending = [token]

    def decode(
        self, prompt: list[int], grammar: str | None, max_new_tokens: int, reuse: bool, sampling: Sampling
    ) -> tuple[list[int], int, bool]:
        llm = self.llm
        reused = self._cached_prefix(prompt, reuse)
        self.prompt_cpu_seconds = None
        if sampling.temperature is None and self.fast_greedy:
            jump = self._jump_forward() if grammar else None
            if jump is not None and grammar:
                greedy, stopped = self._greedy_jump(jump, prompt, grammar, max_new_tokens, reused)
            else:
                greedy, stopped = self._greedy(prompt, grammar, max_new_tokens, reused)
            return greedy, reused, stopped
        tokens: list[int] = []
        stopped = False
        if sampling.temperature is None:
            options: dict[str, Any] = {"temp": 0.0, "top_k": 1}  # greedy
        else:
            options = {"temp": sampling.temperature, "top_p": sampling.top_p, "top_k": 0}
            if sampling.seed is not None:
                llm.set_seed(sampling.seed)
        # generate() itself keeps the longest common prefix of its cache and the prompt.
        for token in llm.generate(
            prompt, repeat_penalty=1.0, grammar=self._grammar(grammar) if grammar else None, reset=True, **options
        ):
            if token == self.eos or self._is_end_of_generation(llm._model.vocab, token):
                stopped = True
                break
            tokens.append(int(token))
            if len(tokens) >= max_new_tokens:
                break
        return tokens, reused, stopped


class _JumpForward:
    """Jump-forward decoding for the llama.cpp greedy loop: xgrammar's matcher over the GGUF's own vocabulary.

    llama.cpp's grammar sampler answers only "is this token allowed"; which text the grammar forces next is
    xgrammar's ``find_jump_forward_string`` (the technique of SGLang's compressed finite-state machine, Zheng et al.
    2024, "SGLang: Efficient Execution of Structured Language Model Programs", section 4). The forced text is
    tokenised as the tokenizer writes it (the way the model saw it in training), and its last token is given
    back to the grammar and chosen normally unless the text ends the answer: that token could merge with the text
    after it (``, `` then ``kitchen`` is ``,`` and `` kitchen``, not ``, `` and ``kitchen``). A token the grammar
    refuses ends the forced run there.

    **Lookahead** (``TextModelConfig.forced_lookahead``, off by default). Two kinds of evaluation are cut; each
    choice is still the greedy one under the grammar, but from logits computed in another batch:

    * A token that the grammar then leaves as the only choice is taken with the forced text. xgrammar's forced text
      stops where targets part (``_`` after `` red`` when ``red_box_1`` and ``red_can`` are both allowed) and its
      last token is given back; when that token is still the only one allowed, greedy decoding could only choose
      it, so it is not evaluated on its own first.
    * The given-back token before a real choice is evaluated with the forced text as a draft (the technique of
      speculative decoding, Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding",
      with the tokenizer's own split as the draft model): the row before it chooses the next token, and when the
      choice is the draft (`` [`` after ``Subtask:``, ``box`` after ``red_``), the draft's row already holds the
      logits of the choice after it. A refused draft is cut from the cache. Not drafted: a token whose text ends
      in whitespace (`` `` after ``Go to,``: the model writes `` kitchen``).

    A one-token evaluation of SmolLM2-135M costs about as much as a batch of three (the weights are read once per
    evaluation), so each cut saves most of an evaluation. But llama.cpp's one-token path rounds differently from its
    batch path (up to 0.54 in a logit measured), so a token evaluated in the prompt's batch instead of alone can turn
    a near tie: the shipped model's answers were the same in 47 teacher-forced rounds and differed in 1 of 79 rounds
    of 10 noiseless EMMOE tasks (docs/results/planning-round-2026-11-30.md). Hence off by default.
    """

    def __init__(self, backend: _LlamaCppBackend) -> None:
        import xgrammar as xgr

        from homiebot.planner.constrained import GrammarCompilerCache

        self._xgr = xgr
        self._backend = backend
        n_vocab = backend.n_vocab
        # Each token's bytes as llama.cpp writes them (special tokens write nothing).
        vocabulary = [backend.llm.detokenize([i], special=False) for i in range(n_vocab)]
        self.stop_ids = np.array([i for i in range(n_vocab) if backend._stops(i)], dtype=np.int64)
        self._compiler = GrammarCompilerCache(None, n_vocab, self.stop_ids.tolist(), vocabulary=vocabulary)
        self._bitmask = xgr.allocate_token_bitmask(1, n_vocab)
        self._bits = self._bitmask.numpy().view(np.uint8)
        self.n_vocab = n_vocab

    def matcher(self, grammar: str) -> Any:
        # ConstraintError (a ValueError) when the grammar does not compile; rollback is unlimited in xgrammar 0.2.
        return self._xgr.GrammarMatcher(self._compiler.compile(grammar))

    def _allowed(self, matcher: Any) -> np.ndarray:
        """Which tokens the grammar allows next (a boolean per token)."""
        matcher.fill_next_token_bitmask(self._bitmask)
        return np.unpackbits(self._bits, bitorder="little")[: self.n_vocab].astype(bool)

    def forced(self, matcher: Any, lookahead: bool = False) -> tuple[list[int], bool, int | None]:
        """The tokens the grammar forces next, accepted into ``matcher``; whether the answer is complete after them
        (only a stop token may follow); and, with ``lookahead``, a draft of the next token (not accepted) or None.

        Without ``lookahead``: the forced text's tokens, less the last one unless the text ends the answer (it is
        given back to be chosen). With it (class docstring, "Lookahead"): a token that is then the only one the
        grammar allows is taken too, and the forced text after it, until a real choice remains; the given-back
        token before that choice is the draft, unless its text ends in whitespace."""
        tokens: list[int] = []
        while True:
            text = matcher.find_jump_forward_string()
            run: list[int] = []
            for token in self._backend.tokenize(text) if text else []:
                if not matcher.accept_token(token):
                    break
                run.append(token)
            allowed = self._allowed(matcher)
            stops = int(allowed[self.stop_ids].sum())
            if stops > 0 and int(allowed.sum()) == stops:
                return tokens + run, True, None
            given_back = None
            if run:
                matcher.rollback(1)
                given_back = run.pop()
            tokens += run
            if not lookahead:
                return tokens, False, None
            if given_back is not None:
                allowed = self._allowed(matcher)
            choices = np.flatnonzero(allowed)
            if len(choices) == 1 and not self._backend._stops(int(choices[0])):
                only = int(choices[0])
                if not matcher.accept_token(only):
                    raise RuntimeError(f"the grammar refused token {only}, the only one its mask allowed")
                tokens.append(only)
                continue
            if given_back is not None and self._draftable(given_back):
                return tokens, False, given_back
            return tokens, False, None

    def _draftable(self, token: int) -> bool:
        """Whether a given-back token is worth drafting: its text does not end in whitespace (a byte-level BPE
        vocabulary joins a space to the word after it, so ``" "`` before a name is almost never the model's token)."""
        text = self._backend.detokenize([token])
        return bool(text) and not text[-1].isspace()

    def best_allowed(self, matcher: Any, logits: np.ndarray) -> int:
        """The highest-logit token the grammar allows, accepted into ``matcher`` (a stop token is not)."""
        allowed = self._allowed(matcher)
        token = int(np.argmax(logits))
        if not allowed[token]:
            token = int(np.argmax(np.where(allowed, logits, -np.inf)))
        if not self._backend._stops(token) and not matcher.accept_token(token):
            raise RuntimeError(f"the grammar refused token {token} that its mask allowed")
        return token


class _TransformersBackend:
    name = "transformers"

    def __init__(self, path: Path, config: TextModelConfig) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self._torch = torch
        if config.threads is not None:
            torch.set_num_threads(config.threads)
        folder, filename = str(path.parent), path.name
        self.tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=filename, local_files_only=True)
        self.model = AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=filename, local_files_only=True, dtype=torch.float32
        ).eval()
        self.chat_template = str(self.tokenizer.chat_template or "")
        self.stop_ids = chat_stop_ids(self.tokenizer)
        self.vocab_size = int(self.model.get_output_embeddings().weight.shape[0])
        self._compiler: Any = None
        self._cache: Any = None
        self._cached_ids: list[int] = []

    def tokenize(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def detokenize(self, tokens: list[int]) -> str:
        return str(self.tokenizer.decode(tokens, skip_special_tokens=True, clean_up_tokenization_spaces=False))

    def _compiled(self, grammar: str) -> Any:
        from homiebot.planner.constrained import GrammarCompilerCache

        if self._compiler is None:
            self._compiler = GrammarCompilerCache(self.tokenizer, self.vocab_size, self.stop_ids)
        return self._compiler.compile(grammar)

    def check_grammar(self, grammar: str) -> None:
        self._compiled(grammar)  # ConstraintError is a ValueError

    def decode(
        self, prompt: list[int], grammar: str | None, max_new_tokens: int, reuse: bool, sampling: Sampling
    ) -> tuple[list[int], int, bool]:
        from transformers import DynamicCache

        from homiebot.planner.constrained import GrammarLogitsProcessor
        from homiebot.planner.fast_decode import cache_keyword

        torch = self._torch
        reused = (
            min(_common_prefix(self._cached_ids, prompt), len(prompt) - 1) if reuse and self._cache is not None else 0
        )
        if reused > 0:
            surplus = self._cache.get_seq_length() - reused
            if surplus > 0:
                self._cache.crop(-surplus)  # transformers 5: a negative count removes that many tokens from the end
        else:
            self._cache = DynamicCache()
        input_ids = torch.tensor([prompt], dtype=torch.long)
        if sampling.temperature is None:
            options: dict[str, Any] = {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        else:
            options = {"do_sample": True, "temperature": sampling.temperature, "top_p": sampling.top_p, "top_k": None}
            if sampling.seed is not None:
                torch.manual_seed(sampling.seed)
        with torch.inference_mode():
            output = self.model.generate(
                input_ids=input_ids,
                attention_mask=torch.ones_like(input_ids),
                **{cache_keyword(): self._cache},
                max_new_tokens=max_new_tokens,
                eos_token_id=self.stop_ids,
                pad_token_id=self.stop_ids[0] if self.stop_ids else 0,
                logits_processor=[GrammarLogitsProcessor([self._compiled(grammar)])] if grammar else None,
                **options,
            )
        sequence = [int(t) for t in output[0].tolist()]
        self._cached_ids = sequence[: self._cache.get_seq_length()]
        answer = sequence[len(prompt) :]
        tokens: list[int] = []
        stopped = False
        for token in answer:
            if token in self.stop_ids:
                stopped = True
                break
            tokens.append(token)
        return tokens, reused, stopped


@functools.lru_cache(maxsize=8)
def _compiled_template(template: str) -> Any:
    """A chat template compiled once (jinja2 in a sandbox, as transformers renders it; transformers caches it too)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    return ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(template)


def _render(template: str, messages: Sequence[ChatMessage]) -> str:
    """The prompt text through the model's own chat template."""
    return str(_compiled_template(template).render(
        messages=[{"role": m.role, "content": m.text} for m in messages], add_generation_prompt=True
    ))


class TextLanguageModel:
    """A bundled text model answering chat conversations (the engine of :class:`~homiebot.planner.hf_backend.HFPlanner`
    in text mode, and of the OpenAI-compatible server for such models). One call at a time (a lock)."""

    text_only = True

    def __init__(self, config: TextModelConfig) -> None:
        self.runtime = self._choose(config.runtime)
        if config.threads is None:
            config = dataclasses.replace(config, threads=default_threads())
        try:
            path = config.model.path()
        except ModelNotInstalledError as exc:
            raise PlannerLoadError(str(exc)) from None
        self.config = config
        #: Reuse the cached prefix (``TextModelConfig.prefix_reuse``; switchable between calls for comparisons).
        self.prefix_reuse = config.prefix_reuse
        started = time.perf_counter()
        try:
            self.backend: _Backend = (
                _LlamaCppBackend(path, config) if self.runtime == "llama_cpp" else _TransformersBackend(path, config)
            )
        except ImportError as exc:
            raise PlannerLoadError(
                f"runtime {self.runtime!r} cannot load: {exc}; install it: pip install -e '.[{config.model.extra}]'"
            ) from exc
        self.load_seconds = time.perf_counter() - started
        if not self.backend.chat_template:
            raise PlannerLoadError(f"{path.name} carries no chat template")
        log.info(
            "%s loaded with %s (%d thread(s)) in %.1f s",
            config.model.name,
            self.runtime,
            config.threads,
            self.load_seconds,
        )
        self._lock = threading.Lock()
        #: The exact prompt text of the last call and its cost (for records, tests and the benchmark).
        self.last_prompt: str = ""
        self.last_stats: CallStats | None = None

    @staticmethod
    def _choose(runtime: Runtime) -> str:
        import importlib.util

        if runtime not in ("auto", "llama_cpp", "transformers"):
            raise PlannerLoadError(f"unknown runtime {runtime!r}; choose auto, llama_cpp or transformers")
        has_llama = importlib.util.find_spec("llama_cpp") is not None
        if runtime == "llama_cpp" and not has_llama:
            raise PlannerLoadError(
                "runtime 'llama_cpp' needs llama-cpp-python: pip install -e '.[smollm2]' (compiles once)"
            )
        if runtime == "auto":
            return "llama_cpp" if has_llama else "transformers"
        return runtime

    def render(self, conversation: Sequence[ChatMessage]) -> tuple[str, list[Any]]:
        """The prompt text through the model's chat template, and no images (the interface of
        :meth:`~homiebot.planner.hf_backend.VisionLanguageModel.render`)."""
        if any(m.images for m in conversation):
            raise PlannerLoadError(f"{self.config.model.name} is a text-only model: the conversation carries images")
        return _render(self.backend.chat_template, conversation), []

    def generate(
        self,
        conversations: Sequence[Sequence[ChatMessage]],
        *,
        grammars: Sequence[str | None] | None = None,
        max_new_tokens: int = 512,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        **_transformers_options: Any,
    ) -> list[Generation]:
        """Answers one conversation after another (a CPU runtime gains nothing from batching with one sequence
        cache); the signature of :meth:`~homiebot.planner.hf_backend.VisionLanguageModel.generate`, whose
        ``cache_implementation`` / ``compile`` options do not apply here."""
        sampling = Sampling(temperature, top_p, seed) if do_sample else GREEDY
        results = []
        for index, conversation in enumerate(conversations):
            grammar = grammars[index] if grammars is not None else None
            results.append(self._one(conversation, grammar, max_new_tokens, sampling))
        return results

    def score(self, conversation: Sequence[ChatMessage], continuations: Sequence[str]) -> list[tuple[float, int]]:
        """The sum of the token log-probabilities of each text in ``continuations`` written after the prompt of
        ``conversation`` (the assistant's turn opened): SayCan-style scoring (:mod:`homiebot.planner.likelihood`).
        A continuation's tokens are those the whole text (prompt and continuation) tokenizes to after the prompt's,
        so a token that spans the boundary is scored as the model would read it; with it, the number of tokens.
        llama.cpp only."""
        if not isinstance(self.backend, _LlamaCppBackend):
            raise PlannerLoadError("the likelihood choice runs on the llama.cpp runtime (-p runtime=llama_cpp)")
        text, _ = self.render(conversation)
        with self._lock:
            started, started_cpu = time.perf_counter(), time.process_time()
            prompt = self.backend.tokenize(text)
            pieces = []
            for continuation in continuations:
                whole = self.backend.tokenize(text + continuation)
                tail = whole[len(prompt):] if whole[: len(prompt)] == prompt else self.backend.tokenize(continuation)
                if not tail:
                    raise ValueError(f"the continuation {continuation!r} has no tokens")
                pieces.append(tail)
            if len(prompt) + max(len(p) for p in pieces) > self.config.context_tokens:
                raise PlannerLoadError(
                    f"the prompt has {len(prompt)} tokens, too many for the {self.config.context_tokens}-token context"
                )
            scores, reused = self.backend.score(prompt, pieces, self.prefix_reuse)
            self.last_prompt = text
            self.last_stats = CallStats(len(prompt), reused, 0, time.perf_counter() - started,
                                        cpu_seconds=time.process_time() - started_cpu)
        return [(total, len(piece)) for total, piece in zip(scores, pieces, strict=True)]

    def compile_grammar(self, grammar: str) -> None:
        """Check that the runtime can use ``grammar`` (``ValueError`` otherwise): the server refuses a broken one."""
        with self._lock:
            self.backend.check_grammar(grammar)

    def _one(
        self, conversation: Sequence[ChatMessage], grammar: str | None, max_new_tokens: int, sampling: Sampling
    ) -> Generation:
        text, _ = self.render(conversation)
        with self._lock:
            started, started_cpu = time.perf_counter(), time.process_time()
            prompt = self.backend.tokenize(text)
            room = self.config.context_tokens - len(prompt)
            if room < 1:
                raise PlannerLoadError(
                    f"the prompt has {len(prompt)} tokens, more than the {self.config.context_tokens}-token context"
                )
            tokens, reused, stopped = self.backend.decode(
                prompt, grammar, min(max_new_tokens, room), self.prefix_reuse, sampling
            )
            answer = self.backend.detokenize(tokens)
            self.last_prompt = text
            self.last_stats = CallStats(
                len(prompt),
                reused,
                len(tokens) + int(stopped),
                time.perf_counter() - started,
                cpu_seconds=time.process_time() - started_cpu,
                prompt_cpu_seconds=getattr(self.backend, "prompt_cpu_seconds", None),
            )
        return Generation(
            text=answer,
            prompt_tokens=len(prompt),
            completion_tokens=len(tokens) + int(stopped),
            finish_reason="stop" if stopped else "length",
            token_ids=tuple(tokens),
        )

    def close(self) -> None:
        backend = self.__dict__.pop("backend", None)
        if isinstance(backend, _LlamaCppBackend):
            backend.free_samplers()
        llm = getattr(backend, "llm", None)
        if llm is not None:
            llm.close()
