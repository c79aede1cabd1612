"""What every case of a run or compile artifact records beside its measurements: the
model, the topology it ran on, the expanded workload and the run counts, each a typed
sub-record (docs/artifacts.md).

They are sparse: their JSON holds exactly the keys they were given, nulls included, and
no other. An artifact written before a key existed (`runs.max_rss`, `workload.semantics`,
`topology.devices`) reads, and writes back, without it: reading and writing an artifact
leaves these fields as they were.
"""

from __future__ import annotations

from mibench.workloads.spec import Sparse as SparseModel
from mibench.workloads.spec import WorkloadSpec

from .base import Record


class Sparse(Record, SparseModel):
    """A record whose dump holds only the fields that were set (given, read or assigned)."""


class ModelRef(Sparse):
    """The checkpoint a case ran."""

    path: str  # a checkpoint folder or embedded:<preset>
    dtype: str


class DeviceRef(Sparse):
    """One device of the case's mesh."""

    id: int
    kind: str  # as JAX or torch names it, e.g. "TPU v6 lite", "cpu"
    process: int | None = None  # the JAX process owning it (multi-device meshes only)


class TopologyRecord(Sparse):
    """What the case ran on: the config's tp, completed by the engine's own `topology`."""

    tp: int
    mesh_shape: dict[str, int] | None = None  # axis -> size, e.g. {"tp": 4}
    devices: list[DeviceRef] | None = None
    base_url: str | None = None  # an http case's server

    def with_engine(self, described: dict) -> TopologyRecord:
        """This topology with what an engine describes (its `topology` property) over it."""
        return TopologyRecord.model_validate(self.as_dict() | described)


# the expanded workload: the one type a case's spec and its record hold (sparse too)
WorkloadRecord = WorkloadSpec


class RunsRecord(Sparse):
    """How often the case ran (the config's `runs`)."""

    warmup: int
    timed: int
    timeout_s: float | None = None
    max_rss: int | None = None  # bytes; absent in artifacts before it
    processes: int = 1  # worker processes timing the case; absent in artifacts before it


class CaseHead(Record):
    """What a case of a run or compile artifact starts with: its id, engine and mode, its
    options (as given, and as they resolved), its model, topology and workload. CaseRecord
    and CompileCase add their own fields after these (a base's fields come first, so the
    artifacts' key order is the same)."""

    case_id: str
    engine: str
    mode: str
    params: dict
    # what the options resolved to on this machine, e.g. {"attention": "cudnn"} for auto
    resolved: dict = {}
    model: ModelRef
    topology: TopologyRecord
    workload: WorkloadRecord

    @classmethod
    def head_of(cls, case) -> dict:
        """The head fields of an expanded case (config/cases.py `CaseSpec`), as keywords."""
        return dict(case_id=case.case_id, engine=case.engine, mode=case.mode,
                    params=dict(case.params), model=ModelRef(path=case.model, dtype=case.dtype),
                    topology=TopologyRecord(tp=case.tp),
                    workload=case.workload)
