"""Plain functions behind the CLI commands: they return values and raise MibenchError."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from mibench.errors import MibenchError


def run_config(config_path: Path, out: Path, sets: list[str], resume: Path | None,
               engine_repo: Path | None, argv: list[str],
               distributed: tuple = (None, None, None), allow_mixed: bool = False,
               progress: str = "auto", case: str | None = None) -> int:
    """Load, run, print a summary; returns the exit code (0 ok, 3 failures).
    `distributed` is (coordinator, num_processes, process_id) of a multi-process run;
    `progress` the style on stderr (auto, bar, lines, none); `case` a glob on case ids."""
    from mibench.engines import init_distributed, is_writer
    from mibench.harness.config import load_config
    from mibench.harness.config.matrix import expand
    from mibench.harness.report.console import render_summary
    from mibench.harness.run.progress import style
    from mibench.harness.run.runner import artifact_path, exit_code, run, select_cases

    style(progress)  # a bad --progress or --case is exit 2 before anything starts
    config = load_config(config_path, sets)
    select_cases(expand(config), case)
    check_distributed(*distributed)
    try:
        multi_process = init_distributed(*distributed)
    except (RuntimeError, ValueError) as e:  # jax could not join the run
        if isinstance(e, MibenchError):
            raise
        raise MibenchError(f"cannot join the multi-process run: {e}",
                           field="--coordinator") from None
    writer = is_writer()
    folder = Path(resume).parent if resume else Path(out)
    if writer and (resume is None or Path(resume).is_file()):  # else: "no such artifact"
        writable_folder(folder, "--resume" if resume else "--out")
    try:  # a multi-process run's processes score in-process: the mesh spans them
        record = run(config, out, resume=resume, engine_repo=engine_repo, argv=argv,
                     writer=writer, workers=not multi_process, allow_mixed=allow_mixed,
                     progress=progress, case=case)
    except KeyboardInterrupt:
        print("interrupted: the finished cases are in the artifact under "
              f"{resume or out}; continue with --resume ARTIFACT", file=sys.stderr)
        raise
    except OSError as e:  # the artifact's folder went away or became unwritable mid-run
        if not _under(e.filename, folder):
            raise
        raise MibenchError(f"cannot write the artifact ({e.strerror or e}); the run stopped, "
                           "the cases finished before are in the last artifact written",
                           field="--resume" if resume else "--out") from None
    path = Path(resume) if resume else artifact_path(record, out)
    if writer:
        print(render_summary(record, path))
    return exit_code(record)


def writable_folder(folder: Path, flag: str) -> Path:
    """`folder`, made if needed, after proving a file can be written in it; else a
    MibenchError naming `flag` (a file, a folder under a file, no permission)."""
    folder = Path(folder)
    try:
        if folder.exists() and not folder.is_dir():
            raise MibenchError(f"{folder} is a file, not a folder", field=flag)
        parent = folder
        while not parent.exists() and parent.parent != parent:
            parent = parent.parent
        if parent.exists() and not parent.is_dir():
            raise MibenchError(f"{parent} is a file, so {folder} cannot be a folder under it",
                               field=flag)
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise MibenchError(f"cannot write in {folder}: {e.strerror or e}", field=flag) from None
    return folder


def _under(name, folder: Path) -> bool:
    if name is None:
        return False
    try:
        return Path(os.fsdecode(name)).resolve().is_relative_to(folder.resolve())
    except (OSError, ValueError, TypeError):
        return False


def check_distributed(coordinator: str | None, num_processes: int | None,
                      process_id: int | None) -> None:
    """--coordinator HOST:PORT with --num-processes N and --process-id I in [0, N), or none
    of them; else a MibenchError naming the flag."""
    if coordinator is None:
        for flag, value in (("--num-processes", num_processes), ("--process-id", process_id)):
            if value is not None:
                raise MibenchError("goes with --coordinator HOST:PORT", field=flag)
        return
    host, sep, port = coordinator.strip().rpartition(":")
    host = host.removeprefix("[").removesuffix("]")  # [::1]:1234
    if (not sep or not host or any(c.isspace() or c in "/@?#" for c in host)
            or not (port.isascii() and port.isdigit() and len(port) <= 5)
            or not 0 < int(port) < 65536):
        raise MibenchError(f"expected HOST:PORT with a port in 1..65535 (e.g. 10.0.0.1:8476), "
                           f"got {coordinator!r}", field="--coordinator")
    if num_processes is None or num_processes < 1:
        raise MibenchError(f"must be a positive integer with --coordinator, got {num_processes}",
                           field="--num-processes")
    if process_id is None or not 0 <= process_id < num_processes:
        raise MibenchError(f"must be in [0, {num_processes}) with --coordinator, got "
                           f"{process_id}", field="--process-id")


def validate_config(config_path: Path, sets: list[str]) -> str:
    from mibench.harness.config import load_config
    from mibench.harness.config.matrix import expand
    from mibench.harness.report.console import render_cases

    config = load_config(config_path, sets)
    return render_cases(config, expand(config))


MAX_REQUEST_BYTES = 64 * 1024**2
MAX_ID_DIGITS = 12


def parse_ids(text: str, flag: str, text_flag: str | None = None) -> list[int]:
    """`1,2,3` (or `[1, 2, 3]`) as token ids; anything else is a MibenchError naming
    `flag` (`1,,2`, `1.5`, `1,2,`, `-3`, `abc`), never silently text."""
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1].strip()
    hint = f"; text goes in {text_flag}" if text_flag else ""
    if not body:
        raise MibenchError(f"is empty: expected token ids like 1,2,3{hint}", field=flag)
    ids = []
    for j, part in enumerate(body.split(",")):
        part = part.strip()
        if not part:
            raise MibenchError(f"{text!r} has an empty id at position {j}: expected token ids "
                               f"like 1,2,3{hint}", field=flag)
        if not (part.isascii() and part.isdigit()) or len(part) > MAX_ID_DIGITS:
            raise MibenchError(f"{part!r} (position {j}) is not a token id (an integer >= 0):"
                               f" expected ids like 1,2,3{hint}", field=flag)
        ids.append(int(part))
    return ids


def _options(options: list[str]) -> dict:
    from mibench.harness.config.yamlsource import load_yaml

    out = {}
    for opt in options:
        key, eq, value = opt.partition("=")
        if not eq or not key.strip():
            raise MibenchError(f"expected key=value, got {opt!r}", field="--option")
        out[key.strip()] = load_yaml(value, f"--option {key.strip()}")[0]
    return out


def read_request_file(path: Path) -> tuple:
    """(query, items) of a JSON request file, validated (workloads.request.RequestModel)."""
    from mibench.workloads.request import parse_request

    where = f"--request {path}"
    path = Path(path)
    try:
        if path.is_dir():
            raise MibenchError("is a folder, not a JSON file", field=where)
        if not path.is_file():
            raise MibenchError("no such file", field=where)
        if path.stat().st_size > MAX_REQUEST_BYTES:
            raise MibenchError(f"is larger than {MAX_REQUEST_BYTES} bytes", field=where)
        data = json.loads(path.read_bytes())
    except OSError as e:
        raise MibenchError(f"cannot read: {e.strerror or e}", field=where) from None
    except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError
        if isinstance(e, MibenchError):
            raise
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise MibenchError(f"not JSON: {first}", field=where) from None
    req = parse_request(data, where)
    return req.query, list(req.items)


def _request(query_ids, query_text, item_ids, item_text, request: Path | None) -> tuple:
    """(query, items) from exactly one source: --request FILE, or a --query-* flag and
    --item-* flags (token ids and text are separate flags; items are not mixed)."""
    flags = [f for f, v in (("--query-ids", query_ids), ("--query-text", query_text),
                            ("--item-ids", item_ids), ("--item-text", item_text)) if v]
    if request is not None:
        if flags:
            raise MibenchError(f"give --request FILE or {flags[0]}, not both", field="--request")
        return read_request_file(request)
    if query_ids is not None and query_text is not None:
        raise MibenchError("give --query-ids or --query-text, not both", field="--query-text")
    if query_ids is None and query_text is None:
        raise MibenchError("missing: give --query-ids 1,2,3 or --query-text TEXT (or "
                           "--request FILE)", field="--query-ids")
    if item_ids and item_text:
        raise MibenchError("items are all token ids (--item-ids) or all text (--item-text), "
                           "not mixed", field="--item-text")
    if not item_ids and not item_text:
        raise MibenchError("missing: give at least one --item-ids 4,5 or --item-text TEXT",
                           field="--item-ids")
    if query_ids is not None:
        query = parse_ids(query_ids, "--query-ids", "--query-text")
    elif not query_text:
        raise MibenchError("is empty", field="--query-text")
    else:
        query = query_text
    if item_ids:
        items = [parse_ids(i, "--item-ids", "--item-text") for i in item_ids]
    else:
        empty = [n for n, t in enumerate(item_text) if not t]
        if empty:
            raise MibenchError(f"item {empty[0]} is empty", field="--item-text")
        items = list(item_text)
    return query, items


def score_request(*, query_ids=None, query_text=None, item_ids=None, item_text=None,
                  request=None, labels: str, model: str, engine: str, mode: str, dtype: str,
                  tp: int, delimiter, softmax: bool, options: list[str],
                  semantics: str | None = None) -> dict:
    """Score one request given on the command line. Everything that can be checked
    without the model's weights is checked before they load: the request, the labels,
    the engine, mode and options, the model (a known preset or a checkpoint folder)."""
    from mibench.engines import load_engine, model_facts

    q, its = _request(query_ids, query_text, item_ids, item_text, request)
    label_ids = parse_ids(labels, "--labels")
    opts = _options(options)
    modes = engine_modes_or_error(engine)
    if mode not in modes:
        raise MibenchError(f"unknown mode {mode!r} for engine {engine} (known: "
                           f"{', '.join(modes)})", field="--mode")
    try:
        modes[mode].check(opts)
    except MibenchError as e:
        raise MibenchError(str(e), field="--option") from None
    try:
        modes[mode].check_semantics(semantics, delimiter)
    except MibenchError as e:  # names `semantics`, or `delimiter` for a packing mode
        raise MibenchError(str(e).removeprefix(f"{e.field}: "), field=f"--{e.field}") from None
    facts = model_facts(model)
    _check_memory(modes[mode], opts, q, its, delimiter, facts, dtype)
    eng = load_engine(engine, model=model, dtype=dtype, tp=tp)
    extra = {} if semantics is None else {"semantics": semantics}
    result = eng.score(q, its, label_ids, mode=mode, apply_softmax=softmax,
                       delimiter=delimiter, **extra, **opts)
    return {"engine": engine, "model": model, "mode": mode, "dtype": dtype,
            "num_tokens": result.num_tokens, "scores": result.scores}


def _check_memory(mode, opts: dict, query, items, delimiter, facts=None,
                  dtype: str = "float32") -> None:
    """Refuse a request whose memory (`Mode.host_bytes` with the model's facts: the host
    parts and the device working set, which on a CPU is host memory too; text counted a
    token a byte, the most a byte-level tokenizer makes) is more than this machine has."""
    from mibench.engines import Shape
    from mibench.harness.config.checks import HARD_LIMIT, gib, host_memory

    def length(x) -> int:
        return len(x.encode("utf-8", "surrogatepass")) if isinstance(x, str) else len(x)

    prefix = length(query) + (delimiter is not None)
    lengths = [length(i) for i in items]
    shape = Shape(prefix, len(items), sum(lengths) / len(items), longest=max(lengths),
                  model=facts, dtype=dtype)
    parts = mode.host_bytes(shape, opts)
    ram, source = host_memory()
    limit = min(ram or HARD_LIMIT, HARD_LIMIT)
    if sum(parts.values()) > limit:
        shown = ", ".join(f"{name} {gib(n)}" for name, n in parts.items())
        raise MibenchError(f"needs at least {gib(sum(parts.values()))} of host memory "
                           f"({shown}), more than {gib(limit)} ({source})", field="--mode")


def engine_modes_or_error(engine: str) -> dict:
    from mibench.engines import MODES

    if engine not in MODES:
        raise MibenchError(f"unknown engine {engine!r} (known: {', '.join(MODES)})",
                           field="--engine")
    return MODES[engine]


def environment(with_peak: bool) -> dict:
    from mibench.engines import env_info
    from mibench.harness.run.peak import PeakTable
    from mibench.harness.run.provenance import host_info, package_versions

    info = env_info()
    info["packages"] = package_versions()
    info["host"] = host_info()
    if with_peak:
        d = info.get("devices", {})
        table = PeakTable(d.get("platform"), d.get("kind"))
        info["peak_flops"] = {dt: table(dt) for dt in ("float32", "bfloat16")}
        info["peak_source"] = table.source
    return info
