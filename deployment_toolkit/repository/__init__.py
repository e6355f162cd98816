"""Model repository: Triton configs (ModelConfig protobuf) and the on-disk layout."""
from .config import ConfigError, ConfigOptions, HostMismatchWarning, build_config, parse_text, read_config, to_text
from .layout import write_model
from .names import ModelNameError, check_model_name

__all__ = ["ConfigError", "ConfigOptions", "HostMismatchWarning", "ModelNameError", "check_model_name", "build_config", "parse_text", "read_config",
           "to_text", "write_model"]
