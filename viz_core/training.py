"""Old path of viz_core.seq2seq.training, kept because the public API names it (docs/api.md)."""
import sys

from .seq2seq import training as _module

sys.modules[__name__] = _module
