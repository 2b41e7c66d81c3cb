"""A minimal client of Foxglove's WebSocket protocol (the ws-protocol spec, documented at
https://github.com/foxglove/ws-protocol/blob/main/docs/spec.md), written for the tests: it reads the server's
channel advertisements, subscribes by topic, and decodes binary message frames with the protobuf schema each
channel advertised (a FileDescriptorSet), so the tests read what the Foxglove app would read."""

from __future__ import annotations

import base64
import contextlib
import json
import struct
import time
from collections.abc import Iterable
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Subprotocol

SUBPROTOCOL = "foxglove.sdk.v1"  # the SDK server speaks this version of the protocol (it refuses foxglove.websocket.v1)
MESSAGE_DATA = 0x01  # binary opcode of a message frame: u8 opcode, u32 subscription id, u64 log time, payload


def _message_class(schema_name: str, schema_b64: str) -> Any:
    files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(schema_b64)).file
    pool = descriptor_pool.DescriptorPool()
    pending = list(files)
    while pending:  # add each file after the files it imports
        added = [f for f in pending if all(_has_file(pool, dep) for dep in f.dependency)]
        if not added:
            raise ValueError(f"{schema_name}: unresolved imports in the advertised schema")
        for f in added:
            pool.Add(f)
            pending.remove(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(schema_name))


def _has_file(pool: descriptor_pool.DescriptorPool, name: str) -> bool:
    try:
        pool.FindFileByName(name)
    except KeyError:
        return False
    return True


class FoxgloveClient:
    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        self.timeout_s = timeout_s
        self._stack = contextlib.ExitStack()  # websockets wants the sync connection closed through its context
        self._connection: ClientConnection = self._stack.enter_context(
            connect(url, subprotocols=[Subprotocol(SUBPROTOCOL)], max_size=None, open_timeout=timeout_s)
        )
        self.channels: dict[str, dict[str, Any]] = {}  # topic -> advertised channel
        self._subscriptions: dict[int, tuple[str, Any]] = {}  # subscription id -> (topic, message class)
        self.server_info: dict[str, Any] = {}

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> FoxgloveClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _handle_text(self, text: str) -> None:
        message = json.loads(text)
        if message.get("op") == "serverInfo":
            self.server_info = message
        elif message.get("op") == "advertise":
            for channel in message["channels"]:
                self.channels[channel["topic"]] = channel

    def wait_for_topics(self, topics: Iterable[str]) -> None:
        wanted = set(topics)
        deadline = time.monotonic() + self.timeout_s
        while not wanted <= set(self.channels):
            if time.monotonic() > deadline:
                raise TimeoutError(f"not advertised: {sorted(wanted - set(self.channels))}")
            frame = self._connection.recv(timeout=max(deadline - time.monotonic(), 0.01))
            if isinstance(frame, str):
                self._handle_text(frame)

    def subscribe(self, topics: Iterable[str]) -> None:
        topics = list(topics)
        self.wait_for_topics(topics)
        subscriptions = []
        for topic in topics:
            channel = self.channels[topic]
            assert channel["encoding"] == "protobuf" and channel["schemaEncoding"] == "protobuf", channel
            sub_id = len(self._subscriptions) + 1
            self._subscriptions[sub_id] = (topic, _message_class(channel["schemaName"], channel["schema"]))
            subscriptions.append({"id": sub_id, "channelId": channel["id"]})
        self._connection.send(json.dumps({"op": "subscribe", "subscriptions": subscriptions}))

    def receive(self, timeout_s: float | None = None) -> tuple[str, int, Any] | None:
        """The next message on a subscribed topic as (topic, log time ns, decoded message); None on timeout."""
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        while time.monotonic() < deadline:
            try:
                frame = self._connection.recv(timeout=max(deadline - time.monotonic(), 0.01))
            except TimeoutError:
                return None
            if isinstance(frame, str):
                self._handle_text(frame)
                continue
            if frame[0] != MESSAGE_DATA:
                continue
            sub_id, log_time = struct.unpack_from("<IQ", frame, 1)
            topic, cls = self._subscriptions[sub_id]
            return topic, log_time, cls.FromString(bytes(frame[13:]))
        return None
