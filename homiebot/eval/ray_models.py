"""Shared model servers for ``homie eval --backend ray``: one copy of a planner's model per Ray actor, not per worker.

With the local backend every worker that runs a model planner (``--planner hf``) loads its own copy of the
model. On Ray the model can live in a few :class:`ModelActor` s instead (``--model-actors N``, one per GPU
with ``--model-gpus 1``: Ray places each where its declared resources are,
https://docs.ray.io/en/latest/ray-core/scheduling/resources.html), and each episode worker's planner keeps
its own per-episode state (the text mode's growing chat, the round counter, the sampling seed) but sends its
``generate`` calls to an actor through a :class:`RemoteEngine`.

Requests of concurrent episodes are gathered into batches by the batching front the OpenAI-compatible server
uses (:class:`homiebot.planner.batching.RequestBatcher`): the actor is threaded (``max_concurrency``), each
call waits on the batcher, and one batch runs at a time on the model. Requests are batched only with
requests of the same generation options (a batch is one ``engine.generate`` call). A CPU runtime answers a
batch one conversation after another (:class:`homiebot.planner.text_lm.TextLanguageModel`), a GPU model in
one padded batch.

The model is built exactly as the worker's planner would build it (an :class:`~homiebot.planner.hf_backend.HFPlanner`
with the evaluation's planner configuration, whose engine the actor keeps), so the answers are the same greedy
answers; only where the model sits changes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from homiebot.config.planners import PlannerConfig

log = logging.getLogger(__name__)

#: Planners whose backend holds a model that model actors can serve (the ``engine=`` option of HFPlanner).
SHARED_MODEL_PLANNERS = ("hf",)


@dataclass(frozen=True)
class _Request:
    conversation: Any
    grammar: str | None
    options: tuple[tuple[str, Any], ...]  # generation options, sorted: a batch shares them


class ModelActor:
    """A Ray actor holding one copy of a planner's model and batching the calls of concurrent episodes."""

    def __init__(self, planner: PlannerConfig, max_batch_size: int = 8, max_wait_s: float = 0.01) -> None:
        from homiebot.logs import configure_logging
        from homiebot.planner.batching import RequestBatcher
        from homiebot.planner.registry import build_planner

        configure_logging(logging.WARNING, "%(asctime)s %(levelname)s model actor %(process)d %(name)s: %(message)s")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        self.setup_error: str | None = None
        self.engine: Any = None
        try:
            built = build_planner(planner)  # the evaluation's planner configuration, as a worker builds it
            from homiebot.planner.hf_backend import HFPlanner

            if not isinstance(built, HFPlanner):  # the registry's "hf" is HFPlanner; its engine is what is shared
                raise TypeError(f"planner {planner.name!r} is {type(built).__name__}, not HFPlanner")
            self.engine = built.engine
        except Exception as err:  # reported by ready(): the evaluation stops with it, as when a worker cannot load it
            self.setup_error = f"{type(err).__name__}: {err}"
        self.batcher: RequestBatcher[_Request, Any] = RequestBatcher(
            self._run_batch, max_batch_size=max_batch_size, max_wait_s=max_wait_s, name="model-actor-batcher"
        )
        self.calls = 0

    def ready(self) -> str | None:
        return self.setup_error

    def text_only(self) -> bool:
        return bool(self.engine.text_only)

    def _run_batch(self, requests: list[_Request]) -> list[Any]:
        results: list[Any] = [None] * len(requests)
        groups: dict[tuple[tuple[str, Any], ...], list[int]] = {}
        for i, request in enumerate(requests):
            groups.setdefault(request.options, []).append(i)
        for options, members in groups.items():
            grammars = [requests[i].grammar for i in members]
            generations = self.engine.generate(
                [requests[i].conversation for i in members],
                grammars=grammars if any(g is not None for g in grammars) else None,
                **dict(options),
            )
            for i, generation in zip(members, generations, strict=True):
                results[i] = generation
        return results

    def generate(
        self, conversations: Sequence[Any], grammars: Sequence[str | None] | None = None, **options: Any
    ) -> list[Any]:
        """The engine's ``generate``, each conversation queued with those of the other episodes' calls."""
        self.calls += 1
        key = tuple(sorted(options.items()))
        futures = [
            self.batcher.submit(_Request(c, grammars[i] if grammars is not None else None, key))
            for i, c in enumerate(conversations)
        ]
        return [f.result() for f in futures]

    def render(self, conversation: Any) -> tuple[str, list[Any]]:
        return self.engine.render(conversation)  # type: ignore[no-any-return]

    def compile_grammar(self, grammar: str) -> None:
        self.engine.compile_grammar(grammar)

    def stats(self) -> dict[str, Any]:
        """Calls and batches so far (the benchmark and the test read them)."""
        return {
            "pid": os.getpid(),
            "calls": self.calls,
            "batches": self.batcher.stats.batches,
            "requests": self.batcher.stats.requests,
            "max_batch": max(self.batcher.stats.sizes, default=0),
        }


class RemoteEngine:
    """The engine interface :class:`~homiebot.planner.hf_backend.HFPlanner` uses, answered by a :class:`ModelActor`."""

    def __init__(self, actor: Any) -> None:
        import ray

        self._ray = ray
        self.actor = actor
        self.text_only = bool(ray.get(actor.text_only.remote()))

    def generate(self, conversations: Sequence[Any], *, grammars: Sequence[str | None] | None = None, **options: Any) -> list[Any]:
        from homiebot.planner.hf_backend import PlannerBackendError

        try:
            result: list[Any] = self._ray.get(self.actor.generate.remote(list(conversations), grammars, **options))
        except self._ray.exceptions.RayActorError as err:
            # The model is gone, not the planner wrong: the episode is not a result (the worker's guard sees
            # the backends' common error and the runner reruns the episode later).
            raise PlannerBackendError(f"the shared model actor was lost: {str(err).splitlines()[0]}") from None
        return result

    def render(self, conversation: Any) -> tuple[str, list[Any]]:
        result: tuple[str, list[Any]] = self._ray.get(self.actor.render.remote(conversation))
        return result

    def compile_grammar(self, grammar: str) -> None:
        self._ray.get(self.actor.compile_grammar.remote(grammar))

    def close(self) -> None:
        """The model belongs to the actor, which the pool ends; a worker's planner closing changes nothing."""
