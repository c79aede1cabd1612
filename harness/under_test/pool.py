"""The launched servers of a run, one per distinct launch (model, dtype, launch with its
server arguments), seen by the engine pools through `bind`: an http engine's key names
its launch; `bind` starts that server if needed and returns the key with the live
`base_url`, which is what the engine is built with. `release` stops the servers no later
case needs; `close` stops them all (harness/under_test/launch.py says how)."""

from __future__ import annotations

import contextlib
import dataclasses
import re
from pathlib import Path

from mibench.errors import ServerUnavailable

from ..config.keys import EngineKey
from ..config.server import ServerLaunch
from ..records import ServerInfo
from .launch import (
    Server,
    ServerFailed,
    Started,
    package_version,
    source_commit,
)


@dataclasses.dataclass(frozen=True)
class LaunchKey:
    """What makes a launched server distinct: the model and dtype it serves and its launch
    (the pool keeps one server per key)."""

    model: str
    dtype: str
    launch: ServerLaunch


def server_id(key: EngineKey) -> LaunchKey | None:
    """The launched server an engine key names (None: the key names no server to launch)."""
    return None if key.launch is None else LaunchKey(key.model, key.dtype, key.launch)


class ServerPool:
    """Servers started on first need. `python` and `env` override a launch's interpreter
    and add variables (one side of `mibench ab --server-repo`); `label` tells sides apart
    in log names."""

    def __init__(self, log_dir: Path, *, python: str | None = None,
                 env: dict[str, str] | None = None, label: str = "", source: str | None = None,
                 artifact_dir: Path | None = None):
        self.log_dir, self.python, self.env, self.label = Path(log_dir), python, env, label
        self.artifact_dir = artifact_dir  # logs are recorded relative to it
        self.source = source  # the server source folder of this side (a revision's worktree)
        self._servers: dict[LaunchKey, Server] = {}
        self._failed: dict[LaunchKey, ServerFailed] = {}
        self._info: dict[LaunchKey, ServerInfo] = {}
        self._count = 0  # servers started, for their log names
        self._wire: dict[LaunchKey, str] = {}  # the wire each server speaks (for its info)

    def bind(self, key: EngineKey) -> EngineKey:
        """`key` with its launched server's live base_url (started now if needed); keys of
        other engines unchanged. A server that fails to start fails every key naming it,
        without a second try."""
        ident = server_id(key)
        if ident is None:
            return key
        if ident in self._failed:
            raise self._failed[ident]
        why = ident.launch.missing() if self.python is None else None
        if why:
            raise ServerUnavailable(why, field="launch.python")
        if ident not in self._servers:
            self._wire[ident] = key.server.wire
            self._start(ident)
        return key.bound_to(self._servers[ident].started.base_url)

    def _server(self, ident: LaunchKey, tag: str = "") -> Server:
        from mibench.engines import model_folder

        self._count += 1
        name = _file_name(f"{self.label}{ident.launch.display_name()}{tag}-{self._count}")
        return Server(ident.launch, model_folder(ident.model), ident.dtype,
                      self.log_dir / f"{name}.log", python=self.python, extra_env=self.env)

    @contextlib.contextmanager
    def fresh(self, key: EngineKey, tag: str = "-fresh"):
        """A new server of `key`'s launch, started now and stopped at the end of the
        block (the `concurrency` check scores on a server that has answered nothing yet;
        a cold start times it): yields its base_url and start-up seconds, or the running
        server's base_url and None for a key that is not launched."""
        ident = server_id(key)
        if ident is None:
            yield key.base_url, None
            return
        with self._server(ident, tag) as started:
            yield started.base_url, started.startup_s

    def _start(self, ident: LaunchKey) -> None:
        server = self._server(ident)
        try:
            started = server.start()
        except ServerFailed as e:
            self._failed[ident] = e
            raise
        self._servers[ident] = server
        self._info[ident] = self._describe(server, started, self._wire[ident])

    def _describe(self, server: Server, started: Started, wire_name: str) -> ServerInfo:
        from mibench.engines import HttpClient, wire

        launch = server.launch
        client = HttpClient(started.base_url, 10.0)
        try:
            reported = wire(wire_name).info(client)
        finally:
            client.close()
        source = self.source or launch.source
        return ServerInfo.of(
            launch, started, log=_relative(started.log, self.artifact_dir), reported=reported,
            package_version=(package_version(server.python, launch.package, started.env)
                             if launch.package else None),
            source=source_commit(source) if source else None)

    def info(self, key: EngineKey) -> ServerInfo | None:
        """The provenance of the server `key` names (None: not a launched server, or it
        never started)."""
        return self._info.get(server_id(key))

    def url(self, key: EngineKey) -> str | None:
        ident = server_id(key)
        server = self._servers.get(ident)
        return server.started.base_url if server is not None else None

    def release(self, needed: set[EngineKey]) -> None:
        """Stop every server that no key in `needed` names."""
        keep = {server_id(k) for k in needed}
        for ident in [i for i in self._servers if i not in keep]:
            self._servers.pop(ident).stop()

    def close(self) -> None:
        for ident in list(self._servers):
            self._servers.pop(ident).stop()


def _relative(path: Path, folder: Path | None) -> str:
    try:
        return str(path.resolve().relative_to(folder.resolve())) if folder else str(path)
    except ValueError:
        return str(path)


def _file_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)[:120]
