"""A trained text model folder as one GGUF file, so that llama.cpp runs it (``homie train gguf``, and
``--planner hf --model FOLDER -p runtime=llama_cpp``, which exports once into the model cache).

Why: a trained SmolLM2 folder runs on transformers at about 95 CPU s per 20-round EMMOE episode, the bundled
model on llama.cpp (re-encoded to Q8_0) at about 23 s (docs/results/training.md, BENCHMARKS.md). Exporting the
trained weights gives the trained model the same runtime, so its evaluation costs what the base model's does.

Why this module writes the file itself: llama.cpp's converter (``convert_hf_to_gguf.py``) is a script in its
source tree that no wheel installs. The ``gguf`` package (installed with the ``smollm2`` extra) has the file
writer and the map from transformers' tensor names to GGUF's, which is all the Llama architecture needs. What
it lacks is the tokenizer conversion, whose pre-tokenizer id that script picks by hashing sample encodings; so
the tokenizer's metadata is copied from a bundled model's GGUF file whose vocabulary and merges the folder's
tokenizer equals (every folder ``homie train base|sft|dpo|merge|dagger`` writes from ``--model smollm2``). A
folder with another architecture or tokenizer is refused in one line that names llama.cpp's converter.

The layout facts used (GGUF's spec, https://github.com/ggml-org/ggml/blob/master/docs/gguf.md, and
llama.cpp's Llama loader): hyper-parameters under ``llama.*``; query and key projection rows reordered from
transformers' rotary layout (the two halves of each head's dimensions) to GGML's (interleaved pairs); no
``output.weight`` when the embeddings are tied. Tensors are written as float32, so the file is the folder's
weights exactly; the llama.cpp runtime then re-encodes it to Q8_0 as it does the bundled file
(:func:`homiebot.planner.models.q8_0_copy`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

#: Changes whenever the written bytes would change for the same folder, so cached exports are remade.
EXPORT_VERSION = 1


class GGUFExportError(ValueError):
    """A folder that cannot be written as GGUF here, or an output that cannot be written: one line why."""


@dataclass(frozen=True)
class ExportSummary:
    path: Path
    tensors: int
    parameters: int
    template: str  # the bundled model whose tokenizer metadata was copied


_CONVERTER_HINT = "use llama.cpp's convert_hf_to_gguf.py for other models"


def rotary_rows_to_ggml(weight: np.ndarray, heads: int) -> np.ndarray:
    """Reorder a query or key projection's output rows from transformers' rotary layout (each head's first and
    second halves rotate together) to GGML's (adjacent pairs rotate together). ``heads``: the heads the rows
    hold (the key/value heads for the key projection)."""
    rows = weight.shape[0]
    if rows % (2 * heads):
        raise GGUFExportError(f"a projection of {rows} rows does not split into {heads} heads of pairs")
    return weight.reshape(heads, 2, rows // heads // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def _folder_config(folder: Path) -> dict[str, Any]:
    try:
        config = json.loads((folder / "config.json").read_text())
    except FileNotFoundError:
        raise GGUFExportError(f"{folder}: not a model folder (no config.json)") from None
    except (OSError, ValueError) as exc:
        raise GGUFExportError(f"{folder}/config.json cannot be read: {exc}") from None
    if config.get("model_type") != "llama":
        raise GGUFExportError(
            f"{folder}: model type {config.get('model_type')!r}; only Llama-architecture folders (SmolLM2, as "
            f"homie train writes them) are exported here; {_CONVERTER_HINT}"
        )
    if config.get("attention_bias") or config.get("mlp_bias"):
        raise GGUFExportError(f"{folder}: projection biases are not exported here; {_CONVERTER_HINT}")
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    if rope.get("rope_type", "default") != "default":
        raise GGUFExportError(f"{folder}: rope scaling {rope.get('rope_type')!r} is not exported here; {_CONVERTER_HINT}")
    return config


def _template_reader(template: str) -> tuple[Any, Path]:
    import gguf

    from homiebot.planner.models import ModelNotInstalledError, bundled_model

    bundled = bundled_model(template)
    if bundled is None:
        raise GGUFExportError(f"{template!r} is not a bundled model")
    try:
        path = bundled.path()
    except ModelNotInstalledError as exc:
        raise GGUFExportError(str(exc)) from None
    return gguf.GGUFReader(str(path)), path


def _normalised_merges(merges: list[Any]) -> list[str]:
    # tokenizer.json keeps merges either as "a b" strings or as [a, b] pairs, depending on the tokenizers version.
    return [m if isinstance(m, str) else " ".join(m) for m in merges]


def _check_tokenizer(folder: Path, reader: Any, template: str) -> None:
    """The folder's tokenizer must be the template's, token for token and merge for merge."""
    tokens = list(reader.fields["tokenizer.ggml.tokens"].contents())
    merges = list(reader.fields["tokenizer.ggml.merges"].contents())
    try:
        spec = json.loads((folder / "tokenizer.json").read_text())
    except (OSError, ValueError) as exc:
        raise GGUFExportError(f"{folder}: no readable tokenizer.json ({exc})") from None
    vocab: dict[str, int] = dict(spec.get("model", {}).get("vocab", {}))
    for added in spec.get("added_tokens", []):
        vocab[added["content"]] = added["id"]
    by_id = sorted(vocab.items(), key=lambda item: item[1])
    same_vocab = len(by_id) == len(tokens) and all(
        name == tokens[index] and token_id == index for index, (name, token_id) in enumerate(by_id)
    )
    if not same_vocab or _normalised_merges(spec.get("model", {}).get("merges", [])) != merges:
        raise GGUFExportError(
            f"{folder}: its tokenizer is not {template}'s (the only tokenizer this exporter writes); "
            f"{_CONVERTER_HINT}"
        )


def _state_dict(folder: Path, adapter: Path | None) -> tuple[dict[str, np.ndarray], str | None]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    network = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True, dtype=torch.float32)
    if adapter is not None:
        from peft import PeftModel

        if not (adapter / "adapter_config.json").is_file():
            raise GGUFExportError(f"{adapter}: not a peft adapter (no adapter_config.json)")
        network = PeftModel.from_pretrained(network, str(adapter)).merge_and_unload()
    chat_template = AutoTokenizer.from_pretrained(str(folder), local_files_only=True).chat_template
    with torch.no_grad():
        state = {name: value.detach().float().cpu().numpy() for name, value in network.state_dict().items()}
    return state, chat_template


def export_gguf(
    folder: str | Path, out: str | Path, *, adapter: str | Path | None = None, template: str = "smollm2"
) -> ExportSummary:
    """Write ``folder`` (with ``adapter`` merged in, when given) to the GGUF file ``out``, float32 tensors.
    Written under a temporary name and renamed, so ``out`` is either complete or absent."""
    import gguf

    source = Path(folder).expanduser()
    adapter_path = Path(adapter).expanduser() if adapter is not None else None
    target = Path(out).expanduser().absolute()
    # The output first: a refused path must not cost the model's load.
    if not target.parent.is_dir():
        raise GGUFExportError(f"output folder {target.parent} does not exist")
    if not os.access(target.parent, os.W_OK):
        raise GGUFExportError(f"cannot write in {target.parent}: permission denied")
    config = _folder_config(source)
    reader, _ = _template_reader(template)
    _check_tokenizer(source, reader, template)
    state, chat_template = _state_dict(source, adapter_path)

    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    hidden = int(config["hidden_size"])
    head_dim = int(config.get("head_dim") or hidden // heads)
    blocks = int(config["num_hidden_layers"])
    rope = config.get("rope_parameters") or {}
    rope_theta = float(rope.get("rope_theta", config.get("rope_theta", 10000.0)))
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, blocks)

    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.close(handle)
    except OSError as exc:
        raise GGUFExportError(f"cannot write in {target.parent}: {exc.strerror or exc}") from None
    try:
        writer = gguf.GGUFWriter(temporary, "llama")
        writer.add_name(source.name)
        writer.add_block_count(blocks)
        writer.add_context_length(int(config.get("max_position_embeddings", 2048)))
        writer.add_embedding_length(hidden)
        writer.add_feed_forward_length(int(config["intermediate_size"]))
        writer.add_head_count(heads)
        writer.add_head_count_kv(kv_heads)
        writer.add_rope_freq_base(rope_theta)
        writer.add_layer_norm_rms_eps(float(config.get("rms_norm_eps", 1e-6)))
        writer.add_rope_dimension_count(head_dim)
        if head_dim * heads != hidden:
            writer.add_key_length(head_dim)
            writer.add_value_length(head_dim)
        writer.add_vocab_size(int(config["vocab_size"]))
        writer.add_file_type(gguf.LlamaFileType.ALL_F32)
        for key, field in reader.fields.items():
            if key.startswith("tokenizer.") and key != "tokenizer.chat_template":
                sub_type = field.types[1] if len(field.types) > 1 else None
                writer.add_key_value(key, field.contents(), field.types[0], sub_type)
        if chat_template:
            writer.add_chat_template(chat_template)
        count = parameters = 0
        tied = bool(config.get("tie_word_embeddings", False))
        for name, tensor in state.items():
            if name.endswith("rotary_emb.inv_freq") or (tied and name == "lm_head.weight"):
                continue
            mapped = names.get_name(name, try_suffixes=(".weight", ".bias"))
            if mapped is None:
                raise GGUFExportError(f"{source}: tensor {name!r} has no GGUF name; {_CONVERTER_HINT}")
            weight = tensor
            if mapped.endswith("attn_q.weight"):
                weight = rotary_rows_to_ggml(tensor, heads)
            elif mapped.endswith("attn_k.weight"):
                weight = rotary_rows_to_ggml(tensor, kv_heads)
            writer.add_tensor(mapped, np.ascontiguousarray(weight, dtype=np.float32))
            count += 1
            parameters += int(weight.size)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(temporary, target)
    except OSError as exc:
        raise GGUFExportError(f"cannot write {target}: {exc.strerror or exc}") from None
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    log.info("wrote %s: %d tensors, %.1f M parameters (float32)", target, count, parameters / 1e6)
    return ExportSummary(target, count, parameters, template)


def float_folder(gguf_file: Path, out: Path) -> Path:
    """A GGUF model (a bundled one: ``smollm2``) written as a float32 transformers folder ``out``: what ``homie
    train base`` trains on and what the shipped model's adapter is merged into (:mod:`homiebot.planner.shipped`).
    transformers' GGUF reader dequantises the weights."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, filename = str(gguf_file.parent), gguf_file.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=filename, local_files_only=True)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=filename, local_files_only=True, dtype=torch.float32)
    config = AutoConfig.from_pretrained(folder, gguf_file=filename, local_files_only=True)
    # A GGUF-loaded model refuses save_pretrained ("quantized with gguf, not serializable"): rebuild it from its
    # config without the quantisation entry and copy the dequantised weights over.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict())
    plain.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return out


