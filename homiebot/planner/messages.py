"""Chat messages for model planners, built from a :class:`~homiebot.planner.base.PlanRequest`.

One neutral form (:class:`ChatMessage`: a role, text, and images in order) is built once and rendered for
each backend: the OpenAI wire format (images as base64 PNG data URLs) and the transformers chat-template
format (``{"type": "image"}`` placeholders plus a separate image list). The local OpenAI-compatible server
parses the wire format back into the neutral form, so a request sent by the OpenAI backend and a request
answered by the transformers backend reach the model as the same conversation.

Message order (decisions, tested in ``tests/planner/test_backends.py``):

1. ``system``: the EMMOE system information (appendix D), as the request carries it.
2. Optionally the in-context example of appendix H.1 (``icl_example=True``): a user turn with the example
   output and the assistant's promise to follow it, exactly as the paper gives Qwen2-VL and MiniCPM-V 2.6.
   It comes before the history because in the paper it is a standing preamble of every inference.
3. The conversation window (``request.history``, at most three earlier rounds, oldest first) as text-only
   user/assistant turns. Earlier rounds' images are not repeated: the paper's window stores text only
   (``f"USER:\\n{instruction}ASSISTANT:\\n{output}\\n"``), and four extra images per round would multiply
   the prompt length.
4. The current user turn: the four views in the order front, left, back, right, then the instruction.
"""

from __future__ import annotations

import base64
import binascii
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from PIL import Image

from homiebot.planner.base import PlanRequest
from homiebot.planner.prompt import ICL_EXAMPLE_ASSISTANT, ICL_EXAMPLE_USER
from homiebot.types import VIEW_NAMES, ModelCall, SentMessage

Role = Literal["system", "user", "assistant"]
_ROLES: frozenset[str] = frozenset({"system", "user", "assistant"})


class MessageFormatError(ValueError):
    """A message (from a request or from the wire) cannot be turned into a chat message."""


