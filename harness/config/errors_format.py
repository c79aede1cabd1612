"""Turn pydantic's validation errors into one ConfigError line: `file:line: key.path: why`."""

from __future__ import annotations

import re
import typing

from pydantic import BaseModel, ValidationError

from mibench.errors import did_you_mean

from .yamlsource import ConfigError, Key, Locations, dotted

MAX_SHOWN = 3


def _child(node, part):
    if isinstance(node, dict) and isinstance(part, str) and part in node:
        return True, node[part]
    if isinstance(node, list) and isinstance(part, int) and part < len(node):
        return True, node[part]
    return False, None


def _clean_loc(loc: tuple, data, kind: str) -> Key:
    """Follow pydantic's loc through the raw data, dropping its union-branch tags
    (`int`, `Dist`, `list[int]`...) that name types, not keys."""
    out: list = []
    node = data
    n = 0
    while n < len(loc):
        part = loc[n]
        found, child = _child(node, part)
        if not found:
            # a union tag, or the index 0 of a scalar made a one-value list (an axis):
            # skip it when a part a little further on is a real key
            ahead = next((k for k in (1, 2) if n + k < len(loc)
                          and _child(node, loc[n + k])[0]), None)
            if ahead is not None:
                n += ahead
                continue
            if kind == "missing" and isinstance(part, str) and isinstance(node, dict):
                out.append(part)
            break
        out.append(part)
        node = child
        n += 1
    return tuple(out)


def _models_in(annotation) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found = []
    for arg in typing.get_args(annotation):
        found += _models_in(arg)
    return found


def _section(root: type[BaseModel], key: Key) -> type[BaseModel] | None:
    """The model class of the mapping at `key` (list indices skipped)."""
    model = root
    for part in key:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        models = _models_in(field.annotation) if field else []
        if not models:
            return None
        model = models[-1]
    return model


def _message(err: dict, key: Key, root: type[BaseModel]) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        parent = _section(root, key[:-1])
        if parent is None:
            return "unknown key"
        guess = did_you_mean(str(key[-1]), parent.model_fields) if key else ""
        return f"unknown key{guess} (allowed: {', '.join(parent.model_fields)})"
    if kind == "missing":
        return "required key is missing"
    if kind == "too_short" and isinstance(err.get("input"), list) and not err["input"]:
        return "is empty: needs at least one value (a matrix axis with no values has no cases)"
    msg = err["msg"].removeprefix("Value error, ")
    value = err.get("input")
    if kind.endswith(("_type", "_parsing")) and isinstance(value, bool | int | float | str) \
            or value is None and kind.endswith("_type"):
        shown = {True: "true", False: "false", None: "null"}.get(value, None) \
            if isinstance(value, bool) or value is None else repr(value)
        msg += f", got {shown[:60]}"  # strict types: `true` is not an integer
    if kind == "literal_error" and isinstance(value, str):  # a name misspelt: the closest
        msg += f", got {value[:60]!r}" + did_you_mean(
            value, re.findall(r"'([^']*)'", str(err.get("ctx", {}).get("expected", ""))))
    return msg


def format_validation_error(e: ValidationError, data: dict, locs: Locations,
                            root: type[BaseModel]) -> ConfigError:
    """One ConfigError for a validation failure of `root` (the Config model)."""
    seen: dict[str, tuple[Key, str, tuple]] = {}
    for err in e.errors(include_url=False):
        key = _clean_loc(tuple(err["loc"]), data, err["type"])
        # a union reports one error per branch: a value error, or the branch that got
        # deepest into the value, names the real problem
        rank = (err["type"] == "value_error", len(err["loc"]))
        if dotted(key) not in seen or rank > seen[dotted(key)][2]:
            seen[dotted(key)] = (key, _message(err, key, root), rank)
    # a type error of one union branch is noise when another branch got deeper
    items = [(k, m) for k, m, _ in seen.values()
             if not (m.startswith("Input should be a valid") and
                     any(d.startswith(dotted(k) + ".") for d in seen))]
    key, msg = items[0]
    first = locs.error(key, msg)
    if len(items) == 1:
        return first
    more = "; ".join(f"{dotted(k)}: {m}" for k, m in items[1:MAX_SHOWN])
    extra = f" (+{len(items) - MAX_SHOWN} more)" if len(items) > MAX_SHOWN else ""
    return ConfigError(f"{msg}; also {more}{extra}", key=first.key, file=first.file,
                       line=first.line)
