"""The command that reproduces one row: `mibench run CONFIG [--set ...] --case ID`.

The config file, its `--set` overrides and a multi-process run's options are the run's own
(`provenance.invocation`, recorded by `mibench run`); the case is selected by its id with
`--case` (glob characters in the id escaped), and parity checks are turned off so that
only that case runs. An artifact written before the invocation was recorded (or by a run
that did not come from a config file) names `configs/NAME.yaml` and no overrides.
"""

from __future__ import annotations

import re
import shlex

from ..records import CaseRecord, RunRecord


def config_args(record: RunRecord) -> tuple[str, list[str], list[str]]:
    """(config path, the run's own --set overrides, its multi-process options)."""
    inv = record.provenance.invocation
    if inv is not None:
        return inv.config, list(inv.sets), list(inv.options)
    return f"configs/{record.config.get('name', 'CONFIG')}.yaml", [], []


def glob_escape(text: str) -> str:
    """`text` as an fnmatch pattern that matches only itself."""
    return re.sub(r"([*?[])", r"[\1]", text)


def command(record: RunRecord, case: CaseRecord) -> str:
    """A shell command that runs exactly this case of the config (parity checks off)."""
    config, sets, extra = config_args(record)
    if (record.config.get("parity") or {}).get("checks"):
        sets = sets + ["parity.checks=[]"]
    words = (["mibench", "run", config] + [w for s in sets for w in ("--set", s)]
             + ["--case", glob_escape(case.case_id)] + extra)
    return " ".join(shlex.quote(w) for w in words)


def decide_command(base: RunRecord, new: RunRecord, case_ids: list[str]
                   ) -> tuple[str | None, str]:
    """(`mibench ab BASE NEW CONFIG [--set ...] --case ID ...`, a note) that decides the
    cases by interleaved rounds of the two commits the runs measured, with the new run's
    config and overrides; (None, what is missing) when the commits or the config path are
    not recorded, or both runs measured one commit (nothing for `ab` to compare)."""
    from ..judge.comparable import code_git, label

    b, n = code_git(base), code_git(new)
    inv = new.provenance.invocation
    missing = [f"the {side} run's commit ({r.run_id})" for side, r, g in
               (("base", base, b), ("new", new, n)) if not g.commit]
    if inv is None:
        missing.append(f"the config path ({new.run_id} did not record `provenance.invocation`)")
    if missing:
        return None, "not recorded: " + "; ".join(missing)
    if b.commit == n.commit:
        return None, (f"both runs measured commit {b.commit[:8]}, so `mibench ab` has two "
                      "commits to compare only once the change is committed")
    words = [shlex.quote(w) for w in ["mibench", "ab", b.commit[:12], n.commit[:12],
                                      inv.config] + [w for s in inv.sets for w in ("--set", s)]]
    words += [f"--case {quoted(glob_escape(c))}" for c in case_ids]
    dirty = [label(r) for r, g in ((base, b), (new, n)) if g.dirty]
    note = (f"{' and '.join(dirty)} had uncommitted changes, which `ab` does not measure"
            if dirty else "")
    return " ".join(words), note


def quoted(text: str) -> str:
    """`text` in single quotes for a shell, whatever it holds (a case glob reads the same
    in every command mibench prints)."""
    return "'" + text.replace("'", "'\\''") + "'"
