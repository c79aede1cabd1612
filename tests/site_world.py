"""A made-up nightly history for the site's tests (tests/test_site.py,
tests/test_site_browser.py), written by the nightly's own code through the fake steps of
tests/nightly_fakes.py: commit 4 makes both cases 2x slower (confirmed at night 5, bisected
to commit 4), prefill_extend's is accepted, commit 6 fixes packed (fixed at night 7), a
busy night 8 suspects prefill_extend and `ab` disproves it, and commit 9 makes
prefill_extend 2x slower again (confirmed at night 10: the open regression)."""

from __future__ import annotations

from pathlib import Path

from nightly_fakes import BUSY, EXTEND, PACKED, QUIET, FakeSteps, sha

from mibench.harness.nightly.index import Folder, accept
from mibench.harness.nightly.loop import NightlyOptions, nightly

NIGHTS = (0, 2, 5, 7, 8, 10)  # the commits a night ran at (night 0 seeds: 5 runs)
RUNS = 5 + len(NIGHTS) - 1
WHO, WHY = "ana", "exact softmax: slower on purpose"
CULPRIT, SECOND = sha(4), sha(9)


def make_history(folder: Path, nights: tuple[int, ...] = NIGHTS) -> Path:
    """The history folder (the module docstring), under `folder`: its nights at `nights`
    (a prefix of NIGHTS)."""
    steps = FakeSteps(folder, n=10, effects={4: {EXTEND: 2.0, PACKED: 2.0}, 6: {PACKED: 0.5},
                                             9: {EXTEND: 2.0}})
    history = folder / "history"
    for at in nights:
        steps.head_i = at
        steps.load, steps.scale = (BUSY, {EXTEND: 1.6}) if at == 8 else (QUIET, {})
        nightly(NightlyOptions(history=history, config="nightly-fake"), steps,
                note=lambda line: None)
        if at == 5:
            accept(Folder(history), [EXTEND], WHO, WHY)
    return history
