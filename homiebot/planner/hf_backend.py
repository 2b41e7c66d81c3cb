"""Local transformers backend: an image-text-to-text model loaded from a local folder plans each round.

``--planner hf --model PATH`` loads ``AutoProcessor`` and ``AutoModelForImageTextToText`` from ``PATH``
(local files only; no hub access), which covers Qwen2-VL, Qwen2.5-VL, the LLaVA family including
Video-LLaVA (EMMOE's HomieBot-7B base), MiniCPM-V-style models that ship a chat template, and every other
model transformers maps to that Auto class. HomieBot-7B is a base model plus a LoRA adapter: ``--adapter
PATH`` applies one through peft (merged into the weights unless the model is quantised).

Precision: bfloat16 on a GPU, float32 on the CPU (``dtype="auto"``); 4- or 8-bit weights through
bitsandbytes where it is installed and a CUDA GPU is present (``quantization="4bit"|"8bit"``), or FP8
weights and activations through torchao on an FP8-capable GPU (``quantization="fp8"``: the language model's
linear layers only; the vision tower and the output head stay in bf16), else a clear error.

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
  It applies to the ``generate`` path only.
* **Two decoding paths** (``decode``, tested in ``tests/planner/test_fast_decode.py``): ``"fast"`` is the
  greedy loop of :mod:`homiebot.planner.fast_decode` (no per-step bookkeeping, static cache, the step
  compiled on CUDA), ``"generate"`` is transformers' ``generate``. ``"auto"`` (the default) picks
  ``"fast"`` where it is supported and pays off: a Qwen2-VL or Qwen2.5-VL model (the loop needs their
  ``get_rope_index`` 3D positions) on a CUDA device; ``"generate"`` otherwise. ``"fast"`` forced on
  another family is a :class:`PlannerLoadError`; forced on the CPU it works (and is how it is tested).
  Both give the same greedy token ids, constrained or not, for padded batches too. **Sampling**
  (``do_sample=True``) always runs ``generate``: the fast loop is greedy only.
* **Shared prefix** (``share_prefix=True``, fast path only): the preamble, identical across rounds and
  episodes (the system turn, and the in-context example pair when ``icl_example=True``), is prefilled once and its keys and values are reused by every later call (only when every
  conversation of the batch starts with the same preamble and its tokens are the prompt's first
  tokens; otherwise that call prefills the whole prompt). Same tokens as without it.
* **Qwen2-VL without torchvision**: transformers builds Qwen2-VL's processor with a video part that needs
  torchvision. Where torchvision is missing, a Qwen2-VL / Qwen2.5-VL folder loads with an image-only
  processor (:func:`image_only_qwen_vl_processor`; the planner sends images, never video).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from homiebot.config import AnswerFormat, DecodeMode
from homiebot.config.planners import HFPlannerConfig, PlannerConfig
from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.constrained import AnswerConstraint
from homiebot.planner.messages import ChatMessage, build_messages, report_call, to_hf_messages, to_plain_prompt
from homiebot.planner.models import available_models, bundled_model
from homiebot.planner.prompt import ICL_EXAMPLE_ASSISTANT, ICL_EXAMPLE_USER
from homiebot.planner.shipped import SHIPPED_MODELS, ShippedModel, shipped_model
from homiebot.planner.text_planning import TextTranscript, fresh_text_chat

if TYPE_CHECKING:
    from homiebot.planner.text_engine import CausalTextModel
    from homiebot.planner.text_lm import TextLanguageModel

log = logging.getLogger(__name__)

#: Answer budget of a bundled text model (``max_new_tokens`` when not given): room for a short analysis.
TEXT_MODEL_MAX_NEW_TOKENS = 160
#: Answer budget in the subtask-only format (``max_new_tokens`` when not given): its longest constrained answer with
#: free-form targets (``Subtask: [Put, <48 characters>, <48 characters>]`` and the longest EMMOE model) is 128
#: bytes, so no grammar of it is cut short. A trained model's answer is about 12 tokens and the grammar ends it.
SUBTASK_MAX_NEW_TOKENS = 128

#: Module names that ``quantization="fp8"`` leaves in bf16: vision towers and projectors (small, and their
#: variable-length attention dominates them, not GEMMs) and the output head (its logits pick the answer).
FP8_KEEP_MODULES: tuple[str, ...] = ("visual", "vision_tower", "multi_modal_projector", "lm_head")


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
    #: The answer's token ids, the stop token included when there was one (no padding).
    token_ids: tuple[int, ...] = ()


class LocalModelConfig(BaseModel):
    """How to load a local image-text-to-text model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(description="local folder of the model (config.json, weights, processor files)")
    adapter: str | None = Field(default=None, description="local folder of a peft (LoRA) adapter")
    merge_adapter: bool = True
    device: str = "auto"  # "auto": cuda when available, else cpu
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    #: "4bit" / "8bit": bitsandbytes weights; "fp8": FP8 weights and activations (torchao, per-row scales)
    #: for the language model's linear layers, on a GPU of compute capability >= 8.9 (H100, L40, RTX 40).
    quantization: Literal["4bit", "8bit", "fp8"] | None = None
    attn_implementation: str | None = None  # e.g. "sdpa", "flash_attention_2"; None: transformers' default
    trust_remote_code: bool = False
    #: CPU threads for torch (process-wide: ``torch.set_num_threads``); None keeps torch's default. One
    #: thread is much faster for tiny models on a loaded machine, where extra threads only wait on each other.
    torch_threads: int | None = Field(default=None, ge=1)
    #: Greedy decoding loop: "fast" (homiebot.planner.fast_decode; Qwen2-VL family), "generate"
    #: (transformers), "auto": fast for a Qwen2-VL-family model on CUDA, else generate.
    decode: DecodeMode = DecodeMode.AUTO
    #: Fast path only: prefill the shared system turn once and reuse its keys and values.
    share_prefix: bool = False
    #: Fast path: the language model's SDPA reads grouped key/value heads (fast_decode.GroupedQuerySDPA, on
    #: this model only); None: on CUDA when its attention is "sdpa".
    sdpa_gqa: bool | None = None
    #: Fast path: one SDPA call per vision layer for same-sized images (None: on CUDA for Qwen2-VL).
    batched_vision: bool | None = None

    @field_validator("model")
    @classmethod
    def _model_is_local_folder(cls, value: str) -> str:
        return str(check_model_folder(value))

    @field_validator("adapter")
    @classmethod
    def _adapter_is_local_folder(cls, value: str | None) -> str | None:
        if value is None:
            return None
        path = Path(value).expanduser()
        if not (path / "adapter_config.json").is_file():
            raise ValueError(f"adapter folder {value!r} has no adapter_config.json (expected a peft adapter)")
        return str(path)

    @model_validator(mode="after")
    def _fp8_quantises_merged_weights(self) -> LocalModelConfig:
        if self.quantization == "fp8" and self.adapter is not None and not self.merge_adapter:
            raise ValueError("quantization='fp8' quantises merged weights: it needs merge_adapter=true")
        return self


