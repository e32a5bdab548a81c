"""How large the messages a page sends get at its input limits. Prints a table; asserts nothing.

  python bench/bench_messages.py                        # every page state below
  python bench/bench_messages.py --only scaling,attention
  python bench/bench_messages.py --only scaling --lang zh

Each row is one page state at its input limits, opened by a fresh session (bench/st_protocol.py: what a browser tab
sends, no browser): the page is opened at its address (the view, part and number settings in the query string), then
the text boxes of the state are filled with the longest text each takes (in English and in Chinese) and its buttons
pressed; the last of those reruns is the one measured. A box whose page checks more than its characters (a model's
tokens, a number of words or numbers) gets the longest text the page accepts without an error, found first by
bisection in a session of its own ("chars typed" says how long it was). Printed per row: the largest websocket
message of that rerun (one ForwardMsg: a chart's figure, a table, an iframe), which element it was, and the bytes and
messages of the whole rerun. A fresh session has no cached messages, so every element is sent in full, as to a new
visitor.

The server is `streamlit run app.py` on a free port of 127.0.0.1 (bench_browser.Server), stopped at the end.
"""
from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from bench_browser import WORDS, Server  # noqa: E402
from st_protocol import Session  # noqa: E402
from viz_core.lm.generate import PROMPT_MAX_CHARS  # noqa: E402
from viz_core.pretrained.result import MAX_CHARS  # noqa: E402

LIMIT_MB = 4.0  # the bound every page's largest message should keep (printed as a flag, not asserted)
HANZI = "注意力机制让模型在处理每个词时看向句子中的其他词并按相关程度加权求和得到新的表示"
LONG_WORD = {"en": "internationalisation", "zh": "注意力机制让模型看向"}  # a word of many characters
SHORT_WORD = {"en": "cat", "zh": "猫"}  # boxes of many lines: every word the page takes fits their characters


def english(n: int) -> str:
    """n characters of English words (the bench's word list, cycled), cut at n."""
    return " ".join(itertools.islice(itertools.cycle(WORDS), n))[:n]


def chinese(n: int) -> str:
    """n Chinese characters (a sentence about attention, cycled)."""
    return "".join(itertools.islice(itertools.cycle(HANZI), n))


TEXT = {"en": english, "zh": chinese}
# a text that shares no word or character with TEXT's: two texts that line up nowhere (Compare's largest grid)
OTHER_WORDS = ("zebra yacht xylophone violin umbrella tiger sunset quartz piano ocean nectar mango lemon kettle "
               "jungle igloo honey guitar forest eagle dolphin castle banana apple").split()
OTHER_HANZI = "春眠不觉晓夜来风雨声花落知多少床前明月光疑是地上霜举头望低思故乡"


def other(lang: str, n: int) -> str:
    """n characters of a text that shares nothing with TEXT[lang]'s."""
    if lang == "zh":
        return "".join(itertools.islice(itertools.cycle(OTHER_HANZI), n))
    return " ".join(itertools.islice(itertools.cycle(OTHER_WORDS), n))[:n]


@dataclass(frozen=True)
class Box:
    """A text box and the longest text it takes: `make(lang, n)` is a text of n units (characters, words, numbers),
    never longer than the box's max_chars. fit=False: n = most. fit=True: the box's real limit is narrower than its
    characters (tokens, words, numbers the page checks), so n is the largest in 1..most the page accepts (shows
    no error for), found by bisection."""
    key: str                                        # the widget key ('<page>.<param>')
    make: Callable[[str, int], str]
    most: int
    fit: bool = False


def chars(key: str, max_chars: int) -> Box:
    """The box filled to max_chars: English words, or Chinese characters."""
    return Box(key, lambda lang, n: TEXT[lang](n), max_chars)


def words(key: str, max_chars: int, lines: int = 1, word: dict = LONG_WORD) -> Box:
    """As many words as the page takes (n a line, on `lines` lines), within max_chars."""
    def make(lang: str, n: int) -> str:
        line = " ".join([word[lang]] * n)
        return "\n".join([line] * lines)[:max_chars]
    return Box(key, make, max_chars, fit=True)


def numbers(key: str, max_chars: int, every: str = "{i}") -> Box:
    """As many numbers as the page takes (`every` formats the i-th), within max_chars."""
    return Box(key, lambda lang, n: " ".join(every.format(i=i % 10) for i in range(n))[:max_chars], max_chars,
               fit=True)


def tokens(key: str, max_chars: int) -> Box:
    """As much text (English words, Chinese characters) as the page's model takes, within max_chars."""
    return Box(key, lambda lang, n: TEXT[lang](n), max_chars, fit=True)


@dataclass(frozen=True)
class State:
    """One page state at its limits: the page's address, then the boxes filled and a button pressed."""
    page: str                       # url path ("" = the root page, Attention)
    name: str                       # the row's label
    query: str = ""                 # the address: view / part / number settings
    boxes: tuple = ()               # Box, in the order they are filled
    click: str = ""                 # a button's widget key, pressed last


