"""PARTNR's metrics, state files, suite generation and scored episodes on the embedded simulator (docs/partnr.md);
the evaluation language they score with is :mod:`homiebot.tasks.partnr`."""
