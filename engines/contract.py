"""The engine contract: everything the harness may ask of an engine (the JAX engine, the
PyTorch reference, the `http` engine in front of a server, and the test fake). The
harness reaches an engine only through `load_engine` and these members, never through its
internals."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .config import ModelConfig
from .result import ScoreResult


@runtime_checkable
class Engine(Protocol):
    """A scoring engine bound to one model, dtype and topology.

    Optional members, asked for with `getattr` where a backend has them: `backend_info()`
    (a staticmethod: the backend's version and devices, `mibench job gpu`),
    `memory_stats()`, `device_peak()` and `reset_device_peak()` (a case's own device
    peak: harness/host/memory.py)."""

    name: str  # "jax", "torch", ...
    model: str  # the model spec it was loaded from
    dtype: str
    tp: int
    modes: tuple[str, ...]  # the modes `score` accepts (their options: modes.registry.MODES)
    model_config: ModelConfig  # model facts: vocabulary, shape (for useful FLOPs)

    @property
    def topology(self) -> dict:
        """tp, mesh shape and the devices used."""

    @property
    def special_ids(self) -> frozenset[int]:
        """Token ids a generated workload must avoid (the tokenizer's special tokens)."""

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`; a MibenchError when the model has no tokenizer."""

    def resolved_options(self, mode: str, options: dict) -> dict:
        """What options left to the engine (e.g. `attention: auto`) resolve to here."""

    def close(self) -> None:
        """Free what the engine holds (weights, compiled programs, device memory); the
        engine is not used afterwards."""

    def score(self, query, items, label_token_ids, mode: str = "single",
              apply_softmax: bool = False, delimiter: int | None = None,
              semantics: str | None = None, **options) -> ScoreResult:
        """Scores of every item (docs/semantics.md): `semantics` is `delimited` or `plain`
        (default: delimited with a delimiter, plain without); `options` the mode's own
        (modes/registry.py)."""
