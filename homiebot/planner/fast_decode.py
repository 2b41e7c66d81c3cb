"""Greedy decoding without ``generate``: the fast loop of the ``hf`` planner for Qwen2-VL and Qwen2.5-VL.

transformers' ``generate`` spends most of a planning step's decoding time on per-step bookkeeping (stopping
criteria with a host sync, position and mask updates, logits-processor plumbing). This loop does only what
a greedy planner needs, and is what ``VisionLanguageModel.generate`` runs when ``decode="fast"``
(:mod:`homiebot.planner.hf_backend`). ``benchmarks/bench_planner_gpu.py`` measures it on an H100.

One call (:meth:`FastDecoder.generate`):

1. **Positions.** The 3D rope positions of the whole prompt come from the model's ``get_rope_index``
   (which is why only the Qwen2-VL family is supported: :data:`SUPPORTED_MODEL_TYPES`), with the attention
   mask when rows are left-padded, exactly as ``generate`` computes them; each row's next position is its
   largest position + 1, so padded rows continue from their own length, not the padded one.
2. **Vision** (``get_image_features``) on its own, then the **prefill** of the prompt into a dynamic
   cache. Without padding no mask is passed, so SDPA runs its causal kernel.
3. With a **shared prefix** (``prefix_ids``: the system turn, identical across rounds and episodes), the
   prefix's keys and values are computed once at batch 1, kept (a small LRU keyed by the token ids) and
   copied into every row; only the rest of the prompt is prefilled. Left-padded rows are laid out as
   ``[prefix | padding | rest]`` for this (the padding moves behind the prefix; the attention mask and the
   positions follow it), so one cached prefix serves rows of any length. A row that does not start with
   the prefix (after its padding) turns sharing off for that call, never into a wrong answer.
4. The keys and values move into a **static cache** sized for the answer (rounded up to
   :data:`CACHE_BUCKET` tokens; kept for the next call, which reuses it when it fits: same tensor
   addresses and shapes, so the compiled step is neither recompiled nor re-recorded), and each
   decoding step calls the model's forward with explicit 3D positions and takes the argmax on the device.
   On CUDA with ``compile=True`` the step is the model's ``get_compiled_call`` (``torch.compile``,
   ``reduce-overhead``: CUDA graphs), the same compiled call ``generate`` uses; elsewhere it runs eagerly.
5. **Stopping** as ``generate`` does it: a row that emitted a stop token emits the pad token from then on,
   and the loop ends when every row has stopped or after ``max_new_tokens``. On CUDA without a grammar the
   "all stopped" flag is read :data:`STOP_CHECK_LAG` steps late through pinned memory, so the host never
   waits for the step it just queued (at most that many extra steps run, and are cut off the result).
6. **Constrained decoding**: a logits processor (``GrammarLogitsProcessor`` of
   :mod:`homiebot.planner.constrained`, one xgrammar matcher per row) masks each step's logits (float32,
   as ``generate`` does) before the argmax and advances its matchers with the tokens chosen; this needs the
   tokens on the host every step, as it does in ``generate``.

The result is the same token ids as ``generate`` with ``do_sample=False`` (checked token for token in float32
on the CPU by ``tests/planner/test_fast_decode.py``: batch 1, left-padded batches, grammars, shared prefix).
Sampling is not implemented here: the backend falls back to ``generate`` for ``do_sample=True``.

Two optional speed-ups measured in ``BENCHMARKS.md`` (H100 section):

* :class:`GroupedQuerySDPA`: SDPA reads the grouped key/value heads instead of transformers repeating them
  under compile (Qwen2-VL-7B: 4 KV heads for 28 query heads). It is transformers' process-wide
  ``TRANSFORMERS_SDPA_FORCE_GQA=1`` made per model: an attention function registered with transformers'
  ``AttentionInterface`` and selected for this model's language model only.
* :class:`BatchedVisionAttention`: Qwen2-VL's vision tower (without flash-attn) calls SDPA once per image
  and layer and syncs with the host per layer; when every image has the same patch count (the planner's
  four views always do), the per-image blocks are stacked into one SDPA call. Patched on the model
  instance (not the class); Qwen2.5-VL's windowed vision attention is left alone.
"""

from __future__ import annotations

import contextlib
import logging
import time
import types
from collections import OrderedDict, deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