@dataclass(frozen=True)
class ChatMessage:
    """One chat turn: images (RGB uint8 arrays, in order) come before the text in the rendered turn."""

    role: Role
    text: str
    images: tuple[np.ndarray, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise MessageFormatError(f"unknown chat role {self.role!r}; expected one of {sorted(_ROLES)}")


def check_image(image: np.ndarray, *, what: str = "image") -> np.ndarray:
    """Return ``image`` as a contiguous (H, W, 3) uint8 array, or raise with what is wrong with it."""
    array = np.asarray(image)
    if array.ndim != 3 or array.shape[2] != 3:
        raise MessageFormatError(f"{what} must be an (H, W, 3) RGB array, got shape {array.shape}")
    if array.dtype != np.uint8:
        raise MessageFormatError(f"{what} must be uint8, got {array.dtype}")
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise MessageFormatError(f"{what} is empty (shape {array.shape})")
    return np.ascontiguousarray(array)


def build_messages(
    request: PlanRequest,
    *,
    icl_example: bool = False,
    include_history: bool = True,
    include_images: bool = True,
) -> list[ChatMessage]:
    """The conversation a model planner sends for one round (order in the module docstring)."""
    if len(request.images) not in (0, 4) and include_images:
        raise MessageFormatError(
            f"a plan request carries the four views front, left, back, right; got {len(request.images)} images"
        )
    messages: list[ChatMessage] = [ChatMessage("system", request.system_prompt)]
    if icl_example:
        messages.append(ChatMessage("user", ICL_EXAMPLE_USER))
        messages.append(ChatMessage("assistant", ICL_EXAMPLE_ASSISTANT))
    if include_history:
        for turn in request.history:
            messages.append(ChatMessage("user", turn.instruction))
            messages.append(ChatMessage("assistant", turn.answer))
    images: tuple[np.ndarray, ...] = ()
    if include_images:
        names = ("front", "left", "back", "right")
        images = tuple(check_image(img, what=f"the {names[i]} view") for i, img in enumerate(request.images))
    text = request.instruction
    if request.world_description:
        # PARTNR feeds its planners the world graph as text; EMMOE forbids background information, so this is
        # only present when perception is configured to describe the world. It goes before the instruction.
        text = f"World description:\n{request.world_description.strip()}\n{text}"
    messages.append(ChatMessage("user", text, images))
    return messages


def report_call(request: PlanRequest, messages: Sequence[ChatMessage], answer: str) -> ModelCall:
    """Report one model call for ``request``'s round (:attr:`PlanRequest.model_calls`, which the loop records):
    the messages exactly as sent, each image named by the view of the request it is (``front`` ... ``right``;
    ``image<n>`` for one that is none of them), and the model's answer. Returns the call."""
    views = list(request.images)

    def view_name(image: np.ndarray, n: int) -> str:
        for index, view in enumerate(views[: len(VIEW_NAMES)]):
            if image is view or (image.shape == np.shape(view) and np.array_equal(image, view)):
                return VIEW_NAMES[index]
        return f"image{n}"

    sent = []
    count = 0
    for message in messages:
        names = []
        for image in message.images:
            count += 1
            names.append(view_name(image, count))
        sent.append(SentMessage(message.role, message.text, tuple(names)))
    call = ModelCall(tuple(sent), answer)
    request.model_calls.append(call)
    return call


# ----------------------------------------------------------------------------------------------- images


def encode_png_data_url(image: np.ndarray) -> str:
    """``data:image/png;base64,...`` for an RGB uint8 array (PNG: lossless, so both backends see the same pixels)."""
    buffer = io.BytesIO()
    Image.fromarray(check_image(image)).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def decode_data_url(url: str) -> np.ndarray:
    """The RGB uint8 array inside a ``data:image/...;base64,`` URL (any format Pillow reads).

    Only data URLs are accepted: the local server never fetches remote images (it has no network by design).
    """
    if not isinstance(url, str) or not url.startswith("data:"):
        shown = url[:40] + "..." if isinstance(url, str) and len(url) > 40 else url
        raise MessageFormatError(f"only base64 data URLs are accepted for images, got {shown!r}")
    header, sep, payload = url.partition(",")
    if not sep or ";base64" not in header:
        raise MessageFormatError("the image data URL is not base64-encoded ('data:image/png;base64,...')")
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise MessageFormatError(f"the image data URL holds invalid base64: {exc}") from None
    try:
        with Image.open(io.BytesIO(raw)) as img:
            return np.asarray(img.convert("RGB"), dtype=np.uint8)
    except Exception as exc:  # noqa: BLE001 - Pillow raises several unrelated types for corrupt data
        raise MessageFormatError(f"the image data URL does not hold a readable image: {exc}") from None


def to_pil(image: np.ndarray) -> Image.Image:
    return Image.fromarray(check_image(image))


# --------------------------------------------------------------------------------------- OpenAI format


def to_openai_messages(messages: Sequence[ChatMessage], *, image_detail: str | None = None) -> list[dict[str, Any]]:
    """OpenAI chat-completions ``messages``: plain string content for text-only turns, parts otherwise."""
    wire: list[dict[str, Any]] = []
    for message in messages:
        if not message.images:
            wire.append({"role": message.role, "content": message.text})
            continue
        parts: list[dict[str, Any]] = []
        for image in message.images:
            image_url: dict[str, Any] = {"url": encode_png_data_url(image)}
            if image_detail is not None:
                image_url["detail"] = image_detail
            parts.append({"type": "image_url", "image_url": image_url})
        parts.append({"type": "text", "text": message.text})
        wire.append({"role": message.role, "content": parts})
    return wire


def from_openai_messages(wire: Any) -> list[ChatMessage]:
    """Parse OpenAI chat-completions ``messages`` (as a server receives them) into chat messages.

    Accepts string content and lists of ``text`` / ``image_url`` parts (``image_url`` as an object or a bare
    string); a turn's images keep their order and come before its text, as the backends render them.
    """
    if not isinstance(wire, list) or not wire:
        raise MessageFormatError("'messages' must be a non-empty list")
    parsed: list[ChatMessage] = []
    for index, item in enumerate(wire):
        if not isinstance(item, dict):
            raise MessageFormatError(f"messages[{index}] must be an object")
        role = item.get("role")
        if role == "developer":  # newer OpenAI name for the system role
            role = "system"
        if role not in _ROLES:
            raise MessageFormatError(f"messages[{index}].role must be one of {sorted(_ROLES)}, got {role!r}")
        content = item.get("content")
        if content is None:
            content = ""
        if isinstance(content, str):
            parsed.append(ChatMessage(role, content))
            continue
        if not isinstance(content, list):
            raise MessageFormatError(f"messages[{index}].content must be a string or a list of parts")
        texts: list[str] = []
        images: list[np.ndarray] = []
        for part_index, part in enumerate(content):
            where = f"messages[{index}].content[{part_index}]"
            if not isinstance(part, dict):
                raise MessageFormatError(f"{where} must be an object")
            kind = part.get("type")
            if kind == "text":
                text = part.get("text")
                if not isinstance(text, str):
                    raise MessageFormatError(f"{where}.text must be a string")
                texts.append(text)
            elif kind == "image_url":
                ref = part.get("image_url")
                url = ref.get("url") if isinstance(ref, dict) else ref
                try:
                    images.append(decode_data_url(url if isinstance(url, str) else ""))
                except MessageFormatError as exc:
                    raise MessageFormatError(f"{where}: {exc}") from None
            else:
                raise MessageFormatError(f"{where}.type must be 'text' or 'image_url', got {kind!r}")
        parsed.append(ChatMessage(role, "".join(texts), tuple(images)))
    return parsed


# ---------------------------------------------------------------------------------- transformers format


def to_hf_messages(messages: Iterable[ChatMessage]) -> tuple[list[dict[str, Any]], list[Image.Image]]:
    """Chat-template messages with ``{"type": "image"}`` placeholders, and the images in template order.

    Every turn uses the list-of-parts content form, which the chat templates of Qwen2-VL, Qwen2.5-VL, LLaVA
    (and most image-text-to-text models in transformers) understand; the processor then expands each
    placeholder into the model's image tokens.
    """
    hf_messages: list[dict[str, Any]] = []
    pil_images: list[Image.Image] = []
    for message in messages:
        parts: list[dict[str, Any]] = [{"type": "image"} for _ in message.images]
        pil_images.extend(to_pil(img) for img in message.images)
        parts.append({"type": "text", "text": message.text})
        hf_messages.append({"role": message.role, "content": parts})
    return hf_messages, pil_images


def to_plain_prompt(messages: Sequence[ChatMessage], *, image_token: str | None) -> str:
    """A ``USER: ... ASSISTANT:`` prompt for a processor that has no chat template (Video-LLaVA's style).

    Decision: the system text comes first as a plain paragraph (Video-LLaVA has no system role), each image
    is one ``image_token`` followed by a newline, and the prompt ends with ``ASSISTANT:`` for the answer.
    """
    lines: list[str] = []
    for message in messages:
        if message.role == "system":
            lines.append(message.text)
            continue
        images = "".join(f"{image_token}\n" for _ in message.images) if image_token else ""
        speaker = "USER" if message.role == "user" else "ASSISTANT"
        lines.append(f"{speaker}: {images}{message.text}")
    lines.append("ASSISTANT:")
    return "\n".join(lines)
