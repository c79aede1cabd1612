"""The YAML config, validated once at the edge into typed objects (pydantic, unknown keys
forbidden). `load_config(path, overrides)` is the one entry point; every error is a
`ConfigError` naming `file:line: key.path`.

List-valued options are matrix axes (expanded by harness/config/matrix.py): `model.path`,
`model.dtype`, `topology.tp`, `workload.query_tokens`, `workload.num_items`,
`workload.item_tokens` and every mode option of a case. `precompile_bs: [1, 2, 4]` is one
value; a list of such lists is an axis.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ByteSize,
    Field,
    NonNegativeInt,
    PositiveInt,
    PrivateAttr,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from mibench.engines import OPTIONS, Option
from mibench.workloads import ItemRange, WorkloadSpec

from ..records.case import RunsRecord
from ..records.run import CHECKS
from .base import Axis, Dtype, Rate, Seconds, Strict, nest
from .bounds import at_most
from .server import Launch, ServerArg
from .server_measures import ColdStart, Concurrency, PrefixCache, Slo
from .yamlsource import ConfigError, Locations

__all__ = ["Config", "ConfigError", "Case", "Workload", "WorkloadFields"]


class Dist(Strict):
    """Item lengths drawn uniformly from [min, max] (inclusive); `dist: uniform`, the one
    distribution, may be left out."""

    dist: Literal["uniform"] = "uniform"
    min: PositiveInt
    max: PositiveInt

    @model_validator(mode="after")
    def _ordered(self):
        if self.min > self.max:
            raise ValueError(f"min {self.min} is greater than max {self.max}")
        return self


class ModelSection(Strict):
    """`path`: a checkpoint folder or `embedded:<preset>`; `dtype`: float32 or bfloat16."""

    path: Axis(str)
    dtype: Axis(Dtype) = ["float32"]


class Topology(Strict):
    """`tp`: tensor-parallel degree (devices per engine). `target`: the TPU slice that
    `mibench compile` compiles for when no --target is given (e.g. v6e-4); `run` ignores it."""

    tp: Axis(PositiveInt) = [1]
    target: str | None = None

    @field_validator("target")
    @classmethod
    def _known_target(cls, v):
        from mibench.engines import MibenchError, tpu_target

        try:
            return v if v is None else tpu_target(v).name
        except MibenchError as e:
            raise ValueError(e.message) from None


def distinct_labels(ids: list[int]) -> list[int]:
    """Label ids, each once: a label is one column of the scores (SGLang, and so `mibench
    serve`, refuses a repeated one, and so does every engine)."""
    seen: set[int] = set()
    repeated = next((x for x in ids if x in seen or seen.add(x)), None)
    if repeated is not None:
        raise ValueError(f"holds token id {repeated} twice: each label is one column of "
                         "the scores, and servers (SGLang, mibench serve) refuse a repeat")
    return ids


class WorkloadFields(Strict):
    """Workload keys, all optional: a case's or parity's patch over the top-level workload."""

    query_tokens: Axis(PositiveInt) | None = None
    num_items: Axis(PositiveInt) | None = None
    item_tokens: Axis(PositiveInt | Dist) | None = None
    tokens: Literal["random", "constant"] = "random"
    label_token_ids: Annotated[list[NonNegativeInt], Field(min_length=1),
                               AfterValidator(distinct_labels)] | None = None
    delimiter: NonNegativeInt | None = None
    # delimited (items after `query d`) or plain (after `query`); unset: delimited when a
    # delimiter is given, else plain (docs/semantics.md)
    semantics: Literal["delimited", "plain"] | None = None
    apply_softmax: bool = False
    seed: NonNegativeInt = 0
    requests: str | None = None  # JSONL file of text or token requests, relative to the config


class Workload(WorkloadFields):
    """What every case scores: one generated request, or the requests of a JSONL file."""

    @model_validator(mode="after")
    def _complete(self):
        if self.label_token_ids is None:
            raise ValueError("label_token_ids is required")
        generated = ("query_tokens", "num_items", "item_tokens")
        given = [k for k in generated if getattr(self, k) is not None]
        if self.requests is not None and given:
            raise ValueError(f"give either requests or {', '.join(generated)}, not both")
        if self.requests is None and len(given) < 3:
            missing = [k for k in generated if k not in given]
            raise ValueError(f"{', '.join(missing)} required (or requests: FILE.jsonl)")
        return self

    def patched(self, patch: WorkloadFields | None) -> Workload:
        """This workload with the keys `patch` sets over it (a case's or parity's), valid;
        a ValueError saying why when the result is not a workload."""
        if patch is None:
            return self
        merged = {**self.model_dump(exclude_unset=True), **patch.model_dump(exclude_unset=True)}
        try:
            return Workload.model_validate(merged)
        except ValidationError as e:
            raise ValueError(e.errors()[0]["msg"].removeprefix("Value error, ")) from None

    def expand(self) -> list[tuple[dict, WorkloadSpec]]:
        """Its axes expanded: (axis values by short name, spec) per combination. A spec
        holds every key but an unset `semantics` (what its record writes)."""
        axes = ("query_tokens", "num_items", "item_tokens")
        unset = {"semantics"} if self.semantics is None else set()
        fixed = self.model_dump(exclude={*axes, *unset})
        if self.requests is not None:
            return [({}, WorkloadSpec(**dict.fromkeys(axes), **fixed))]
        return [({"q": q, "items": n, "item_len": length},
                 WorkloadSpec(query_tokens=q, num_items=n, item_tokens=_item_tokens(length),
                              **fixed))
                for q, n, length in itertools.product(self.query_tokens, self.num_items,
                                                      self.item_tokens)]


def _item_tokens(length: int | Dist) -> int | ItemRange:
    return ItemRange(**length.model_dump()) if isinstance(length, Dist) else length


# counts bounded with a stated reason (harness/config/bounds.py)
Warmup = Annotated[NonNegativeInt, at_most("runs.warmup")]
Timed = Annotated[PositiveInt, at_most("runs.timed")]
Processes = Annotated[PositiveInt, at_most("runs.processes")]


class RunsPatch(Strict):
    """Run counts: `warmup` untimed runs after the first (compile) call, `timed` runs; an
    optional per-case `timeout_s`; `max_rss` (bytes, or `8GiB`), the resident set an engine
    worker may reach before the harness kills it and fails the case; `processes`, how many
    fresh worker processes measure each case one after another (their timed runs pooled,
    so the spread between processes shows in the statistics)."""

    warmup: Warmup | None = None
    timed: Timed | None = None
    timeout_s: Seconds | None = None
    max_rss: Annotated[ByteSize, Field(gt=0)] | None = None
    processes: Processes | None = None


class Runs(RunsPatch):
    warmup: Warmup = 1
    timed: Timed = 5
    processes: Processes = 1

    def patched(self, patch: RunsPatch | None) -> RunsRecord:
        """A case's run counts: these, with the keys its `runs` sets over them."""
        over = patch.model_dump(exclude_none=True) if patch is not None else {}
        return RunsRecord(**{**self.model_dump(), **over})


