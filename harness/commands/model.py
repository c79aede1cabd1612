"""`mibench model make PRESET --out DIR` and `mibench model verify PATH`: model files and
their integrity."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mibench.engines import PRESETS

from .common import folder_out, guarded, writable_folder

model_app = typer.Typer(no_args_is_help=True, help="Model files.")


@model_app.command("make")
@guarded
def model_make(preset: Annotated[str, typer.Argument(
                   help=f"One of: {', '.join(PRESETS)}.")],
               out: Annotated[Path, typer.Option(help="Output folder.", callback=folder_out)]):
    """Write embedded preset PRESET as a Hugging Face checkpoint folder."""
    from mibench.engines import model_facts

    model_facts(f"embedded:{preset}")  # an unknown preset, before any folder is made
    print(make_whole(preset, writable_folder(out, "--out")))


def make_whole(preset: str, out: Path) -> Path:
    """The preset's files made in a folder beside `out`, then moved into it (renames, which
    need no space): a write that fails (a full disk) leaves `out` as it was, and is an
    EnvironmentFailed (exit 4) naming it."""
    import os
    import shutil
    import tempfile

    from mibench.engines import make_model
    from mibench.errors import EnvironmentFailed

    from ..records.io import why_not_written

    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        make_model(preset, tmp)
        for f in sorted(tmp.iterdir()):
            os.replace(f, out / f.name)
    except OSError as e:
        raise EnvironmentFailed(f"cannot write the model's files: {why_not_written(e)}; "
                                "nothing was written there", field=str(out)) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


@model_app.command("verify")
@guarded
def model_verify(path: Annotated[str, typer.Argument(help="A checkpoint folder or "
                                                     "embedded:<preset>.")]):
    """Check a model fully: files against the manifest (sha256), config.json, safetensors
    headers and sizes, tensors against the config. Changes nothing; exit 2 names the file."""
    from mibench.engines import verify_model

    print(verify_model(path))