def check_model_folder(value: str) -> Path:
    """The local transformers model folder ``value`` names (a folder with a ``config.json``), or a ``ValueError``
    that says what is wrong with it. Looks at the files only: loading the weights is the engine's job."""
    path = Path(value).expanduser()
    if not path.is_dir():
        raise ValueError(
            f"model folder {value!r} does not exist: the hf planner loads local folders only "
            "(download weights yourself, then pass their folder to --model)"
        )
    if not (path / "config.json").is_file():
        raise ValueError(f"{value!r} has no config.json; is it a transformers model folder?")
    return path


def _validation_message(exc: ValidationError) -> str:
    """One line per problem: ``option: message`` (pydantic's own text is several lines per error)."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error.get("loc", ())) or "options"
        parts.append(f"{where}: {error.get('msg', '').removeprefix('Value error, ')}")
    return "; ".join(parts)


#: Model types whose processors carry a video part (torchvision) that the planner never uses.
_QWEN_VL_TYPES = ("qwen2_vl", "qwen2_5_vl")


def _folder_model_type(folder: str) -> str | None:
    try:
        return json.loads((Path(folder) / "config.json").read_text()).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None


def is_causal_text_folder(folder: str) -> bool:
    """Whether a model folder holds a text-only causal LM (SmolLM2, Qwen2, Llama written by ``homie train
    base|sft|merge``): its model type maps to transformers' causal-LM classes and not to its image-text ones.

    Some vision-language families are in both maps (Gemma 3, Mllama); they stay image-text models here.
    """
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
    )

    model_type = _folder_model_type(folder)
    return (
        model_type is not None
        and model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        and model_type not in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
    )


def _folder_chat_template(folder: str) -> str | None:
    path = Path(folder)
    if (path / "chat_template.jinja").is_file():
        return (path / "chat_template.jinja").read_text()
    if (path / "chat_template.json").is_file():
        try:
            return json.loads((path / "chat_template.json").read_text()).get("chat_template")
        except (OSError, ValueError, AttributeError):
            return None
    return None


@functools.cache
def _image_only_processor_class() -> type:
    from transformers import Qwen2VLProcessor
    from transformers.processing_utils import ProcessorMixin

    class ImageOnlyQwenVLProcessor(Qwen2VLProcessor):
        """Qwen2-VL's processor without the video processor (whose construction needs torchvision)."""

        def __init__(
            self, image_processor: Any = None, tokenizer: Any = None, chat_template: Any = None, **kwargs: Any
        ):
            self.image_token = getattr(tokenizer, "image_token", None) or "<|image_pad|>"
            self.video_token = getattr(tokenizer, "video_token", None) or "<|video_pad|>"
            self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
            self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)
            ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template)

    # What save_pretrained writes as processor_class: a folder saved from it loads with the full processor
    # wherever torchvision is installed (and through this fallback where it is not).
    ImageOnlyQwenVLProcessor.__name__ = ImageOnlyQwenVLProcessor.__qualname__ = "Qwen2VLProcessor"
    return ImageOnlyQwenVLProcessor


def image_only_qwen_vl_processor(image_processor: Any, tokenizer: Any, chat_template: str | None = None) -> Any:
    """A Qwen2-VL / Qwen2.5-VL processor for text and images only (no torchvision needed).

    transformers 5 builds these processors with a video processor that requires torchvision; the planner
    never sends video. Same text and image handling as the full processor (it subclasses it), including
    ``mm_token_type_ids``; a ``videos=`` argument is not supported.
    """
    return _image_only_processor_class()(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=chat_template
    )


