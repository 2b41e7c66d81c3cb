"""PARTNR's evaluation language on the embedded simulator (docs/partnr.md): predicates, evaluation functions,
the proposition tracker, failure explanations and EMMOE goals converted to functions."""