def files_digest(paths: list[Path], salt: str = f"homiebot-gguf-export-{EXPORT_VERSION}") -> str:
    """A short digest of ``paths``' names and bytes after ``salt`` (what names a file built from them in the model
    cache; the salt holds what else the build depends on)."""
    sha = hashlib.sha256(salt.encode())
    for path in paths:
        sha.update(path.name.encode())
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                sha.update(block)
    return sha.hexdigest()[:16]


def _model_files(folder: Path) -> list[Path]:
    wanted = ["config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"]
    files = [folder / name for name in wanted if (folder / name).is_file()]
    return files + sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin"))


def cached_gguf(folder: str | Path, adapter: str | Path | None = None, cache: Path | None = None) -> Path:
    """The float32 GGUF export of ``folder`` (+ ``adapter``), made once and kept in the model cache
    (:func:`homiebot.planner.models.cache_dir`, else the system's temporary folder) under a name holding the
    digest of the weights, tokenizer and adapter files, so a retrained folder gets a new export."""
    from homiebot.planner.models import model_cache_places

    source = Path(folder).expanduser()
    files = _model_files(source)
    label = source.name
    if adapter is not None:
        adapter_folder = Path(adapter).expanduser()
        files += sorted(p for p in adapter_folder.iterdir() if p.name.startswith("adapter_"))
        label += f"+{adapter_folder.name}"
    name = f"{label}.{files_digest(files)}.f32.gguf"
    errors = []
    for place in model_cache_places(cache):
        if (place / name).is_file():
            return place / name
        try:
            place.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            errors.append(f"{place}: {exc.strerror or exc}")
            continue
        if not os.access(place, os.W_OK):
            errors.append(f"{place}: not writable")
            continue
        return export_gguf(source, place / name, adapter=adapter).path
    raise GGUFExportError(f"no folder to keep the GGUF export of {source} in: {'; '.join(errors)}")
