"""``--adapter DIR`` of ``homie run``, ``homie eval`` and ``homie up sim``: a LoRA adapter of ``homie train
sft|dpo`` on the ``hf`` planner's ``--model`` (docs/training.md, "Planning with the result").

The option is ``-p adapter=DIR`` under a name of its own, checked before anything is written or loaded, so
that a wrong folder costs one line instead of a model load (seconds) and, in ``homie eval``, one failed
episode per worker. The checks read files only (peft's ``adapter_config.json`` and the weights' header):

* the folder exists and holds ``adapter_config.json`` (a JSON object with ``peft_type``) and the weights
  (``adapter_model.safetensors`` or ``adapter_model.bin``), which is what peft's ``save_pretrained`` writes
  (https://huggingface.co/docs/peft/developer_guides/checkpoint);
* the planner takes an adapter (a constructor parameter called ``adapter``: the ``hf`` planner);
* ``--model`` is a model folder: a bundled GGUF name (``smollm2``) runs in llama.cpp, where no adapter applies;
* a LoRA adapter's input sizes (the second dimension of every ``lora_A`` weight, peft's layout) are sizes the
  model's ``config.json`` has (``hidden_size``, ``intermediate_size``, heads x ``head_dim``): an adapter trained on another model
  family would otherwise fail deep inside peft's loader.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

#: The weights files peft's ``save_pretrained`` writes (safetensors by default, the pickle on request).
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")


class AdapterOptionError(ValueError):
    """``--adapter`` names no usable adapter for this planner and model (one line)."""


@dataclass(frozen=True)
class AdapterInfo:
    """What the checks read from an adapter folder."""

    folder: Path
    peft_type: str
    weights: Path
    #: The ``lora_A`` input sizes (empty for a ``.bin`` file or a non-LoRA adapter: not read).
    input_sizes: frozenset[int]


def read_adapter(folder: Path) -> AdapterInfo:
    """The adapter in ``folder``, or :class:`AdapterOptionError` saying why it is not one."""
    if not folder.exists():
        raise AdapterOptionError(f"--adapter {folder}: no such folder")
    if not folder.is_dir():
        raise AdapterOptionError(f"--adapter {folder}: not a folder (give the folder homie train sft|dpo wrote)")
    config_path = folder / "adapter_config.json"
    if not config_path.is_file():
        raise AdapterOptionError(
            f"--adapter {folder}: no adapter_config.json, not a peft adapter (homie train sft|dpo --out writes one)"
        )
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise AdapterOptionError(f"--adapter {folder}: adapter_config.json does not read as JSON ({err})") from None
    if not isinstance(config, dict) or not isinstance(config.get("peft_type"), str):
        raise AdapterOptionError(f"--adapter {folder}: adapter_config.json has no peft_type (not a peft adapter)")
    weights = next((folder / name for name in ADAPTER_WEIGHTS if (folder / name).is_file()), None)
    if weights is None:
        raise AdapterOptionError(f"--adapter {folder}: no adapter weights ({' or '.join(ADAPTER_WEIGHTS)})")
    return AdapterInfo(folder, config["peft_type"], weights, _lora_input_sizes(weights))


def _lora_input_sizes(weights: Path) -> frozenset[int]:
    if weights.suffix != ".safetensors":
        return frozenset()  # a pickle: reading its shapes means unpickling it, which the loader does anyway
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(weights), framework="numpy") as handle:
            return frozenset(
                int(handle.get_slice(key).get_shape()[1])
                for key in handle.keys()  # noqa: SIM118 - safe_open is not a mapping
                if ".lora_A." in key and len(handle.get_slice(key).get_shape()) == 2
            )
    except (OSError, SafetensorError) as err:
        raise AdapterOptionError(f"--adapter {weights.parent}: {weights.name} does not read ({err})") from None


def _model_sizes(model: Path) -> frozenset[int] | None:
    try:
        config = json.loads((model / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # the planner's own loader reports an unreadable model folder
    hidden, intermediate = config.get("hidden_size"), config.get("intermediate_size")
    if not (isinstance(hidden, int) and isinstance(intermediate, int)):
        return None  # an image-text model's sizes sit in its text_config: left to peft's loader
    sizes = {hidden, intermediate}
    heads, head_dim = config.get("num_attention_heads"), config.get("head_dim")
    if isinstance(heads, int) and isinstance(head_dim, int):
        sizes.add(heads * head_dim)  # the attention output projection's input where head_dim x heads != hidden
    return frozenset(sizes)


def check_adapter(adapter: Path, planner: str | None, model: str | None) -> str:
    """The adapter folder as the ``adapter`` planner option, or :class:`AdapterOptionError` (one line)."""
    if planner is not None:
        from homiebot.config.planners import ConfigError, planner_config_class

        try:  # the planner's options are its configuration class's fields
            parameters = planner_config_class(planner).model_fields
        except (ConfigError, ImportError):
            parameters = None  # the command reports the planner itself
        if parameters is not None and "adapter" not in parameters:
            raise AdapterOptionError(f"--adapter: planner {planner!r} takes no adapter (the hf planner does)")
    info = read_adapter(adapter)
    if model is None:
        raise AdapterOptionError("--adapter needs --model, the model folder the adapter was trained on")
    from homiebot.planner.models import bundled_model

    if bundled_model(model) is not None and not Path(model).expanduser().is_dir():
        raise AdapterOptionError(
            f"--adapter: --model {model} is a bundled GGUF model, which takes no adapter; "
            f"homie train base --model {model} --out DIR writes its trainable folder"
        )
    sizes = _model_sizes(Path(model).expanduser())
    if sizes is not None and info.input_sizes and not info.input_sizes <= sizes:
        raise AdapterOptionError(
            f"--adapter {adapter}: trained on a model of another size (LoRA input sizes "
            f"{sorted(info.input_sizes)}, --model {model} has {sorted(sizes)})"
        )
    return str(adapter.expanduser().absolute())  # eval.json pins it: a resumed run may start elsewhere


def adapter_option(adapter: Path | None, planner: str | None, options: dict[str, object]) -> dict[str, str]:
    """``{"adapter": FOLDER}`` for the planner options (``options``: the others, ``model`` among them), checked,
    or ``{}`` without ``--adapter``; beside ``-p adapter=`` it is refused (two answers to one question)."""
    if adapter is None:
        return {}
    if options.get("adapter") is not None:
        raise AdapterOptionError("give the adapter once: --adapter DIR or -p adapter=DIR, not both")
    model = options.get("model")
    return {"adapter": check_adapter(adapter, planner, model if isinstance(model, str) else None)}
