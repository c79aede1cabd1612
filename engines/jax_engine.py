"""The JAX engine: loads a checkpoint, validates requests, dispatches to a scoring mode."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .attention_paths import Paths, paths, resolve
from .checkpoint import (
    encode,
    load_params,
    load_tokenizer,
    resolve_model,
    special_ids,
)
from .jax_model import Decoder
from .model_cache import cached_special_ids
from .modes.options import ATTENTIONS, choice
from .modes.registry import MODES, engine_mode
from .request import make_request
from .result import ScoreResult, checked_result
from .sharding import fit_kv_heads, make_shard_config, place_params


class JaxEngine:
    """Scores requests with the JAX decoder in any of its modes."""

    name = "jax"

    def __init__(self, model: str, dtype: str = "float32", tp: int = 1):
        self.model, self.dtype, self.tp = model, dtype, tp
        self.shard = make_shard_config(tp)  # before any loading: a missing device skips fast
        self.folder = resolve_model(model)
        # model_config is the checkpoint's; cfg is what runs (KV heads fitted to the mesh)
        self.model_config, np_params = load_params(self.folder)
        self.cfg, np_params = fit_kv_heads(self.model_config, np_params, tp)
        placed = place_params(np_params, jnp.dtype(dtype), self.shard)
        self.module = Decoder(self.cfg, placed)
        self.params = self.module.weights()
        self.compiled: set = set()  # shapes a mode has precompiled on this engine
        self.platform = jax.devices()[0].platform  # cpu, gpu or tpu
        self._tokenizer = None

    @staticmethod
    def backend_info() -> dict:
        """JAX's version and devices (`mibench job gpu`'s machine check)."""
        return {"jax": jax.__version__,
                "devices": [f"{d.platform}:{d.device_kind}" for d in jax.devices()]}

    @property
    def topology(self) -> dict:
        """tp, mesh shape and the devices used (ids, kinds, processes)."""
        return self.shard.describe()

    def attention(self, options: dict) -> Paths:
        """The attention path of a call's `attention` option (auto: by backend)."""
        choice_ = choice(options.get("attention", "auto"), "attention", ATTENTIONS)
        return paths(resolve(choice_, self.platform, self.dtype, self.tp), self.platform,
                     self.shard.mesh)

    def close(self) -> None:
        """Drop the weights (their device buffers go with the last reference)."""
        self.params = self.module = None

    def resolved_options(self, mode: str, options: dict) -> dict:
        """What a call with these options runs on this machine (for the case record):
        `Mode.resolved_options` (modes/registry.py); an unknown mode, nothing."""
        declared = MODES["jax"].get(mode)
        return {} if declared is None else declared.resolved_options(self, options)

    @property
    def modes(self) -> tuple[str, ...]:
        return tuple(MODES["jax"])

    @property
    def special_ids(self) -> frozenset[int]:
        if self._tokenizer is None and self.folder is not None:  # not loaded: remembered
            # ids, no transformers import (an abstract engine, compile's, has no folder)
            return cached_special_ids(self.folder, lambda f: special_ids(load_tokenizer(f)))
        return special_ids(self.tokenizer)

    def encode(self, text: str) -> list[int]:
        return encode(self.tokenizer, text)

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.folder) or False
        return self._tokenizer or None

    def request(self, query, items, label_token_ids, apply_softmax=False, delimiter=None,
                semantics=None):
        cfg = self.model_config
        return make_request(query, items, label_token_ids, apply_softmax=apply_softmax,
                            delimiter=delimiter, semantics=semantics, vocab_size=cfg.vocab_size,
                            max_length=cfg.max_position_embeddings,
                            tokenizer=self.tokenizer if _has_text(query, items) else None)

    def score(self, query, items, label_token_ids, mode: str = "single",
              apply_softmax: bool = False, delimiter: int | None = None,
              semantics: str | None = None, **options) -> ScoreResult:
        """Score every item (docs/semantics.md); `semantics`: `delimited` or `plain` (None:
        delimited when a delimiter is given); the modes' options: modes/registry.py. Scores
        no correct engine returns (NaN, out of range) are an InvalidScores naming the item."""
        mode_ = engine_mode(self.name, mode)
        req = self.request(query, items, label_token_ids, apply_softmax, delimiter, semantics)
        scores = mode_.score(self, req, **options)  # checks the options and semantics
        num_tokens = mode_.num_tokens(len(req.prefix), [len(i) for i in req.items], options,
                                      req.semantics)
        return checked_result(scores, req, self.dtype, mode, num_tokens, self.name)


    def batch_times(self, query, items, label_token_ids, mode: str = "single",
                    apply_softmax: bool = False, delimiter: int | None = None,
                    semantics: str | None = None, **options) -> list[float] | None:
        """Wall seconds of each batch the mode runs for this request, each synced before the
        next (`Mode.batch_times`; prefill_extend's extend batches); None for a mode without
        batches. Sync points change what is timed: never call it inside timed runs."""
        mode_ = engine_mode(self.name, mode)
        req = self.request(query, items, label_token_ids, apply_softmax, delimiter, semantics)
        return mode_.batch_times(self, req, **options)


def resolved_attention(engine: JaxEngine, options: dict) -> dict:
    """The attention path a jax mode's call runs (`Mode.resolves`): masked attention in
    XLA for the dense mask (the seeds' baseline), else the `attention` option's path."""
    if options.get("mask") == "dense":
        return {"attention": "xla-masked"}
    return {"attention": engine.attention(options).name}


def _has_text(query, items) -> bool:
    """Whether the request holds text (then the tokenizer is loaded); a malformed request
    is left to `make_request`, which names what is wrong."""
    return isinstance(query, str) or (isinstance(items, list | tuple)
                                       and any(isinstance(i, str) for i in items))
