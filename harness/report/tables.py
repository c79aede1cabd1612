"""Per-row report tables: results matrix, parity, run-to-run spread, environment, commands."""

from __future__ import annotations

import dataclasses
import statistics

from ..case_kinds import kind_of
from ..judge.comparable import label
from ..records import CaseRecord, ParityCheck, RunRecord
from ..records.summaries import median
from . import fmt
from .fmt import Table
from .repro import command, config_args
from .resources import TIMED_MARK, TIMED_NOTE

TAIL_FACTOR = 1.5  # a timed run slower than 1.5x the case's median is a tail pause


@dataclasses.dataclass(frozen=True)
class Row:
    """One case of one artifact; `run` is the artifact's unique label in this report."""

    record: RunRecord
    case: CaseRecord
    run: str

    @property
    def items(self) -> int | None:
        return self.case.workload.num_items


def unique_labels(records: list[RunRecord]) -> list[str]:
    """Short commits; when two artifacts share one, the config name is added, then `#n`."""
    labels = [label(r) for r in records]
    if len(set(labels)) < len(labels):
        labels = [f"{lab} {r.config.get('name')}" if labels.count(lab) > 1 else lab
                  for lab, r in zip(labels, records, strict=True)]
    return [f"{lab}#{i + 1}" if labels.count(lab) > 1 else lab for i, lab in enumerate(labels)]


def rows_of(records: list[RunRecord]) -> list[Row]:
    return [Row(r, c, lab) for r, lab in zip(records, unique_labels(records), strict=True)
            for c in r.cases]


def _distinct(rows: list[Row], key) -> int:
    return len({key(r) for r in rows})


CONSTANT = ["Hardware", "Commit", "Engine", "Options", "Model", "TP", "Items", "Peak mem",
            "Status"]  # lifted above the results matrix when one value on every row


def peak_note(records: list[RunRecord]) -> str:
    """The peak FLOP/s each artifact's MFU divides by, and where it came from."""
    parts = []
    for lab, r in zip(unique_labels(records), records, strict=True):
        d = r.provenance.devices
        value = ", ".join(f"{k} {fmt.flops(v)}" for k, v in sorted(d.peak_flops.items()))
        where = f"{lab}: " if len(records) > 1 else ""
        parts.append(f"{where}{value or 'unknown, so MFU is unknown'}"
                     + (f" ({d.peak_source})" if d.peak_source else ""))
    return "; ".join(dict.fromkeys(parts))


def results_matrix(rows: list[Row]) -> Table:
    """Hardware, engine, mode and options, topology, items/s, latency per item, compile
    time, MFU, peak memory, status (the seeds' matrix plus the harness's); a column with one
    value on every row is said once above the table (`Table.facts`)."""
    many_runs = _distinct(rows, lambda r: r.run) > 1
    many_models = _distinct(rows, lambda r: fmt.model_label(r.case)) > 1
    header = (["Hardware"] + (["Commit"] if many_runs else []) + ["Engine", "Mode", "Options"]
              + (["Model"] if many_models else []) + ["TP", "Items"])
    align = ["l"] * len(header)
    header += ["Items/s", "Latency/item (ms)", "Compile (s)", "MFU", "Peak mem", "Status"]
    align += ["r"] * 5 + ["l"]
    out = []
    for r in rows:
        c, m = r.case, r.case.metrics
        cells = [fmt.hardware(r.record)] + ([r.run] if many_runs else []) + [
            c.engine, c.mode, fmt.options(c)] + ([fmt.model_label(c)] if many_models else [])
        cells += [str(c.topology.tp), str(r.items) if r.items else "-"]
        marked = f" {TIMED_MARK}" if m.timed_compiles else ""
        cells += [fmt.num(median(m.throughput_items_per_s)),
                  fmt.num(median(m.latency_per_item_ms)), fmt.num(c.compile_s),
                  fmt.mfu(m.mfu), fmt.peak(m.peak_memory_bytes, m.peak_memory_source),
                  fmt.status(c) + marked]
        out.append(cells)
    records = list({id(r.record): r.record for r in rows}.values())
    note = ("Medians over the timed runs; MFU = useful FLOPs / (median time x peak), peak "
            f"{peak_note(records)}.")
    note += "".join(dict.fromkeys(kind_of(r.case.engine).results_note for r in rows))
    if any(r.case.metrics.timed_compiles for r in rows):
        note += f" {TIMED_NOTE}"
    return Table(header, out, align, note=note).lift_constant(CONSTANT)


