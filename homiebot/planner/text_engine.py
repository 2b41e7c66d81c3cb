"""A trained text model (a transformers causal-LM folder, optionally with a peft adapter) as a planner engine.

:class:`~homiebot.planner.hf_backend.HFPlanner` plans with any engine that has the interface of
:class:`~homiebot.planner.text_lm.TextLanguageModel` (``text_only``, ``render``, ``generate``,
``compile_grammar``, ``close``) and takes one through its ``engine=`` argument; this is such an engine for the
models ``homie train`` writes (SmolLM2 after ``homie train base``, with the SFT or DPO adapter). With a
text-only engine the planner runs the text planning mode of :mod:`homiebot.planner.text_planning`, the prompt
the ``--text-observation`` data were built for. The hf planner builds it for a causal-LM folder itself
(``homie run --planner hf --model DIR -p adapter=ADAPTER``); in Python::

    planner = HFPlanner(model="trained", engine=CausalTextModel("base_dir", adapter="adapter_dir"))

Decoding is greedy unless sampling is asked for; a grammar (``constrained=True``) goes through the same
xgrammar logits processor as the bundled models' transformers runtime.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from homiebot.planner.hf_backend import Generation, PlannerLoadError
from homiebot.planner.messages import ChatMessage
from homiebot.planner.text_lm import chat_stop_ids

log = logging.getLogger(__name__)


class CausalTextModel:
    """A local causal LM folder (+ adapter, merged on load) answering chat conversations on the CPU or a GPU."""

    text_only = True

    def __init__(
        self,
        model: str | Path,
        adapter: str | Path | None = None,
        threads: int | None = None,
        device: str = "auto",
    ) -> None:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise PlannerLoadError(
                "a trained text model needs torch and transformers: pip install -e '.[train]'"
            ) from exc
        folder = Path(model)
        if not (folder / "config.json").is_file():
            raise PlannerLoadError(f"{model}: not a model folder (no config.json)")
        self._torch = torch
        if threads is not None:
            torch.set_num_threads(threads)
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        if not self.tokenizer.chat_template:
            raise PlannerLoadError(f"{model}: the tokenizer has no chat template")
        self.device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device)
        network: Any = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True, dtype=torch.float32)
        if adapter is not None:
            if not (Path(adapter) / "adapter_config.json").is_file():
                raise PlannerLoadError(f"{adapter}: not a peft adapter (no adapter_config.json)")
            from peft import PeftModel

            network = PeftModel.from_pretrained(network, str(adapter)).merge_and_unload()
        self.model = network.to(self.device).eval()
        self.stop_ids = chat_stop_ids(self.tokenizer)
        self.vocab_size = int(self.model.get_output_embeddings().weight.shape[0])
        self._compiler: Any = None
        self._lock = threading.Lock()
        self.last_prompt = ""

    def render(self, conversation: Sequence[ChatMessage]) -> tuple[str, list[Any]]:
        if any(m.images for m in conversation):
            raise PlannerLoadError("a text model cannot take images")
        messages = [{"role": m.role, "content": m.text} for m in conversation]
        text = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return str(text), []

    def _compiled(self, grammar: str) -> Any:
        from homiebot.planner.constrained import GrammarCompilerCache

        if self._compiler is None:
            self._compiler = GrammarCompilerCache(self.tokenizer, self.vocab_size, self.stop_ids)
        return self._compiler.compile(grammar)

    def compile_grammar(self, grammar: str) -> None:
        self._compiled(grammar)

    def generate(
        self,
        conversations: Sequence[Sequence[ChatMessage]],
        *,
        grammars: Sequence[str | None] | None = None,
        max_new_tokens: int = 128,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        **_options: Any,
    ) -> list[Generation]:
        torch = self._torch
        results = []
        for index, conversation in enumerate(conversations):
            text, _ = self.render(conversation)
            grammar = grammars[index] if grammars is not None else None
            ids = self.tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"].to(self.device)
            options: dict[str, Any] = {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
            if do_sample:
                options = {"do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": None}
                if seed is not None:
                    torch.manual_seed(seed)
            with self._lock, torch.inference_mode():
                processors = None
                if grammar:
                    from homiebot.planner.constrained import GrammarLogitsProcessor

                    processors = [GrammarLogitsProcessor([self._compiled(grammar)])]
                output = self.model.generate(
                    input_ids=ids,
                    attention_mask=torch.ones_like(ids),
                    max_new_tokens=max_new_tokens,
                    eos_token_id=self.stop_ids,
                    pad_token_id=self.stop_ids[0] if self.stop_ids else 0,
                    logits_processor=processors,
                    **options,
                )
            answer = [int(t) for t in output[0, ids.shape[1] :].tolist()]
            stopped = False
            for cut, token in enumerate(answer):
                if token in self.stop_ids:
                    answer, stopped = answer[:cut], True
                    break
            self.last_prompt = text
            results.append(
                Generation(
                    text=str(self.tokenizer.decode(answer, skip_special_tokens=True)),
                    prompt_tokens=int(ids.shape[1]),
                    completion_tokens=len(answer) + int(stopped),
                    finish_reason="stop" if stopped else "length",
                    token_ids=tuple(answer),
                )
            )
        return results

    def close(self) -> None:
        self.__dict__.pop("model", None)
