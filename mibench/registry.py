"""One registry style for every extension point (modes, engines, case kinds, exporters,
wires, parity checks): a `Registry` maps a name to what implements it, and says what is
known when a name is not.

    EXPORTERS = Registry("format", field="--format")
    EXPORTERS.add("csv", csv)                  # or, on a class or function:
    @WIRES.register("sglang")
    class SGLang: ...
    EXPORTERS.get("xml")  # MibenchError: --format: unknown format 'xml' (known: csv, ...)

An entry may be given as "package.module:attribute" and is imported on first lookup (a
registry whose entries import heavy or optional modules, or modules above the registry's
own layer). `fill` runs once, before the first lookup, for a registry filled from
elsewhere. Neutral, as mibench/errors.py is: it imports nothing of engines or harness.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Generic, TypeVar

from .errors import MibenchError, did_you_mean

T = TypeVar("T")


class Registry(Mapping[str, T], Generic[T]):
    """Names of one kind of extension point -> their implementations, in the order added
    (the order the CLI and the docs list them in)."""

    def __init__(self, what: str, field: str | None = None,
                 fill: Callable[[Registry[T]], None] | None = None, where: str = ""):
        # `where`: what the names belong to, said after the unknown name ("for engine jax")
        self.what, self.field, self.where = what, field, where
        self._entries: dict[str, T | str] = {}
        self._fill = fill

    def add(self, name: str, value: T | str) -> T | str:
        """Register `value` (or a lazy "module:attribute") under `name`; a name twice is a
        programming error (ValueError), never a silent replacement."""
        if name in self._entries:
            raise ValueError(f"{self.what} {name!r} is registered twice")
        self._entries[name] = value
        return value

    def register(self, name: str) -> Callable[[T], T]:
        """A decorator: `@REGISTRY.register("name")` on a class or function."""
        def put(value: T) -> T:
            self.add(name, value)
            return value
        return put

    @contextmanager
    def entry(self, name: str, value: T | str) -> Iterator[T | str]:
        """`name` -> `value` for a `with` block, then as before: added then removed, or
        replaced (in its place in the order) then restored. How a test tries an entry
        without reaching into the registry."""
        entries = self._filled()
        had, before = name in entries, entries.get(name)
        entries[name] = value
        try:
            yield value
        finally:
            if had:
                entries[name] = before
            else:
                entries.pop(name, None)

    def get(self, name, default=None):  # Mapping.get, lazy entries resolved
        return self[name] if isinstance(name, str) and name in self._filled() else default

    def lookup(self, name) -> T:
        """The entry called `name`, or a MibenchError naming `field`: `unknown format 'x'
        (known: csv, json, bmf); did you mean 'csv'?`."""
        if not isinstance(name, str) or name not in self._filled():
            known = ", ".join(self._entries)
            hint = did_you_mean(name, self._entries) if isinstance(name, str) else ""
            where = f" {self.where}" if self.where else ""
            raise MibenchError(f"unknown {self.what} {name!r}{where} (known: {known}){hint}",
                               field=self.field)
        return self[name]

    def __getitem__(self, name: str) -> T:
        entry = self._filled()[name]
        if isinstance(entry, str) and ":" in entry:
            module, _, attribute = entry.partition(":")
            entry = getattr(importlib.import_module(module), attribute)
            self._entries[name] = entry
        return entry

    def __contains__(self, name) -> bool:
        return name in self._filled()

    def __iter__(self) -> Iterator[str]:
        return iter(self._filled())

    def __len__(self) -> int:
        return len(self._filled())

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {', '.join(self._entries) or 'empty'})"

    def _filled(self) -> dict[str, T | str]:
        if self._fill is not None:
            fill, self._fill = self._fill, None
            fill(self)
        return self._entries
