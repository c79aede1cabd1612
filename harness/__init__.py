"""The mibench harness: configs, the case runner, artifacts, provenance, parity and the CLI.

Parse (`config`, `yamlsource`), expand (`matrix`), measure (`runner`, `measure`), summarise
(`stats`, `metrics`), check (`parity`) and store (`records`) are separate modules. Nothing
here imports jax or torch at module level.
"""

SCHEMA = "mibench.run/1"
