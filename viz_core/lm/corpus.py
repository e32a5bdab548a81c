"""A small bilingual (English / Chinese) corpus written by this project, for the character-level language model.

Simple sentences from templates and word lists of our own, drawn with a fixed seed, so the corpus is the same on
every machine (about 15 KB of text) and needs no download.
"""
from __future__ import annotations

import random
from functools import lru_cache

# (English, Chinese) pairs that fill the templates; each pair means the same thing in both languages
ANIMALS = [("the cat", "小猫"), ("the dog", "小狗"), ("the bird", "小鸟"), ("the fish", "小鱼"),
           ("the horse", "小马"), ("the rabbit", "兔子")]
PEOPLE = [("my friend", "我的朋友"), ("the teacher", "老师"), ("my sister", "我的妹妹"), ("the child", "孩子"),
          ("my father", "我的爸爸"), ("the doctor", "医生")]
PLACES = [("the park", "公园"), ("the river", "河边"), ("the school", "学校"), ("the garden", "花园"),
          ("the market", "市场"), ("the library", "图书馆")]
THINGS = [("a book", "一本书"), ("an apple", "一个苹果"), ("a letter", "一封信"), ("some tea", "一些茶"),
          ("a red ball", "一个红球"), ("a small cake", "一块小蛋糕")]
TIMES = [("in the morning", "早上"), ("at night", "晚上"), ("today", "今天"), ("on sunday", "星期天"),
         ("after school", "放学后")]
MOODS = [("happy", "开心"), ("tired", "累"), ("hungry", "饿"), ("quiet", "安静"), ("busy", "忙")]
VERBS_GO = [("goes to", "去"), ("walks to", "走到"), ("runs to", "跑到")]
VERBS_HAVE = [("reads", "读"), ("likes", "喜欢"), ("finds", "找到"), ("gives me", "给我")]

TEMPLATES = [
    ("{who} {go} {place} {time}.", "{time_zh}{who_zh}{go_zh}{place_zh}。"),
    ("{who} {have} {thing}.", "{who_zh}{have_zh}{thing_zh}。"),
    ("{who} is {mood} {time}.", "{time_zh}{who_zh}很{mood_zh}。"),
    ("{animal} sleeps in {place}.", "{animal_zh}在{place_zh}睡觉。"),
    ("{who} sees {animal} in {place}.", "{who_zh}在{place_zh}看见{animal_zh}。"),
]


def _fill(rng: random.Random, template: tuple[str, str]) -> tuple[str, str]:
    """One English sentence and its Chinese counterpart from a template."""
    slots = {"who": rng.choice(PEOPLE + ANIMALS), "go": rng.choice(VERBS_GO), "place": rng.choice(PLACES),
             "time": rng.choice(TIMES), "have": rng.choice(VERBS_HAVE), "thing": rng.choice(THINGS),
             "mood": rng.choice(MOODS), "animal": rng.choice(ANIMALS)}
    en_args = {k: v[0] for k, v in slots.items()}
    zh_args = {f"{k}_zh": v[1] for k, v in slots.items()}
    en = template[0].format(**en_args)
    return en[0].upper() + en[1:], template[1].format(**zh_args)


@lru_cache(maxsize=4)
def bilingual_corpus(n_pairs: int = 260, seed: int = 0) -> str:
    """n_pairs lines "English sentence / 中文句子", one per line (about 15 KB for the default 260)."""
    rng = random.Random(seed)
    lines = [" / ".join(_fill(rng, rng.choice(TEMPLATES))) for _ in range(n_pairs)]
    return "\n".join(lines) + "\n"
