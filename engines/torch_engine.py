"""The PyTorch reference engine: the checkpoint run through `transformers`, float32 by
default. `single` runs one item at a time with eager attention: simple and obviously
right, it is the parity oracle. `prefill_extend` prefills the prefix once and extends the
items in batches against its shared KV cache (SDPA with a custom mask), for speed on GPU.
Both modes score either semantics: the prefix is `query d` (delimited) or `query` (plain),
and each item follows it at positions from the prefix length on.

Shape legend: T tokens of one extend batch (its items concatenated), P prefix tokens,
B items in the batch, V vocabulary, K labels.
"""

from __future__ import annotations

import inspect

import numpy as np

from mibench.errors import MibenchError

from .checkpoint import (
    check_checkpoint,
    encode,
    load_tokenizer,
    resolve_model,
    special_ids,
)
from .modes.registry import MODES, engine_mode
from .request import ScoreRequest, make_request
from .result import ScoreResult, checked_result


def label_scores(logits_bv, labels_k, apply_softmax: bool):
    """[B, K] scores: softmax over the label logits, or exp(log_softmax over V)[labels]."""
    import torch

    if apply_softmax:
        return torch.softmax(logits_bv[:, labels_k], dim=-1)
    return torch.exp(torch.log_softmax(logits_bv, dim=-1)[:, labels_k])


def extend_inputs(items, prefix_len: int, device):
    """One batch of items laid out as ONE sequence (batch 1) that extends a cached prefix:
    ids [1, T], positions [1, T] (each item from P on, as in its standalone sequence),
    boolean mask [1, 1, T, P + T] (True = attend: the whole prefix, then the item's own
    earlier tokens, nothing of other items) and the index of each item's last token [B]."""
    import torch

    lens = [len(item) for item in items]
    len_b = torch.tensor(lens, device=device)
    end_b = len_b.cumsum(0)
    seg_t = torch.repeat_interleave(torch.arange(len(items), device=device), len_b)
    idx_t = torch.arange(sum(lens), device=device)
    pos_t = prefix_len + idx_t - (end_b - len_b)[seg_t]
    own_tt = (seg_t[:, None] == seg_t[None, :]) & (idx_t[None, :] <= idx_t[:, None])
    mask_tx = torch.cat([own_tt.new_ones(len(idx_t), prefix_len), own_tt], dim=1)
    ids_t = torch.tensor([t for item in items for t in item], device=device)
    return ids_t[None], pos_t[None], mask_tx[None, None], end_b - 1