def attention_states() -> list[State]:
    """Attention with its text at MAX_CHARS, in each view that draws a matrix. Compare, with the variant at
    MAX_CHARS too: the same text (the largest difference map: every token lines up) and a text that shares none
    (the largest grid of the two maps side by side)."""
    text = (chars("attention.text", MAX_CHARS),)
    out = [State("", f"attention {view}", f"view={view}", text) for view in ("head", "grid", "stats", "lines",
                                                                           "aggregate")]
    return out + [State("", "attention compare (same)", "view=compare", text + (chars("attention.text2", MAX_CHARS),)),
                  State("", "attention compare (other)", "view=compare",
                        text + (Box("attention.text2", other, MAX_CHARS),))]


def scaling_states() -> list[State]:
    return [State("scaling", "scaling dist", "part=dist&dk=4096"),
            State("scaling", "scaling softmax N=512", "part=softmax&n=512&dk=4096&temp=0.1"),
            State("scaling", "scaling model", "part=model&layer=5&head=11", (chars("scaling.text", 2000),)),
            State("scaling", "scaling train", "part=train&exp_dk=1024&exp_steps=300", click="scaling.train")]


def positions_states() -> list[State]:
    sizes = "max_len=1024&d_model=1024"
    return [State("positions", f"positions {part}", f"part={part}&{sizes}") for part in ("heatmap", "similarity",
                                                                                       "relative", "learned")] + [
        State("positions", "positions example", "part=example&p0=511&p1=511",
              (numbers("positions.vec", 400, "0.{i}5,"),)),
        State("positions", "positions scale", "part=scale&sd=1024"),
        State("positions", "positions order", "part=order&od=64", (words("positions.tokens", 300),))]


def mechanics_states() -> list[State]:
    return [State("mechanics", "mechanics steps random", "section=steps&src=random&rn=10&rdm=16&rdk=16&rdv=16"),
            State("mechanics", "mechanics steps real", "section=steps&src=real&rlayer=5&rhead=11",
                  (tokens("mechanics.rtext", 200),)),
            State("mechanics", "mechanics steps real causal+drop", "section=steps&src=real&causal=1&train=1&p=0.9",
                  (tokens("mechanics.rtext", 200),)),
            State("mechanics", "mechanics masks", "section=masks&bb=4&bn=8&bdm=64&win=12",
                  (words("mechanics.batch", 600, lines=6, word=SHORT_WORD),)),
            State("mechanics", "mechanics variants", "section=variants&vdm=64&vn=10"),
            State("mechanics", "mechanics cross", "section=cross&xdm=32",
                  (words("mechanics.cq", 200), words("mechanics.ck", 200))),
            State("mechanics", "mechanics additive", "section=additive&an=10&adk=64&adh=64")]


def other_states() -> list[State]:
    return [State("language_model", "lm generate (prompt)", "tab=generate&n_new=60",
                  (chars("language_model.prompt", PROMPT_MAX_CHARS),)),
            State("language_model", "lm sequence (own input)", "tab=sequence",
                  (numbers("language_model.seq", 600),)),
            *[State("language_model", f"lm decoder {view} ({model})", f"tab=decoder&dec_view={view}&dec_model={model}",
                    (tokens(f"language_model.dec_text_{model}", 600) if model == "chars" else
                     numbers(f"language_model.dec_text_{model}", 600),))
              for view in ("lens", "sinks") for model in ("chars", "induction")],
            State("language_model", "lm cache", "tab=cache"),
            *[State("anatomy", f"anatomy {s}", f"section={s}") for s in ("norms", "placement", "ffn", "dropout",
                                                                        "smoothing")],
            State("anatomy", "anatomy path", "section=path&vocab=37000&pd=64&layers=6",
                  (tokens("anatomy.prompt", 200),)),
            State("optimizers", "optimizers"), State("start", "start"), State("train", "train"),
            State("head_finder", "head finder")]


GROUPS = {"attention": attention_states, "scaling": scaling_states, "positions": positions_states,
          "mechanics": mechanics_states, "other": other_states}


class MeasuredSession(Session):
    """A Session that also notes what the largest message of the run in progress drew (its element and key)."""

    def __post_init__(self):
        super().__post_init__()
        self.largest_what, self._largest = "", 0

    def reset_largest(self) -> None:
        self.largest_what, self._largest = "", 0

    def _handle(self, msg, size: int) -> None:
        if size > self._largest:
            self._largest, self.largest_what = size, describe(msg)
        super()._handle(msg, size)


def describe(msg) -> str:
    """A message in a few words: its type, and for an element its kind and key (the end of its widget id)."""
    kind = msg.WhichOneof("type")
    if kind != "delta" or msg.delta.WhichOneof("type") != "new_element":
        return kind or "?"
    el = msg.delta.new_element
    etype = el.WhichOneof("type") or "?"
    proto = getattr(el, etype, None)
    ident = getattr(proto, "id", "") or ""
    return f"{etype} {ident.rsplit('-', 1)[-1]}" if ident else etype


