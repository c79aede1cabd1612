"""Scoring modes of the JAX engine: single, packed (dense / segment mask), chunked and
prefill_extend. One module per concern: host layouts, option checks, compile counting, and
one module per mode family."""
