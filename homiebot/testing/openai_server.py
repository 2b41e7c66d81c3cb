"""An OpenAI-compatible endpoint on 127.0.0.1 for tests of what talks to a model server (the start-up check, the
evaluation's handling of a server that goes away, the recovery stages over HTTP). Not a model: a test's ``reply``
function says what each chat completion gets."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: What ``reply`` returns for one chat completion: the assistant's text (HTTP 200); an HTTP error status (int); or
#: None: the connection is closed with no reply, as a server that went away does.
Reply = str | int | None


class FakeOpenAIServer:
    """``GET .../models`` lists ``model`` (so the planners' start-up check passes); ``POST .../chat/completions``
    answers with ``reply(request_body)``. ``url`` is the base URL to give ``--base-url``; ``close()`` stops it."""

    def __init__(self, reply: Callable[[dict[str, Any]], Reply], model: str = "fake") -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep the test output clean
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "test"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                answer = reply(body)
                if answer is None:
                    self.close_connection = True  # no status line, no body: the client sees the server go away
                elif isinstance(answer, int):
                    self._send(answer, {"error": {"message": f"HTTP {answer} from the test server"}})
                else:
                    self._send(200, {
                        "id": "fake-1", "object": "chat.completion", "created": 0, "model": body.get("model", model),
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": answer}}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    })

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self._httpd.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
