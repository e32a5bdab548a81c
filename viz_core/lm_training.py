"""Old path of viz_core.lm.training, kept because the public API names it (docs/api.md)."""
import sys

from .lm import training as _module

sys.modules[__name__] = _module
