"""Plain-text tables for the terminal: the expanded cases of a config, a run's results."""

from __future__ import annotations

from pathlib import Path

from mibench.engines import MODES

from ..case_kinds import kind_of
from ..config.keys import short
from ..records.summaries import median
from .fmt import mfu


def table(header: list[str], rows: list[list[str]], width: int | None = None) -> str:
    """Plain text (no colour, no frame): the header, a rule, the rows, columns two spaces
    apart (rich's table). On a terminal narrower than the table, rich wraps the widest
    cells (a long case id) to fit; elsewhere (logs, pipes, `width` None off a terminal)
    nothing wraps."""
    import io
    import shutil
    import sys

    from rich import box
    from rich.console import Console
    from rich.table import Table

    if width is None:
        width = shutil.get_terminal_size().columns if sys.stdout.isatty() else 100_000
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1),
              header_style="", collapse_padding=True)
    for name in header:
        t.add_column(name, overflow="fold")
    for row in rows:
        t.add_row(*(str(c) for c in row))
    out = io.StringIO()
    Console(file=out, width=width, color_system=None, force_terminal=False,
            highlight=False, emoji=False, markup=False).print(t)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines() if line.strip())


def _workload(w) -> str:
    if w.requests:
        return f"requests {Path(w.requests).name}"
    it = w.item_tokens
    length = it if isinstance(it, int) else f"{it.min}-{it.max}"
    return f"{w.query_tokens}/{w.num_items}x{length} {w.tokens}"


def options(case) -> str:
    """Every option the case's mode runs with: the case's own values over the mode
    registry's defaults (`-` for one the mode derives, e.g. precompile_bs)."""
    text = kind_of(case.engine).options_text(case)
    if text is not None:
        return text
    full = MODES[case.engine][case.mode].with_defaults(case.params)
    return " ".join(f"{k}={'-' if v is None else short(v)}" for k, v in full.items()) or "-"


def untested_line(cases) -> str | None:
    """One line when `runs.timed` leaves cases without a timing verdict in `compare`
    (fewer than 3 timed runs: `untested`), else None."""
    from ..judge.compare import MIN_RUNS

    short_ = [c for c in cases if c.runs.processes * c.runs.timed < MIN_RUNS]
    if not short_:
        return None
    names = ", ".join(c.case_id for c in short_[:3]) + (", ..." if len(short_) > 3 else "")
    timed = sorted({c.runs.timed for c in short_})
    return (f"note: {len(short_)} of {len(cases)} case(s) have runs.timed "
            f"{'/'.join(map(str, timed))} (< {MIN_RUNS}): `mibench compare` gives them no "
            f"timing verdict (untested) ({names})")


def render_cases(config, cases, times: list[str] | None = None) -> str:
    """The case table; `times`: each case's time here (validate's estimate column)."""
    rows = [[str(i + 1), c.case_id, c.model.removeprefix("embedded:"), c.dtype,
             _workload(c.workload), f"{c.runs.warmup}+{c.runs.timed}"]
            + ([times[i]] if times else []) + [options(c)]
            for i, c in enumerate(cases)]
    checks = ", ".join(config.parity.checks) if config.parity else "none"
    head = f"{config.name}: {len(cases)} cases; parity: {checks}"
    note = untested_line(cases)
    return head + "\n" + table(["#", "case", "model", "dtype", "workload", "warmup+timed"]
                               + (["time here"] if times else [])
                               + ["options (mode registry defaults filled in)"], rows) + (
        f"\n{note}" if note else "")


def _fmt(x, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def _verdict(p) -> str:
    """What failed: the speedup against its minimum, or the largest difference against its
    tolerance (log scores where the check judged them, plus probabilities where bounded)."""
    if p.check == "speedup":
        return f"speedup {_fmt(p.speedup, '.2f')}x < {p.tolerance:g}x"
    log = getattr(p, "max_log_diff", None)
    if log is None:
        return f"max {_fmt(p.max_abs_diff, '.3g')} > {p.tolerance:g}"
    text = f"max |ln diff| {log:.3g} (tolerance {p.tolerance:g})"
    abs_tol = getattr(p, "abs_tolerance", None)
    if abs_tol is not None:
        text += f", max abs diff {_fmt(p.max_abs_diff, '.3g')} (tolerance {abs_tol:g})"
    return text


def render_summary(record, path) -> str:
    rows = []
    for c in record.cases:
        m = c.metrics
        tput, lat = median(m.throughput_items_per_s), median(m.latency_per_item_ms)
        note = f"{c.error.type}: {c.error.message}"[:80] if c.error else ""
        rows.append([c.case_id, c.status, _fmt(tput, ".2f"), _fmt(lat, ".3f"),
                     _fmt(c.compile_s, ".2f"), mfu(m.mfu), note])
    out = [table(["case", "status", "items/s", "ms/item", "compile_s", "mfu", "error"], rows)]
    if record.parity is not None:
        bad = [p for p in record.parity.checks if not p.passing]
        out.append(f"parity: {len(record.parity.checks) - len(bad)}/"
                   f"{len(record.parity.checks)} checks passed")
        out += [f"  {p.status}: {p.check}{'/' + p.variant if p.variant else ''} {p.case_id} "
                f"vs {p.against}: {_verdict(p)}" + (f" ({p.error})" if p.error else "")
                for p in bad]
    ok = sum(c.status == "ok" for c in record.cases)
    skipped = sum(c.status == "skipped" for c in record.cases)
    out.append(f"{ok}/{len(record.cases)} cases ok" + (f", {skipped} skipped" if skipped else ""))
    out.append(f"artifact: {path}")
    return "\n".join(out)
