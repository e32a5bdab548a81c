"""`python -m viz_core.train ...`: the seq2seq command line (viz_core/seq2seq/__main__.py), kept at its old path."""
import sys

from .seq2seq.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
