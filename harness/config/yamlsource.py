"""YAML sources with locations: `include:` resolution, deep merge and `--set` overrides.

Every value keeps the file and line it came from (`Locations`), so a config error can name
`file:line: key.path`. Key paths are tuples of str (mapping keys) and int (list indices).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import yaml

from mibench.errors import MibenchError
from mibench.files import Unreadable, read_bounded, resolved

Key = tuple[str | int, ...]


class ConfigError(MibenchError):
    """A bad config: names the key path, the file and (where YAML gives it) the line."""

    def __init__(self, message: str, key: str | None = None, file: str | None = None,
                 line: int | None = None):
        self.key, self.file, self.line = key, file, line
        where = f"{file}:{line}" if file and line else file
        prefix = ": ".join(p for p in (where, key) if p)
        super().__init__(message, field=prefix or None)
        self.field = key


@dataclasses.dataclass(frozen=True)
class Problem:
    """A rule a config breaks: the key path at fault and why (no file, no line: the
    config's locations name them when it is raised)."""

    key: Key
    message: str


def dotted(key: Key) -> str:
    """('cases', 2, 'mask') -> 'cases.2.mask'."""
    return ".".join(str(k) for k in key) or "<root>"


class Locations(dict):
    """Key path -> (file, line); `find` falls back to the nearest located ancestor."""

    def find(self, key: Key) -> tuple[str | None, int | None]:
        for n in range(len(key), -1, -1):
            if tuple(key[:n]) in self:
                return self[tuple(key[:n])]
        return None, None

    def error(self, key: Key, message: str) -> ConfigError:
        file, line = self.find(key)
        return ConfigError(message, key=dotted(key), file=file, line=line)


def _walk(node: yaml.Node, key: Key, file: str, locs: Locations) -> None:
    if isinstance(node, yaml.MappingNode):
        seen = set()
        for k_node, v_node in node.value:
            k = k_node.value
            if k in seen:
                raise ConfigError("duplicate key", key=dotted(key + (k,)), file=file,
                                  line=k_node.start_mark.line + 1)
            seen.add(k)
            locs[key + (k,)] = (file, k_node.start_mark.line + 1)
            _walk(v_node, key + (k,), file, locs)
    elif isinstance(node, yaml.SequenceNode):
        for i, v_node in enumerate(node.value):
            locs[key + (i,)] = (file, v_node.start_mark.line + 1)
            _walk(v_node, key + (i,), file, locs)


# Bounds on what a config may expand to: aliases (`*x`) repeat whole anchored subtrees, so
# nine levels of them make billions of values from a few lines ("billion laughs")
MAX_VALUES = 100_000  # values (scalars, lists, mappings) after aliases are expanded
MAX_DEPTH = 64  # nesting of lists and mappings
MAX_FILE_BYTES = 4 * 1024**2  # a config is a short text file
MAX_INCLUDES = 64  # files read through `include:`, all levels together


class _BoundedLoader(yaml.SafeLoader):
    """A SafeLoader that counts every value an alias expands to and refuses, naming the
    line, a document past MAX_VALUES values, MAX_DEPTH levels, or an alias inside its own
    anchor (a recursive structure)."""

    def __init__(self, text: str, file: str):
        super().__init__(text)
        self.file = file
        self.values = 0
        self.depth = 0
        self.sizes: dict[int, int] = {}  # id(node) -> values it expands to
        self.open: set[str] = set()  # anchors whose node is still being composed

    def _refuse(self, message: str, mark) -> ConfigError:
        return ConfigError(message, file=self.file, line=mark.line + 1 if mark else None)

    def _size(self, node: yaml.Node) -> int:
        if id(node) not in self.sizes:
            if isinstance(node, yaml.MappingNode):
                size = 1 + sum(self._size(k) + self._size(v) for k, v in node.value)
            elif isinstance(node, yaml.SequenceNode):
                size = 1 + sum(self._size(v) for v in node.value)
            else:
                size = 1
            self.sizes[id(node)] = size
        return self.sizes[id(node)]

    def _count(self, n: int, mark) -> None:
        self.values += n
        if self.values > MAX_VALUES:
            raise self._refuse(f"expands to more than {MAX_VALUES} values (aliases repeat "
                               "whole anchored subtrees); a config is far smaller", mark)

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self.open:
                raise self._refuse(f"alias *{event.anchor} inside its own anchor (a recursive "
                                   "structure)", event.start_mark)
            if event.anchor in self.anchors:
                self._count(self._size(self.anchors[event.anchor]), event.start_mark)
            return super().compose_node(parent, index)
        self._count(1, event.start_mark)
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self._refuse(f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
        if event.anchor is not None:
            self.open.add(event.anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1
            self.open.discard(event.anchor)


# YAML 1.1 (PyYAML) reads a float only with a dot: `1e9` and `-2E-3` are strings there, but
# numbers in YAML 1.2 and JSON, as anyone writing `p50_ms: 1e9` means; read as floats here,
# once for every key and every `--set`/`--option` value
_BoundedLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))


def load_yaml(text: str, file: str) -> tuple[object, yaml.Node | None]:
    """One YAML document, bounded (see _BoundedLoader): (its value, its node graph).
    Every failure is a ConfigError naming `file` (and the line where YAML gives one)."""
    loader = None
    try:
        loader = _BoundedLoader(text, file)  # the reader refuses control characters here
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark else None
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"invalid YAML: {problem}", file=file, line=line) from None
    except (ValueError, RecursionError) as e:  # e.g. an integer of 5000 digits
        if isinstance(e, ConfigError):
            raise
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ConfigError(f"invalid YAML: {first}", file=file) from None
    finally:
        if loader is not None:
            loader.dispose()
    return data, node


