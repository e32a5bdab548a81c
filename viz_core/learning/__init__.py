"""The learning path of the Start page (path.py: its steps and the answers the app computes for them) and the
glossary (glossary.py: the terms and where the app shows each)."""
