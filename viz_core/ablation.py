"""Old path of viz_core.pretrained.ablation, kept because the public API names it (docs/api.md)."""
import sys

from .pretrained import ablation as _module

sys.modules[__name__] = _module
