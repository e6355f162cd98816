"""Converters (TorchScript trace/script, ONNX, TensorRT) and verification against the framework."""
from .convert import ConvertOptions, convert, copy_artifact, verify_artifact
from .errors import ConversionError, FormatUnavailable, VerificationError

__all__ = ["ConvertOptions", "convert", "copy_artifact", "verify_artifact", "ConversionError", "FormatUnavailable",
           "VerificationError"]
