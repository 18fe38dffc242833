"""Exceptions raised by akunu. Every failure of the native core arrives as one of these."""


class AkunuError(Exception):
    """Base class for every akunu error."""


class ModelFormatError(AkunuError):
    """The model file is malformed, truncated or internally inconsistent."""


class UnsupportedModelError(AkunuError):
    """The file is valid but asks for an architecture, dtype or feature akunu does not implement."""
