"""PARTNR's evaluation language on the embedded simulator (docs/partnr.md)."""
