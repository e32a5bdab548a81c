"""`python -m viz_core.lm_train ...`: the language-model command line (viz_core/lm/__main__.py), kept at its old path."""
import sys

from .lm.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