def address(state: State, lang: str) -> str:
    return f"lang={lang}" + (f"&{state.query}" if state.query else "")


async def fit(url: str, state: State, lang: str, texts: dict, box: Box, timeout: float) -> str:
    """The longest text of `box` the page accepts (no error shown), the boxes before it filled with `texts`: the
    largest n in 1..box.most by bisection, in one session (its reruns are not measured). "" if none is accepted."""
    async with Session(url, timeout=timeout) as s:
        await s.open("/" + state.page, address(state, lang))
        for key, text in texts.items():
            await s.set_widget(s.widget(key).id, string_value=text)
        lo, hi = 0, box.most  # lo: accepted (0 = none yet); hi: the largest not yet refused
        while lo < hi:
            n = (lo + hi + 1) // 2
            await s.set_widget(s.widget(box.key).id, string_value=box.make(lang, n))
            lo, hi = (n, hi) if not shown_errors(s) else (lo, n - 1)
        return box.make(lang, lo) if lo else ""


async def texts_at_limits(url: str, state: State, lang: str, timeout: float) -> dict:
    """{widget key: the longest text it takes}, box by box in the state's order."""
    texts = {}
    for box in state.boxes:
        texts[box.key] = (await fit(url, state, lang, texts, box, timeout)) if box.fit else box.make(lang, box.most)
    return texts


async def measure(url: str, state: State, lang: str, timeout: float) -> dict:
    """Open the state's page in a fresh session, fill its boxes with the longest texts they take, press its button;
    the last rerun's figures."""
    texts = await texts_at_limits(url, state, lang, timeout)
    async with MeasuredSession(url, timeout=timeout) as s:
        s.reset_largest()
        run = await s.open("/" + state.page, address(state, lang))
        for key, text in texts.items():
            s.reset_largest()
            run = await s.set_widget(s.widget(key).id, string_value=text)
        if state.click:
            s.reset_largest()
            run = await s.click(s.widget(state.click, "button").id)
        return {"largest": run.largest, "what": s.largest_what, "bytes": run.n_bytes, "msgs": run.n_msgs,
                "seconds": run.latency, "errors": shown_errors(s), "chars": [len(x) for x in texts.values()]}


def shown_errors(s: Session) -> str:
    """An exception or error box on the page (a state that did not draw what it should)."""
    for el in s.find("exception"):
        return f"exception {el.proto.type}"
    for el in s.find("alert"):
        if el.proto.format == 1:  # ERROR
            return "error: " + el.proto.body[:60].replace("\n", " ")
    return ""


def mb(n: int) -> str:
    return f"{n / 1e6:.2f}"


def row(state: State, lang: str, r: dict) -> str:
    flag = " !" if r["largest"] > LIMIT_MB * 1e6 else ""
    note = f"  [{r['errors']}]" if r["errors"] else ""
    typed = "+".join(str(n) for n in r["chars"]) or "-"
    return (f"{state.name:<30} {lang:<3} {typed:>11} {mb(r['largest']):>7}{flag:<2} {r['what'][:30]:<30} "
            f"{mb(r['bytes']):>8} {r['msgs']:>5} {r['seconds']:>6.1f}{note}")


async def run_all(url: str, states: list[State], langs: list[str], timeout: float) -> None:
    print(f"{'page / state':<30} {'txt':<3} {'chars typed':>11} {'max MB':>7}   {'largest message':<30} "
          f"{'rerun MB':>8} {'msgs':>5} {'s':>6}")
    for state in states:
        for lang in (langs if state.boxes else langs[:1]):
            try:
                r = await measure(url, state, lang, timeout)
                print(row(state, lang, r), flush=True)
            except Exception as exc:  # noqa: BLE001 - one state that fails is reported, the others go on
                print(f"{state.name:<30} {lang:<3} failed: {type(exc).__name__}: {str(exc)[:80]}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default=",".join(GROUPS), help=f"groups, comma-separated: {', '.join(GROUPS)}")
    ap.add_argument("--match", default="", help="only the states whose name contains this")
    ap.add_argument("--lang", default="en,zh", help="the texts' languages (en, zh), comma-separated")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds one rerun may take")
    args = ap.parse_args()
    states = [s for g in args.only.split(",") for s in GROUPS[g.strip()]() if args.match in s.name]
    t0 = time.perf_counter()
    with Server() as server:
        asyncio.run(run_all(server.url, states, args.lang.split(","), args.timeout))
    print(f"\n{len(states)} states in {time.perf_counter() - t0:.0f} s; largest message = one websocket frame "
          f"(MB = 10^6 bytes); '!' = over {LIMIT_MB:g} MB")


if __name__ == "__main__":
    main()
