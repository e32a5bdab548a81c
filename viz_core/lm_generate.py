"""Old path of viz_core.lm.generate, kept because the public API names it (docs/api.md)."""
import sys

from .lm import generate as _module

sys.modules[__name__] = _module
