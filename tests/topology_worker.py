"""Runs in a subprocess for the topology tests (JAX must see its devices from the start).

    python tests/topology_worker.py modes PRESET TP...          every mode at every tp
    python tests/topology_worker.py process ADDR NPROC ID TP    one process of a multi-process run

Prints one JSON object: {"<tp>": {"<mode label>": scores}} (process 0 only, in a
multi-process run).
"""

from __future__ import annotations

import json
import sys

from conftest import DELIM, LABELS, random_request

MODES = [("single", {}), ("packed", {"mask": "dense"}), ("packed", {"mask": "segment"}),
         ("chunked", {"chunk_size": 3}),
         ("prefill_extend", {"extend_batch_size": 3, "precompile_bs": [1, 3]})]  # 7 items: 3, 3, 1


def score_every_mode(preset: str, tp: int) -> dict:
    from mibench.engines import load_engine

    engine = load_engine("jax", model=f"embedded:{preset}", tp=tp)
    query, items = random_request(11, query_len=40, num_items=7, item_len=(2, 7))
    out = {"topology": engine.topology, "kv_heads": engine.cfg.num_kv_heads}
    for mode, options in MODES:
        label = "/".join([mode, *(f"{k}={v}" for k, v in options.items())])
        out[label] = engine.score(query, items, LABELS, mode=mode, apply_softmax=True,
                                  delimiter=DELIM, **options).scores
    return out


def main(argv: list[str]) -> None:
    if argv[0] == "modes":
        print(json.dumps({tp: score_every_mode(argv[1], int(tp)) for tp in argv[2:]}))
        return
    from mibench.engines.distributed import initialize, is_writer

    addr, nproc, pid, tp = argv[1], int(argv[2]), int(argv[3]), argv[4]
    assert initialize(addr, nproc, pid)
    result = {tp: score_every_mode("tiny", int(tp))}
    if is_writer():
        print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