def _parity_measures(c: ParityCheck, logs: bool) -> list[str]:
    """The number cells: (the log difference,) differences and tolerance, or a speedup and
    its minimum."""
    value = getattr(c, "max_log_diff", None)  # 3 digits: 1.05e-06 against 1e-06 shows
    spread = getattr(c, "spread", None)  # degenerate (scores): must exceed the tolerance
    cell = f"{value:.3g}" if value is not None else f"spread {spread:.3g}" \
        if spread is not None else "-"
    log = [cell] if logs else []
    if c.check == "speedup":
        return log + [f"{fmt.times(c.speedup)} ({fmt.num(c.throughput_items_per_s)} vs "
                      f"{fmt.num(c.against_throughput_items_per_s)} items/s)", "-", "-",
                      f">= {fmt.times(c.tolerance)}"]
    abs_tol = getattr(c, "abs_tolerance", None)
    beyond = "> " if getattr(c, "check", None) == "degenerate" else ""  # must move past it
    return log + [fmt.sci(c.max_abs_diff), fmt.sci(c.mean_abs_diff), fmt.sci(c.max_rel_diff),
                  beyond + fmt.sci(c.tolerance) + (f", abs {fmt.sci(abs_tol)}" if abs_tol
                                                   else "")]


def parity_table(records: list[RunRecord], passed: bool | None = None) -> Table | None:
    """Every parity check (`passed` None), or only those that passed (True) or did not
    (False); None when there are none. With log differences recorded (the checks judge log
    scores), they come first and the tolerance is theirs."""
    labels = unique_labels(records)
    many = len(records) > 1
    checks = [(rec, lab, c) for rec, lab in zip(records, labels, strict=True)
              for c in (rec.parity.checks if rec.parity else [])]
    logs = any(getattr(c, "max_log_diff", None) is not None for _, _, c in checks)
    out, speedups = [], False
    for _, lab, c in checks:
        if passed is not None and c.passing != passed:
            continue
        status = c.status if c.passing else f"**{c.status.upper()}**"
        if c.exempt:
            status += f" `{fmt.first_line(c.exempt)}`"
        if c.error:
            status += f" `{fmt.first_line(c.error)}`"
        speedups |= c.check == "speedup"
        out.append(([lab] if many else []) + [
            c.check + (f" ({c.variant})" if c.variant else ""), c.case_id, c.against,
            *_parity_measures(c, logs), status])
    if not out:
        return None
    header = (["Commit"] if many else []) + ["Check", "Case", "Against"] + (
        ["Max abs ln diff"] if logs else []) + [
        "Max abs diff" + (" / speedup" if speedups else ""), "Mean abs diff", "Max rel diff",
        "Tolerance" + (" / minimum" if speedups else ""), "Status"]
    align = ["l"] * (4 if many else 3) + ["r"] * (5 if logs else 4) + ["l"]
    note = ("speedup: the case's median items/s over `Against`'s (measured by the cases, "
            "not on the parity workload), at least the minimum.") if speedups else None
    return Table(header, out, align, note=note)


def tail_pauses(times_s: list[float], factor: float = TAIL_FACTOR) -> list[int]:
    """Indices of runs slower than `factor` x the median run."""
    if len(times_s) < 2:
        return []
    med = statistics.median(times_s)
    return [i for i, t in enumerate(times_s) if t > factor * med]


def spread_table(rows: list[Row]) -> tuple[Table | None, int]:
    """Run-to-run spread of every case with two or more timed runs; (table, tail pauses)."""
    out, pauses = [], 0
    many = _distinct(rows, lambda r: r.run) > 1
    for r in rows:
        t = r.case.metrics.total_s
        if r.case.status != "ok" or t is None or t.n < 2:
            continue
        slow = tail_pauses(r.case.timed_s)
        pauses += len(slow)
        flagged = ", ".join(f"run {i + 1}: {r.case.timed_s[i]:.3g} s "
                            f"({r.case.timed_s[i] / t.median:.1f}x)" for i in slow)
        out.append(([r.run] if many else []) + [
            r.case.case_id, str(t.n), fmt.num(t.median, 3), fmt.num(t.min, 3),
            fmt.num(t.max, 3), f"{t.stdev / t.mean:.1%}" if t.mean else "-",
            f"{t.max / t.median:.2f}x", f"**{flagged}**" if flagged else "-"])
    if not out:
        return None, 0
    header = (["Commit"] if many else []) + ["Case", "Runs", "Median (s)", "Min (s)",
                                             "Max (s)", "CV", "Max/median", "Tail pauses"]
    align = ["l"] * (2 if many else 1) + ["r"] * 6 + ["l"]
    return Table(header, out, align, note=f"A tail pause is a timed run slower than "
                 f"{TAIL_FACTOR}x the case's median."), pauses


