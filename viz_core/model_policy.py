"""Old path of viz_core.pretrained.policy, kept because the public API names it (docs/api.md)."""
import sys

from .pretrained import policy as _module

sys.modules[__name__] = _module