#: ``config.model_type`` values the loop supports: models whose text positions are 3D (M-RoPE) computed by
#: ``model.model.get_rope_index`` from the prompt and the image grid.
SUPPORTED_MODEL_TYPES: tuple[str, ...] = ("qwen2_vl", "qwen2_5_vl")
#: The static cache's length is rounded up to a multiple of this (fewer recompilations on CUDA).
CACHE_BUCKET = 256
#: On CUDA, how many steps late the "every row has stopped" flag is read (the host queues this far ahead).
STOP_CHECK_LAG = 2


class FastDecodeUnsupported(ValueError):
    """The model cannot be decoded by the fast loop (not of the Qwen2-VL family)."""


def cache_keyword() -> str:
    """The keyword under which this transformers takes a key/value cache: ``cache`` since it renamed
    ``past_key_values`` (5.24 warns that the old name goes in 5.40 for forward and in 6.0 for ``generate``),
    else ``past_key_values``. Read from the signature of ``prepare_inputs_for_generation``, which every
    generative model inherits and which names the cache explicitly in both generations of the API."""
    import inspect

    from transformers.generation.utils import GenerationMixin

    parameters = inspect.signature(GenerationMixin.prepare_inputs_for_generation).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def output_cache(output: Any) -> Any:
    """The key/value cache of a model output (``output.cache``, formerly ``output.past_key_values``)."""
    fields = output.keys() if hasattr(output, "keys") else ()
    if "cache" in fields:
        return output["cache"]
    return output.past_key_values


def base_model(model: Any) -> Any:
    """The transformers model under a peft wrapper (LoRA layers live inside its modules), or the model itself."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def unsupported_reason(model: Any) -> str | None:
    """Why ``model`` cannot use the fast loop, or None when it can."""
    base = base_model(model)
    model_type = getattr(getattr(base, "config", None), "model_type", None)
    if model_type not in SUPPORTED_MODEL_TYPES:
        return (
            f"the fast decoding loop supports Qwen2-VL and Qwen2.5-VL models only ({', '.join(SUPPORTED_MODEL_TYPES)}: "
            f"their 3D rope positions come from get_rope_index); this model is {model_type!r}"
        )
    if not callable(getattr(getattr(base, "model", None), "get_rope_index", None)):
        return f"this {model_type} model has no model.get_rope_index (an unsupported transformers version?)"
    return None


# ------------------------------------------------------------------------------------------ helpers


#: The attention implementation name :class:`GroupedQuerySDPA` registers with transformers.
GQA_SDPA_IMPLEMENTATION = "homie_sdpa_gqa"


def grouped_query_sdpa(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, dropout: float = 0.0,
                       scaling: float | None = None, is_causal: bool | None = None, **kwargs: Any) -> tuple[Any, None]:
    """transformers' SDPA attention, but SDPA reads the grouped key/value heads (``enable_gqa``) when it can.

    transformers repeats the key/value heads to the query heads' count under ``torch.compile`` unless the
    process-wide ``TRANSFORMERS_SDPA_FORCE_GQA=1`` is set; this function is the per-model form of that switch
    (registered with ``AttentionInterface`` and selected for one model's text config by
    :class:`GroupedQuerySDPA`), written here because transformers offers no per-model option. Grouped heads
    are used for decoding steps (one query token; with a static cache's mask SDPA's math kernel is cheap at
    one query) and for unmasked prefills (flash kernel); a *masked* prefill (left-padded batch) goes to
    transformers' own path, which repeats the heads so that the memory-efficient kernel takes the mask
    (grouped heads with a mask would fall back to the math kernel and its full score matrix on CUDA).
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    groups = getattr(module, "num_key_value_groups", 1)
    q_length = query.shape[2]
    special = kwargs.get("output_attentions") or any(kwargs.get(k) is not None for k in ("position_bias", "softcap", "cache"))
    if groups <= 1 or special or (attention_mask is not None and q_length > 1):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    import torch.nn.functional as F

    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    causal = q_length > 1 and attention_mask is None and bool(causal)
    if causal and key.shape[2] > q_length:  # as transformers: a causal prefill into an empty static cache
        key, value = key[:, :, :q_length], value[:, :, :q_length]
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling,
                                         is_causal=causal, enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


