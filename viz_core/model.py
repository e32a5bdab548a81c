"""Old path of viz_core.seq2seq.model, kept because the public API names it (docs/api.md)."""
import sys

from .seq2seq import model as _module

sys.modules[__name__] = _module