class VisionLanguageModel:
    """A loaded processor + model that turns chat conversations into answers, optionally grammar-constrained.

    Shared by :class:`HFPlanner` and the OpenAI-compatible server (:mod:`homiebot.planner.openai_server`).
    ``generate`` holds a lock: one batch runs on the model at a time.
    """

    #: It takes images (the text mode of homiebot.planner.text_planning is for engines where this is True).
    text_only = False

    def __init__(self, config: LocalModelConfig) -> None:
        try:
            import torch
            from transformers import AutoModelForImageTextToText
        except ImportError as exc:
            raise PlannerLoadError("the hf planner needs torch and transformers: pip install -e '.[models]'") from exc
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
        self.model_type = _folder_model_type(config.model)
        self.processor = self._load_processor(config)
        self.tokenizer = getattr(self.processor, "tokenizer", self.processor)
        self.tokenizer.padding_side = "left"
        load_kwargs: dict[str, Any] = {
            "local_files_only": True,
            "trust_remote_code": config.trust_remote_code,
            "dtype": self.dtype,
        }
        if config.attn_implementation:
            load_kwargs["attn_implementation"] = config.attn_implementation
        if config.quantization == "fp8":
            check_fp8_support(self.device)  # before loading: a clear error costs no load
        elif config.quantization is not None:
            load_kwargs["quantization_config"] = self._quantization_config(config.quantization)
            load_kwargs["device_map"] = {"": self.device.index or 0}
        model: Any  # the Auto class picks the model's class at run time
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
        if config.quantization in (None, "fp8"):
            model = model.to(self.device)
        if config.adapter is not None:
            model = self._apply_adapter(model, config)
        if config.quantization == "fp8":
            quantize_fp8(model)  # after the adapter's merge: the merged weights are what gets quantised
        self.model = model.eval()
        self.vocab_size = int(self.model.get_output_embeddings().weight.shape[0])
        self.stop_token_ids = self._stop_token_ids()
        self.image_token = getattr(self.processor, "image_token", None)
        self.has_chat_template = bool(getattr(self.processor, "chat_template", None))
        self._grammar_cache: Any = None
        self._prefix_ids: dict[tuple[ChatMessage, ...], tuple[int, ...]] = {}
        #: Which loop the last call ran ("fast" or "generate"), for tests and benchmarks.
        self.last_decode: str | None = None
        self.decode_mode, self.fast_decoder = self._decoding(config)

    # ------------------------------------------------------------------------------------ loading

    def _load_processor(self, config: LocalModelConfig) -> Any:
        from transformers import AutoProcessor

        qwen_without_torchvision = self.model_type in _QWEN_VL_TYPES and importlib.util.find_spec("torchvision") is None
        try:
            processor = AutoProcessor.from_pretrained(
                config.model, local_files_only=True, trust_remote_code=config.trust_remote_code
            )
        except Exception as exc:  # transformers raises OSError/ValueError/ImportError/TypeError variously
            if qwen_without_torchvision:
                return self._image_only_processor(config, exc)
            raise PlannerLoadError(
                f"cannot load the processor from {config.model}: {exc}"
                + (
                    " (processors with a video part, like Qwen2-VL's, need torchvision built for your torch)"
                    if "video" in str(exc).lower() or "VIDEO" in str(exc)
                    else ""
                )
            ) from exc
        if qwen_without_torchvision and getattr(processor, "image_processor", None) is None:
            # No processor config in the folder: AutoProcessor fell back to the tokenizer alone.
            return self._image_only_processor(config, None)
        return processor

    def _image_only_processor(self, config: LocalModelConfig, cause: Exception | None) -> Any:
        from transformers import AutoImageProcessor, AutoTokenizer

        log.info("torchvision is missing: loading %s with an image-only Qwen2-VL processor", config.model)
        try:
            tokenizer = AutoTokenizer.from_pretrained(
                config.model, local_files_only=True, trust_remote_code=config.trust_remote_code
            )
            image_processor = AutoImageProcessor.from_pretrained(config.model, local_files_only=True)
        except Exception as exc:  # reported as a load error with both causes
            raise PlannerLoadError(
                f"cannot load the processor from {config.model}: {cause or exc} (image-only fallback: {exc})"
            ) from exc
        chat_template = getattr(tokenizer, "chat_template", None) or _folder_chat_template(config.model)
        return image_only_qwen_vl_processor(image_processor, tokenizer, chat_template)

    def _decoding(self, config: LocalModelConfig) -> tuple[str, Any]:
        """The decoding path ("fast" or "generate") and the fast loop's decoder (None for generate)."""
        from homiebot.planner import fast_decode

        reason = fast_decode.unsupported_reason(self.model)
        cuda = self.device.type == "cuda"
        if config.decode is DecodeMode.FAST and reason:
            raise PlannerLoadError(f"decode='fast': {reason}; use decode='generate' (or 'auto')")
        fast = config.decode is DecodeMode.FAST or (config.decode is DecodeMode.AUTO and not reason and cuda)
        mode = "fast" if fast else "generate"
        if config.share_prefix and mode != "fast":
            raise PlannerLoadError(
                "share_prefix=True needs the fast decoding loop: pass decode='fast' "
                + (f"({reason})" if reason else "(decode='auto' chose generate: this device is not CUDA)")
            )
        if mode == "generate":
            return mode, None
        batched_vision = config.batched_vision
        if batched_vision is None:
            batched_vision = cuda and fast_decode.base_model(self.model).config.model_type == "qwen2_vl"
        sdpa_gqa = config.sdpa_gqa
        if sdpa_gqa is None:  # auto: on CUDA, where the language model runs transformers' SDPA attention
            text_config = getattr(fast_decode.base_model(self.model).config, "text_config", None)
            sdpa_gqa = cuda and getattr(text_config, "_attn_implementation", None) == "sdpa"
        try:
            decoder = fast_decode.FastDecoder(self.model, batched_vision=bool(batched_vision), sdpa_gqa=sdpa_gqa)
        except fast_decode.FastDecodeUnsupported as exc:
            raise PlannerLoadError(f"decode='fast': {exc}") from exc
        log.info(
            "decoding with the fast loop (batched vision %s, sdpa gqa %s)", decoder.vision is not None, decoder.sdpa_gqa
        )
        return mode, decoder

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
        if config.adapter is None:
            raise PlannerLoadError("no adapter folder given")
        adapted = PeftModel.from_pretrained(model, config.adapter, is_trainable=False)
        if config.merge_adapter and config.quantization in (None, "fp8"):
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
        """Answer several conversations as one left-padded batch; ``grammars[i]`` constrains row ``i``.

        Greedy calls run the fast loop when :attr:`decode_mode` is ``"fast"`` (``compile`` then decides whether
        its step is compiled on CUDA; ``cache_implementation`` is ``generate``'s and is ignored there); sampling
        calls always run ``generate``.
        """
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
        if self.fast_decoder is not None and not do_sample:
            prefix_ids = self._shared_prefix_ids(conversations) if self.config.share_prefix else None
            with self._lock:
                output = self.fast_decoder.generate(
                    inputs,
                    max_new_tokens,
                    stop_token_ids=self.stop_token_ids,
                    pad_token_id=self.pad_token_id,
                    logits_processor=logits_processors[0] if logits_processors else None,
                    prefix_ids=prefix_ids,
                    compile=compile,
                )
                self.last_decode = "fast"
            return self._generations(output[:, prompt_length:].tolist(), inputs["attention_mask"])
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
            self.last_decode = "generate"
        return self._generations(output[:, prompt_length:].tolist(), inputs["attention_mask"])

    def _generations(self, new_tokens: list[list[int]], attention_mask: Any) -> list[Generation]:
        """Each row's answer: tokens up to the first stop token (kept in ``token_ids``), padding dropped."""
        results: list[Generation] = []
        attention = attention_mask.sum(dim=1).tolist()
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
                    token_ids=tuple(kept) + ((tokens[len(kept)],) if stopped else ()),
                )
            )
        return results

    def _shared_prefix_ids(self, conversations: Sequence[Sequence[ChatMessage]]) -> tuple[int, ...] | None:
        """The token ids of the preamble every conversation starts with, or None.

        The preamble is the part of a round's conversation that never changes: the system turn, and appendix
        H.1's in-context example pair after it when the planner sends one (:func:`preamble_length`). It is
        rendered alone through the chat template and tokenized as the processor tokenizes the prompt; the
        fast loop still checks that each row's prompt starts with exactly these ids.
        """
        if not self.has_chat_template or not conversations:
            return None
        size = preamble_length(conversations[0])
        preamble = tuple(conversations[0][:size])
        if not size or any(tuple(c[:size]) != preamble or len(c) <= size for c in conversations):
            return None
        cached = self._prefix_ids.get(preamble)
        if cached is None:
            hf_messages, _ = to_hf_messages(list(preamble))
            text = self.processor.apply_chat_template(hf_messages, add_generation_prompt=False, tokenize=False)
            cached = tuple(int(t) for t in self.tokenizer(text)["input_ids"])
            if len(self._prefix_ids) > 8:
                self._prefix_ids.clear()
            self._prefix_ids[preamble] = cached
        return cached or None

    def close(self) -> None:
        if self.fast_decoder is not None:
            self.fast_decoder.close()
            self.fast_decoder = None
        self.model = None
        if self._torch.cuda.is_available():
            self._torch.cuda.empty_cache()


