"""A local HTTP server that speaks the OpenAI chat-completions wire format and serves a transformers model.

``python -m homiebot.planner.openai_server --model PATH [--port 8000]`` serves the model in ``PATH`` (any
model the hf backend loads, or a bundled model's name such as ``smollm2``: :mod:`homiebot.planner.models`,
served by :mod:`homiebot.planner.text_lm`, text only, with its grammars in llama.cpp's GBNF) at ``http://127.0.0.1:PORT/v1``; ``homie run --planner openai --base-url
http://127.0.0.1:PORT/v1 --model NAME`` (or any OpenAI client) then plans through it. Tests run it as a
real subprocess on a free loopback port with a tiny random model.

Endpoints: ``GET /v1/models``, ``GET /health``, ``POST /v1/chat/completions`` (non-streaming; ``n=1``).
Images arrive as base64 data URLs in ``image_url`` parts (never fetched from the network). A grammar
constrains the answer when the request carries one, in any of the spellings clients use:
``structured_outputs: {"grammar": EBNF}`` (vLLM >= 0.10.2), ``guided_grammar`` (older vLLM) or
``grammar`` (llama.cpp's server); the grammar dialect is xgrammar's EBNF.

Concurrent requests are gathered into padded batches by :class:`homiebot.planner.batching.RequestBatcher`
(``--max-batch-size``, ``--max-wait-ms``): several evaluation processes sharing this server share batches.

Decisions:

* **Standard library** ``http.server.ThreadingHTTPServer``: the wire format is a few JSON objects, the model
  runs one batch at a time, and no extra web framework is needed in the ``models`` extra.
* **Binds to 127.0.0.1 by default**; ``--host`` changes it deliberately.
* **API key** (optional): with ``--api-key-env NAME`` the server requires ``Authorization: Bearer <value of
  NAME>`` and answers 401 otherwise; the key is never logged or echoed.
* **Unsupported request fields that change the answer** (``stream=true``, ``n>1``, ``stop``, JSON-schema
  or regex constraints) are refused with 400 rather than silently ignored; unknown fields are ignored and
  logged, as vLLM does.
* ``--fail-first N`` answers the first N chat requests with 503: a fault-injection switch for testing
  clients' retries against a real server.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from homiebot.config import DecodeMode
from homiebot.files import atomic_write_text
from homiebot.planner.batching import RequestBatcher
from homiebot.planner.hf_backend import Generation, LocalModelConfig, VisionLanguageModel, shipped_text_engine
from homiebot.planner.messages import ChatMessage, MessageFormatError, from_openai_messages
from homiebot.planner.models import bundled_model
from homiebot.planner.shipped import shipped_model
from homiebot.planner.text_lm import TextLanguageModel, TextModelConfig

log = logging.getLogger(__name__)

#: The largest request body accepted (four PNG views are about 1 MB; history is text).
MAX_BODY_BYTES = 64 * 1024 * 1024


class ChatCompletionRequest(BaseModel):
    """The subset of OpenAI's chat-completions request this server honours."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[Any]
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    seed: int | None = None
    n: int = 1
    stream: bool = False
    stop: str | list[str] | None = None
    structured_outputs: dict[str, Any] | None = None
    guided_grammar: str | None = None
    grammar: str | None = None
    response_format: dict[str, Any] | None = None


@dataclass(frozen=True)
class _Job:
    messages: tuple[ChatMessage, ...]
    grammar: str | None
    max_tokens: int
    do_sample: bool
    temperature: float
    top_p: float
    seed: int | None

    def batch_key(self) -> tuple[Any, ...]:
        return (self.max_tokens, self.do_sample, self.temperature, self.top_p, self.seed)


