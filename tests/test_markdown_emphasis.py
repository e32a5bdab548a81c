"""Bold and italic marks in our texts close where we meant them to (CommonMark's flanking rules, which the browser's
markdown follows). A closing ** right after punctuation and right before a letter does not close: in Chinese,
"**[[causal_mask|因果]]**掩码" (a link ends in ")" and no space follows) showed its asterisks on the Mechanics page.
Bold a glossary link from inside it instead: [[causal_mask|**因果**]]."""
import json
import re
import unicodedata
from pathlib import Path

import pytest

from viz_core.i18n import GLOSSARY_MARK

LOCALES = sorted((Path(__file__).resolve().parents[1] / "viz_core" / "locales").glob("*.json"))
CODE = re.compile(r"`[^`]*`")
RUN = re.compile(r"\*+")


def _punct(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "PS"


def _space(ch: str) -> bool:
    return ch == "" or ch.isspace()


def flanking(text: str, start: int, end: int) -> tuple[bool, bool]:
    """(left-flanking, right-flanking) of the delimiter run text[start:end] (CommonMark 0.31, section 6.2)."""
    before = text[start - 1] if start else ""
    after = text[end] if end < len(text) else ""
    left = not _space(after) and (not _punct(after) or _space(before) or _punct(before))
    right = not _space(before) and (not _punct(before) or _space(after) or _punct(after))
    return left, right


def misplaced(text: str) -> list[str]:
    """The * runs of a text that cannot open or close as written, taking them in order as opener, closer, ..."""
    text = CODE.sub(lambda m: "x" * len(m[0]), GLOSSARY_MARK.sub(lambda m: f"[{m[2] or m[1]}](u)", text))
    bad, open_run = [], None
    for m in RUN.finditer(text):
        if text[m.end():m.end() + 1].isspace() and text[m.start() - 1:m.start()].isspace():
            continue  # a lone * between spaces is a multiplication sign, not emphasis
        left, right = flanking(text, m.start(), m.end())
        if open_run is None:
            if not left:
                bad.append(f"opens at {text[max(0, m.start() - 12):m.end() + 12]!r}")
            open_run = m
        else:
            if not right:
                bad.append(f"closes at {text[max(0, m.start() - 12):m.end() + 12]!r}")
            open_run = None
    return bad


def _strings(path: Path):
    for key, entry in json.loads(path.read_text(encoding="utf-8")).items():
        for lang, text in (entry.items() if isinstance(entry, dict) else []):
            if isinstance(text, str):
                yield f"{path.stem}.{key}.{lang}", text


@pytest.mark.parametrize("path", LOCALES, ids=[p.stem for p in LOCALES])
def test_every_bold_and_italic_mark_opens_and_closes(path):
    wrong = {name: found for name, text in _strings(path) if (found := misplaced(text))}
    assert not wrong, wrong


def test_the_check_sees_the_chinese_bold_that_did_not_close():
    assert misplaced("因为**[[causal_mask|因果]]**掩码屏蔽")
    assert not misplaced("因为[[causal_mask|**因果**]]掩码屏蔽")
    assert not misplaced("**[[layer_norm|LayerNorm]]** 取一行；*h* 与 **之后**的")