def _causal_text_engine(load: LocalModelConfig) -> CausalTextModel:
    """A trained text-only causal LM (``homie train``) as the engine, refusing the options only the image-text
    loader implements."""
    refused = {
        "quantization": load.quantization is not None,
        "decode='fast'": load.decode is DecodeMode.FAST,
        "share_prefix": load.share_prefix,
        "merge_adapter=false": load.adapter is not None and not load.merge_adapter,
    }
    named = [name for name, given in refused.items() if given]
    if named:
        raise PlannerLoadError(f"{load.model} is a text-only causal LM; {', '.join(named)} is for image-text models")
    # Imported here: the training package imports this module (Generation, PlannerLoadError).
    from homiebot.planner.text_engine import CausalTextModel

    return CausalTextModel(load.model, adapter=load.adapter, threads=load.torch_threads, device=load.device)


def _exported_text_engine(model: str, adapter: str | None, **options: Any) -> TextLanguageModel:
    """A trained text-only folder (with ``adapter`` merged in) on the llama.cpp runtime: written once as GGUF
    into the model cache (:func:`homiebot.planner.gguf_export.cached_gguf`), then run as the bundled model is
    (re-encoded to Q8_0 unless ``weights="bundled"``, prefix reuse, GBNF grammars)."""
    from homiebot.planner.gguf_export import GGUFExportError, cached_gguf
    from homiebot.planner.models import ModelFile
    from homiebot.planner.text_lm import TextLanguageModel, TextModelConfig

    folder = Path(model).expanduser()
    if adapter is not None and not (Path(adapter).expanduser() / "adapter_config.json").is_file():
        raise PlannerLoadError(f"adapter folder {adapter!r} has no adapter_config.json (expected a peft adapter)")
    try:
        exported = cached_gguf(folder, adapter)
    except GGUFExportError as exc:
        raise PlannerLoadError(str(exc)) from None
    name = folder.name if adapter is None else f"{folder.name}+{Path(adapter).expanduser().name}"
    return TextLanguageModel(TextModelConfig(ModelFile(name, exported), runtime="llama_cpp", **options))


