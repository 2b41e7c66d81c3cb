"""Tiny, randomly initialised vision-language models written to a local folder, built without any download.

They exist so that the real generate path of the transformers backend, the OpenAI-compatible server and
constrained decoding run in tests and on machines without weights. They are real architectures
(transformers' ``LlavaForConditionalGeneration``: a CLIP vision tower, a projector, a Llama decoder; or
``Qwen2VLForConditionalGeneration`` / ``Qwen2_5_VLForConditionalGeneration``) with random weights, a
byte-level BPE tokenizer trained in-process on the EMMOE prompt text, a ChatML chat template and a real
image processor. Their answers are noise, which is the point: a random model makes every format error a
trained one would, so constrained decoding is tested against the worst case.

Usage: ``python -m homiebot.planner.tiny_vlm OUT_DIR [--arch llava|qwen2_vl|qwen2_5_vl] [--seed N]``, then
``homie run --planner hf --model OUT_DIR``.

Qwen2-VL needs torchvision for its full processor in transformers 5 (its video processor is part of the
processor); the CPU torch pinned here has no matching torchvision wheel, so ``llava`` is the default. Without
torchvision the ``qwen2_vl`` / ``qwen2_5_vl`` models are written with an image-only processor
(``hf_backend.image_only_qwen_vl_processor``; saved under the real processor's name), and the hf backend
loads them the same way: that is how the fast decoding loop (Qwen2-VL family only) is tested on the CPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from homiebot.planner.prompt import ICL_EXAMPLE_ASSISTANT, ICL_EXAMPLE_USER, format_output, system_prompt
from homiebot.types import EMMOE_ACTIONS, EMMOE_MODELS, Subtask

if TYPE_CHECKING:  # transformers is imported when a model is built (the models extra)
    from transformers import PreTrainedModel, ProcessorMixin

log = logging.getLogger(__name__)

Architecture = Literal["llava", "qwen2_vl", "qwen2_5_vl"]

#: ChatML, the format of Qwen2-VL's template, with the image placeholder of the architecture.
_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}__IMAGE__"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_LLAVA_IMAGE = "<image>"
_QWEN_IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"
_SPECIAL_TOKENS = {
    "llava": ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>"],
    "qwen2_vl": ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"],
}
_SPECIAL_TOKENS["qwen2_5_vl"] = _SPECIAL_TOKENS["qwen2_vl"]

#: Words the tokenizer should see as whole tokens (objects and places of the EMMOE scenes).
_WORDS = (
    "fridge apple kitchen table counter sofa couch cabinet drawer microwave sink bed shelf box bowl cup "
    "living room bedroom bathroom green can yellow box cereal banana plate door chair desk oven"
)


def _corpus() -> list[str]:
    answers = [
        format_output("I need to go to the fridge first.", Subtask(action, "fridge"), model)
        for action in EMMOE_ACTIONS
        for model in EMMOE_MODELS
    ]
    return [system_prompt(), ICL_EXAMPLE_USER, ICL_EXAMPLE_ASSISTANT, _WORDS, *answers] * 4


def build_tokenizer(arch: Architecture = "llava", vocab_size: int = 1024):
    """A byte-level BPE tokenizer trained on the EMMOE prompt text (every byte is a token, so any text encodes)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = _SPECIAL_TOKENS[arch]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(_corpus(), trainer)
    template = _CHAT_TEMPLATE.replace("__IMAGE__", _LLAVA_IMAGE if arch == "llava" else _QWEN_IMAGE)
    extra = {"image_token": "<image>"} if arch == "llava" else {}
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=template,
        padding_side="left",
        extra_special_tokens=extra,
    )


