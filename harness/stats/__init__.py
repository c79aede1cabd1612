"""Maths only: pure functions on numbers (lists of floats in, numbers or frozen records of
numbers out), each with its method's source in the docstring. Nothing here imports the
records, the config, the reports, the judgement (harness/judge/) or the verdict words:
tests/test_layering.py `test_stats_holds_maths_only` keeps it so."""
