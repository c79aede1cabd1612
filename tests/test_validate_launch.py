"""`mibench validate` refuses every launch and http value that `run` would fail on (before:
a bare ValueError or OverflowError mid-run), each as one line naming the key; repeated
label ids are refused the same way everywhere (serve refused them, everything else took
them, so an http case with [198, 198] validated and then every request was a 400)."""

from __future__ import annotations

import sys

import pytest
from typer.testing import CliRunner

from mibench.engines import InputError, load_engine
from mibench.harness.cli import app
from mibench.harness.config import ConfigError, load_config
from mibench.harness.testing import error_line, write_config

HEAD = """name: v
model: {path: "embedded:tiny"}
workload: {query_tokens: 8, num_items: 2, item_tokens: 2, label_token_ids: [198]}
cases:
"""
LAUNCH = '{engine: http, mode: single, clients: 1, launch: {command: ["{python}", "{port}"]'


@pytest.mark.parametrize("case,key,words", [
    (LAUNCH + ', env: {"A=B": "1"}}}', "cases.0.launch.env", "'A=B' is not a variable name"),
    (LAUNCH + ', env: {"": "1"}}}', "cases.0.launch.env", "'' is not a variable name"),
    (LAUNCH + ', env: {A: "x\\0y"}}}', "cases.0.launch.env", "NUL byte"),
    ('{engine: http, mode: single, clients: 1, launch: {command: ["{python}", "a\\0b", '
     '"{port}"]}}', "cases.0.launch.command", "item 1 holds a NUL byte"),
    ('{engine: http, mode: single, clients: 1, launch: {command: ["{python}", '
     '"--port={port:s}"]}}', "cases.0.launch.command", "{port:s} takes no conversion"),
    ('{engine: http, mode: single, clients: 1, launch: {command: ["{python!r}", '
     '"{port}"]}}', "cases.0.launch.command", "{python!r} takes no conversion"),
    (LAUNCH + ', python: "/usr/bin/py\\0thon"}}', "cases.0.launch.python", "NUL byte"),
    (LAUNCH + ', ready: {path: "/he alth"}}}', "cases.0.launch.ready.path", "pattern"),
    (LAUNCH + ', ready: {timeout_s: 1.0e+300}}}', "cases.0.launch.ready.timeout_s",
     "less than or equal to 1000000"),
    (LAUNCH + ', stop: {grace_s: 1.0e+12}}}', "cases.0.launch.stop.grace_s",
     "less than or equal"),
    (LAUNCH + '}, server_args: {x: "a\\0b"}}', "cases.0.server_args", "NUL byte"),
    ('{engine: http, mode: single, base_url: "http://127.0.0.1:1", rate: 1.0e-300}',
     "cases.0.rate", "greater than or equal to 0.000277"),
    ('{engine: http, mode: single, base_url: "http://127.0.0.1:1", clients: 1, '
     'timeout_s: 1.0e+300}', "cases.0.timeout_s", "less than or equal to 1000000"),
    ('{engine: http, mode: single, base_url: "http://127.0.0.1:1", clients: 1, '
     'workload: {label_token_ids: [198, 198]}}', "label_token_ids",
     "holds token id 198 twice"),
    ('{engine: jax, mode: single, workload: {label_token_ids: [5, 9, 5]}}',
     "label_token_ids", "holds token id 5 twice"),
])
def test_validate_refuses_what_run_would_fail_on(tmp_path, case, key, words):
    path = tmp_path / "c.yaml"
    path.write_text(HEAD + f"  - {case}\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert key in str(e.value) and words in str(e.value), str(e.value)
    out = CliRunner().invoke(app, ["validate", str(path)])
    assert out.exit_code == 2 and key in error_line(out), out.output


@pytest.mark.parametrize("field,value,words", [
    ("cwd", "/no/such/folder", "/no/such/folder is not a folder here"),
    ("python", "/no/such/python", "/no/such/python is not an executable file here"),
])
def test_validate_refuses_a_folder_or_interpreter_that_is_not_here(tmp_path, field, value,
                                                                   words):
    path = write_config(tmp_path, HEAD + f"  - {LAUNCH}, {field}: {value}}}}}\n")
    with pytest.raises(ConfigError, match=f"cases.0.launch.{field}: .*{words}"):
        load_config(path)


def test_what_validate_takes_runs(tmp_path):
    """Control: the same launch with sound values validates (an interpreter on PATH by
    name, this one by path, this folder)."""
    for python in ("python3", sys.executable):
        path = write_config(tmp_path, HEAD + f'  - {LAUNCH}, python: {python}, cwd: '
                            f'{tmp_path}, env: {{A: "1"}}, ready: {{timeout_s: 600}}}}, '
                            'rate: 0.5}\n'.replace("clients: 1, ", ""))
        assert load_config(path).cases[0].launch.python == python


def test_every_engine_refuses_a_repeated_label(jax_tiny):
    with pytest.raises(InputError, match="^label_token_ids: holds token id 198 twice"):
        jax_tiny.score([1, 2, 3], [[4], [5]], [198, 198])
    torch = load_engine("torch", model="embedded:tiny")
    with pytest.raises(InputError, match="^label_token_ids: holds token id 7 twice"):
        torch.score([1, 2, 3], [[4]], [7, 8, 7])
    out = CliRunner().invoke(app, ["score", "--model", "embedded:tiny", "--query-ids", "1,2",
                                   "--item-ids", "3", "--labels", "9,9"])
    assert out.exit_code == 2 and "holds token id 9 twice" in out.stderr, out.output
