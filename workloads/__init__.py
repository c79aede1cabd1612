"""Workloads: what a benchmark case scores, as pure, seeded token generators.

    spec = WorkloadSpec(query_tokens=64, num_items=16,
                        item_tokens=ItemRange(dist="uniform", min=4, max=8),
                        label_token_ids=(198,), delimiter=151643)
    requests = materialize(spec, vocab_size=151936, exclude={151643})
"""

from .generate import generate, materialize, total_items, total_tokens
from .request import Request
from .spec import ItemRange, WorkloadSpec

__all__ = ["ItemRange", "Request", "WorkloadSpec", "generate", "materialize", "total_items",
           "total_tokens"]
