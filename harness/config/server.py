"""The `launch` section of an http case: how mibench starts the server under test
(docs/configs.md, "Servers under test"). Validated here, frozen and hashable; the matrix
carries it, with one combination of the case's `server_args`, as a `ServerLaunch`: the
one typed value of a launch from the config to the started server (HttpPlan.launch,
ServerRef.launch, under_test/pool.py `LaunchKey`, under_test/launch.py `Server`).

    launch:
      name: sglang-jax                 # in case ids and log names (optional)
      python: $MIBENCH_SGLANG_JAX      # what {python} stands for: a path, or $VARIABLE
      command: ["{python}", "-m", "sgl_jax.launch_server", "--model-path", "{model}",
                "--host", "{host}", "--port", "{port}", "--device", "cpu"]
      env: {JAX_PLATFORMS: cpu}
      cwd: null
      ready: {path: /health, timeout_s: 300}
      stop: {signal: SIGTERM, grace_s: 10}
      package: sglang-jax              # its version in the server's interpreter is recorded
      source: null                     # a checkout of the server's source: its commit is recorded
      repo_path: python                # mibench ab --server-repo: a revision's folder first
                                       # on PYTHONPATH (revisions share one environment)
    server_args: {max_running_requests: [1, 16]}   # flags; a list is a matrix axis

Placeholders in `command`: {python}, {model} (the checkpoint folder: an embedded preset
is written out first), {dtype}, {host} (127.0.0.1) and {port} (a free port mibench picks);
{port} is required.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import string
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from .base import Seconds, Strict

PLACEHOLDERS = ("python", "model", "dtype", "host", "port")
NAME = r"^[A-Za-z0-9_.-]+$"


class ReadyProbe(Strict):
    """The server is ready when `GET path` answers 200 (polled every `interval_s`), at
    most `timeout_s` after it started; else the case fails with the log's last lines."""

    # what an HTTP request line can carry: printable ASCII, no space
    path: Annotated[str, Field(pattern=r"^/[\x21-\x7e]*$")] = "/health"
    timeout_s: Seconds = 300.0
    interval_s: Seconds = 0.5


class StopPolicy(Strict):
    """How the server is stopped: `signal` to its whole process group, then SIGKILL to
    the group after `grace_s`."""

    signal: Literal["SIGTERM", "SIGINT"] = "SIGTERM"
    grace_s: Seconds = 10.0


class Launch(Strict):
    """How mibench starts the server under test (module docstring)."""

    name: Annotated[str, Field(pattern=NAME)] | None = None
    command: Annotated[list[str], Field(min_length=1)]
    python: str | None = None
    env: dict[str, str] = {}
    cwd: str | None = None
    ready: ReadyProbe = ReadyProbe()
    stop: StopPolicy = StopPolicy()
    package: str | None = None
    source: str | None = None
    repo_path: str | None = None

    def __hash__(self) -> int:
        """By value (its command list and env mapping included): a server's key holds it."""
        return hash(json.dumps(self.model_dump(mode="json"), sort_keys=True))

    @field_validator("command")
    @classmethod
    def _placeholders(cls, command: list[str]) -> list[str]:
        found = set()
        for k, word in enumerate(command):
            _no_nul(word, f"item {k}")
            try:
                parsed = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(word)
                          if f is not None]
            except ValueError as e:
                raise ValueError(f"item {k} {word!r}: {e} (a literal brace is {{{{ or }}}})") \
                    from None
            for f, spec, conv in parsed:
                if spec or conv:
                    raise ValueError(f"item {k} {word!r}: {{{f}{'!' + conv if conv else ''}"
                                     f"{':' + spec if spec else ''}}} takes no conversion or "
                                     f"format: write {{{f}}}")
            names = {f for f, _, _ in parsed}
            unknown = sorted(n for n in names if n not in PLACEHOLDERS)
            if unknown:
                raise ValueError(f"item {k} {word!r}: unknown placeholder {{{unknown[0]}}} "
                                 f"(known: {', '.join('{' + p + '}' for p in PLACEHOLDERS)})")
            found |= names
        if "port" not in found:
            raise ValueError("must pass the server its port: put {port} in the command "
                             "(mibench picks a free one)")
        return command

    @field_validator("python")
    @classmethod
    def _python(cls, v: str | None) -> str | None:
        if v is not None and v.startswith("$") and not re.fullmatch(r"\$\{?[A-Za-z_]\w*\}?", v):
            raise ValueError(f"{v!r} is not a variable: write $NAME (or a path)")
        return _no_nul(v, "the path")

    @field_validator("cwd", "package", "source", "repo_path")
    @classmethod
    def _paths(cls, v: str | None) -> str | None:
        return _no_nul(v, "the value")

    @field_validator("env")
    @classmethod
    def _env(cls, env: dict[str, str]) -> dict[str, str]:
        """What a process environment can hold: a name without `=` (nor empty), no NUL."""
        for name, value in env.items():
            if not name or "=" in name:
                raise ValueError(f"{name!r} is not a variable name: it may not be empty or "
                                 "hold '='")
            _no_nul(name, f"the name {name!r}")
            _no_nul(value, f"the value of {name}")
        return env


