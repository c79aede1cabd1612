"""Reference figures: the seeds' file validated at the edge (a bad field is one line naming
file and key, exit 2), carried by a config into its artifact, and shown by the report as
their own rows with measured / reference only where hardware, model, dtype and shape
match (otherwise the reason)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from mibench.harness.cli import app
from mibench.harness.config import load_config
from mibench.harness.config.references import load_references
from mibench.harness.config.yamlsource import ConfigError
from mibench.harness.records import RunRecord, read_artifact
from mibench.harness.report import build_context, render
from mibench.harness.report.references import ratio_table
from mibench.harness.report.tables import rows_of

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT / "configs" / "references" / "seeds.yaml"
DATA = ROOT / "tests" / "data" / "reports"


def test_seeds_file_holds_every_figure_the_seeds_state():
    """Every items/s figure, stated speedup and parity maximum of seeds 000 to 004 (issue
    33's list included), each with its seed, section, engine and statistic."""
    refs = load_references(SEEDS)
    got = {f.id: f.items_per_s for f in refs.figures if f.items_per_s}
    assert {10.34, 52.18, 525.87, 52.27, 105.06, 518.36, 513.06, 112.32, 400.10, 52.17,
            70.13, 66.94, 141.22, 70.16, 1, 70, 52} == set(got.values())
    by = {f.id: f for f in refs.figures}
    assert by["seed000-prefill-extend"].options == {"mask": "dense", "extend_batch_size": 12}
    assert (by["seed001-packed-tp4"].tp, by["seed001-packed-tp8"].tp) == (4, 8)
    oom = by["seed001-batching-turn142-tp1"]
    assert (oom.tp, oom.hardware.chips, oom.approximate) == (1, 4, True) and "OOM" in oom.outcome
    # "Chunk=512" counts items: one chunk of all 500 (configs/references/seeds.yaml's header)
    assert by["seed004-current-peak"].options == {"chunk_size": 512}
    assert by["seed001-parallel-chunks-tp4"].options["chunk_size"] == 32
    pairs = {sp.id: sp.ratio for sp in refs.speedups}
    assert {pairs[k] for k in ("seed000-prefill-extend-vs-packed",
                               "seed000-prefill-extend-vs-single",
                               "seed000-packed-vs-single", "seed002-packed-segment-vs-dense",
                               "seed002-prefill-extend-segment-vs-dense",
                               "seed001-tp4-vs-tp1")} == {10.08, 50.86, 5.05, 2.01, 0.9898, 1.34}
    seed003 = {k: v for k, v in pairs.items() if k.startswith("seed003-")}
    assert len(seed003) == 9 and seed003["seed003-qwen3-4b-n32"] == 3.85
    assert {p.model.shape for p in refs.parity if p.seed == "003"} == {
        "qwen3-0.6b", "qwen3-1.7b", "qwen3-4b"} and len(refs.parity) == 16
    for entry in [*refs.figures, *refs.speedups, *refs.parity]:
        assert entry.seed and entry.section and entry.source_engine and entry.statistic
    peaks = {f.id for f in refs.figures if f.statistic.read_as == "best"}
    assert "seed001-packed-tp4" in peaks and "seed000-prefill-extend" not in peaks
    assert all("dtype" in f.unstated for f in refs.figures)  # no seed states it


def test_every_quote_is_in_its_seed_verbatim():
    """Each entry's `quoted` text appears exactly in the seed report it names (the seeds are
    kept verbatim beside the file); control: a changed digit is not found."""
    refs = load_references(SEEDS)
    texts = {p.name[:3]: p.read_text() for p in (SEEDS.parent / "seeds").glob("*.txt")}
    assert sorted(texts) == ["000", "001", "002", "003", "004"]
    entries = [*refs.figures, *refs.speedups, *refs.parity]
    missing = [e.id for e in entries if e.quoted not in texts[e.seed]]
    assert missing == []
    assert "| Multi-Item Packed | 52.19 |" not in texts["000"]  # the control


def test_a_reference_file_must_say_where_each_entry_comes_from(tmp_path):
    bad = tmp_path / "refs.yaml"
    text = SEEDS.read_text()
    cut = "    statistic: &unstated {said: null, read_as: unstated}\n"
    assert cut in text
    bad.write_text(text.replace(cut, "", 1).replace("statistic: *unstated",
                                                    "statistic: {said: null, read_as: unstated}"))
    with pytest.raises(ConfigError, match="seed000-single: a reference file states statistic"):
        load_references(bad)
    # an artifact's set is read without them (run/2 sets carried none)
    from mibench.harness.records import ReferenceSet

    plain = load_references(SEEDS).model_dump()
    plain["figures"][0]["statistic"] = None
    assert ReferenceSet.model_validate(plain).figures[0].statistic is None


def test_a_missing_file_is_named_as_what_it_is(tmp_path):
    with pytest.raises(ConfigError, match="no such reference-figures file"):
        load_references(tmp_path / "missing.yaml")


@pytest.mark.parametrize("edit,key", [
    (("items_per_s: 10.34", 'items_per_s: "fast"'), "figures.0.items_per_s"),
    (("    mode: single\n", "    mode: single\n    colour: red\n"), "figures.0.colour"),
    (("unstated: [dtype]\n", "unstated: [weather]\n"), "figures.0.unstated.0"),
    (("id: seed000-packed-dense", "id: seed000-single"), "figures"),
])
def test_a_bad_field_is_one_line_naming_file_and_key(tmp_path, edit, key):
    bad = tmp_path / "refs.yaml"
    text = SEEDS.read_text()
    assert edit[0] in text
    bad.write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises(ConfigError) as e:
        load_references(bad)
    assert str(bad) in str(e.value) and f": {key}: " in str(e.value)
    out = CliRunner().invoke(app, ["report", str(DATA / "new.json"), "--references",
                                    str(bad)])
    assert out.exit_code == 2 and len(out.output.strip().splitlines()) == 1
    assert str(bad) in out.output and key in out.output


def _config(tmp_path: Path, refs: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(f"""name: c
model: {{path: "embedded:tiny"}}
workload: {{query_tokens: 8, num_items: 2, item_tokens: 2, label_token_ids: [198]}}
cases: [{{engine: jax, mode: single}}]
references: {refs}
""")
    return path


def test_config_names_a_reference_file_relative_to_itself(tmp_path):
    (tmp_path / "refs").mkdir()
    (tmp_path / "refs" / "s.yaml").write_text(SEEDS.read_text())
    config = load_config(_config(tmp_path, "refs/s.yaml"))
    assert config.references == str((tmp_path / "refs" / "s.yaml").resolve())
    (tmp_path / "refs" / "s.yaml").write_text(SEEDS.read_text().replace("chips: 4",
                                                                        "chips: -4"))
    out = CliRunner().invoke(app, ["validate", str(_config(tmp_path, "refs/s.yaml"))])
    assert out.exit_code == 2 and "s.yaml" in out.output and "hardware.chips" in out.output


@pytest.mark.parametrize("name", ["v6e1.yaml", "v6e1-seeds.yaml", "v6e4.yaml", "v6e8.yaml",
                                  "model-matrix.yaml"])
def test_tpu_configs_carry_the_seeds(name):
    assert Path(load_config(ROOT / "configs" / name).references) == SEEDS.resolve()


def test_artifact_keeps_the_set_as_an_optional_field(tmp_path):
    rec = read_artifact(DATA / "new.json")
    assert rec.references is None  # older artifacts read as they are
    rec.references = load_references(SEEDS)
    path = tmp_path / "a.json"
    path.write_text(rec.to_json())
    back = read_artifact(path)
    assert back.schema_ == "mibench.run/4" and back.references == rec.references
    text = render(build_context([back]))
    assert "## Reference figures" in text and "| seed000-single | seed 000, " in text


def _on_v6e1(rec: RunRecord) -> RunRecord:
    """new.json as if measured on one v6e chip (its tp=1 cases)."""
    out = rec.model_copy(deep=True)
    out.provenance.devices.count = 1
    out.cases = [c for c in out.cases if c.topology.tp == 1]
    return out


def _row(table, ref_id):
    return next(r for r in table.rows if r[0] == ref_id)


def test_ratio_only_when_hardware_model_dtype_and_shape_match():
    rec = _on_v6e1(read_artifact(DATA / "new.json"))
    refs = load_references(SEEDS)
    t = ratio_table([refs], rows_of([rec]))
    col = t.header.index("Measured / reference")
    seg = next(c for c in rec.cases if c.case_id == "jax/packed/mask=segment/tp=1")
    thr = seg.metrics.throughput_items_per_s
    row = _row(t, "seed002-packed-segment")
    # the seed names no statistic: mibench's median and best run, both
    assert row[3] == seg.case_id and row[2] == "median, best"
    assert row[col].startswith(f"{thr.median / 105.06:.2f}x median, "
                               f"{thr.max / 105.06:.2f}x best")
    assert "leans on dtype" in row[col] and row[-1] == ""
    # prefill_extend of new.json runs the segment mask (the default): not seed 000's dense
    assert _row(t, "seed000-prefill-extend")[-1].startswith("no case jax/prefill_extend")
    # controls: each mismatch removes the ratio and says why
    for edit, why in ((lambda r: setattr(r.provenance.devices, "count", 4), "hardware"),
                      (lambda r: setattr(r.provenance.devices, "kind", "TPU v5 lite"),
                       "hardware"),
                      (lambda r: [setattr(c.model, "dtype", "float32") for c in r.cases], "dtype"),
                      (lambda r: [setattr(c.model, "path", "embedded:tiny") for c in r.cases],
                       "model"),
                      (lambda r: [setattr(c, "workload", c.workload.replace(query_tokens=1000))
                                  for c in r.cases],
                       "query_tokens")):
        bad = rec.model_copy(deep=True)
        edit(bad)
        row = _row(ratio_table([refs], rows_of([bad])), "seed002-packed-segment")
        assert row[col] == "-" and why in row[-1], (why, row)


def test_ratio_on_different_item_counts_says_so():
    rec = _on_v6e1(read_artifact(DATA / "new.json"))
    single = next(c for c in rec.cases if c.case_id == "jax/single/tp=1")
    single.workload = single.workload.model_copy(update={"num_items": 64})
    t = ratio_table([load_references(SEEDS)], rows_of([rec]))
    cell = _row(t, "seed000-single")[t.header.index("Measured / reference")]
    thr = single.metrics.throughput_items_per_s
    assert cell.startswith(f"{thr.median / 10.34:.2f}x median, {thr.max / 10.34:.2f}x best "
                           "(N 64 / 500)")


def test_a_peak_is_set_beside_the_best_timed_run():
    """Seed 001's figures are a "Peak Throughput": the ratio is of mibench's best run."""
    rec = _on_v6e1(read_artifact(DATA / "new.json"))
    dense = next(c for c in rec.cases if c.case_id == "jax/packed/mask=dense/tp=1")
    t = ratio_table([load_references(SEEDS)], rows_of([rec]))
    row = _row(t, "seed001-packed-tp1")
    thr = dense.metrics.throughput_items_per_s
    assert thr.max > thr.median  # so the two readings differ
    assert row[2] == "best run" and row[3] == dense.case_id
    assert row[t.header.index("Measured / reference")].startswith(
        f"{thr.max / 52.17:.2f}x best, leans on model")


def test_the_seeds_speedups_beside_mibench_ratios():
    """seed 000's 5.05x (packed dense over single) beside mibench's ratio of its matching
    cases; a side with no case says so."""
    from mibench.harness.report.reference_pairs import speedup_table

    rec = _on_v6e1(read_artifact(DATA / "new.json"))
    t = speedup_table([load_references(SEEDS)], rows_of([rec]))
    row = _row(t, "seed000-packed-vs-single")
    dense = next(c for c in rec.cases if c.case_id == "jax/packed/mask=dense/tp=1")
    single = next(c for c in rec.cases if c.case_id == "jax/single/tp=1")
    a, b = dense.metrics.throughput_items_per_s, single.metrics.throughput_items_per_s
    assert row[2] == "5.05x" and row[5] == f"{dense.case_id} over {single.case_id}"
    assert row[6] == f"{a.median / b.median:.2f}x median, {a.max / b.max:.2f}x best"
    assert row[-1] == "the seed's measurement (machine, model, lengths)"
    bad = rec.model_copy(deep=True)
    for c in bad.cases:
        c.model.dtype = "float32"
    assert "dtype float32, not bfloat16" in _row(speedup_table(
        [load_references(SEEDS)], rows_of([bad])), "seed000-packed-vs-single")[-1]
    assert _row(t, "seed000-prefill-extend-vs-packed")[-1].startswith(
        "no case jax/prefill_extend (mask=dense")


def test_report_option_overrides_the_artifacts_set():
    rec = read_artifact(DATA / "new.json")
    assert build_context([rec])["ref_figures"] is None  # none given, none shown
    ctx = build_context([rec], refs=load_references(SEEDS))
    assert ctx["ref_figures"].rows[0][0] == "seed000-single"
    measured = {r[0] for r in ctx["results"].rows}
    assert not measured & {"seed000-single"}  # never mixed into the measured rows


def test_references_are_for_run_artifacts_only(tmp_path):
    from mibench.harness.records import read_ab

    ab = next(p for p in (ROOT / "artifacts").rglob("ab-*.json"))
    assert read_ab(ab)  # a real A/B artifact
    out = CliRunner().invoke(app, ["report", str(ab), "--references", str(SEEDS)])
    assert out.exit_code == 2 and "--references" in out.output
    plain = CliRunner().invoke(app, ["report", str(ab)])
    assert plain.exit_code == 0, plain.output  # control: the artifact itself reports
