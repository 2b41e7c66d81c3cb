"""Local transformers backend: an image-text-to-text model loaded from a local folder plans each round.

``--planner hf --model PATH`` loads ``AutoProcessor`` and ``AutoModelForImageTextToText`` from ``PATH``
(local files only; no hub access), which covers Qwen2-VL, Qwen2.5-VL, the LLaVA family including
Video-LLaVA (EMMOE's HomieBot-7B base), MiniCPM-V-style models that ship a chat template, and every other
model transformers maps to that Auto class. HomieBot-7B is a base model plus a LoRA adapter: ``--adapter
PATH`` applies one through peft (merged into the weights unless the model is quantised).

Precision: bfloat16 on a GPU, float32 on the CPU (``dtype="auto"``); 4- or 8-bit weights through
bitsandbytes where it is installed and a CUDA GPU is present (``quantization="4bit"|"8bit"``), else a
clear error.

Decisions (tested in ``tests/planner/test_backends.py``):

* **Greedy decoding** by default (``do_sample=False``): a planner's answer should be reproducible; sampling
  is an option with a per-episode seed (:meth:`HFPlanner.reset`).
* **One padded batch** for :meth:`HFPlanner.plan_batch`, padded on the left (decoder-only generation), each
  row with its own grammar when ``constrained=True`` (each episode has its own grounded targets).
* **The in-context example of appendix H.1** is an option (``icl_example=True``) because the paper gives it
  only to small open models that need it.
* **A processor without a chat template** (some Video-LLaVA exports) gets the ``USER: ... ASSISTANT:``
  prompt of :func:`homiebot.planner.messages.to_plain_prompt`.
* **Static cache**: ``cache_implementation="static"`` uses transformers' static KV cache, which compiles
  the decoding step on CUDA automatically (``compile=False`` turns that off); on the CPU it is only slower.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.constrained import DEFAULT_ANALYSIS_MAX_CHARS, AnswerConstraint
from homiebot.planner.messages import ChatMessage, build_messages, to_hf_messages, to_plain_prompt

log = logging.getLogger(__name__)


class PlannerBackendError(RuntimeError):
    """A model backend cannot serve (missing files or packages, unreachable server, bad answer from it)."""


class PlannerLoadError(PlannerBackendError, ValueError):
    """A backend cannot be built from its options (bad model folder, missing package): bad input.

    It is a ``ValueError`` too, so that :func:`homiebot.planner.registry.make_planner` reports it as a bad
    option (``homie run`` exits 2 with the message) rather than as a crash.
    """


@dataclass(frozen=True)
class Generation:
    """One generated answer and its token counts."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: Literal["stop", "length"]


