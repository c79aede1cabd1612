"""What the engines run on: JAX devices and the versions of the packages that matter."""

from __future__ import annotations

import importlib.metadata

# what every engine reads checkpoints and scores with (each engine's own: ENGINE_PACKAGES)
COMMON = ("safetensors", "numpy", "pydantic")


def packages() -> tuple[str, ...]:
    """The distributions whose versions a record keeps: mibench, every engine's, the common
    ones."""
    from . import ENGINE_PACKAGES

    own = (p for names in ENGINE_PACKAGES.values() for p in names)
    return tuple(dict.fromkeys(("mibench", *own, *COMMON)))


def package_versions() -> dict[str, str | None]:
    out = {}
    for name in packages():
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def device_info() -> dict:
    """Platform, device kind and count of JAX's default backend, and every device."""
    from .platforms import skip_absent_tpu

    skip_absent_tpu()  # before JAX starts (the worker probe, `mibench env`)
    import jax

    devices = jax.devices()
    return {
        "platform": devices[0].platform,
        "kind": devices[0].device_kind,
        "count": len(devices),
        "process_count": jax.process_count(),
        "devices": [{"id": d.id, "kind": d.device_kind, "process": d.process_index}
                    for d in devices],
    }


def env_info() -> dict:
    return {"devices": device_info(), "packages": package_versions()}