class _BadRequest(Exception):
    def __init__(self, status: HTTPStatus, message: str, param: str | None = None, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.kind = kind


class ChatCompletionServer:
    """The server object: an engine, a batcher and a ``ThreadingHTTPServer`` (start, url, shutdown)."""

    def __init__(
        self,
        engine: VisionLanguageModel | TextLanguageModel,
        *,
        served_name: str,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        max_batch_size: int = 8,
        max_wait_s: float = 0.01,
        default_max_tokens: int = 512,
        fail_first: int = 0,
    ) -> None:
        self.engine = engine
        self.served_name = served_name
        self.default_max_tokens = default_max_tokens
        self._api_key = api_key
        self._fail_remaining = fail_first
        self._fail_lock = threading.Lock()
        self.created = int(time.time())
        self.batcher: RequestBatcher[_Job, Generation] = RequestBatcher(
            self._run_jobs, max_batch_size=max_batch_size, max_wait_s=max_wait_s, name="openai-server-batcher"
        )
        handler = type("_BoundHandler", (_Handler,), {"app": self})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def url(self) -> str:
        host = self.httpd.server_address[0]
        if isinstance(host, bytes):  # typeshed allows bytes; the socket server gives a str
            host = host.decode()
        return f"http://{host}:{self.port}/v1"

    def start(self) -> None:
        """Serve in a background thread (tests in-process; the CLI uses :meth:`serve_forever`)."""
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="openai-server", daemon=True)
        self._thread.start()

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def shutdown(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.batcher.close()
        if self._thread is not None:
            self._thread.join(5)

    # ------------------------------------------------------------------------------------ model side

    def _run_jobs(self, jobs: list[_Job]) -> list[Generation]:
        """Run a batch; jobs whose generation settings differ run as separate sub-batches."""
        results: list[Generation | None] = [None] * len(jobs)
        groups: dict[tuple[Any, ...], list[int]] = {}
        for index, job in enumerate(jobs):
            groups.setdefault(job.batch_key(), []).append(index)
        for indices in groups.values():
            first = jobs[indices[0]]
            grammars = [jobs[i].grammar for i in indices]
            generations = self.engine.generate(
                [jobs[i].messages for i in indices],
                grammars=grammars if any(g is not None for g in grammars) else None,
                max_new_tokens=first.max_tokens,
                do_sample=first.do_sample,
                temperature=first.temperature,
                top_p=first.top_p,
                seed=first.seed,
            )
            for i, generation in zip(indices, generations, strict=False):
                results[i] = generation
        return [r for r in results if r is not None]

    # ------------------------------------------------------------------------------------ HTTP side

    def check_auth(self, header: str | None) -> None:
        if self._api_key is None:
            return
        expected = f"Bearer {self._api_key}"
        if header is None or not _constant_time_equal(header, expected):
            raise _BadRequest(HTTPStatus.UNAUTHORIZED, "missing or invalid API key", kind="authentication_error")

    def take_injected_failure(self) -> bool:
        with self._fail_lock:
            if self._fail_remaining > 0:
                self._fail_remaining -= 1
                return True
            return False

    def health_payload(self) -> dict[str, Any]:
        """Liveness plus batching counts (no secrets: it is served without the key)."""
        stats = self.batcher.stats
        return {
            "status": "ok",
            "model": self.served_name,
            "batches": stats.batches,
            "requests": stats.requests,
            "max_batch_size_seen": max(stats.sizes, default=0),
            "injected_failures_left": self._fail_remaining,
        }

    def models_payload(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": self.served_name, "object": "model", "created": self.created, "owned_by": "homiebot"}],
        }

    def to_job(self, body: dict[str, Any]) -> _Job:
        try:
            request = ChatCompletionRequest.model_validate(body)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or None
            raise _BadRequest(HTTPStatus.BAD_REQUEST, f"invalid request: {where}: {first.get('msg')}", where) from None
        if request.model != self.served_name:
            raise _BadRequest(
                HTTPStatus.NOT_FOUND,
                f"the model {request.model!r} does not exist; this server serves {self.served_name!r}",
                "model",
                kind="not_found_error",
            )
        if request.stream:
            raise _BadRequest(HTTPStatus.BAD_REQUEST, "streaming is not supported by this server", "stream")
        if request.n != 1:
            raise _BadRequest(HTTPStatus.BAD_REQUEST, "only n=1 is supported", "n")
        if request.stop:
            raise _BadRequest(HTTPStatus.BAD_REQUEST, "stop sequences are not supported by this server", "stop")
        if request.response_format and request.response_format.get("type") not in (None, "text"):
            raise _BadRequest(
                HTTPStatus.BAD_REQUEST, "only grammar constraints are supported (structured_outputs.grammar)", "response_format"
            )
        grammar = request.guided_grammar or request.grammar
        if request.structured_outputs:
            unsupported = sorted(k for k, v in request.structured_outputs.items() if k != "grammar" and v is not None)
            if unsupported:
                raise _BadRequest(
                    HTTPStatus.BAD_REQUEST,
                    f"structured_outputs supports 'grammar' only, got {unsupported}",
                    "structured_outputs",
                )
            grammar = request.structured_outputs.get("grammar") or grammar
        if request.model_extra:
            log.info("ignoring request fields %s", sorted(request.model_extra))
        try:
            messages = tuple(from_openai_messages(request.messages))
        except MessageFormatError as exc:
            raise _BadRequest(HTTPStatus.BAD_REQUEST, str(exc), "messages") from None
        if self.engine.text_only and any(m.images for m in messages):
            raise _BadRequest(
                HTTPStatus.BAD_REQUEST, f"{self.served_name} is a text-only model: send no image_url parts", "messages"
            )
        if grammar is not None:
            try:
                self.engine.compile_grammar(grammar)  # refuse a broken grammar with 400, before batching
            except Exception as exc:  # noqa: BLE001 - any compile failure is the client's grammar
                raise _BadRequest(HTTPStatus.BAD_REQUEST, f"the grammar does not compile: {exc}", "grammar") from None
        temperature = 1.0 if request.temperature is None else request.temperature
        return _Job(
            messages=messages,
            grammar=grammar,
            max_tokens=request.max_completion_tokens or request.max_tokens or self.default_max_tokens,
            do_sample=temperature > 0,
            temperature=temperature if temperature > 0 else 1.0,
            top_p=1.0 if request.top_p is None else request.top_p,
            seed=request.seed,
        )

    def completion_payload(self, generation: Generation) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.served_name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": generation.text},
                    "finish_reason": generation.finish_reason,
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": generation.prompt_tokens,
                "completion_tokens": generation.completion_tokens,
                "total_tokens": generation.prompt_tokens + generation.completion_tokens,
            },
        }