class GroupedQuerySDPA:
    """Select :func:`grouped_query_sdpa` for one model's language model (its vision tower is left alone).

    Installing registers the function (and transformers' SDPA mask builder) under
    :data:`GQA_SDPA_IMPLEMENTATION` and sets the model's text config to it, so only this model's attention
    changes, for ``generate`` and the fast loop alike; :meth:`remove` restores the previous implementation.
    The text config's implementation must be ``sdpa`` (a flash-attention model needs no switch).
    """

    def __init__(self, model: Any) -> None:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

        self.model = base_model(model)
        text_config = getattr(self.model.config, "text_config", None)
        if text_config is None:
            raise FastDecodeUnsupported("grouped-query SDPA needs a model with a text_config (a Qwen2-VL-family VLM)")
        self.previous = text_config._attn_implementation
        if self.previous not in ("sdpa", GQA_SDPA_IMPLEMENTATION):
            raise FastDecodeUnsupported(
                f"grouped-query SDPA replaces the 'sdpa' attention; this model's language model uses {self.previous!r}"
            )
        AttentionInterface.register(GQA_SDPA_IMPLEMENTATION, grouped_query_sdpa)
        AttentionMaskInterface.register(GQA_SDPA_IMPLEMENTATION, sdpa_mask)
        self.model.set_attn_implementation({"text_config": GQA_SDPA_IMPLEMENTATION})

    @property
    def active(self) -> bool:
        return self.model.config.text_config._attn_implementation == GQA_SDPA_IMPLEMENTATION

    def remove(self) -> None:
        if self.active:
            previous = "sdpa" if self.previous == GQA_SDPA_IMPLEMENTATION else self.previous
            self.model.set_attn_implementation({"text_config": previous})


class Marks:
    """Optional synchronised split timings (each mark costs a device sync, so only when asked)."""

    def __init__(self, device: Any, timings: dict[str, float] | None) -> None:
        self.device, self.timings, self.last = device, timings, time.perf_counter()

    def __call__(self, name: str) -> None:
        if self.timings is None:
            return
        if self.device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.device)
        now = time.perf_counter()
        self.timings[name] = self.timings.get(name, 0.0) + now - self.last
        self.last = now


class BatchedVisionAttention:
    """One SDPA call per vision layer for all images, when every image has the same patch count.

    transformers' Qwen2-VL ``VisionAttention`` (without flash-attn) splits the patch sequence per image and
    calls SDPA once per image and layer, with a host sync per layer. Installing this replaces the forward
    of the model's own ``VisionAttention`` modules (instance attributes: other models are untouched). The
    batched path runs only while :attr:`patches_per_image` is set (by :meth:`images`, or by hand) and the
    sequence splits evenly into images of that size; otherwise, and under flash attention, the original
    forward runs. :meth:`remove` restores the modules.
    """

    def __init__(self, model: Any) -> None:
        from transformers.models.qwen2_vl import modeling_qwen2_vl as qwen

        self._qwen = qwen
        self.patches_per_image: int | None = None
        self.modules = [m for m in base_model(model).modules() if type(m) is qwen.VisionAttention]
        if not self.modules:
            raise FastDecodeUnsupported("batched vision attention needs a Qwen2-VL vision tower (VisionAttention)")
        original = qwen.VisionAttention.forward
        handle = self

        def forward(module, hidden_states, cu_seqlens, position_embeddings=None, max_seqlen=None, **kwargs):
            patches = handle.patches_per_image
            seq = hidden_states.shape[0]
            flash = "flash" in str(getattr(module.config, "_attn_implementation", "") or "")
            if patches is None or seq % patches or position_embeddings is None or flash:
                return original(module, hidden_states, cu_seqlens, position_embeddings=position_embeddings,
                                max_seqlen=max_seqlen, **kwargs)
            import torch.nn.functional as F

            q, k, v = module.qkv(hidden_states).reshape(seq, 3, module.num_heads, -1).permute(1, 0, 2, 3).unbind(0)
            cos, sin = position_embeddings
            q, k = qwen.apply_rotary_pos_emb_vision(q, k, cos, sin)
            images = seq // patches
            q, k, v = (t.reshape(images, patches, module.num_heads, -1).transpose(1, 2) for t in (q, k, v))
            out = F.scaled_dot_product_attention(q, k, v, scale=module.scaling)
            return module.proj(out.transpose(1, 2).reshape(seq, -1))

        for module in self.modules:
            module.forward = types.MethodType(forward, module)

    @contextlib.contextmanager
    def images(self, grid_thw: Sequence[Sequence[int]] | None) -> Iterator[None]:
        """Batch the images of one call when their (height, width) grids are all the same."""
        # Attention runs per frame of h x w patches (t is 1 for an image), so equal (h, w) is what matters.
        sizes = {(int(h), int(w)) for _, h, w in grid_thw} if grid_thw is not None else set()
        self.patches_per_image = None
        if len(sizes) == 1:
            height, width = sizes.pop()
            self.patches_per_image = height * width
        try:
            yield
        finally:
            self.patches_per_image = None

    def remove(self) -> None:
        for module in self.modules:
            module.__dict__.pop("forward", None)


