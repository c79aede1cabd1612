"""The cases of artifacts as a pandas DataFrame, for notebooks (pandas: the optional `frame`
extra, `pip install 'mibench[frame]'`, imported here only when called)."""

from __future__ import annotations

from pathlib import Path

from mibench.errors import MibenchError

from .rows import COLUMNS, case_rows


def cases_frame(artifacts):
    """One row per case and timed run of every artifact (paths, a folder of them, or
    RunRecords; each run once), with its commit, config, workload, hardware and metrics
    (`rows.COLUMNS`).

        >>> from mibench.harness.report.exporters.frame import cases_frame
        >>> df = cases_frame("artifacts/cpu")
        >>> df.groupby(["commit", "case_id"]).items_per_s.median()
    """
    try:
        import pandas as pd
    except ImportError:
        raise MibenchError("needs pandas: pip install 'mibench[frame]' (or pandas)",
                           field="cases_frame") from None
    return pd.DataFrame(case_rows(_records(artifacts)), columns=COLUMNS)


def _records(artifacts) -> list:
    """The run records of `artifacts`, each run once (harness.judge.duplicates)."""
    from ...judge.duplicates import unique_runs
    from ...judge.history import load_dir
    from ...records import RunRecord, read_artifact

    if isinstance(artifacts, str | Path):
        artifacts = [artifacts]
    out, names = [], []
    for a in artifacts:
        if isinstance(a, RunRecord):
            out.append(a)
            names.append(None)
        elif Path(a).is_dir():
            got = load_dir(a).records
            out += got
            names += [None] * len(got)
        else:
            out.append(read_artifact(a))
            names.append(a)
    return unique_runs(out, names)[0]