def shipped_text_engine(model: ShippedModel, **options: Any) -> TextLanguageModel:
    """A shipped model (:mod:`homiebot.planner.shipped`) on the llama.cpp runtime: its Q8_0 file, built on first use,
    run as it is (prefix reuse, GBNF grammars)."""
    from homiebot.planner.models import ModelCacheError, ModelFile
    from homiebot.planner.shipped import shipped_gguf
    from homiebot.planner.text_lm import TextLanguageModel, TextModelConfig

    try:
        built = shipped_gguf(model)
    except ModelCacheError as exc:
        raise PlannerLoadError(str(exc)) from None
    return TextLanguageModel(TextModelConfig(ModelFile(model.name, built), runtime="llama_cpp", weights="bundled",
                                             **options))


def preamble_length(conversation: Sequence[ChatMessage]) -> int:
    """How many leading messages of a planner conversation are its fixed preamble: the system turn (1), and
    appendix H.1's in-context example pair after it (3), which are the same in every round and episode that
    share a system prompt; 0 when the conversation does not open with a text-only system turn."""
    if not conversation or conversation[0].role != "system" or conversation[0].images:
        return 0
    pair = tuple((m.role, m.text, bool(m.images)) for m in conversation[1:3])
    if pair == (("user", ICL_EXAMPLE_USER, False), ("assistant", ICL_EXAMPLE_ASSISTANT, False)):
        return 3
    return 1


def check_fp8_support(device: Any) -> None:
    """Raise :class:`PlannerLoadError` naming what ``quantization="fp8"`` lacks here (torchao, a CUDA GPU,
    compute capability >= 8.9), or return."""
    import importlib.util

    import torch

    if importlib.util.find_spec("torchao") is None:
        raise PlannerLoadError(
            "quantization='fp8' needs torchao, which is not installed (pip install -e '.[fp8]'); "
            "or load the model unquantised"
        )
    if torch.device(device).type != "cuda":
        raise PlannerLoadError(
            "quantization='fp8' needs a CUDA GPU with FP8 tensor cores (compute capability "
            ">= 8.9: H100, L40, RTX 40); none is in use"
        )
    capability = torch.cuda.get_device_capability(device)
    if capability < (8, 9):
        raise PlannerLoadError(
            f"quantization='fp8' needs compute capability >= 8.9 (H100, L40, RTX 40); "
            f"{torch.cuda.get_device_name(device)} has {capability[0]}.{capability[1]}: use '8bit' or '4bit'"
        )


def quantize_fp8(model: Any) -> int:
    """FP8 (e4m3) weights and dynamically scaled FP8 activations, per-row scales, for the language model's
    linear layers, in place; returns how many layers were converted. The planner (``quantization="fp8"``,
    applied after a bf16 load, so that the adapter merge happens first) and the GPU benchmark (``--fp8``)
    both call this.

    torchao rather than transformers' ``FineGrainedFP8Config``: its per-row scaled GEMM is cuBLAS's
    ``_scaled_mm``, the kernel the prefill's large matrices want, and it composes with ``torch.compile``
    (the fast loop's decoding step). Modules named in :data:`FP8_KEEP_MODULES` stay bf16.
    """
    import torch
    from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow, quantize_

    converted: list[str] = []

    def wanted(module: Any, name: str) -> bool:
        keep = isinstance(module, torch.nn.Linear) and not any(part in FP8_KEEP_MODULES for part in name.split("."))
        if keep:
            converted.append(name)
        return keep

    quantize_(model, Float8DynamicActivationFloat8WeightConfig(granularity=PerRow()), filter_fn=wanted)
    log.info("FP8 weights for %d linear layers (kept in bf16: %s)", len(converted), ", ".join(FP8_KEEP_MODULES))
    return len(converted)