@dataclass
class PrefixKV:
    """The keys and values of a shared prompt prefix, computed once at batch 1."""

    token_ids: tuple[int, ...]
    layers: list[tuple[Any, Any]]

    def __len__(self) -> int:
        return len(self.token_ids)

    def cache(self, batch: int, config: Any) -> Any:
        """A dynamic cache holding the prefix, repeated for ``batch`` rows (copies: the cache grows in place)."""
        from transformers import DynamicCache

        cache = DynamicCache(config=config)
        for index, (keys, values) in enumerate(self.layers):
            cache.update(keys.expand(batch, -1, -1, -1).contiguous(), values.expand(batch, -1, -1, -1).contiguous(), index)
        return cache


def compute_prefix(model: Any, token_ids: Sequence[int], device: Any) -> PrefixKV:
    """Prefill ``token_ids`` (text only) at batch 1 and keep their keys and values."""
    import torch

    base = base_model(model)
    ids = torch.tensor([list(token_ids)], dtype=torch.long, device=device)
    positions = torch.arange(ids.shape[1], device=device).view(1, 1, -1).expand(3, 1, -1)
    with torch.inference_mode():
        out = base(input_ids=ids, position_ids=positions, use_cache=True, logits_to_keep=1)
    layers = [(layer.keys, layer.values) for layer in output_cache(out).layers]
    return PrefixKV(tuple(int(t) for t in token_ids), layers)


def prefix_cache(model: Any, inputs: dict[str, Any], prefix_len: int, batch: int) -> Any:
    """A dynamic cache holding the first ``prefix_len`` tokens of row 0, repeated for ``batch`` rows.

    For ``generate(cache=...)`` (``past_key_values=`` before transformers renamed it: :func:`cache_keyword`; the
    benchmark's "shared prefix" variant of ``generate``).
    """
    ids = inputs["input_ids"][0, :prefix_len].tolist()
    return compute_prefix(model, ids, inputs["input_ids"].device).cache(batch, base_model(model).config)


def mm_token_types(config: Any, input_ids: Any) -> Any:
    """``mm_token_type_ids`` (0 text, 1 image, 2 video) for processors that do not return them."""
    import torch

    types_ = torch.zeros_like(input_ids, dtype=torch.int)
    types_[input_ids == config.image_token_id] = 1
    video = getattr(config, "video_token_id", None)
    if video is not None:
        types_[input_ids == video] = 2
    return types_


def _prefix_layout(ids: Any, mask: Any | None, token_types: Any, prefix: Sequence[int]) -> tuple[bool, Any | None]:
    """Whether every row starts with ``prefix`` after its left padding, and the column order that puts the
    prefix first (``[prefix | padding | rest]``; None when no row is padded)."""
    import torch

    batch, length = ids.shape
    size = len(prefix)
    pads = (length - mask.sum(dim=1)).tolist() if mask is not None else [0] * batch
    expected = torch.tensor(list(prefix), dtype=ids.dtype, device=ids.device)
    for row, pad in enumerate(pads):
        if length - pad <= size:  # the prefix must leave at least one token to prefill
            return False, None
        if not torch.equal(ids[row, pad : pad + size], expected) or bool(token_types[row, pad : pad + size].any()):
            return False, None
    if not any(pads):
        return True, None
    order = []
    for pad in pads:
        order.append(torch.cat([torch.arange(pad, pad + size), torch.arange(0, pad), torch.arange(pad + size, length)]))
    return True, torch.stack(order).to(ids.device)


