"""How much memory this machine has for a request: its RAM or cgroup limit, capped at
HARD_LIMIT. Plain data from /proc and /sys (no jax), read by the config check, `mibench
score` and `mibench serve` alike; `Mode.memory_problem` compares an estimate with it."""

from __future__ import annotations

import os
from pathlib import Path

HARD_LIMIT = 1024**4  # 1 TiB: refused whatever the machine


def host_memory() -> tuple[int | None, str]:
    """(bytes, where they come from): the smaller of the RAM (/proc/meminfo MemTotal, else
    sysconf) and a cgroup memory limit; None when neither is known."""
    found: list[tuple[int, str]] = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                found.append((int(line.split()[1]) * 1024, "RAM (MemTotal)"))
                break
    except (OSError, ValueError, IndexError):
        pass
    if not found:
        try:
            found.append((os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "RAM"))
        except (ValueError, OSError, AttributeError):
            pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit.isdigit():
            found.append((int(limit), "cgroup memory.max"))
    except OSError:
        pass
    return min(found) if found else (None, "unknown")
