"""Planner models trained here and shipped with the package, by name: ``--model homiebot-smollm2``.

A shipped model is a LoRA adapter kept as package data (``homiebot/planner/shipped/<name>/``: peft's
``adapter_config.json`` and ``adapter_model.safetensors``, and the model card ``README.md``) over a bundled model
(:mod:`homiebot.planner.models`). The adapter is the smallest artifact that reproduces the model (r 8 on every linear
layer of SmolLM2-135M: 9.8 MB, where the merged model would be 540 MB in float32 or 145 MB as Q8_0). On first use
the model is built once and kept in the model cache (:func:`~homiebot.planner.models.cache_dir`):

1. the bundled GGUF written as a float32 transformers folder (:func:`~homiebot.planner.gguf_export.float_folder`,
   what ``homie train base`` writes, which the adapter was trained on);
2. the adapter merged in with peft and the result exported as GGUF (:func:`~homiebot.planner.gguf_export.export_gguf`);
3. re-encoded to Q8_0 (:func:`~homiebot.planner.models.q8_0_copy`), the weights the llama.cpp runtime runs by default.

Only the Q8_0 file stays (145 MB), named by the digest of the adapter's files and the base file, so a new adapter in
an upgraded package is built again. Steps 1-2 run in a folder beside the cache's file and are removed; the file is
renamed into place whole, so two processes building at once both end with one complete file.

The name also sets the planner options the model was trained for (:data:`homiebot.config.planners.SHIPPED_MODEL_OPTIONS`:
the growing chat without a system turn, answers without the Analysis line, constrained, llama.cpp).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from homiebot.planner.models import ModelCacheError, ModelNotInstalledError, bundled_model, model_cache_places

log = logging.getLogger(__name__)

#: Where the shipped adapters are, inside this package.
SHIPPED_DIR = Path(__file__).parent / "shipped"
#: Changes whenever a build of the same adapter would give other bytes (the export, the re-encoding).
BUILD_VERSION = 1
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")


@dataclass(frozen=True)
class ShippedModel:
    """A LoRA adapter shipped in this package over a bundled base model (module docstring)."""

    name: str
    base: str  # the bundled model (homiebot.planner.models.BUNDLED_MODELS) the adapter was trained on
    description: str

    @property
    def folder(self) -> Path:
        return SHIPPED_DIR / self.name

    def adapter_files(self) -> list[Path]:
        """The adapter's files, or :class:`ModelNotInstalledError` when the package lacks them."""
        missing = [name for name in ADAPTER_FILES if not (self.folder / name).is_file()]
        if missing:
            raise ModelNotInstalledError(
                f"model {self.name!r}: the installed package lacks {', '.join(missing)} in {self.folder}; reinstall homiebot"
            )
        return [self.folder / name for name in ADAPTER_FILES]


SHIPPED_MODELS: dict[str, ShippedModel] = {
    "homiebot-smollm2": ShippedModel(
        name="homiebot-smollm2",
        base="smollm2",
        description="SmolLM2-135M-Instruct with a LoRA adapter (r 8) trained on this stack's EMMOE episodes; "
        "answers without the Analysis line (the model card: homiebot/planner/shipped/homiebot-smollm2/README.md)",
    ),
}


def shipped_model(name: str) -> ShippedModel | None:
    """The shipped model called ``name`` (case-insensitive), or None."""
    return SHIPPED_MODELS.get(name.strip().lower())


def build_digest(model: ShippedModel, base_file: Path) -> str:
    """What names the built file: the adapter's bytes, the base file (name and size: a bundled file changes only
    with its package's version) and :data:`BUILD_VERSION`."""
    from homiebot.planner.gguf_export import files_digest

    return files_digest(
        model.adapter_files(), salt=f"homiebot-shipped-{BUILD_VERSION}:{base_file.name}:{base_file.stat().st_size}"
    )


def shipped_gguf(model: ShippedModel, cache: Path | None = None) -> Path:
    """The shipped model as one Q8_0 GGUF file for llama.cpp, built on first use and kept in the model cache
    (module docstring). :class:`ModelNotInstalledError` when the base's package is missing, :class:`ModelCacheError`
    when no folder can keep the file."""
    from homiebot.planner.gguf_export import GGUFExportError, export_gguf, float_folder
    from homiebot.planner.models import q8_0_copy

    base = bundled_model(model.base)
    if base is None:  # a programming error in SHIPPED_MODELS, not the user's
        raise ModelCacheError(f"model {model.name!r}: its base {model.base!r} is not a bundled model")
    base_file = base.path()
    name = f"{model.name}.{build_digest(model, base_file)}.q8_0.gguf"
    errors = []
    for place in model_cache_places(cache):
        if (place / name).is_file():
            return place / name
        try:
            place.mkdir(parents=True, exist_ok=True)
            work = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=place))
        except OSError as exc:
            errors.append(f"{place}: {exc.strerror or exc}")
            log.warning("cannot write the model cache %s (%s); trying the next place", place, exc.strerror or exc)
            continue
        started = time.perf_counter()
        log.info("building %s once (%s with its adapter merged, as GGUF, re-encoded to Q8_0; about a minute) into %s",
                 model.name, model.base, place)
        try:
            folder = float_folder(base_file, work / "base")
            log.info("%s: merging the adapter and writing GGUF", model.name)
            merged = export_gguf(folder, work / f"{model.name}.f32.gguf", adapter=model.folder).path
            log.info("%s: re-encoding to Q8_0", model.name)
            quantised = q8_0_copy(merged, folder=work / "q8_0")
            os.replace(quantised, place / name)
        except GGUFExportError as exc:
            raise ModelCacheError(f"building {model.name} failed: {exc}") from None
        finally:
            _remove_tree(work)
        log.info("built %s in %.0f s: %s", model.name, time.perf_counter() - started, place / name)
        return place / name
    raise ModelCacheError(f"no folder to keep {model.name} in: {'; '.join(errors)}")


def _remove_tree(folder: Path) -> None:
    import shutil

    shutil.rmtree(folder, ignore_errors=True)