def build_tiny_vlm(arch: Architecture = "llava", *, seed: int = 0, image_size: int = 28):
    """``(model, processor)`` of a tiny random VLM (about 0.2 M parameters)."""
    import torch

    tokenizer = build_tokenizer(arch)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in _SPECIAL_TOKENS[arch]}
    vocab = len(tokenizer)
    text = {
        "vocab_size": vocab,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 8192,
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
    }
    torch.manual_seed(seed)
    model: PreTrainedModel
    processor: ProcessorMixin
    if arch == "llava":
        from transformers import (
            CLIPImageProcessor,
            CLIPVisionConfig,
            LlamaConfig,
            LlavaConfig,
            LlavaForConditionalGeneration,
            LlavaProcessor,
        )

        config = LlavaConfig(
            vision_config=CLIPVisionConfig(
                hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                image_size=image_size, patch_size=14, projection_dim=32,
            ),
            text_config=LlamaConfig(**text),
            image_token_index=ids["<image>"],  # the declared name of what transformers also reads as image_token_id
            vision_feature_select_strategy="default",
            vision_feature_layer=-1,
        )
        model = LlavaForConditionalGeneration(config)
        image_processor = CLIPImageProcessor(
            size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}
        )
        processor = LlavaProcessor(
            image_processor=image_processor,
            tokenizer=tokenizer,
            chat_template=tokenizer.chat_template,
            patch_size=14,
            vision_feature_select_strategy="default",
            num_additional_image_tokens=1,
        )
    elif arch in ("qwen2_vl", "qwen2_5_vl"):
        from transformers import (
            Qwen2_5_VLConfig,
            Qwen2_5_VLForConditionalGeneration,
            Qwen2_5_VLProcessor,
            Qwen2VLConfig,
            Qwen2VLForConditionalGeneration,
            Qwen2VLImageProcessor,
            Qwen2VLProcessor,
            Qwen2VLVideoProcessor,
        )

        text_config = dict(text, rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]})
        special = {"image_token_id": ids["<|image_pad|>"], "video_token_id": ids["<|video_pad|>"],
                   "vision_start_token_id": ids["<|vision_start|>"]}
        if arch == "qwen2_vl":
            qwen2_config = Qwen2VLConfig(
                text_config=text_config,
                vision_config={"depth": 1, "embed_dim": 32, "hidden_size": 64, "num_heads": 2, "mlp_ratio": 2,
                               "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2},
                **special,
            )
            model = Qwen2VLForConditionalGeneration(qwen2_config)
        else:  # windowed vision attention in block 0, full attention in block 1
            qwen2_5_config = Qwen2_5_VLConfig(
                text_config=text_config,
                vision_config={"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
                               "out_hidden_size": 64, "patch_size": 14, "spatial_merge_size": 2,
                               "temporal_patch_size": 2, "window_size": 56, "fullatt_block_indexes": [1]},
                **special,
            )
            model = Qwen2_5_VLForConditionalGeneration(qwen2_5_config)
        # Each view becomes (side / 28)^2 merged tokens: one at the default 28 px.
        pixels = max(image_size, 28) ** 2
        qwen_images = Qwen2VLImageProcessor(min_pixels=pixels, max_pixels=pixels)
        if importlib.util.find_spec("torchvision") is None:
            # The video processor needs torchvision; the planner sends images only (see the module docstring).
            from homiebot.planner.hf_backend import image_only_qwen_vl_processor

            processor = image_only_qwen_vl_processor(qwen_images, tokenizer, tokenizer.chat_template)
        else:
            processor_class = Qwen2VLProcessor if arch == "qwen2_vl" else Qwen2_5_VLProcessor
            processor = processor_class(
                image_processor=qwen_images, tokenizer=tokenizer, video_processor=Qwen2VLVideoProcessor(),
                chat_template=tokenizer.chat_template,
            )
    else:
        raise ValueError(f"unknown tiny architecture {arch!r}; expected 'llava', 'qwen2_vl' or 'qwen2_5_vl'")
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    return model.eval(), processor


def save_tiny_vlm(path: str | os.PathLike[str], arch: Architecture = "llava", *, seed: int = 0) -> Path:
    """Write a tiny random VLM (weights, config, processor) to ``path`` atomically; return the path."""
    target = Path(path)
    if target.exists() and any(target.iterdir()):
        raise FileExistsError(f"{target} exists and is not empty; choose a new folder")
    model, processor = build_tiny_vlm(arch, seed=seed)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".tiny-vlm-", dir=target.parent))
    try:
        model.save_pretrained(staging)
        processor.save_pretrained(staging)
        if target.exists():
            target.rmdir()
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write a tiny random vision-language model to a local folder.")
    parser.add_argument("out_dir")
    parser.add_argument("--arch", choices=("llava", "qwen2_vl", "qwen2_5_vl"), default="llava")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        path = save_tiny_vlm(args.out_dir, args.arch, seed=args.seed)
    except (FileExistsError, ValueError, ImportError) as exc:
        parser.error(str(exc))
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
