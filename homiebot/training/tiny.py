"""A tiny random chat model for CI-sized training runs (tests, the benchmark's smoke figures): no download.

A byte-level BPE tokenizer trained in-process on the given texts (a few hundred tokens of vocabulary) with
ChatML special tokens and a ChatML chat template, and a random Qwen2 causal LM of about 0.1 M parameters.
Nothing it says means anything; what it shows is that the training code runs end to end and that the losses
are the ones the formulas give.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

#: ChatML, the format SmolLM2's own template renders (system / user / assistant turns).
CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ("<|pad|>", "<|im_start|>", "<|im_end|>")


def write_tiny_chat_model(folder: str | Path, texts: Iterable[str], seed: int = 0, vocab_size: int = 400) -> Path:
    """Write a random Qwen2 model and a tokenizer trained on ``texts`` into ``folder`` (a transformers folder)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    core.train_from_iterator(list(texts), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<|pad|>",
        eos_token="<|im_end|>",
        bos_token=None,
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    tokenizer.save_pretrained(str(target))
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    Qwen2ForCausalLM(config).save_pretrained(str(target))
    return target
