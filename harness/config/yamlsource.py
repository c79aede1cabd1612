"""YAML sources with locations: `include:` resolution, deep merge and `--set` overrides.

Every value keeps the file and line it came from (`Locations`), so a config error can name
`file:line: key.path`. Key paths are tuples of str (mapping keys) and int (list indices).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from mibench.errors import MibenchError

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


def parse_yaml(text: str, file: str) -> tuple[dict, Locations]:
    """Parse one YAML document into a dict and the location of every key."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark else None
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"invalid YAML: {problem}", file=file, line=line) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"must be a mapping at the top, got {type(data).__name__}", file=file,
                          line=1)
    locs = Locations({(): (file, 1)})
    if node is not None:
        _walk(node, (), file, locs)
    return data, locs


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


def load_source(path: Path, _stack: tuple[Path, ...] = ()) -> tuple[dict, Locations]:
    """Read a config file and the files it includes (relative to it), merged in order."""
    path = Path(path)
    shown = str(path)
    if not path.is_file():
        raise ConfigError("no such config file", file=shown)
    data, locs = parse_yaml(path.read_text(), shown)
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
        target = (path.parent / name).resolve()
        if target in _stack or target == path.resolve():
            raise locs.error(key, f"include cycle through {name}")
        if not target.is_file():
            raise locs.error(key, f"included file {name} not found (looked in {target})")
        sub, sub_locs = load_source(target, _stack + (path.resolve(),))
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
    if not all(parts):
        raise ConfigError("empty key", file=where)
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as e:
        raise ConfigError(f"value is not valid YAML: {e}", file=where) from None
    key: Key = tuple(int(p) if p.isdigit() else p for p in parts)
    target = data
    for depth, k in enumerate(key[:-1]):
        target = _step(target, k, key[:depth + 1], where)
    last = key[-1]
    if isinstance(target, list):
        if not isinstance(last, int) or last >= len(target):
            raise ConfigError("no such list element", key=dotted(key), file=where)
    elif isinstance(last, int):
        last = str(last)
    target[last] = value
    for k in [k for k in locs if len(k) >= len(key) and k[:len(key)] == key]:
        del locs[k]
    locs[key] = (where, None)
    return data


def _step(target, k, key: Key, where: str):
    if isinstance(target, list):
        if not isinstance(k, int) or k >= len(target):
            raise ConfigError("no such list element", key=dotted(key), file=where)
        return target[k]
    if not isinstance(target, dict):
        raise ConfigError("is not a mapping", key=dotted(key[:-1]), file=where)
    k = str(k)
    if k not in target or target[k] is None:
        target[k] = {}
    return target[k]