def _option_field(option: Option) -> tuple:
    """A case's field for a registry option: a value or a list of values (a matrix axis);
    an `ints` option (a list itself) is one value, and a list of lists is its axis."""
    if option.kind == "choice":
        kind = Axis(Literal[option.choices])
    elif option.kind == "int":
        kind = Axis(PositiveInt)
    else:
        kind = Annotated[list[Annotated[list[PositiveInt], Field(min_length=1)]],
                         BeforeValidator(nest), Field(min_length=1)]
    return kind | None, Field(None, description=option.doc)


class _CaseHead(Strict):
    """`engine` and its `mode`; an engine with one mode (http: single) needs no `mode`."""

    engine: str
    mode: str

    @model_validator(mode="before")
    @classmethod
    def _only_mode(cls, data):
        from mibench.engines import MODES

        if isinstance(data, dict) and "mode" not in data:
            modes = MODES.get(data.get("engine")) if isinstance(data.get("engine"), str) \
                else None
            if modes is not None and len(modes) == 1:
                return {**data, "mode": next(iter(modes))}
        return data



# The keys of an `engine: http` case (a server speaking SGLang's /v1/score; docs/configs.md):
# where it is (base_url), or how mibench starts it (launch, server_args), and the load it
# gets. `clients`, `rate` and each server argument are matrix axes. Their rules (only for
# http, base_url or launch, clients, rate or slo) are checked by harness/config/problems.py
# (`_http`); harness/config/matrix.py expands the axes.
HTTP_FIELDS = {
    "base_url": (str | None, Field(None, description="the server, http://HOST:PORT")),
    "served_model": (str | None, Field(None, description="sent as the request's model")),
    "timeout_s": (Seconds | None, Field(None, description="per whole request (default "
                                         "60)")),
    "clients": (Axis(Annotated[PositiveInt, at_most("clients")]) | None,
                Field(None, description="closed loop: requests in flight")),
    "rate": (Axis(Rate) | None, Field(None, description="open loop: Poisson arrivals, "
                                       "requests per second (at least one an hour)")),
    "requests": (Annotated[PositiveInt, at_most("requests")] | None,
                 Field(None, description="measured requests (100)")),
    "warmup_requests": (Annotated[NonNegativeInt, at_most("warmup_requests")] | None,
                        Field(None, description="untimed, first (1)")),
    "max_error_rate": (Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None,
                       Field(None, description="failed requests allowed (0)")),
    "same_query": (bool | None, Field(None, description="one query repeated (false)")),
    "wire": (str | None, Field(None, description="how requests are put to the server: a "
                                "wire of engines/wires (sglang: /v1/score)")),
    "launch": (Launch | None, Field(None, description="how mibench starts the server "
                                    "(instead of base_url)")),
    "server_args": (dict[str, Axis(ServerArg)] | None,
                    Field(None, description="the launched server's flags; a list is an "
                                            "axis")),
    "slo": (Slo | None, Field(None, description="a latency budget: the highest open-loop "
                              "rate that meets it (instead of clients or rate)")),
    "concurrency": (Concurrency | None, Field(None, description="the concurrency check's "
                                              "trials and the fail rate allowed")),
    "cold_start": (ColdStart | None, Field(None, description="fresh launches timed to "
                                           "ready and to a first answer")),
    "prefix_cache": (PrefixCache | None, Field(None, description="the prefix_cache check's "
                                               "trials, and how the server's cache is "
                                               "turned off (the control)")),
    "tolerance": (Annotated[float, Field(ge=0, allow_inf_nan=False)] | None,
                  Field(None, description="the largest |d ln score| the server's score "
                                          "checks allow (default by dtype: float32 1e-5, "
                                          "bfloat16 1e-1)")),
}

