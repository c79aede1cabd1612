"""The host a run measures on: its processes, load, memory, peaks, provenance."""
