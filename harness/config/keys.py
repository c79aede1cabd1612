"""What names an engine (`EngineKey`) and what names a case (`case_id`, the one maker of
case ids).

An `EngineKey` is what the engine pools key their engines by (harness/run/pool.py,
worker.py, harness/under_test/pool.py): the engine, model, dtype and tp, and for an http engine its
server (`ServerRef`). It is frozen and hashable, and pickles by value, so it travels to
engine workers (harness/run/bootstrap.py) like the tuple it replaces.

A case id is `ENGINE/MODE[/OPTION=V...]/tp=N[/AXIS=V...]`: the key's engine and tp, the
mode, the parts before tp (mode options, the http load and server parts) and the parts
after it (the matrix axes that vary). `case_id` is the only place that joins them, so a
variant of an id (the same case at tp 1, `EngineKey.at_tp1`) is made from its key, never
by editing the string.

Like config/cases.py, this module imports nothing of `mibench.engines`: keys are
unpickled in workers that may run another revision's engines.
"""

from __future__ import annotations

import dataclasses

from .server import ServerLaunch

JAX = "jax"


@dataclasses.dataclass(frozen=True)
class ServerRef:
    """An http engine's server: its address (None until a server mibench launches is
    started: `EngineKey.bound_to`), what the requests name as the model, their timeout and
    the wire they are put in (engines/wires). `launch` is kept only while the key names a
    server to start, not an address."""

    base_url: str | None
    served_model: str | None
    timeout_s: float
    wire: str
    launch: ServerLaunch | None = None

    def engine_kwargs(self) -> dict:
        """The http engine's keywords (load_engine): base_url, served_model, timeout_s,
        wire."""
        return {"base_url": self.base_url, "served_model": self.served_model,
                "timeout_s": self.timeout_s, "wire": self.wire}


@dataclasses.dataclass(frozen=True)
class EngineKey:
    """One engine: (engine, model, dtype, tp), and for an http engine its `server`."""

    engine: str
    model: str
    dtype: str
    tp: int
    server: ServerRef | None = None

    @property
    def is_jax(self) -> bool:
        return self.engine == JAX

    @property
    def base_url(self) -> str | None:
        """The server's address; None for an engine without a server, or a server not
        started yet."""
        return self.server.base_url if self.server is not None else None

    @property
    def launch(self) -> ServerLaunch | None:
        """How mibench starts this key's server (None: no server, or one bound to its
        address already)."""
        return self.server.launch if self.server is not None else None

    def at_tp1(self) -> EngineKey:
        """The same engine at tp 1 (what the `topologies` parity check compares with)."""
        return dataclasses.replace(self, tp=1)

    def bound_to(self, base_url: str) -> EngineKey:
        """This key with its server at `base_url` (a launched server once it is up): the
        key the engine is built with."""
        if self.server is None:
            raise ValueError(f"{self.engine} engine key has no server to bind")
        return dataclasses.replace(
            self, server=dataclasses.replace(self.server, base_url=base_url, launch=None))

    def server_kwargs(self) -> dict:
        """What load_engine takes besides engine, model, dtype and tp: the server's
        keywords, {} without a server."""
        return self.server.engine_kwargs() if self.server is not None else {}

    def load_kwargs(self) -> dict:
        """load_engine's keywords for this key: model, dtype, tp and the server's."""
        return {"model": self.model, "dtype": self.dtype, "tp": self.tp,
                **self.server_kwargs()}


def case_id(key: EngineKey, mode: str, options: tuple[str, ...] | list[str] = (),
            axes: tuple[str, ...] | list[str] = ()) -> str:
    """The case id: `ENGINE/MODE/<options...>/tp=N/<axes...>`, each part `NAME=VALUE`
    as `part` writes it; the only maker of case ids."""
    return "/".join([key.engine, mode, *options, f"tp={key.tp}", *axes])


def id_part(name: str, value) -> str:
    """One `NAME=VALUE` part of a case id, the value as `short` writes it."""
    return f"{name}={short(value)}"


def short(value) -> str:
    """Compact, readable rendering of an option value for case ids."""
    if isinstance(value, list | tuple):
        ints = all(isinstance(v, int) for v in value)
        if ints and len(value) > 2 and list(value) == list(range(value[0], value[-1] + 1)):
            return f"{value[0]}-{value[-1]}"  # 1,2,...,12 -> 1-12
        return ",".join(short(v) for v in value)
    if hasattr(value, "dist"):
        return f"{value.dist}{value.min}-{value.max}"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def model_name(path: str) -> str:
    """A model path's last name (`embedded:tiny` -> `tiny`), as case ids write it."""
    return path.removeprefix("embedded:").rstrip("/").rsplit("/", 1)[-1]
