"""akunu: fast LLM inference. ``akunu.load(path)`` returns a :class:`Model`."""

from .errors import AkunuError, ModelFormatError, UnsupportedModelError
from .grammar import Grammar
from .model import GenerationResult, GenerationStats, GenerationStream, Model, load
from .sampling import SamplingConfig
from .perplexity import perplexity

__all__ = [
    "AkunuError",
    "ModelFormatError",
    "UnsupportedModelError",
    "GenerationResult",
    "GenerationStats",
    "GenerationStream",
    "Grammar",
    "SamplingConfig",
    "Model",
    "load",
    "perplexity",
]
__version__ = "0.1.0"
