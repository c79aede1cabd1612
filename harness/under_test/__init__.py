"""Servers under test: launching, pooling, loading and judging them."""