# One line of `cases`: engine, mode, the mode options of the registry (lists expand), and
# per-case overrides of runs and workload; an http case's keys
Case = create_model(
    "Case", __base__=_CaseHead, __module__=__name__,
    **{name: _option_field(option) for name, option in OPTIONS.items()},
    runs=(RunsPatch | None, None), workload=(WorkloadFields | None, None), **HTTP_FIELDS)


class Reference(Strict):
    """The parity oracle for the `engines` check (float32 by default)."""

    engine: str = "torch"
    mode: str = "single"
    dtype: Dtype = "float32"


class Parity(Strict):
    """Which parity checks to run, against what, on which (small) workload.

    `min_speedup`: the `speedup` check's gate, packed items/s over single items/s (a
    positive finite number, default 3: mibench's own gate, no seed states one).
    `speedup_items`: the `num_items` the gate applies at (default: every one; packing one
    item cannot be faster than single). Both are harmless without `speedup` in `checks`,
    so `--set parity.checks=[]` (the report's reproduce commands) still loads a config that
    sets them.
    """

    reference: Reference = Reference()
    checks: list[Literal[CHECKS]] = []
    workload: WorkloadFields | None = None
    min_speedup: Annotated[float, Field(gt=0, allow_inf_nan=False, strict=True)] = 3.0
    speedup_items: Axis(PositiveInt) | None = None


class Config(Strict):
    """A whole benchmark config (docs/configs.md)."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$"), at_most("name")]
    description: str | None = None
    model: ModelSection
    topology: Topology = Topology()
    workload: Workload
    runs: Runs = Runs()
    cases: Annotated[list[Case], Field(min_length=1)]
    parity: Parity | None = None
    # a reference-figures file (configs/references/seeds.yaml), relative to the config:
    # published results set beside the run in its report, never mixed with measured rows
    references: str | None = None

    _locations: Locations = PrivateAttr(default_factory=Locations)
    _source: str = PrivateAttr(default="")
    _cases: tuple | None = PrivateAttr(default=None)  # its expansion, made once (`expand`)

    def resolved(self) -> dict:
        """The fully resolved config (includes and overrides applied), JSON-ready."""
        return self.model_dump(mode="json", exclude_unset=True)

    def sha256(self) -> str:
        text = json.dumps(self.resolved(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def error(self, key: tuple, message: str) -> ConfigError:
        return self._locations.error(key, message)
