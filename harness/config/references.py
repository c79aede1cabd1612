"""Reading a reference-figures file (YAML, e.g. configs/references/seeds.yaml) into a
validated `ReferenceSet`: a bad field is one ConfigError naming `file:line: key.path`
(exit 2), as for configs."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from mibench.files import Unreadable, resolved

from ..records import ReferenceSet
from ..records.references import FILE_CONTEXT
from .errors_format import format_validation_error
from .yamlsource import ConfigError, parse_yaml, read_text


def load_references(path: str | Path) -> ReferenceSet:
    """The reference set in `path`; every problem is one ConfigError naming the file.
    Each entry must say where it comes from in the seed's words (`FILE_CONTEXT`)."""
    shown = str(path)
    data, locs = parse_yaml(read_text(Path(path), shown, "reference-figures file"), shown)
    try:
        return ReferenceSet.model_validate(data, context=FILE_CONTEXT)
    except ValidationError as e:
        raise format_validation_error(e, data, locs, ReferenceSet) from None


def resolve(value: str, config_file: str | None) -> str:
    """A config's `references:` path, relative to the file that names it, made absolute."""
    base = Path(config_file).parent if config_file and not config_file.startswith("--set") \
        else Path.cwd()
    try:
        return str(resolved(base / value))
    except Unreadable as e:
        raise ConfigError(f"{value}: {e.why}", key="references", file=config_file) from None
