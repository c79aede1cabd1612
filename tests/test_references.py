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


def test_seeds_file_holds_the_seeds_figures():
    """The figures the seed reports publish (seeds 000, 001, 002, 004), each with its source."""
    refs = load_references(SEEDS)
    got = {f.id: f.items_per_s for f in refs.figures}
    assert got == {"seed000-single": 10.34, "seed000-packed-dense": 52.18,
                   "seed002-packed-segment": 105.06, "seed000-prefill-extend": 525.87,
                   "seed001-parallel-chunks-tp4": 141.22, "seed001-pytorch-rtx6000": 400.10}
    by = {f.id: f for f in refs.figures}
    assert by["seed000-prefill-extend"].options == {"mask": "dense", "extend_batch_size": 12}
    assert by["seed001-parallel-chunks-tp4"].tp == 4
    assert all(f.source.startswith("seed 00") for f in refs.figures)
    assert all("dtype" in f.unstated for f in refs.figures)  # no seed states it


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


@pytest.mark.parametrize("name", ["v6e1.yaml", "v6e1-seeds.yaml", "v6e4.yaml"])
def test_tpu_configs_carry_the_seeds(name):
    assert Path(load_config(ROOT / "configs" / name).references) == SEEDS.resolve()


def test_artifact_keeps_the_set_as_an_optional_field(tmp_path):
    rec = read_artifact(DATA / "new.json")
    assert rec.references is None  # older artifacts read as they are
    rec.references = load_references(SEEDS)
    path = tmp_path / "a.json"
    path.write_text(rec.to_json())
    back = read_artifact(path)
    assert back.schema_ == "mibench.run/3" and back.references == rec.references
    text = render(build_context([back]))
    assert "## Reference figures" in text and "| seed000-single | jax/single |" in text


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
    want = seg.metrics.throughput_items_per_s.median / 105.06
    row = _row(t, "seed002-packed-segment")
    assert row[2] == seg.case_id and row[col].startswith(f"{want:.2f}x")
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
                      (lambda r: [setattr(c.workload, "query_tokens", 1000) for c in r.cases],
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
    want = single.metrics.throughput_items_per_s.median / 10.34
    assert cell.startswith(f"{want:.2f}x (N 64 / 500)")


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