class _StopWatch:
    """Tells when every row has stopped, ``lag`` steps late (0: at once).

    On CUDA the flag of each step is copied to pinned memory behind an event, and the event of the step
    ``lag`` steps back is the only thing the host waits for: it never waits for the step it just queued.
    Elsewhere the flag is read at once and only reported late (which is how the lagged path is tested).
    """

    def __init__(self, device: Any, lag: int) -> None:
        import torch

        self.lag = max(0, lag)
        self.cuda = device.type == "cuda"
        self.pending: deque[Any] = deque()
        self.step = 0
        if self.lag and self.cuda:
            self.flags = [torch.zeros((), dtype=torch.bool).pin_memory() for _ in range(self.lag + 1)]
            self.events = [torch.cuda.Event() for _ in range(self.lag + 1)]

    def all_stopped(self, done: Any) -> bool:
        if not self.lag:
            return bool(done.all())
        if not self.cuda:
            self.pending.append(bool(done.all()))
            return len(self.pending) > self.lag and self.pending.popleft()
        slot = self.step % (self.lag + 1)
        self.step += 1
        self.flags[slot].copy_(done.all(), non_blocking=True)
        self.events[slot].record()
        self.pending.append((self.events[slot], self.flags[slot]))
        if len(self.pending) <= self.lag:
            return False
        event, flag = self.pending.popleft()
        event.synchronize()
        return bool(flag)


def _trim(tokens: Any, stops: Any) -> Any:
    """Cut the columns after the step where the last row stopped (what ``generate`` returns)."""
    import torch

    stopped = torch.isin(tokens, stops)
    finished = stopped.any(dim=1)
    if not bool(finished.all()):
        return tokens
    first = stopped.int().argmax(dim=1)
    return tokens[:, : int(first.max()) + 1]


# ------------------------------------------------------------------------------------------ the loop


