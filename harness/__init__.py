"""The mibench harness, in layers (lowest first; a package imports only its own layer and
those below it: tests/test_layering.py):

    util      git, time stamps, sizes
    records   the artifacts: versioned pydantic records, read and written atomically
    stats     pure statistics: summaries, significance, comparisons, history
    config    YAML with locations -> a typed Config -> expanded cases, checked at the edge
    run       measuring: the plan, the runner, workers, the one timing loop, parity
    serve     `mibench serve`: the JAX engine behind an SGLang-compatible /v1/score
    report    Markdown, plots and exports of artifacts
    ab        two revisions measured in interleaved rounds, bisect
    jobs      prepared jobs, one module each (`mibench job --help` lists them)
    testing   the fake engine of the harness's tests
    commands  one module per `mibench` command (the Typer function and its plain function)
    cli       the app, assembled

Nothing here imports jax or torch at module level.
"""
