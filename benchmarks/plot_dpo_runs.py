"""The curves of DPO runs from their ``training.json`` (no rerun): the loss per optimizer step, and the policy's
log-probability of the chosen and of the rejected answer (summed over the answer's tokens, the batch's mean), as
trl logs them.

    python -m benchmarks.plot_dpo_runs --out dpo-curves.png --run DPO adapters/sft-dpo --run RPO adapters/sft-rpo

Why the second panel: DPO's loss falls when the rejected answer's log-probability falls faster than the chosen
one's, so a falling loss can hide a chosen answer that became less likely (docs/results/trained-planner-dpo-*.md).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the PNG to write")
    parser.add_argument("--run", nargs=2, action="append", metavar=("LABEL", "FOLDER"), required=True,
                        help="a label and a homie train dpo output folder (repeatable)")
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    figure, (losses, logps) = plt.subplots(1, 2, figsize=(11, 4))
    for label, folder in args.run:
        history = json.loads((Path(folder) / "training.json").read_text(encoding="utf-8"))["log_history"]
        rows = [h for h in history if "loss" in h and "logps/chosen" in h]
        steps = [h["step"] for h in rows]
        losses.plot(steps, [float(h["loss"]) for h in rows], label=label)
        logps.plot(steps, [float(h["logps/chosen"]) for h in rows], label=f"{label}: chosen")
        logps.plot(steps, [float(h["logps/rejected"]) for h in rows], "--", label=f"{label}: rejected")
    losses.axhline(0.6931, color="grey", lw=0.8, ls=":")  # ln 2: policy equal to the reference
    losses.set(xlabel="optimizer step", ylabel="loss (nats)", title="training loss")
    logps.set(xlabel="optimizer step", ylabel="log-probability of the answer (nats)",
              title="policy log-probability, batch mean")
    for axes in (losses, logps):
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(args.out, dpi=100)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
