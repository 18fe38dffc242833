"""akunu: fast LLM inference. ``akunu.load(path)`` returns a :class:`Model`."""

from .errors import AkunuError, ModelFormatError, UnsupportedModelError
from .model import GenerationResult, GenerationStats, Model, load
from .perplexity import perplexity

__all__ = [
    "AkunuError",
    "ModelFormatError",
    "UnsupportedModelError",
    "GenerationResult",
    "GenerationStats",
    "Model",
    "load",
    "perplexity",
]
__version__ = "0.1.0"
