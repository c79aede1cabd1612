"""Scoring modes of the JAX engine: single, packed (dense / segment mask), chunked and
prefill_extend, each declared once in the registry (`registry.Mode`). One module per
concern: the registry, their pure costs (accounting), host layouts, compile counting, and
one module per mode family."""
