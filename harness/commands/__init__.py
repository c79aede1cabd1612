"""The command layer: one module per `mibench` command, each holding its Typer function
(which only parses arguments) and the plain function it calls (which returns a value or an
exit code, and raises MibenchError for bad input); `common` holds what several share (the
one-line error policy, option types, folders, thresholds, case selection). harness/cli.py
only assembles them. Nothing below this layer imports it (tests/test_layering.py).
"""