class HFPlanner(Planner):
    """EMMOE planner on a local transformers model (``homie run --planner hf --model PATH``).

    ``decode`` / ``share_prefix`` / ``sdpa_gqa`` / ``batched_vision``: see :class:`LocalModelConfig` and the
    module docstring (``homie run --decode fast``, ``-p share_prefix=true``). With ``engine=`` the engine's
    own configuration rules and these load options are not used.

    A bundled model's name instead of a folder (``--model smollm2``, :mod:`homiebot.planner.models`) loads it
    on the CPU runtime of :mod:`homiebot.planner.text_lm` (``runtime``, ``prefix_reuse``, ``lookup_tokens``,
    ``weights``, ``flash_attention``; ``torch_threads`` sets its threads) and plans in the text mode of :mod:`homiebot.planner.text_planning`.
    A shipped model's name (``--model homiebot-smollm2``, :mod:`homiebot.planner.shipped`: an adapter in this package
    over a bundled model) runs the same way, from a Q8_0 file built once into the model cache. A folder holding a
    text-only causal LM (:func:`is_causal_text_folder`: what ``homie train base|sft|merge`` writes, with
    ``adapter=`` a LoRA adapter of ``homie train sft|dpo``) loads as
    :class:`homiebot.planner.text_engine.CausalTextModel` and plans in the same text mode; with
    ``runtime="llama_cpp"`` such a folder (and its adapter, merged in) is instead written once as GGUF into the
    model cache and runs on the bundled model's llama.cpp runtime (:mod:`homiebot.planner.gguf_export`),
    about 5x less CPU per round. Every round's messages, exactly as sent, and the answer are reported in the
    request's ``model_calls`` (the episode record keeps them); ``prompt_log`` (any engine) also appends each
    round's prompt as the model's chat template renders it, and the answer, to a JSON-lines file.

    Text mode only: ``include_history=False`` sends each round as a fresh chat (the system turn, then one user
    turn with the world description and the round's instruction, whose appendix-D historical execution
    already lists the earlier rounds) instead of the episode's growing chat; ``system_turn=False`` leaves the
    system turn out, as EMMOE's training samples do (appendix F.1: the human turn is the instruction alone).
    These two make the prompt of a round the prompt ``homie data build sft --text-observation`` trains on
    (docs/training.md). ``answer_format="subtask"`` is for a model trained on answers without the Analysis line
    (``--thoughtless``): the grammar starts at ``Subtask: [``, the loop reads answers without an analysis, and
    ``max_new_tokens`` defaults to :data:`SUBTASK_MAX_NEW_TOKENS`; the prompt is unchanged.
    """

    name = "hf"
    privileged = False
    accepts_free_text = True

    #: The planner's configuration class (its options, typed; homiebot.config.planners).
    config_class: type[HFPlannerConfig] = HFPlannerConfig

    def __init__(
        self,
        config: HFPlannerConfig | None = None,
        *,
        engine: VisionLanguageModel | TextLanguageModel | CausalTextModel | None = None,
        **options: Any,
    ) -> None:
        """``config``: the planner's typed configuration (what ``homie run`` builds); or its options as keywords
        (``HFPlanner(model="smollm2", constrained=True)``), validated into one. ``engine``: a loaded model to plan
        with instead of loading ``config.model``."""
        if config is None:
            try:
                config = self.config_class.model_validate({**options, "name": self.config_class.model_fields["name"].default})
            except ValidationError as exc:
                raise ValueError(_validation_message(exc)) from None
        elif options:
            raise TypeError(f"give the options in the configuration or as keywords, not both: {sorted(options)}")
        self.config = config
        model, adapter, constrained = config.model, config.adapter, config.constrained
        icl_example, include_history, max_new_tokens = config.icl_example, config.include_history, config.max_new_tokens
        analysis_max_chars, do_sample, temperature, top_p = (
            config.analysis_max_chars, config.do_sample, config.temperature, config.top_p)
        device, dtype, quantization = config.device, config.dtype, config.quantization
        cache_implementation, compile, attn_implementation = (
            config.cache_implementation, config.compile, config.attn_implementation)
        merge_adapter, trust_remote_code, torch_threads = (
            config.merge_adapter, config.trust_remote_code, config.torch_threads)
        decode, share_prefix, sdpa_gqa, batched_vision = (
            config.decode, config.share_prefix, config.sdpa_gqa, config.batched_vision)
        runtime, prefix_reuse, lookup_tokens, weights = (
            config.runtime, config.prefix_reuse, config.lookup_tokens, config.weights)
        jump_forward, forced_lookahead = config.jump_forward, config.forced_lookahead
        flash_attention, prompt_log, system_turn = config.flash_attention, config.prompt_log, config.system_turn
        answer_format, decision = config.answer_format, config.decision
        bundled = bundled_model(model)
        shipped = shipped_model(model) if engine is None and bundled is None else None
        text_folder = (
            engine is None
            and bundled is None
            and shipped is None
            and Path(model).expanduser().is_dir()
            and (is_causal_text_folder(str(Path(model).expanduser())))
        )
        answer_format = AnswerFormat(answer_format)
        if decision not in ("generate", "likelihood"):
            raise ValueError(f"decision must be generate or likelihood, got {decision!r}")
        if decision == "likelihood" and answer_format is not AnswerFormat.SUBTASK:
            # The likelihood choice writes no analysis (SayCan: no free generation).
            raise ValueError("decision=likelihood answers in the subtask-only format: add -p answer_format=subtask")
        if max_new_tokens is None and answer_format is AnswerFormat.SUBTASK:
            max_new_tokens = SUBTASK_MAX_NEW_TOKENS
        elif max_new_tokens is None:
            # A text model is small and on the CPU: a short answer keeps a round near a second
            # (the constrained analysis is capped to what fits, homiebot.planner.constrained.analysis_budget).
            max_new_tokens = TEXT_MODEL_MAX_NEW_TOKENS if bundled is not None or shipped or text_folder else 512
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if cache_implementation not in (None, "static"):
            raise ValueError(f"cache_implementation must be 'static' or None, got {cache_implementation!r}")
        self.prompt_log = Path(prompt_log) if prompt_log else None
        if self.prompt_log is not None and not self.prompt_log.parent.is_dir():
            raise ValueError(f"prompt_log: folder {str(self.prompt_log.parent)!r} does not exist")
        self.engine: VisionLanguageModel | TextLanguageModel | CausalTextModel
        if engine is not None:
            self.engine = engine
        elif bundled is not None:
            if adapter is not None:
                # A bundled model runs as quantised GGUF weights in llama.cpp, where a peft adapter cannot apply;
                # refused here so that a Python caller does not plan with the base model unknowingly.
                raise PlannerLoadError(
                    f"adapter={adapter!r}: {model!r} is a bundled GGUF model, which takes no adapter; write its "
                    f"trainable folder with `homie train base --model {model} --out DIR` and pass model=DIR "
                    "(the folder the adapter was trained on)"
                )
            from homiebot.planner.text_lm import TextLanguageModel, TextModelConfig  # it imports Generation from here

            self.engine = TextLanguageModel(
                TextModelConfig(
                    bundled,
                    runtime=runtime,
                    threads=torch_threads,
                    prefix_reuse=prefix_reuse,
                    lookup_tokens=lookup_tokens,
                    jump_forward=jump_forward,
                    forced_lookahead=forced_lookahead,
                    weights=weights,
                    flash_attention=flash_attention,
                )
            )
        elif shipped is not None:
            if adapter is not None:
                raise PlannerLoadError(f"adapter={adapter!r}: {model!r} is a shipped model, which brings its own adapter")
            if runtime == "transformers" or weights != "q8_0":
                # The name's model is one Q8_0 file built once (homiebot.planner.shipped); a float folder of it is
                # `homie train base` plus the adapter in the package, for model=DIR adapter=...
                raise PlannerLoadError(
                    f"{model!r} runs on llama.cpp as Q8_0 weights only (runtime={runtime!r}, weights={weights!r} given)"
                )
            self.engine = shipped_text_engine(
                shipped,
                threads=torch_threads,
                prefix_reuse=prefix_reuse,
                lookup_tokens=lookup_tokens,
                jump_forward=jump_forward,
                forced_lookahead=forced_lookahead,
                flash_attention=flash_attention,
            )
        elif text_folder and runtime == "llama_cpp":
            self.engine = _exported_text_engine(
                model,
                adapter,
                threads=torch_threads,
                prefix_reuse=prefix_reuse,
                lookup_tokens=lookup_tokens,
                jump_forward=jump_forward,
                forced_lookahead=forced_lookahead,
                weights=weights,
                flash_attention=flash_attention,
            )
        else:
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
                    decode=decode,
                    share_prefix=share_prefix,
                    sdpa_gqa=sdpa_gqa,
                    batched_vision=batched_vision,
                )
            except ValidationError as exc:
                raise PlannerLoadError(_validation_message(exc)) from None
            self.engine = _causal_text_engine(load) if text_folder else VisionLanguageModel(load)
        #: One episode's growing chat when the engine is text-only (homiebot.planner.text_planning).
        self._transcript = TextTranscript(compact=config.compact_turns)
        # The text mode describes the world as it is now from the state (never the goal), as PARTNR's oracle
        # perception gives its planners the state (homiebot.planner.text_planning); images serve a VLM instead.
        self.reads_state = type(self).reads_state or self.engine.text_only
        self.constrained = constrained
        if config.typed_grammar and decision == "likelihood":
            raise ValueError("typed_grammar applies to decision=generate (likelihood ranks the untyped grammar's subtasks)")
        self.typed_grammar = config.typed_grammar
        self.answer_format = answer_format
        self.decision = decision
        if decision == "likelihood":
            from homiebot.planner.text_lm import TextLanguageModel as TextEngine

            if not isinstance(self.engine, TextEngine):
                raise PlannerLoadError("decision=likelihood runs on a bundled or shipped text model (llama.cpp)")
        self.system_turn = system_turn
        self.icl_example = icl_example
        self.include_history = include_history
        # Only the text mode's growing chat holds the model's own answers; the image mode's history is the loop's.
        self.adopts_answers = self.text_mode and include_history
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

    @classmethod
    def from_config(cls, config: PlannerConfig, **objects: Any) -> HFPlanner:
        """The planner of a run configuration: the configuration whole, and ``objects`` (a loaded ``engine``)."""
        if not isinstance(config, cls.config_class):
            raise TypeError(f"{cls.__name__} takes a {cls.config_class.__name__}, not {type(config).__name__}")
        return cls(config, **objects)

    @classmethod
    def preflight(cls, options: Mapping[str, Any]) -> None:
        """The model ``--model`` names is there, without loading it: a bundled model's package is installed, or the
        folder exists and holds a ``config.json``, so that a wrong path is refused before a command writes anything
        (a worker would otherwise find it only when it loads the model). An ``engine`` given by a caller is used as
        it is."""
        if options.get("engine") is not None:
            return
        model = options.get("model")
        if model is None:
            raise ValueError("needs --model: a local model folder, or a bundled or shipped model's name "
                             f"({', '.join([*available_models(), *SHIPPED_MODELS])})")
        bundled = bundled_model(str(model))
        shipped = shipped_model(str(model))
        if bundled is not None:
            bundled.path()  # ModelNotInstalledError names the extra that installs it
        elif shipped is not None:
            shipped.adapter_files()
            base = bundled_model(shipped.base)
            if base is not None:
                base.path()
        else:
            check_model_folder(str(model))

    def reset(self, task: str, seed: int = 0) -> None:
        self._seed = seed
        self._calls = 0
        self._transcript.reset()

    def adopt_answer(self, answer: str) -> None:
        if not self.adopts_answers:
            super().adopt_answer(answer)
        self._transcript.adopt(answer)

    @property
    def text_mode(self) -> bool:
        """Whether rounds are planned in the text mode (a text-only engine)."""
        return self.engine.text_only

    def grammar_for(self, request: PlanRequest) -> str:
        """The EBNF grammar of one request's answer (:meth:`constraint_for`); with ``typed_grammar``, in the text mode
        on a state it describes itself, the typed one (:func:`homiebot.planner.partnr_world.text_mode_grammar`)."""
        if (self.typed_grammar and self.text_mode and request.world_state is not None
                and not request.world_description):
            from homiebot.planner.partnr_world import text_mode_grammar

            return text_mode_grammar(request.world_state, request.actions, request.models,
                                     max_new_tokens=self.max_new_tokens, analysis_max_chars=self.analysis_max_chars,
                                     answer_format=self.answer_format).text
        return self.constraint_for(request).grammar()

    def constraint_for(self, request: PlanRequest) -> AnswerConstraint:
        """What one request's answer may contain: its actions, models and grounded targets (in the text mode, the
        names of the world description its prompt carries: :meth:`TextTranscript.targets`)."""
        targets = self._transcript.targets(request) if self.text_mode else request.grounded_targets
        return AnswerConstraint.build(
            request.actions,
            request.models,
            targets,
            max_new_tokens=self.max_new_tokens,
            analysis_max_chars=self.analysis_max_chars,
            answer_format=self.answer_format,
        )

    def messages_for(self, request: PlanRequest) -> list[ChatMessage]:
        if self.text_mode:
            if not self.include_history:
                # a fresh chat per round; the transcript keeps the episode's world at the start
                messages = fresh_text_chat(request, self._transcript)
            else:
                messages = self._transcript.conversation(request)
        else:
            messages = build_messages(request, icl_example=self.icl_example, include_history=self.include_history)
        if not self.system_turn:
            messages = [m for m in messages if m.role != "system"]
        return messages

    def plan(self, request: PlanRequest) -> str:
        return self.plan_batch([request])[0]

    def plan_batch(self, requests: Sequence[PlanRequest]) -> list[str]:
        if not requests:
            return []
        if self.text_mode and len(requests) > 1:
            # The text mode keeps one episode's growing chat; several episodes at once would interleave it.
            raise ValueError(f"the text mode plans one episode at a time; got a batch of {len(requests)}")
        if self.decision == "likelihood":
            return [self._choose_by_likelihood(requests[0])]
        grammars = [self.grammar_for(r) for r in requests] if self.constrained else None
        seed = None
        if self.do_sample and self._seed is not None:
            seed = self._seed * 1_000_003 + self._calls  # reproducible per episode and round
        self._calls += 1
        conversations = [self.messages_for(r) for r in requests]
        generations = self.engine.generate(
            conversations,
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
        for request, conversation, generation in zip(requests, conversations, generations, strict=True):
            report_call(request, conversation, generation.text)
        if self.text_mode:
            self._transcript.keep(conversations[0], generations[0].text, requests[0])
        if self.prompt_log is not None:
            self._log_prompts(requests, conversations, generations)
        return [g.text for g in generations]

    def _choose_by_likelihood(self, request: PlanRequest) -> str:
        """SayCan-style: the grammar's subtasks ranked by the model's likelihood (:mod:`homiebot.planner.likelihood`)."""
        from homiebot.planner.likelihood import LikelihoodChoiceError, choose_answer
        from homiebot.planner.text_lm import TextLanguageModel as TextEngine

        engine = self.engine
        assert isinstance(engine, TextEngine)  # checked when the planner was made
        conversation = self.messages_for(request)
        constraint = self.constraint_for(request)
        try:
            chosen = choose_answer(lambda texts: engine.score(conversation, texts), constraint)
        except LikelihoodChoiceError as err:
            raise PlannerLoadError(str(err)) from None
        stats = engine.last_stats
        self.last_generations = [Generation(chosen.text, stats.prompt_tokens if stats else 0, 0, "stop")]
        report_call(request, conversation, chosen.text)
        self._transcript.keep(conversation, chosen.text, request)
        if self.prompt_log is not None:
            self._log_prompts([request], [conversation], self.last_generations)
        return chosen.text

    def _log_prompts(
        self,
        requests: Sequence[PlanRequest],
        conversations: Sequence[Sequence[ChatMessage]],
        generations: Sequence[Generation],
    ) -> None:
        """Append each round's exact prompt (rendered by the model's chat template) and answer, one JSON line each."""
        assert self.prompt_log is not None
        with self.prompt_log.open("a", encoding="utf-8") as log_file:
            for request, conversation, generation in zip(requests, conversations, generations, strict=True):
                entry = {
                    "task": request.task,
                    "round": request.round_index,
                    "prompt": self.engine.render(conversation)[0],
                    "images": sum(len(m.images) for m in conversation),
                    "answer": generation.text,
                    "prompt_tokens": generation.prompt_tokens,
                    "completion_tokens": generation.completion_tokens,
                }
                log_file.write(json.dumps(entry) + "\n")

    def close(self) -> None:
        self.engine.close()