class FastDecoder:
    """Greedy decoding of a Qwen2-VL-family model without ``generate`` (see the module docstring).

    ``compile``: compile the decoding step on CUDA (never elsewhere). ``batched_vision``: install
    :class:`BatchedVisionAttention` (Qwen2-VL only). ``sdpa_gqa``: install :class:`GroupedQuerySDPA` on the model (until :meth:`close`). ``prefix_cache_size``:
    how many shared prefixes to keep (0: compute the prefix on every call). ``stop_check_lag``: how many
    steps late the "every row stopped" flag is read (None: :data:`STOP_CHECK_LAG` on CUDA without a grammar,
    else 0). Not thread-safe: the caller serialises calls (``VisionLanguageModel`` holds a lock).
    """

    def __init__(
        self,
        model: Any,
        *,
        compile: bool = True,
        batched_vision: bool = False,
        sdpa_gqa: bool = False,
        prefix_cache_size: int = 2,
        cache_bucket: int = CACHE_BUCKET,
        stop_check_lag: int | None = None,
    ) -> None:
        reason = unsupported_reason(model)
        if reason:
            raise FastDecodeUnsupported(reason)
        if cache_bucket < 1:
            raise ValueError(f"cache_bucket must be >= 1, got {cache_bucket}")
        self.model = model
        self.base = base_model(model)
        self.compile = compile
        self.gqa = GroupedQuerySDPA(model) if sdpa_gqa else None
        self.cache_bucket = cache_bucket
        self.prefix_cache_size = prefix_cache_size
        self.stop_check_lag = stop_check_lag
        self.vision = BatchedVisionAttention(model) if batched_vision else None
        self._cache_keyword = cache_keyword()
        self._prefixes: OrderedDict[tuple[int, ...], PrefixKV] = OrderedDict()
        #: Counters for tests and benchmarks: prefixes computed / reused, calls that could not share, calls
        #: that reused the previous call's static cache.
        self.stats = {"calls": 0, "prefix_computed": 0, "prefix_reused": 0, "prefix_not_shared": 0,
                      "static_cache_reused": 0}
        self._static: Any = None
        self._static_key: tuple[Any, ...] | None = None
        self._static_len = 0
        #: Decoding steps the last call ran (with a stop-check lag, up to that many past the last stop).
        self.last_steps = 0

    @property
    def sdpa_gqa(self) -> bool:
        return self.gqa is not None and self.gqa.active

    def close(self) -> None:
        if self.vision is not None:
            self.vision.remove()
        if self.gqa is not None:
            self.gqa.remove()
        self._prefixes.clear()
        self._static = None

    def _static_cache(self, batch: int, needed: int, like: Any) -> tuple[Any, int]:
        """The static cache of the last call, emptied, when it fits; else a new one (bucketed length).

        Reusing it keeps the cache tensors at the same addresses, so the compiled step's CUDA graphs are
        replayed rather than re-recorded (``generate`` keeps its static cache for the same reason).
        """
        from transformers import StaticCache

        key = (batch, like.dtype, like.device)
        if self._static is not None and self._static_key == key and self._static_len >= needed:
            self._static.reset()
            self.stats["static_cache_reused"] += 1
            return self._static, self._static_len
        self._static = None  # free the old one before allocating
        max_len = -(-needed // self.cache_bucket) * self.cache_bucket
        self._static = StaticCache(config=self.base.config, max_cache_len=max_len)
        self._static_key, self._static_len = key, max_len
        return self._static, max_len

    def _prefix(self, token_ids: tuple[int, ...], device: Any) -> PrefixKV:
        cached = self._prefixes.get(token_ids)
        if cached is not None:
            self._prefixes.move_to_end(token_ids)
            self.stats["prefix_reused"] += 1
            return cached
        prefix = compute_prefix(self.model, token_ids, device)
        self.stats["prefix_computed"] += 1
        if self.prefix_cache_size > 0:
            self._prefixes[token_ids] = prefix
            while len(self._prefixes) > self.prefix_cache_size:
                self._prefixes.popitem(last=False)
        return prefix

    def generate(
        self,
        inputs: dict[str, Any],
        max_new_tokens: int,
        *,
        stop_token_ids: Sequence[int] = (),
        pad_token_id: int | None = None,
        logits_processor: Any | None = None,
        prefix_ids: Sequence[int] | None = None,
        compile: bool | None = None,
        timings: dict[str, float] | None = None,
    ) -> Any:
        """Prompt ids followed by the greedy answer, ``(batch, prompt + new)``, like ``generate``'s output.

        ``inputs``: the processor's output on the model's device (``input_ids``, ``attention_mask``,
        ``pixel_values``, ``image_grid_thw``, ``mm_token_type_ids``; left padding). With ``stop_token_ids``
        rows stop as in ``generate`` (then ``pad_token_id`` fills them); without, exactly ``max_new_tokens``
        are decoded. ``logits_processor(last_tokens, scores) -> scores`` runs on every step's float32
        logits. ``prefix_ids``: the shared prefix to reuse (see the module docstring). ``timings``: add
        synchronised ``vision`` / ``prefill`` / ``decode`` seconds to this dict.
        """
        import torch
        from transformers import DynamicCache

        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if inputs.get("pixel_values_videos") is not None:
            raise ValueError("the fast decoding loop takes images, not videos")
        if stop_token_ids and pad_token_id is None:
            raise ValueError("stop_token_ids need a pad_token_id for the rows that stopped")
        base = self.base
        config = base.config
        prompt_ids = inputs["input_ids"]
        device = prompt_ids.device
        batch, length = prompt_ids.shape
        compiled = (self.compile if compile is None else compile) and device.type == "cuda"
        self.stats["calls"] += 1
        marks = Marks(device, timings)
        with torch.inference_mode():
            ids = prompt_ids
            mask = inputs.get("attention_mask")
            if mask is not None and bool(mask.all()):
                mask = None  # no padding: SDPA's causal kernel, as generate gets with an all-ones mask
            token_types = inputs.get("mm_token_type_ids")
            if token_types is None:
                token_types = mm_token_types(config, ids)
            grid = inputs.get("image_grid_thw")
            prefix: PrefixKV | None = None
            if prefix_ids:
                usable, order = _prefix_layout(ids, mask, token_types, prefix_ids)
                if usable:
                    prefix = self._prefix(tuple(int(t) for t in prefix_ids), device)
                    if order is not None:
                        ids, token_types, mask = (t.gather(1, order) for t in (ids, token_types, mask))
                else:
                    self.stats["prefix_not_shared"] += 1
                    log.debug("a row does not start with the shared prefix: prefilling the whole prompt")
            positions, _ = base.model.get_rope_index(
                ids, mm_token_type_ids=token_types, image_grid_thw=grid, attention_mask=mask
            )
            # Padding positions are 0, so a row's largest position is that of its last real token.
            next_position = positions.amax(dim=(0, 2)).view(1, batch, 1) + 1

            vision: dict[str, Any] = {}
            if inputs.get("pixel_values") is not None:
                context = self.vision.images(grid.tolist()) if self.vision is not None else contextlib.nullcontext()
                with context:
                    encoded = base.model.get_image_features(inputs["pixel_values"], grid, return_dict=True)
                vision = {"mm_encoder_outputs": {"image": encoded}, "image_grid_thw": grid}
            marks("vision")

            start = len(prefix) if prefix is not None else 0
            cache = prefix.cache(batch, config) if prefix is not None else DynamicCache(config=config)
            out = base(input_ids=ids[:, start:], position_ids=positions[..., start:], attention_mask=mask,
                       use_cache=True, logits_to_keep=1, **{self._cache_keyword: cache}, **vision)
            marks("prefill")

            layers = output_cache(out).layers
            static, max_len = self._static_cache(batch, length + max_new_tokens, layers[0].keys)
            for index, layer in enumerate(layers):
                static.update(layer.keys, layer.values, index)
            logits = out.logits[:, -1]
            del out, cache
            step_mask = None
            if mask is not None:
                step_mask = torch.ones((batch, max_len), dtype=mask.dtype, device=device)
                step_mask[:, :length] = mask
            forward = base.get_compiled_call(None) if compiled else base.__call__
            stops = torch.tensor(sorted({int(t) for t in stop_token_ids}), device=device) if stop_token_ids else None
            pad = torch.tensor(int(pad_token_id), device=device) if pad_token_id is not None else None
            done = torch.zeros(batch, dtype=torch.bool, device=device)
            lag = self.stop_check_lag
            if lag is None:  # a grammar reads every step's tokens on the host anyway: nothing to gain there
                lag = STOP_CHECK_LAG if device.type == "cuda" and logits_processor is None else 0
            watch = _StopWatch(device, lag) if stops is not None else None
            position = next_position
            token = prompt_ids[:, -1]
            tokens = []
            for step in range(max_new_tokens):
                if step:
                    logits = forward(input_ids=token[:, None], position_ids=position.expand(3, batch, 1),
                                     attention_mask=step_mask, **{self._cache_keyword: static}, use_cache=True,
                                     logits_to_keep=1).logits[:, -1]
                    position = position + 1
                if logits_processor is not None:
                    # generate's order: float32 copy of the logits, processors, then the argmax.
                    scores = logits_processor(token[:, None], logits.to(dtype=torch.float32, copy=True))
                    token = scores.argmax(dim=-1)
                else:
                    token = logits.argmax(dim=-1)
                if stops is not None:
                    token = torch.where(done, pad, token)  # rows that stopped emit padding, as in generate
                    done = done | torch.isin(token, stops)
                tokens.append(token)
                if watch is not None and watch.all_stopped(done):
                    break
            self.last_steps = len(tokens)
            result = torch.stack(tokens, dim=1)
            if stops is not None:
                result = _trim(result, stops)
            marks("decode")
        return torch.cat([prompt_ids, result], dim=1)


def fast_generate(
    model: Any,
    inputs: dict[str, Any],
    new_tokens: int,
    *,
    prefix_len: int = 0,
    compiled: bool = True,
    timings: dict[str, float] | None = None,
    stop_token_ids: Sequence[int] = (),
    pad_token_id: int | None = None,
    logits_processor: Any | None = None,
) -> Any:
    """One call of the fast loop with no state kept (the benchmark's ``fast`` variants).

    ``prefix_len``: the first ``prefix_len`` tokens of row 0 are the shared prefix, computed in this call
    (at batch 1) and copied into every row. Without ``stop_token_ids`` exactly ``new_tokens`` are decoded.
    ``compiled=False`` decodes eagerly: slower per step at batch 1 (kernel launches), but transformers'
    SDPA path then packs the grouped-query heads instead of repeating the keys and values, which is what a
    large batch's decoding step is bound by.
    """
    decoder = FastDecoder(model, compile=compiled, prefix_cache_size=0)
    prefix_ids = inputs["input_ids"][0, :prefix_len].tolist() if prefix_len else None
    return decoder.generate(inputs, new_tokens, stop_token_ids=stop_token_ids, pad_token_id=pad_token_id,
                            logits_processor=logits_processor, prefix_ids=prefix_ids, timings=timings)