def batch_table(rows: list[Row]) -> Table | None:
    """Per case with a synced batch pass (`batch_s`): its batches' p50, p99 and max wall
    time, max over p50, and the batches slower than TAIL_FACTOR x the median batch."""
    out = []
    many = _distinct(rows, lambda r: r.run) > 1
    for r in rows:
        b, times = r.case.metrics.batch_ms, r.case.batch_s
        if b is None or not times:
            continue
        slow = tail_pauses(times)
        flagged = ", ".join(f"batch {i + 1}: {1000 * times[i]:.3g} ms" for i in slow[:5])
        flagged += f" (+{len(slow) - 5} more)" if len(slow) > 5 else ""
        out.append(([r.run] if many else []) + [
            r.case.case_id, str(b.n), fmt.num(b.p50_ms, 3), fmt.num(b.p99_ms, 3),
            fmt.num(b.max_ms, 3), f"{b.max_ms / b.p50_ms:.2f}x" if b.p50_ms else "-",
            f"**{flagged}**" if flagged else "-"])
    if not out:
        return None
    header = (["Commit"] if many else []) + ["Case", "Batches", "p50 (ms)", "p99 (ms)",
                                             "Max (ms)", "Max/p50", "Slow batches"]
    return Table(header, out, ["l"] * (2 if many else 1) + ["r"] * 5 + ["l"],
                 title="Batches, one synced pass after the timed runs",
                 note="Each batch of the mode (prefill_extend's extend batches, with a dense "
                      "mask its host build and copy included) timed on its own, synced before "
                      "the next starts, in one pass after the timed runs (the sync points would "
                      f"change the timed runs). A slow batch takes over {TAIL_FACTOR}x the "
                      "median batch: a tail pause as a number. The last batch of a request "
                      "may be padded to a smaller size.")


def case_commits(record: RunRecord) -> str:
    """The commits the cases were measured at, when a resumed run mixed them (else `-`)."""
    counts: dict[str, int] = {}
    for c in record.cases:
        if c.commit:
            key = c.commit[:8] + ("+" if c.dirty else "")
            counts[key] = counts.get(key, 0) + 1
    if len(counts) < 2:
        return "-"
    return "MIXED: " + ", ".join(f"{k} ({n} cases)" for k, n in counts.items())


def environment_table(records: list[RunRecord]) -> Table:
    """One column per artifact: where and how it ran."""
    fields: list[tuple[str, callable]] = [
        ("Run id", lambda r: r.run_id), ("Config", lambda r: f"{r.config.get('name')} "
                                                             f"(sha256 {r.config_sha256[:12]})"),
        ("Started", lambda r: r.started_at), ("Finished", lambda r: r.finished_at or "partial"),
        ("Commit", lambda r: r.provenance.git.commit or "-"),
        ("Branch", lambda r: r.provenance.git.branch or "-"),
        ("Dirty", lambda r: {True: "yes", False: "no"}.get(r.provenance.git.dirty, "-")),
        ("Case commits", case_commits),
        ("Engine repo", lambda r: (r.provenance.engine_repo.commit or "-")
         if r.provenance.engine_repo else "-"),
        ("Devices", lambda r: f"{r.provenance.devices.platform} / {r.provenance.devices.kind} "
                              f"x{r.provenance.devices.count}"),
        ("Peak FLOP/s", lambda r: ", ".join(f"{k} {fmt.flops(v)}" for k, v in
                                            r.provenance.devices.peak_flops.items()) +
         (f" ({r.provenance.devices.peak_source})" if r.provenance.devices.peak_source else "")),
        ("Host", lambda r: " ".join(str(v) for v in r.provenance.host.values() if v)),
        ("Python", lambda r: r.provenance.python),
        ("Environment", lambda r: " ".join(f"{k}={v}" for k, v in r.provenance.env.items())),
        ("Command", lambda r: " ".join(r.provenance.argv))]
    packages = sorted({k for r in records for k in r.provenance.packages})
    fields += [(name, lambda r, n=name: r.provenance.packages.get(n) or "-") for name in packages]
    body = [[name] + [str(get(r)) or "-" for r in records] for name, get in fields]
    body = [row for row in body if row[0] != "Case commits" or set(row[1:]) != {"-"}]
    return Table(["Field"] + unique_labels(records), body,
                 title=f"Environment ({len(body)} fields)")


def repro_table(rows: list[Row]) -> Table:
    many = _distinct(rows, lambda r: r.run) > 1
    body = [([r.run] if many else []) + [r.case.case_id, f"`{command(r.record, r.case)}`"]
            for r in rows]
    note = "Each command runs one case of the config, selected by its id (parity checks off)."
    records = {id(r.record): r.record for r in rows}.values()
    if any(config_args(rec)[2] for rec in records):  # the run's multi-process options
        note += " A multi-process run: start its command on every host, each with its own " \
                "`--process-id`."
    return Table((["Commit"] if many else []) + ["Case", "Command"], body, note=note)
