"""The sizes of an `engine: http` case's load generator (harness/under_test/feed.py,
harness/under_test/requests_case.py) and the memory its client side holds, which `mibench validate`
adds to the case's estimate (config/case_problems.py): declared here, below both."""

from __future__ import annotations

AHEAD = 16  # bodies built ahead of the sends
MAX_IN_FLIGHT = 256  # open loop: requests in flight at most; later arrivals wait (lag_s)
ID_BYTES = 7  # a token id in a JSON body: up to 6 digits and a comma
INT_BYTES = 36  # a token id as a Python int in a tuple while its body is built
RECORD_BYTES = 1024  # a measured request's record (HttpRequest) in memory, rounded up


def client_bytes(requests: int, in_flight: int, tokens: int, items: int) -> dict[str, float]:
    """The client side's memory (module docstring) for requests of `tokens` token ids in
    `items` items, `in_flight` at once (a JSONL workload's requests are the config's
    `token lists` part already)."""
    body = tokens * ID_BYTES + items * 4 + 256
    return {"request bodies (client)": body * (in_flight + AHEAD + 1) + tokens * INT_BYTES,
            "request records (client)": requests * (RECORD_BYTES + 8)}


def client_parts(spec, plan) -> dict[str, float]:
    """What an http case's load generator holds (`client_bytes`), from its workload `spec`
    and load `plan`."""
    if spec.requests is not None:  # the bodies are the file's requests: its token lists
        tokens, items = 0, 0
    else:
        it = spec.item_tokens
        mean = (it.min + it.max) / 2 if hasattr(it, "max") else it
        tokens, items = int(spec.query_tokens + spec.num_items * mean), spec.num_items
    in_flight = plan.clients if plan.clients is not None else MAX_IN_FLIGHT
    return client_bytes(plan.requests + plan.warmup_requests, min(in_flight, plan.requests),
                        tokens, items)
