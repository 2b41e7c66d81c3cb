"""Planner training from the stack's own episodes (docs/training.md).

* :mod:`~homiebot.training.episodes` reads episode records (``homie run`` / ``homie eval`` output) into
  :class:`~homiebot.training.episodes.EpisodeData`;
* :mod:`~homiebot.training.emmoe` is EMMOE's data pipeline (EMMOE paper, section 4.1, appendices B.3, F.1, F.2):
  the raw ``info.txt`` export, the SFT conversion, ``data_sift`` and ``dpo_augment``;
* :mod:`~homiebot.training.rewrite` is the rewriting augmentation (appendix F.1): an offline template
  rewriter and a cached rewriter over any OpenAI-compatible server;
* :mod:`~homiebot.training.build` turns records into Hugging Face data sets (parquet) with counts per kind;
* :mod:`~homiebot.training.collect` records episodes of the training experts (:mod:`homiebot.planner.perturbed`: the
  expert that chooses by what the prompt shows, and the one that makes EMMOE's designed decision errors);
* :mod:`~homiebot.training.trainer` runs trl's SFT and DPO trainers with peft LoRA (presets ``emmoe`` and
  ``cpu-small``).

Heavy libraries (torch, trl, datasets) are imported inside the functions that need them.
"""
