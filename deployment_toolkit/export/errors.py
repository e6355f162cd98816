"""Conversion errors."""
from ..errors import UserError


class ConversionError(UserError, RuntimeError):
    """The model could not be converted to the format; the message names the cause."""


class FormatUnavailable(ConversionError):
    """The host lacks what the format needs (e.g. TensorRT on a CPU host): a skip, not a failure."""


class VerificationError(ConversionError):
    """The converted model's outputs disagree with the framework's beyond the format's tolerance."""
