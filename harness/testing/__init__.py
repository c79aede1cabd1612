"""A fake engine for testing the harness's plumbing (failures, resume, artifacts): its
scores are a hash of the tokens and its timings are whatever an empty call takes, so it
is never a test of scores or speed."""

from __future__ import annotations

import hashlib

from mibench.engines import (
    InputError,
    MibenchError,
    ModelConfig,
    ScoreResult,
    engine_mode,
    engine_modes,
)

TINY = ModelConfig(architecture="qwen3", vocab_size=151936, hidden_size=256, num_layers=4,
                   num_heads=4, num_kv_heads=2, head_dim=64, intermediate_size=768,
                   rope_theta=1e6, rms_norm_eps=1e-6, tie_word_embeddings=True,
                   max_position_embeddings=40960, qk_norm=True, qkv_bias=False)


class FakeDevice:
    """A device whose memory stats behave as JAX's: `peak_bytes_in_use` only grows over the
    process, whatever is freed. One per process (`DEVICE`), as a real chip is."""

    def __init__(self):
        self.in_use = self.peak = 0

    def hold(self, nbytes: int) -> None:
        """Allocate `nbytes` for good (an engine's weights)."""
        self.in_use += nbytes
        self.peak = max(self.peak, self.in_use)

    def transient(self, nbytes: int) -> None:
        """Allocate `nbytes` and free them again (a call's activations)."""
        self.peak = max(self.peak, self.in_use + nbytes)

    def memory_stats(self) -> dict:
        return {"bytes_in_use": self.in_use, "peak_bytes_in_use": self.peak}


DEVICE = FakeDevice()


class FakeEngine:
    """Scores `hash(prefix + item + label) / 2**64` per label, scaled so a row is what a real
    engine's could be (with apply_softmax a row sums to 1, without it at most 1). `fail`
    maps a mode to the exception its calls raise; `on_call(engine, n)` runs before call n
    (1-based) to inject trouble; `scores(rows)`, when given, replaces the scores (a
    misbehaving engine). `device_bytes`, when given, puts the engine on the process's fake
    device (`DEVICE`): `weights` held from the start, and per mode what one call
    allocates and frees again; `memory_stats()` then reports it as JAX's devices do."""

    special_ids = frozenset()

    def __init__(self, name="jax", model="embedded:tiny", dtype="float32", tp=1, fail=None,
                 on_call=None, on_mode=None, scores=None, device_bytes=None):
        self.name, self.model, self.dtype, self.tp = name, model, dtype, tp
        self.model_config = TINY
        self.modes = tuple(engine_modes(name))
        self.fail = fail or {}
        self.on_call = on_call
        self.on_mode = on_mode or {}  # mode -> trouble(engine) run before each such call
        self.calls = 0
        self.rewrite = scores
        self.device_bytes = device_bytes
        if device_bytes is not None:
            DEVICE.hold(device_bytes.get("weights", 0))

    def memory_stats(self) -> list[dict] | None:
        """Per-device stats (`jax.Device.memory_stats`), None without a fake device."""
        return None if self.device_bytes is None else [DEVICE.memory_stats()]

    def score(self, query, items, label_token_ids, mode="single", apply_softmax=False,
              delimiter=None, semantics=None, **options) -> ScoreResult:
        self.calls += 1
        if self.on_call is not None:
            self.on_call(self, self.calls)
        if mode in self.fail:
            raise self.fail[mode]
        if mode in self.on_mode:
            self.on_mode[mode](self)
        if self.device_bytes is not None:
            DEVICE.transient(self.device_bytes.get(mode, 0))
        declared = engine_mode(self.name, mode)
        declared.check(options)
        for t in label_token_ids:
            if not 0 <= t < TINY.vocab_size:
                raise InputError(f"token id {t} is outside the vocabulary", field="labels")
        prefix = list(query) + ([delimiter] if delimiter is not None else [])
        rows = [[self._h(prefix + list(item) + [label]) for label in label_token_ids]
                for item in items]
        scores = [[s / sum(row) if apply_softmax else s / len(row) for s in row]
                  for row in rows]
        if self.rewrite is not None:
            scores = self.rewrite(scores)
        semantics = declared.resolve_semantics(semantics, delimiter)
        return ScoreResult(scores=scores, mode=mode, num_items=len(items),
                           num_tokens=declared.num_tokens(len(prefix), [len(i) for i in items],
                                                          options, semantics))

    @property
    def topology(self) -> dict:
        return {"tp": self.tp}

    def encode(self, text: str) -> list[int]:
        raise MibenchError("the fake engine has no tokenizer; pass token ids", field="tokens")

    def close(self) -> None:
        self.closed = True

    def resolved_options(self, mode: str, options: dict) -> dict:
        return {}

    @staticmethod
    def _h(tokens) -> float:
        digest = hashlib.blake2b(repr(tokens).encode(), digest_size=8).digest()
        return int.from_bytes(digest) / 2**64


def fake_factory(**kwargs):
    """An engine factory for `runner.run(engine_factory=...)`; kwargs go to every engine."""
    made: list[FakeEngine] = []

    def factory(name, model, dtype, tp):
        engine = FakeEngine(name, model, dtype, tp, **kwargs)
        made.append(engine)
        return engine

    factory.made = made
    return factory


def fixed_peak(flops: float = 1e11):
    """A PeakTable that measures nothing: the same peak for every dtype."""
    from ..host.peak import PeakTable

    table = PeakTable("cpu", "cpu")
    table.values = {"float32": flops, "bfloat16": flops}
    return table


def write_config(folder, text: str, name: str = "c.yaml"):
    """Write a dedented YAML config into `folder`; returns its path."""
    import textwrap
    from pathlib import Path

    path = Path(folder) / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def error_line(result) -> str:
    """The one `error: ...` line a command wrote to stderr (a CliRunner result), asserting it
    is one line and no traceback came with it."""
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


# Trouble for fault-injection tests (module level, so a worker process can unpickle them)
def segfault(engine) -> None:
    """Die as a crash in native code would: SIGSEGV."""
    import os
    import signal

    os.kill(os.getpid(), signal.SIGSEGV)


def allocate(engine, mib: int = 1024) -> None:
    """Touch `mib` MiB and hold it (a memory blow-up that the worker's cap must stop)."""
    import time

    import numpy as np

    engine._held = np.ones(mib * 2**20, np.uint8)
    time.sleep(60)


def hang_in_native_code(engine) -> None:
    """A wait no Python signal handler can interrupt (SIGALRM blocked, as inside a native
    call that never returns): only the parent's deadline ends it."""
    import signal
    import time

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    time.sleep(3600)


def record_pid(engine) -> None:
    """Append this process's id to the file named by MIBENCH_TEST_PIDS (which worker ran)."""
    import os

    with open(os.environ["MIBENCH_TEST_PIDS"], "a") as f:
        f.write(f"{os.getpid()}\n")