def _constant_time_equal(a: str, b: str) -> bool:
    import hmac

    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))


class _Handler(BaseHTTPRequestHandler):
    app: ChatCompletionServer  # set on the bound subclass
    protocol_version = "HTTP/1.1"
    server_version = "homiebot-openai-server"

    def log_message(self, format: str, *args: Any) -> None:
        # Request lines only (never headers, which may carry the API key).
        log.debug("%s %s", self.address_string(), format % args)

    def _send_json(self, status: HTTPStatus, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, error: _BadRequest) -> None:
        self._send_json(
            error.status,
            {"error": {"message": error.message, "type": error.kind, "param": error.param, "code": int(error.status)}},
        )

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            if path in ("/health", "/v1/health"):
                self._send_json(HTTPStatus.OK, self.app.health_payload())
                return
            self.app.check_auth(self.headers.get("Authorization"))
            if path == "/v1/models":
                self._send_json(HTTPStatus.OK, self.app.models_payload())
                return
            raise _BadRequest(HTTPStatus.NOT_FOUND, f"no route {path!r}", kind="not_found_error")
        except _BadRequest as error:
            self._send_error(error)

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            if path != "/v1/chat/completions":
                self._drain()
                raise _BadRequest(HTTPStatus.NOT_FOUND, f"no route {path!r}", kind="not_found_error")
            body = self._read_json()
            self.app.check_auth(self.headers.get("Authorization"))
            if self.app.take_injected_failure():
                raise _BadRequest(HTTPStatus.SERVICE_UNAVAILABLE, "injected failure (--fail-first)", kind="server_error")
            job = self.app.to_job(body)
            try:
                generation = self.app.batcher.call(job)
            except Exception as exc:
                log.exception("generation failed")
                raise _BadRequest(HTTPStatus.INTERNAL_SERVER_ERROR, f"generation failed: {exc}", kind="server_error") from None
            self._send_json(HTTPStatus.OK, self.app.completion_payload(generation))
        except _BadRequest as error:
            self._send_error(error)

    def _drain(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if 0 < length <= MAX_BODY_BYTES:
            self.rfile.read(length)

    def _read_json(self) -> dict[str, Any]:
        length_text = self.headers.get("Content-Length")
        if length_text is None:
            raise _BadRequest(HTTPStatus.LENGTH_REQUIRED, "Content-Length is required")
        try:
            length = int(length_text)
        except ValueError:
            raise _BadRequest(HTTPStatus.BAD_REQUEST, "Content-Length is not a number") from None
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            raise _BadRequest(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"request body over {MAX_BODY_BYTES} bytes")
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise _BadRequest(HTTPStatus.BAD_REQUEST, f"the body is not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise _BadRequest(HTTPStatus.BAD_REQUEST, "the body must be a JSON object")
        return body


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m homiebot.planner.openai_server",
        description="Serve a local transformers vision-language model over the OpenAI chat-completions API.",
    )
    parser.add_argument("--model", required=True,
                        help="local model folder, a bundled model's name (smollm2) or a shipped one's (homiebot-smollm2)")
    parser.add_argument("--served-name", default=None, help="model id clients use (default: the folder name)")
    parser.add_argument("--adapter", default=None, help="local peft (LoRA) adapter folder")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port (see --port-file)")
    parser.add_argument("--port-file", default=None, help="write the bound port here once listening")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto", choices=("auto", "bfloat16", "float16", "float32"))
    parser.add_argument("--quantization", default=None, choices=("4bit", "8bit", "fp8"))
    parser.add_argument("--torch-threads", type=int, default=None, help="CPU threads for torch (default: torch's)")
    parser.add_argument("--decode", default=DecodeMode.AUTO.value, choices=[m.value for m in DecodeMode],
                        help="greedy decoding loop (see homiebot.planner.hf_backend)")
    parser.add_argument("--share-prefix", action="store_true", help="fast loop: reuse the system turn's KV cache")
    parser.add_argument("--runtime", default="auto", choices=("auto", "llama_cpp", "transformers"),
                        help="a bundled model's CPU runtime (homiebot.planner.text_lm)")
    parser.add_argument("--max-batch-size", type=int, default=8)
    parser.add_argument("--max-wait-ms", type=float, default=10.0)
    parser.add_argument("--max-tokens", type=int, default=512, help="default max_tokens of a request")
    parser.add_argument("--api-key-env", default=None, help="require 'Authorization: Bearer $NAME'")
    parser.add_argument("--fail-first", type=int, default=0, help="answer the first N chat requests with 503 (tests)")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            parser.error(f"--api-key-env {args.api_key_env}: that environment variable is not set or empty")
    bundled = bundled_model(args.model)
    shipped = shipped_model(args.model) if bundled is None else None
    engine: VisionLanguageModel | TextLanguageModel
    try:
        if bundled is not None:
            engine = TextLanguageModel(TextModelConfig(bundled, runtime=args.runtime, threads=args.torch_threads))
            default_name = bundled.name
        elif shipped is not None:  # built once into the model cache, served on llama.cpp as homie run runs it
            engine = shipped_text_engine(shipped, threads=args.torch_threads)
            default_name = shipped.name
        else:
            config = LocalModelConfig(model=args.model, adapter=args.adapter, device=args.device, dtype=args.dtype,
                                      quantization=args.quantization, torch_threads=args.torch_threads,
                                      decode=args.decode, share_prefix=args.share_prefix)
            engine = VisionLanguageModel(config)
            default_name = Path(config.model).name
    except (ValidationError, ValueError) as exc:
        parser.error(str(exc))
    except RuntimeError as exc:  # PlannerBackendError
        log.error("%s", exc)
        return 1
    served_name = args.served_name or default_name
    server = ChatCompletionServer(
        engine,
        served_name=served_name,
        host=args.host,
        port=args.port,
        api_key=api_key,
        max_batch_size=args.max_batch_size,
        max_wait_s=args.max_wait_ms / 1000.0,
        default_max_tokens=args.max_tokens,
        fail_first=args.fail_first,
    )
    stop = threading.Event()

    def _stop(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    server.start()
    if args.port_file:
        atomic_write_text(Path(args.port_file), f"{server.port}\n")
    log.info("serving %r at %s", served_name, server.url)
    while not stop.wait(0.5):
        pass
    log.info("shutting down")
    server.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
