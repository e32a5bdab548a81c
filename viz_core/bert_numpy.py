"""Old path of viz_core.pretrained.bert_numpy, kept because the public API names it (docs/api.md)."""
import sys

from .pretrained import bert_numpy as _module

sys.modules[__name__] = _module