def parse_yaml(text: str, file: str) -> tuple[dict, Locations]:
    """Parse one YAML document into a dict and the location of every key."""
    data, node = load_yaml(text, file)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"must be a mapping at the top, got {type(data).__name__}", file=file,
                          line=1)
    locs = Locations({(): (file, 1)})
    if node is not None:
        _walk(node, (), file, locs)
    return data, locs


def read_text(path: Path, shown: str, what: str = "config file") -> str:
    """A config file's (or another YAML input's, `what`) text: a regular UTF-8 file of at
    most MAX_FILE_BYTES."""
    try:
        raw = read_bounded(path, MAX_FILE_BYTES, what)
    except Unreadable as e:
        raise ConfigError(e.why, file=shown) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise ConfigError(f"not a text file (byte {e.start} is not UTF-8)", file=shown,
                          line=line) from None


def deep_merge(base: dict, over: dict) -> dict:
    """Mappings merge key by key; anything else in `over` replaces what `base` had."""
    out = dict(base)
    for k, v in over.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k),
                                                                               dict) else v
    return out


def _merge_locations(base: Locations, over: Locations, over_data: dict) -> Locations:
    """Keys replaced wholesale (non-mapping values) drop the base's locations below them."""
    out = Locations(base)
    for key in over:
        if key and not isinstance(_get(over_data, key), dict):
            for k in [k for k in out if len(k) > len(key) and k[:len(key)] == key]:
                del out[k]
    out.update({k: v for k, v in over.items() if k})
    return out


def _get(data, key: Key):
    for k in key:
        data = data[k]
    return data


def load_source(path: Path, _stack: tuple[Path, ...] = (),
                _read: list | None = None) -> tuple[dict, Locations]:
    """Read a config file and the files it includes (relative to it), merged in order."""
    path = Path(path)
    shown = str(path)
    data, locs = parse_yaml(read_text(path, shown), shown)
    _read = [] if _read is None else _read
    _read.append(path)
    includes = data.pop("include", None)
    if includes is None:
        return data, locs
    single = isinstance(includes, str)
    if single:
        includes = [includes]
    if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
        raise locs.error(("include",), "must be a file name or a list of file names")
    merged, merged_locs = {}, Locations()
    for n, name in enumerate(includes):
        key = ("include",) if single else ("include", n)
        try:
            target = resolved(path.parent / name)
        except Unreadable as e:
            raise locs.error(key, f"included file {name}: {e.why}") from None
        if target in _stack or target == path.resolve():
            raise locs.error(key, f"include cycle through {name}")
        if not target.is_file():
            raise locs.error(key, f"included file {name} not found (looked in {target})")
        if len(_read) > MAX_INCLUDES:
            raise locs.error(key, f"more than {MAX_INCLUDES} included files in all")
        sub, sub_locs = load_source(target, _stack + (path.resolve(),), _read)
        merged_locs = _merge_locations(merged_locs, sub_locs, sub)
        merged = deep_merge(merged, sub)
    locs = Locations({k: v for k, v in locs.items() if not (k and k[0] == "include")})
    return deep_merge(merged, data), _merge_locations(merged_locs, locs, data)


def apply_set(data: dict, locs: Locations, assignment: str) -> dict:
    """Apply one `--set a.b.0.c=value` override; the value is parsed as YAML."""
    where = f"--set {assignment}"
    if "=" not in assignment:
        raise ConfigError("expected KEY=VALUE, e.g. workload.num_items=64", file=where)
    dotted_key, _, raw = assignment.partition("=")
    parts = dotted_key.strip().split(".")
    if not all(p.strip() for p in parts):
        raise ConfigError("empty key", file=where)
    value = load_yaml(raw, where)[0] if raw.strip() else None
    key: Key = tuple(int(p) if p.isascii() and p.isdigit() and len(p) < 10 else p
                     for p in parts)
    target = data
    for depth, k in enumerate(key[:-1]):
        target = _step(target, k, key[:depth + 1], where)
    last = key[-1]
    if isinstance(target, list):
        if not isinstance(last, int) or last >= len(target):
            raise ConfigError("no such list element", key=dotted(key), file=where)
    elif not isinstance(target, dict):
        raise ConfigError(f"is a {_kind(target)}, not a mapping or a list: it has no "
                          f"{last!r}", key=dotted(key[:-1]), file=where)
    elif isinstance(last, int):
        last = str(last)
    target[last] = value
    for k in [k for k in locs if len(k) >= len(key) and k[:len(key)] == key]:
        del locs[k]
    locs[key] = (where, None)
    return data


def _kind(value) -> str:
    return {str: "string", int: "number", float: "number", bool: "boolean",
            type(None): "null"}.get(type(value), type(value).__name__)


def _step(target, k, key: Key, where: str):
    if isinstance(target, list):
        if not isinstance(k, int) or k >= len(target):
            raise ConfigError("no such list element", key=dotted(key), file=where)
        return target[k]
    if not isinstance(target, dict):
        raise ConfigError(f"is a {_kind(target)}, not a mapping or a list: it has no {k!r}",
                          key=dotted(key[:-1]), file=where)
    k = str(k)
    if k not in target or target[k] is None:
        target[k] = {}
    return target[k]
