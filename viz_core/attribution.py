"""Old path of viz_core.pretrained.attribution, kept because the public API names it (docs/api.md)."""
import sys

from .pretrained import attribution as _module

sys.modules[__name__] = _module