class LocalModelConfig(BaseModel):
    """How to load a local image-text-to-text model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(description="local folder of the model (config.json, weights, processor files)")
    adapter: str | None = Field(default=None, description="local folder of a peft (LoRA) adapter")
    merge_adapter: bool = True
    device: str = "auto"  # "auto": cuda when available, else cpu
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    quantization: Literal["4bit", "8bit"] | None = None
    attn_implementation: str | None = None  # e.g. "sdpa", "flash_attention_2"; None: transformers' default
    trust_remote_code: bool = False
    #: CPU threads for torch (process-wide: ``torch.set_num_threads``); None keeps torch's default. One
    #: thread is much faster for tiny models on a loaded machine, where extra threads only wait on each other.
    torch_threads: int | None = Field(default=None, ge=1)

    @field_validator("model")
    @classmethod
    def _model_is_local_folder(cls, value: str) -> str:
        path = Path(value).expanduser()
        if not path.is_dir():
            raise ValueError(
                f"model folder {value!r} does not exist: the hf planner loads local folders only "
                "(download weights yourself, then pass their folder to --model)"
            )
        if not (path / "config.json").is_file():
            raise ValueError(f"{value!r} has no config.json; is it a transformers model folder?")
        return str(path)

    @field_validator("adapter")
    @classmethod
    def _adapter_is_local_folder(cls, value: str | None) -> str | None:
        if value is None:
            return None
        path = Path(value).expanduser()
        if not (path / "adapter_config.json").is_file():
            raise ValueError(f"adapter folder {value!r} has no adapter_config.json (expected a peft adapter)")
        return str(path)


def _validation_message(exc: ValidationError) -> str:
    """One line per problem: ``option: message`` (pydantic's own text is several lines per error)."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error.get("loc", ())) or "options"
        parts.append(f"{where}: {error.get('msg', '').removeprefix('Value error, ')}")
    return "; ".join(parts)


class VisionLanguageModel:
    """A loaded processor + model that turns chat conversations into answers, optionally grammar-constrained.

    Shared by :class:`HFPlanner` and the OpenAI-compatible server (:mod:`homiebot.planner.openai_server`).
    ``generate`` holds a lock: one batch runs on the model at a time.
    """

    def __init__(self, config: LocalModelConfig) -> None:
        try:
            import torch
            from transformers import AutoModelForImageTextToText, AutoProcessor
        except ImportError as exc:
            raise PlannerLoadError(
                "the hf planner needs torch and transformers: pip install -e '.[models]'"
            ) from exc
        self.config = config
        self._torch = torch
        if config.torch_threads is not None:
            torch.set_num_threads(config.torch_threads)
        self._lock = threading.Lock()
        self._grammar_lock = threading.Lock()
        self.device = torch.device(
            ("cuda" if torch.cuda.is_available() else "cpu") if config.device == "auto" else config.device
        )
        if config.dtype == "auto":
            self.dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        else:
            self.dtype = getattr(torch, config.dtype)
        try:
            self.processor = AutoProcessor.from_pretrained(
                config.model, local_files_only=True, trust_remote_code=config.trust_remote_code
            )
        except Exception as exc:  # transformers raises OSError/ValueError/ImportError/TypeError variously
            raise PlannerLoadError(
                f"cannot load the processor from {config.model}: {exc}"
                + (
                    " (processors with a video part, like Qwen2-VL's, need torchvision built for your torch)"
                    if "video" in str(exc).lower() or "VIDEO" in str(exc)
                    else ""
                )
            ) from exc
        self.tokenizer = getattr(self.processor, "tokenizer", self.processor)
        self.tokenizer.padding_side = "left"
        load_kwargs: dict[str, Any] = {
            "local_files_only": True,
            "trust_remote_code": config.trust_remote_code,
            "dtype": self.dtype,
        }
        if config.attn_implementation:
            load_kwargs["attn_implementation"] = config.attn_implementation
        if config.quantization is not None:
            load_kwargs["quantization_config"] = self._quantization_config(config.quantization)
            load_kwargs["device_map"] = {"": self.device.index or 0}
        try:
            model = AutoModelForImageTextToText.from_pretrained(config.model, **load_kwargs)
        except ValueError as exc:
            if "Unrecognized configuration class" in str(exc):
                raise PlannerLoadError(
                    f"{config.model} is not an image-text-to-text model transformers knows "
                    "(AutoModelForImageTextToText has no mapping for its config)"
                ) from exc
            raise PlannerLoadError(f"cannot load the model from {config.model}: {exc}") from exc
        except OSError as exc:
            raise PlannerLoadError(f"cannot load the model from {config.model}: {exc}") from exc
        if config.quantization is None:
            model = model.to(self.device)
        if config.adapter is not None:
            model = self._apply_adapter(model, config)
        self.model = model.eval()
        self.vocab_size = int(self.model.get_output_embeddings().weight.shape[0])
        self.stop_token_ids = self._stop_token_ids()
        self.image_token = getattr(self.processor, "image_token", None)
        self.has_chat_template = bool(getattr(self.processor, "chat_template", None))
        self._grammar_cache: Any = None

    # ------------------------------------------------------------------------------------ loading

    def _quantization_config(self, mode: str) -> Any:
        import importlib.util

        if importlib.util.find_spec("bitsandbytes") is None:
            raise PlannerLoadError(
                f"quantization={mode!r} needs bitsandbytes, which is not installed (pip install bitsandbytes); "
                "or load the model unquantised"
            )
        if self.device.type != "cuda":
            raise PlannerLoadError(f"quantization={mode!r} needs a CUDA GPU (bitsandbytes); none is in use")
        from transformers import BitsAndBytesConfig

        if mode == "4bit":
            return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=self.dtype, bnb_4bit_quant_type="nf4")
        return BitsAndBytesConfig(load_in_8bit=True)

    def _apply_adapter(self, model: Any, config: LocalModelConfig) -> Any:
        try:
            from peft import PeftModel
        except ImportError as exc:
            raise PlannerLoadError("--adapter needs peft: pip install -e '.[models]'") from exc
        adapted = PeftModel.from_pretrained(model, config.adapter, is_trainable=False)
        if config.merge_adapter and config.quantization is None:
            # Merged weights decode as fast as the base model; quantised weights cannot take the merge.
            return adapted.merge_and_unload()
        return adapted

    def _stop_token_ids(self) -> tuple[int, ...]:
        ids: set[int] = set()
        eos = self.model.generation_config.eos_token_id
        for value in eos if isinstance(eos, (list, tuple)) else [eos]:
            if value is not None:
                ids.add(int(value))
        if self.tokenizer.eos_token_id is not None:
            ids.add(int(self.tokenizer.eos_token_id))
        if not ids:
            raise PlannerLoadError(f"{self.config.model} defines no end-of-sequence token")
        return tuple(sorted(ids))

    @property
    def pad_token_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = self.model.generation_config.pad_token_id
        return int(pad if pad is not None else self.stop_token_ids[0])

    # ------------------------------------------------------------------------------------ prompting

    def render(self, messages: Sequence[ChatMessage]) -> tuple[str, list[Any]]:
        """The prompt text (chat template applied) and the images it refers to, in order."""
        hf_messages, images = to_hf_messages(messages)
        if self.has_chat_template:
            prompt = self.processor.apply_chat_template(hf_messages, add_generation_prompt=True, tokenize=False)
        else:
            prompt = to_plain_prompt(messages, image_token=self.image_token)
        return prompt, images

    def compile_grammar(self, grammar: str) -> Any:
        """Compile (or fetch from the cache) an answer grammar for this tokenizer.

        Serialised by a lock of its own: the server's handler threads compile while a batch generates.
        """
        from homiebot.planner.constrained import GrammarCompilerCache

        with self._grammar_lock:
            if self._grammar_cache is None:
                self._grammar_cache = GrammarCompilerCache(self.tokenizer, self.vocab_size, self.stop_token_ids)
            return self._grammar_cache.compile(grammar)

    # ------------------------------------------------------------------------------------ generation

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
        cache_implementation: str | None = None,
        compile: bool = True,
    ) -> list[Generation]:
        """Answer several conversations as one left-padded batch; ``grammars[i]`` constrains row ``i``."""
        if not conversations:
            return []
        if grammars is not None and len(grammars) != len(conversations):
            raise ValueError(f"{len(grammars)} grammars for {len(conversations)} conversations")
        torch = self._torch
        prompts: list[str] = []
        images: list[list[Any]] = []
        for conversation in conversations:
            prompt, conversation_images = self.render(conversation)
            prompts.append(prompt)
            images.append(conversation_images)
        processor_kwargs: dict[str, Any] = {"text": prompts, "padding": True, "return_tensors": "pt"}
        if any(images):
            # Nested per-conversation lists: processors that match images to samples (Idefics, mllama) need
            # them, and the others (LLaVA, Qwen2-VL) flatten them in order.
            processor_kwargs["images"] = images
        inputs = self.processor(**processor_kwargs).to(self.device)
        if "pixel_values" in inputs and inputs["pixel_values"].is_floating_point():
            inputs["pixel_values"] = inputs["pixel_values"].to(self.dtype)
        prompt_length = int(inputs["input_ids"].shape[1])
        logits_processors = []
        if grammars is not None and any(g is not None for g in grammars):
            from homiebot.planner.constrained import GrammarLogitsProcessor

            compiled = [self.compile_grammar(g) if g is not None else None for g in grammars]
            logits_processors.append(GrammarLogitsProcessor(compiled))
        generate_kwargs: dict[str, Any] = {
            "max_new_tokens": max_new_tokens,
            "do_sample": do_sample,
            "pad_token_id": self.pad_token_id,
            "eos_token_id": list(self.stop_token_ids),
        }
        if do_sample:
            generate_kwargs.update(temperature=temperature, top_p=top_p)
        else:
            # Greedy: clear sampling defaults a model's generation_config may carry, which would only warn.
            generate_kwargs.update(temperature=None, top_p=None, top_k=None)
        if cache_implementation is not None:
            generate_kwargs["cache_implementation"] = cache_implementation
        if not compile:
            generate_kwargs["disable_compile"] = True
        with self._lock, torch.inference_mode():
            if seed is not None:
                torch.manual_seed(seed)
            output = self.model.generate(**inputs, logits_processor=logits_processors or None, **generate_kwargs)
        new_tokens = output[:, prompt_length:].tolist()
        results: list[Generation] = []
        attention = inputs["attention_mask"].sum(dim=1).tolist()
        for row, tokens in enumerate(new_tokens):
            stopped = False
            kept: list[int] = []
            for token in tokens:
                if token in self.stop_token_ids:
                    stopped = True
                    break
                kept.append(token)
            text = self.tokenizer.decode(kept, skip_special_tokens=True, clean_up_tokenization_spaces=False)
            results.append(
                Generation(
                    text=text,
                    prompt_tokens=int(attention[row]),
                    completion_tokens=len(kept) + (1 if stopped else 0),
                    finish_reason="stop" if stopped else "length",
                )
            )
        return results

    def close(self) -> None:
        self.model = None  # type: ignore[assignment]
        if self._torch.cuda.is_available():
            self._torch.cuda.empty_cache()


