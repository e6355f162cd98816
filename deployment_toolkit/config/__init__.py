"""The typed configuration: fixed choices as enums, settings fields that carry their own flag, unit and range."""
from .enums import Choice, Format, Objective, OnnxExporter, Precision, Protocol, SharedMemory
from .fields import Flag, add_arguments, check_number, check_numbers, flag_of, from_args, setting

__all__ = ["Choice", "Format", "Objective", "OnnxExporter", "Precision", "Protocol", "SharedMemory", "Flag",
           "add_arguments", "check_number", "check_numbers", "flag_of", "from_args", "setting"]