def _no_nul(v: str | None, what: str) -> str | None:
    """`v`, unless it holds a NUL byte, which no command line, path or environment can."""
    if v is not None and "\0" in v:
        raise ValueError(f"{what} holds a NUL byte (\\0), which no command line, path or "
                         "environment variable can carry")
    return v


ServerArg = Annotated[str, AfterValidator(lambda v: _no_nul(v, "a server argument"))] | int \
    | float | bool


def flag(key: str, value) -> list[str]:
    """A server argument as command-line words: `max_running_requests: 16` ->
    `--max-running-requests 16`; true -> the bare flag; false or null -> nothing."""
    name = "--" + key.replace("_", "-")
    if value is True:
        return [name]
    if value is False or value is None:
        return []
    return [name, str(value)]


@dataclasses.dataclass(frozen=True)
class ServerLaunch:
    """How to start one server under test: the config's `launch` (`Launch`), with
    one combination of the case's server arguments (`args`): hashable, so cases that need
    the same server share it (harness/under_test/pool.py). The launch's own keys read
    through it as typed properties: `.name`, `.command`, `.cwd`, `.ready`, `.stop`, ..."""

    launch: Launch
    args: tuple[tuple[str, object], ...] = ()

    # the launch's own keys, read through (typed: no attribute passes through unnamed)
    @property
    def name(self) -> str | None:
        return self.launch.name

    @property
    def command(self) -> list[str]:
        return self.launch.command

    @property
    def python(self) -> str | None:
        return self.launch.python

    @property
    def env(self) -> dict[str, str]:
        return self.launch.env

    @property
    def cwd(self) -> str | None:
        return self.launch.cwd

    @property
    def ready(self) -> ReadyProbe:
        return self.launch.ready

    @property
    def stop(self) -> StopPolicy:
        return self.launch.stop

    @property
    def package(self) -> str | None:
        return self.launch.package

    @property
    def source(self) -> str | None:
        return self.launch.source

    @property
    def repo_path(self) -> str | None:
        return self.launch.repo_path

    def interpreter(self) -> str | None:
        """What {python} stands for: the path, the variable's value (None when it is not
        set), or None when the launch names none (the caller's own interpreter)."""
        if self.python is None or not self.python.startswith("$"):
            return self.python
        return os.environ.get(self.python.strip("${}")) or None

    def missing(self) -> str | None:
        """Why this machine cannot start the server (a variable the launch needs is not
        set), or None."""
        if self.python is not None and self.python.startswith("$") and not self.interpreter():
            return (f"launch.python is {self.python}, which is not set here: set it to the "
                    "server's interpreter (the case is skipped)")
        return None

    def environment(self) -> dict[str, str]:
        return dict(self.env)

    def flags(self) -> list[str]:
        """The server arguments as command-line flags (`flag`)."""
        return [w for key, value in self.args for w in flag(key, value)]

    def command_for(self, **values) -> list[str]:
        """The command with its placeholders filled, then the server arguments' flags."""
        return [word.format_map(values) for word in self.command] + self.flags()

    def display_name(self) -> str:
        """A short name: `name`, else the program (or python module) the command runs."""
        if self.name:
            return self.name
        words = list(self.command)
        if "-m" in words[:-1]:
            return words[words.index("-m") + 1]
        return re.sub(r"[{}]", "", os.path.basename(words[0])) or "server"
