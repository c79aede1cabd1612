"""The serve rows of the invariance job (harness/jobs/invariance.py): a request scored alone
against the same request while `mibench serve` handles others, for each SERVE_MODES mode;
its controls: other requests of other tokens (same lengths) and of other lengths in flight
must change nothing, and a server whose scores move with what is in flight
(`python -m mibench.harness.testing.fake_server --inflight-shift`) must fail the same check."""

from __future__ import annotations

import tempfile
from pathlib import Path

from mibench.engines import MODES
from mibench.workloads import ItemRange, WorkloadSpec

from ...config.server import Launch, ReadyProbe, ServerLaunch, StopPolicy
from ...jobs.invariance import DELIM, LABELS, TOL, Row, log_diff

# the modes `mibench serve --mode` takes: every mode of the jax engine
# (harness/commands/serve.py), so a new jax mode is served and checked here unasked
SERVE_MODES = tuple(MODES["jax"])
K = 4  # requests compared; as many others in flight with them
SPEC = WorkloadSpec(query_tokens=24, num_items=4,
                    item_tokens=ItemRange(dist="uniform", min=2, max=6),
                    label_token_ids=tuple(LABELS), delimiter=DELIM, apply_softmax=True,
                    seed=0, semantics="delimited")


def _launch(mode: str) -> ServerLaunch:
    return ServerLaunch(Launch(command=["{python}", "-m", "mibench.harness.cli", "serve",
                                        "--model", "{model}", "--host", "{host}", "--port",
                                        "{port}", "--dtype", "{dtype}"],
                               ready=ReadyProbe(timeout_s=300.0)),
                        args=(("mode", mode), ("delimiter", DELIM)))


FAKE = ServerLaunch(Launch(command=["{python}", "-m", "mibench.harness.testing.fake_server",
                                    "{port}", "--inflight-shift", "0.01"],
                           ready=ReadyProbe(path="/get_server_info", timeout_s=60.0),
                           stop=StopPolicy(grace_s=2.0)))


def _differences(url: str, model: str) -> tuple[float, float, float]:
    """(alone vs among: max over the passes, neighbours of other tokens, neighbours of
    other lengths) of one server."""
    from mibench.engines import load_engine

    from .. import concurrency as cc

    engine = load_engine("http", model=model, dtype="float32", base_url=url)
    vocab, exclude = engine.model_config.vocab_size, engine.special_ids
    reqs = cc.requests_of(SPEC, vocab, exclude, K, 0)
    others = cc.requests_of(SPEC, vocab, exclude, K, K)
    trial = cc.run_trial(engine, SPEC, reqs, others)
    among = max(log_diff(a, b) for tables in trial.passes.values()
                for a, b in zip(trial.alone, tables, strict=True))
    retokened = cc.requests_of(SPEC, vocab, exclude, K, 2 * K)  # same shape, other tokens
    longer = cc.requests_of(SPEC.replace(item_tokens=ItemRange(dist="uniform", min=7, max=9)),
                            vocab, exclude, K, 3 * K)
    first = trial.passes["first load"]
    same = max(log_diff(a, b) for a, b in zip(
        first, cc.score_together(engine, SPEC, reqs, retokened), strict=True))
    length = max(log_diff(a, b) for a, b in zip(
        first, cc.score_together(engine, SPEC, reqs, longer), strict=True))
    return among, same, length


def serve_rows(model: str = "embedded:tiny", modes=SERVE_MODES) -> list[Row]:
    """One row per serve mode; the leak control (the fake server) measured once."""
    from mibench.engines import model_folder

    from ..launch import Server

    folder = str(model_folder(model))
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        with Server(FAKE, folder, "float32", Path(tmp) / "fake.log") as started:
            leak, _, _ = _differences(started.base_url, model)
        for mode in modes:
            with Server(_launch(mode), folder, "float32", Path(tmp) / f"{mode}.log") as s:
                among, same, length = _differences(s.base_url, model)
            out.append(Row("serve", mode, "", f"{K} requests alone, then among {K} others "
                           "in flight (twice), then alone again", "bitwise", among, same,
                           length, "scores move with requests in flight (fake server)",
                           leak, among == 0.0 and same == 0.0 and length == 0.0
                           and leak > TOL))
    return out
