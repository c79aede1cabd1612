"""mibench: benchmarking and regression tracking for multi-item scoring with decoder-only
LLMs.

The repository's top-level folders install under this namespace: `mibench.engines` (the JAX
engine, the PyTorch reference, checkpoints), `mibench.harness` (CLI, configs, runner,
records, statistics, reports) and `mibench.workloads` (workload specs and token
generators). `from mibench.engines import load_engine` is the Python entry point.
"""
