"""`mibench env`: devices, package versions and the peak FLOP/s, as JSON."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from .common import guarded


@guarded
def env(peak: Annotated[bool, typer.Option(help="Include the peak FLOP/s (measured on "
                                                "CPU).")] = True):
    """Devices, package versions and peak FLOP/s, as JSON."""
    print(json.dumps(environment(peak), indent=1))


def environment(with_peak: bool) -> dict:
    from mibench.engines import env_info

    from ..host.peak import PeakTable
    from ..host.provenance import host_info, package_versions

    info = env_info()
    info["packages"] = package_versions()
    info["host"] = host_info()
    if with_peak:
        d = info.get("devices", {})
        table = PeakTable(d.get("platform"), d.get("kind"))
        info["peak_flops"] = {dt: table(dt) for dt in ("float32", "bfloat16")}
        info["peak_source"] = table.source
    return info
