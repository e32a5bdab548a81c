"""Old path of viz_core.pretrained.head_analysis, kept because the public API names it (docs/api.md)."""
import sys

from .pretrained import head_analysis as _module

sys.modules[__name__] = _module
