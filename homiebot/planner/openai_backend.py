"""OpenAI-compatible chat backend: plan through any server that speaks the chat-completions API.

``homie run --planner openai --base-url URL --model M [--api-key-env NAME] [--constrained]`` works with
OpenAI's API, vLLM, SGLang, Ollama, llama.cpp's server, LM Studio and the project's own
:mod:`homiebot.planner.openai_server`. The four views travel as base64 PNG data URLs in ``image_url``
parts of the last user turn (:mod:`homiebot.planner.messages`); the conversation is EMMOE's. Each call's
messages, as sent, and the answer are reported in the request's ``model_calls`` (the episode record keeps them).

Library choice: the official ``openai`` client. It already implements what a planner needs from the wire:
timeouts, retries with exponential backoff and jitter on connection errors, 408/409/429 and 5xx (honouring
``Retry-After``), and typed errors; this module only turns its errors into messages that name the server
and never the key.

Configuration (each also from the environment, the explicit option winning):

* ``base_url`` / ``HOMIE_OPENAI_BASE_URL`` (then ``OPENAI_BASE_URL``); default OpenAI's API.
* ``model`` / ``HOMIE_OPENAI_MODEL``; when neither is given the server's model list must hold exactly one
  model, which is used (vLLM and llama.cpp serve one).
* ``api_key_env``: the *name* of the variable holding the key (default ``OPENAI_API_KEY``). The key is
  read once, kept out of ``repr``, logs and exceptions (any echo of it in a server's error text is
  replaced by ``[redacted]``). Local servers need no key: when the default variable is unset, the
  placeholder ``EMPTY`` is sent; when a variable was named explicitly and is unset, that is an error.

Constrained decoding (``constrained=True``) sends the answer grammar of
:mod:`homiebot.planner.constrained` (the same EBNF the hf backend applies) in the request field the
server understands (``grammar_field``): ``structured_outputs`` (vLLM >= 0.10.2 and the local server:
``{"structured_outputs": {"grammar": ...}}``), ``guided_grammar`` (older vLLM) or ``grammar`` (llama.cpp).
Servers without grammar support (OpenAI's API, Ollama) refuse or ignore it; a refusal is reported as such.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.constrained import DEFAULT_ANALYSIS_MAX_CHARS, AnswerConstraint
from homiebot.planner.hf_backend import PlannerBackendError, PlannerLoadError
from homiebot.planner.messages import ChatMessage, build_messages, report_call, to_openai_messages

log = logging.getLogger(__name__)


class OpenAIServerError(PlannerBackendError):
    """The OpenAI-compatible server could not give an answer (unreachable, timed out, refused the request).

    A subclass of the backends' common error, so callers that treat every backend alike still catch it, while
    logs and tracebacks name the backend that failed.
    """


DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
#: Sent when no key is configured: OpenAI-compatible local servers ignore it (vLLM's own convention).
PLACEHOLDER_API_KEY = "EMPTY"
_MASKED_KEY = re.compile(r"\b(sk|key)-[\w*\-]*\*{2,}[\w*\-]*", re.IGNORECASE)

GrammarField = Literal["structured_outputs", "guided_grammar", "grammar"]
#: How long the start-up probe of the server (:meth:`OpenAIPlanner.preflight`) waits: a server that is up answers
#: its model list at once, and a command should not hang on a wrong address.
PROBE_TIMEOUT_S = 5.0


def redact(text: str, secret: str | None) -> str:
    """``text`` without ``secret`` and without masked keys such as ``sk-abc***xyz`` that servers echo."""
    if secret and secret != PLACEHOLDER_API_KEY:
        text = text.replace(secret, "[redacted]")
    return _MASKED_KEY.sub("[redacted]", text)


class OpenAIPlanner(Planner):
    """EMMOE planner over an OpenAI-compatible chat-completions server."""

    name = "openai"
    privileged = False
    accepts_free_text = True

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key_env: str | None = None,
        constrained: bool = False,
        grammar_field: GrammarField = "structured_outputs",
        icl_example: bool = False,
        include_history: bool = True,
        max_tokens: int = 512,
        max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
        analysis_max_chars: int = DEFAULT_ANALYSIS_MAX_CHARS,
        temperature: float | None = 0.0,
        top_p: float | None = None,
        seed: int | None = None,
        image_detail: Literal["low", "high", "auto"] | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 3,
        concurrency: int = 8,
    ) -> None:
        try:
            import openai
        except ImportError as exc:
            raise PlannerLoadError("the openai planner needs the openai package: pip install -e '.[models]'") from exc
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if grammar_field not in ("structured_outputs", "guided_grammar", "grammar"):
            raise ValueError(f"grammar_field must be structured_outputs, guided_grammar or grammar, got {grammar_field!r}")
        self._openai = openai
        self.base_url = (
            base_url
            or os.environ.get("HOMIE_OPENAI_BASE_URL")
            or os.environ.get("OPENAI_BASE_URL")
            or "https://api.openai.com/v1"
        ).rstrip("/")
        key_env = api_key_env or DEFAULT_API_KEY_ENV
        key = os.environ.get(key_env)
        if not key:
            if api_key_env is not None:
                raise ValueError(f"--api-key-env {api_key_env}: that environment variable is not set or empty")
            log.debug("%s is not set: sending no API key (fine for local servers)", DEFAULT_API_KEY_ENV)
            key = PLACEHOLDER_API_KEY
        self.api_key_env = key_env
        self.__api_key = key  # name-mangled: not an attribute anyone reads by accident
        self.constrained = constrained
        self.grammar_field = grammar_field
        self.icl_example = icl_example
        self.include_history = include_history
        self.max_tokens = max_tokens
        self.max_tokens_field = max_tokens_field
        self.analysis_max_chars = analysis_max_chars
        self.temperature = temperature
        self.top_p = top_p
        self.seed = seed
        self.image_detail = image_detail
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.concurrency = max(1, concurrency)
        self._client = openai.OpenAI(
            base_url=self.base_url, api_key=key, timeout=timeout_s, max_retries=max_retries
        )
        self.model = model or os.environ.get("HOMIE_OPENAI_MODEL") or None
        self._episode_seed: int | None = None
        #: The last call's ``usage`` (token counts) and ``finish_reason``, for records and benchmarks.
        self.last_usage: dict[str, Any] | None = None
        self.last_finish_reason: str | None = None

    @classmethod
    def preflight(cls, options: Mapping[str, Any]) -> None:
        """Ask the server for its model list once (``GET {base_url}/models``, no retry, a short timeout), so that a
        server that is down or a wrong ``--base-url`` stops the command before it writes anything. Only a server
        that cannot be reached, or one that refuses the key, fails here: a server that answers otherwise is up (not
        every gateway serves the model list)."""
        planner = cls(**options)
        try:
            planner.probe()
        finally:
            planner.close()

    def probe(self) -> None:
        """One ``GET /models``; raises :class:`OpenAIServerError` when the server cannot be reached or refuses the key."""
        openai = self._openai
        timeout_s = min(self.timeout_s, PROBE_TIMEOUT_S)
        client = self._client.with_options(timeout=timeout_s, max_retries=0)
        try:
            client.models.list()
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            raise self._translate(exc, "checking it before the start (GET /models)", 1, timeout_s) from None
        except openai.APIStatusError as exc:
            if exc.status_code in (401, 403):
                raise self._translate(exc, "checking it before the start (GET /models)") from None
            log.debug("the server at %s answered GET /models with HTTP %s; it is up", self.base_url, exc.status_code)

    def __repr__(self) -> str:
        return f"OpenAIPlanner(base_url={self.base_url!r}, model={self.model!r}, api_key_env={self.api_key_env!r})"

    # ------------------------------------------------------------------------------------ planner API

    def reset(self, task: str, seed: int = 0) -> None:
        self._episode_seed = seed

    def plan(self, request: PlanRequest) -> str:
        return self._complete(request)

    def plan_batch(self, requests: Sequence[PlanRequest]) -> list[str]:
        """Concurrent requests: a batching server (vLLM, the local server) answers them as one batch."""
        if len(requests) <= 1 or self.concurrency == 1:
            return [self._complete(r) for r in requests]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests))) as pool:
            return list(pool.map(self._complete, requests))

    def close(self) -> None:
        self._client.close()

    # ------------------------------------------------------------------------------------ wire

    def grammar_for(self, request: PlanRequest) -> str:
        constraint = AnswerConstraint.build(
            request.actions,
            request.models,
            request.grounded_targets,
            max_new_tokens=self.max_tokens,
            analysis_max_chars=self.analysis_max_chars,
        )
        return constraint.grammar()

    def messages_for(self, request: PlanRequest) -> list[ChatMessage]:
        """The conversation one request sends (homiebot.planner.messages's order)."""
        return build_messages(request, icl_example=self.icl_example, include_history=self.include_history)

    def request_body(self, request: PlanRequest, messages: Sequence[ChatMessage] | None = None) -> dict[str, Any]:
        """The chat-completions arguments for one request (without the model), as sent on the wire; ``messages``:
        the request's conversation when already built."""
        if messages is None:
            messages = self.messages_for(request)
        body: dict[str, Any] = {
            "messages": to_openai_messages(messages, image_detail=self.image_detail),
            self.max_tokens_field: self.max_tokens,
        }
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.top_p is not None:
            body["top_p"] = self.top_p
        seed = self.seed if self.seed is not None else self._episode_seed
        if seed is not None:
            body["seed"] = seed
        extra: dict[str, Any] = {}
        if self.constrained:
            grammar = self.grammar_for(request)
            extra = {"structured_outputs": {"grammar": grammar}} if self.grammar_field == "structured_outputs" else {
                self.grammar_field: grammar
            }
        if extra:
            body["extra_body"] = extra
        return body

    def resolve_model(self) -> str:
        """The model to ask for: the configured one, else the server's only model."""
        if self.model:
            return self.model
        try:
            served = [m.id for m in self._client.models.list()]
        except self._openai.OpenAIError as exc:
            raise self._translate(exc, "listing the served models") from None
        if len(served) != 1:
            raise OpenAIServerError(
                f"no --model given and the server at {self.base_url} serves {len(served)} models "
                f"({', '.join(served[:10]) or 'none'}); pass --model"
            )
        self.model = served[0]
        log.info("using the server's only model %r", self.model)
        return self.model

    def _complete(self, request: PlanRequest) -> str:
        model = self.resolve_model()
        messages = self.messages_for(request)
        body = self.request_body(request, messages)
        try:
            response = self._client.chat.completions.create(model=model, **body)
        except self._openai.OpenAIError as exc:
            raise self._translate(exc, f"asking model {model!r}") from None
        if not response.choices:
            raise OpenAIServerError(f"the server at {self.base_url} answered with no choices")
        choice = response.choices[0]
        self.last_finish_reason = choice.finish_reason
        self.last_usage = response.usage.model_dump() if response.usage is not None else None
        content = choice.message.content
        if content is None:
            # A refusal or a tool call: no text answer. The loop turns the empty answer into F1 feedback.
            log.warning("the server answered with no text content (finish_reason=%s)", choice.finish_reason)
            content = ""
        report_call(request, messages, content)
        return content

    def _translate(
        self, exc: Exception, doing: str, attempts: int | None = None, timeout_s: float | None = None
    ) -> OpenAIServerError:
        """A message that names the server and what failed, never the key."""
        openai = self._openai
        attempts = self.max_retries + 1 if attempts is None else attempts
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        if isinstance(exc, openai.APITimeoutError):
            message = (
                f"the OpenAI-compatible server at {self.base_url} did not answer within {timeout_s:g} s "
                f"({attempts} attempt(s)) while {doing}"
            )
        elif isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            reason = f": {type(cause).__name__}: {cause}" if cause is not None else ""
            message = (
                f"cannot reach the OpenAI-compatible server at {self.base_url} ({attempts} attempt(s)) "
                f"while {doing}{reason}. Is it running, and is --base-url right?"
            )
        elif isinstance(exc, openai.APIStatusError):
            detail = _error_text(exc)
            message = f"the server at {self.base_url} answered HTTP {exc.status_code} while {doing}: {detail}"
            if exc.status_code == 401:
                message += f" (check the key in ${self.api_key_env})"
            elif self.constrained and exc.status_code in (400, 422):
                message += (
                    f" (constrained decoding sends '{self.grammar_field}'; a server without grammar support "
                    "refuses it: try another --grammar-field, or --no-constrained)"
                )
        else:
            message = f"request to {self.base_url} failed while {doing}: {type(exc).__name__}: {exc}"
        return OpenAIServerError(redact(message, self.__api_key))


def _error_text(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return str(getattr(exc, "message", exc))
