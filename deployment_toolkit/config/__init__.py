"""The typed configuration: fixed choices as enums, settings fields that carry their own flag, unit and range."""
from .enums import (Choice, Format, InstanceKind, LoadMode, Objective, OnnxExporter, PipelineLayout, Precision,
                    Protocol, Reuse, SharedMemory, StepStatus)
from .fields import Flag, add_arguments, check_number, check_numbers, flag_of, from_args, setting
from .load import Concurrency, Load, RequestRate, Schedule, is_open_loop

__all__ = ["Choice", "Format", "InstanceKind", "LoadMode", "Objective", "OnnxExporter", "PipelineLayout", "Precision",
           "Protocol", "Reuse", "SharedMemory", "StepStatus", "Flag", "add_arguments", "check_number", "check_numbers",
           "flag_of", "from_args", "setting", "Concurrency", "Load", "RequestRate", "Schedule", "is_open_loop"]
