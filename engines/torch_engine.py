"""The PyTorch reference engine: the checkpoint run through `transformers`, one item at a
time, float32 by default. Simple and obviously right: it is the parity oracle."""

from __future__ import annotations

import numpy as np

from engines.checkpoint import load_tokenizer, resolve_model
from engines.config import read_config
from engines.errors import MibenchError
from engines.modes.options import MODE_OPTIONS, check_known
from engines.request import ScoreRequest, make_request
from engines.result import ScoreResult


class TorchEngine:
    """Reference scoring with `transformers.AutoModelForCausalLM` (eager attention)."""

    name = "torch"
    modes = tuple(MODE_OPTIONS["torch"])

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
        self.model_config = read_config(self.folder)
        self.torch_dtype = getattr(torch, dtype)
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.hf_model = AutoModelForCausalLM.from_pretrained(
            self.folder, dtype=self.torch_dtype, attn_implementation="eager").eval()
        self.hf_model.to(self.device)
        self.tokenizer = load_tokenizer(self.folder)

    @property
    def topology(self) -> dict:
        import torch

        kind = torch.cuda.get_device_name() if self.device == "cuda" else "cpu"
        return {"tp": 1, "mesh_shape": {"tp": 1}, "devices": [{"id": 0, "kind": kind}]}

    def score(self, query, items, label_token_ids, mode: str = "single",
              apply_softmax: bool = False, delimiter: int | None = None,
              **options) -> ScoreResult:
        if mode not in self.modes:
            raise MibenchError(f"unknown mode {mode!r} for the torch engine "
                               f"(known: {', '.join(self.modes)})", field="mode")
        check_known("torch", mode, options)
        cfg = self.model_config
        req = make_request(query, items, label_token_ids, apply_softmax=apply_softmax,
                           delimiter=delimiter, vocab_size=cfg.vocab_size,
                           max_length=cfg.max_position_embeddings, tokenizer=self.tokenizer)
        rows = [self._score_one(req, i) for i in range(len(req.items))]
        return ScoreResult(scores=np.stack(rows).astype(np.float64).tolist(), mode=mode,
                           num_items=len(req.items),
                           num_tokens=sum(len(req.sequence(i)) for i in range(len(req.items))))

    def _score_one(self, req: ScoreRequest, i: int) -> np.ndarray:
        import torch

        ids = torch.tensor([req.sequence(i)], dtype=torch.long, device=self.device)
        with torch.inference_mode():
            logits = self.hf_model(input_ids=ids, logits_to_keep=1).logits[0, -1].float()
        labels = torch.tensor(req.labels, dtype=torch.long, device=self.device)
        if req.apply_softmax:
            return torch.softmax(logits[labels], dim=-1).cpu().numpy()
        return torch.exp(torch.log_softmax(logits, dim=-1)[labels]).cpu().numpy()
