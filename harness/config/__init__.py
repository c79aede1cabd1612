"""Configs: YAML read with locations (`yamlsource`), validated into typed models (`spec`,
built from the mode registry), expanded into cases (`matrix`), all at the edge (`load`)."""

from mibench.harness.config.load import load_config
from mibench.harness.config.matrix import CaseSpec, RunPlan, expand
from mibench.harness.config.spec import Config
from mibench.harness.config.yamlsource import ConfigError

__all__ = ["CaseSpec", "Config", "ConfigError", "RunPlan", "expand", "load_config"]