class HFPlanner(Planner):
    """EMMOE planner on a local transformers model (``homie run --planner hf --model PATH``)."""

    name = "hf"
    privileged = False
    accepts_free_text = True

    def __init__(
        self,
        model: str,
        adapter: str | None = None,
        constrained: bool = False,
        icl_example: bool = False,
        include_history: bool = True,
        max_new_tokens: int = 512,
        analysis_max_chars: int = DEFAULT_ANALYSIS_MAX_CHARS,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_p: float = 1.0,
        device: str = "auto",
        dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto",
        quantization: Literal["4bit", "8bit"] | None = None,
        cache_implementation: Literal["static"] | None = None,
        compile: bool = True,
        attn_implementation: str | None = None,
        merge_adapter: bool = True,
        trust_remote_code: bool = False,
        torch_threads: int | None = None,
        engine: VisionLanguageModel | None = None,
    ) -> None:
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if cache_implementation not in (None, "static"):
            raise ValueError(f"cache_implementation must be 'static' or None, got {cache_implementation!r}")
        try:
            load = LocalModelConfig(
                model=model,
                adapter=adapter,
                merge_adapter=merge_adapter,
                device=device,
                dtype=dtype,
                quantization=quantization,
                attn_implementation=attn_implementation,
                trust_remote_code=trust_remote_code,
                torch_threads=torch_threads,
            )
        except ValidationError as exc:
            raise PlannerLoadError(_validation_message(exc)) from None
        self.engine = engine if engine is not None else VisionLanguageModel(load)
        self.constrained = constrained
        self.icl_example = icl_example
        self.include_history = include_history
        self.max_new_tokens = max_new_tokens
        self.analysis_max_chars = analysis_max_chars
        self.do_sample = do_sample
        self.temperature = temperature
        self.top_p = top_p
        self.cache_implementation = cache_implementation
        self.compile = compile
        self._seed: int | None = None
        self._calls = 0
        #: The last batch's generations (token counts, finish reasons) for benchmarks and records.
        self.last_generations: list[Generation] = []

    def reset(self, task: str, seed: int = 0) -> None:
        self._seed = seed
        self._calls = 0

    def grammar_for(self, request: PlanRequest) -> str:
        """The EBNF grammar of one request's answer (its actions, models and grounded targets)."""
        constraint = AnswerConstraint.build(
            request.actions,
            request.models,
            request.grounded_targets,
            max_new_tokens=self.max_new_tokens,
            analysis_max_chars=self.analysis_max_chars,
        )
        return constraint.grammar()

    def messages_for(self, request: PlanRequest) -> list[ChatMessage]:
        return build_messages(request, icl_example=self.icl_example, include_history=self.include_history)

    def plan(self, request: PlanRequest) -> str:
        return self.plan_batch([request])[0]

    def plan_batch(self, requests: Sequence[PlanRequest]) -> list[str]:
        if not requests:
            return []
        grammars = [self.grammar_for(r) for r in requests] if self.constrained else None
        seed = None
        if self.do_sample and self._seed is not None:
            seed = self._seed * 1_000_003 + self._calls  # reproducible per episode and round
        self._calls += 1
        generations = self.engine.generate(
            [self.messages_for(r) for r in requests],
            grammars=grammars,
            max_new_tokens=self.max_new_tokens,
            do_sample=self.do_sample,
            temperature=self.temperature,
            top_p=self.top_p,
            seed=seed,
            cache_implementation=self.cache_implementation,
            compile=self.compile,
        )
        self.last_generations = generations
        return [g.text for g in generations]

    def close(self) -> None:
        self.engine.close()
