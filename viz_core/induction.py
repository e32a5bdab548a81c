"""Old path of viz_core.lm.induction, kept because the public API names it (docs/api.md)."""
import sys

from .lm import induction as _module

sys.modules[__name__] = _module