class TorchEngine:
    """Reference scoring with `transformers.AutoModelForCausalLM`."""

    name = "torch"
    modes = tuple(MODES["torch"])

    def __init__(self, model: str, dtype: str = "float32", tp: int = 1):
        import torch
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()

        if tp != 1:
            raise MibenchError("the torch reference engine runs on one device (tp=1)",
                               field="tp")
        self.model, self.dtype, self.tp = model, dtype, tp
        self.folder = resolve_model(model)
        # the same check as the JAX engine's, before transformers (which would ignore unused
        # tensors, and raise a SafetensorError traceback on a damaged file)
        self.model_config, _ = check_checkpoint(self.folder)
        self.torch_dtype = getattr(torch, dtype)
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        # eager for `single`; `score` switches to sdpa for `prefill_extend` and back
        self.hf_model = AutoModelForCausalLM.from_pretrained(
            self.folder, dtype=self.torch_dtype, attn_implementation="eager").eval()
        self.hf_model.to(self.device)
        # the KV cache keyword: `cache` in recent transformers 5.x, `past_key_values` before
        forward_args = inspect.signature(self.hf_model.forward).parameters
        self.cache_kw = "cache" if "cache" in forward_args else "past_key_values"
        self.tokenizer = load_tokenizer(self.folder)

    @property
    def special_ids(self) -> frozenset[int]:
        return special_ids(self.tokenizer)

    def encode(self, text: str) -> list[int]:
        return encode(self.tokenizer, text)

    @staticmethod
    def backend_info() -> dict:
        """PyTorch's version and CUDA device (`mibench job gpu`'s machine check); nothing
        without PyTorch."""
        try:
            import torch
        except ImportError:
            return {}
        return {"torch": torch.__version__,
                "torch_cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None}

    def reset_device_peak(self) -> bool:
        """Start CUDA's peak over (a case's own peak, harness/host/memory.py); False without
        CUDA."""
        import torch

        if self.device != "cuda":
            return False
        torch.cuda.reset_peak_memory_stats()
        return True

    def device_peak(self) -> int | None:
        """CUDA's peak allocated bytes since `reset_device_peak` (None without CUDA)."""
        import torch

        return int(torch.cuda.max_memory_allocated()) if self.device == "cuda" else None

    def close(self) -> None:
        """Drop the model (and, on a GPU, the allocator's cached blocks)."""
        import torch

        self.hf_model = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def resolved_options(self, mode: str, options: dict) -> dict:
        """The attention each mode runs (`Mode.resolved_options`, modes/registry.py): eager
        for `single`, SDPA for `prefill_extend`; an unknown mode, nothing."""
        declared = MODES["torch"].get(mode)
        return {} if declared is None else declared.resolved_options(self, options)

    @property
    def topology(self) -> dict:
        import torch

        kind = torch.cuda.get_device_name() if self.device == "cuda" else "cpu"
        return {"tp": 1, "mesh_shape": {"tp": 1}, "devices": [{"id": 0, "kind": kind}]}

    def score(self, query, items, label_token_ids, mode: str = "single",
              apply_softmax: bool = False, delimiter: int | None = None,
              semantics: str | None = None, **options) -> ScoreResult:
        """Both modes score either semantics: `delimited` (`query d item`) or `plain`
        (`query item`, the delimiter unused); None: delimited when a delimiter is given.
        Scores no correct engine returns are an InvalidScores naming the item."""
        mode_ = engine_mode(self.name, mode)
        cfg = self.model_config
        req = make_request(query, items, label_token_ids, apply_softmax=apply_softmax,
                           delimiter=delimiter, semantics=semantics, vocab_size=cfg.vocab_size,
                           max_length=cfg.max_position_embeddings, tokenizer=self.tokenizer)
        scores = mode_.score(self, req, **options)  # checks the options and semantics
        num_tokens = mode_.num_tokens(len(req.prefix), [len(item) for item in req.items],
                                      options, req.semantics)
        return checked_result(scores, req, self.dtype, mode, num_tokens, self.name)

    def attention(self, name: str) -> None:
        """Switch attention: eager for `single`; SDPA for `prefill_extend`, whose custom
        boolean 4D mask SDPA reads as is (eager would not)."""
        self.hf_model.set_attn_implementation(name)

    def _labels(self, req: ScoreRequest):
        import torch

        return torch.tensor(req.labels, dtype=torch.long, device=self.device)

    def _score_one(self, req: ScoreRequest, i: int) -> np.ndarray:
        import torch

        ids = torch.tensor([req.sequence(i)], dtype=torch.long, device=self.device)
        with torch.inference_mode():
            logits_1v = self.hf_model(input_ids=ids, logits_to_keep=1).logits[0].float()
        return label_scores(logits_1v, self._labels(req), req.apply_softmax)[0].cpu().numpy()

    def _score_extend(self, req: ScoreRequest, batch: int) -> np.ndarray:
        """Prefill the prefix once, then extend `batch` items per pass against its cache."""
        import torch
        from transformers import DynamicCache

        p, rows = len(req.prefix), []
        cache = DynamicCache(config=self.hf_model.config)
        with torch.inference_mode():
            ids = torch.tensor([req.prefix], dtype=torch.long, device=self.device)
            self.hf_model(input_ids=ids, use_cache=True, logits_to_keep=1, **{self.cache_kw: cache})
            for start in range(0, len(req.items), batch):
                ids_1t, pos_1t, mask, last_b = extend_inputs(
                    req.items[start:start + batch], p, self.device)
                out = self.hf_model(input_ids=ids_1t, position_ids=pos_1t, attention_mask=mask,
                                    use_cache=True, logits_to_keep=last_b,
                                    **{self.cache_kw: cache})
                cache.crop(-ids_1t.shape[1])  # back to the prefix: batches never see each other
                assert cache.get_seq_length() == p, "the cache must hold the prefix only"
                logits_bv = out.logits[0].float()  # only the items' last rows went to the LM head
                rows.append(label_scores(logits_bv, self._labels(req), req.apply_softmax))
        return torch.cat(rows).cpu().numpy()


def score_single(engine: TorchEngine, req: ScoreRequest) -> np.ndarray:
    """Mode `single`: one forward per item (eager attention)."""
    engine.attention("eager")
    return np.stack([engine._score_one(req, i) for i in range(len(req.items))])


def score_prefill_extend(engine: TorchEngine, req: ScoreRequest,
                         extend_batch_size: int) -> np.ndarray:
    """Mode `prefill_extend`: the prefix prefilled once, `extend_batch_size` items per
    pass against its cache (SDPA)."""
    engine.attention("sdpa")
    return engine._score_extend(req, extend_batch_size)
