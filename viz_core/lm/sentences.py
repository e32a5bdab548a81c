"""Simple English and Chinese sentences written by this project for the character model: word lists of our own and
templates that pair an English sentence with a Chinese one of the same meaning, drawn with a fixed seed.

Everyday sentences (greetings, likes, places, numbers, weather, questions) and sentences about attention and
Transformers, the subject of the app. No download: every word here is ours.
"""
from __future__ import annotations

import random

# subjects: (English, Chinese, English form of "to be"); "is" marks the third person singular (verb + s)
PRONOUNS = [("I", "我", "am"), ("you", "你", "are"), ("we", "我们", "are"), ("they", "他们", "are"),
            ("she", "她", "is"), ("he", "他", "is")]
PEOPLE = [("my friend", "我的朋友", "is"), ("the teacher", "老师", "is"), ("my sister", "我的妹妹", "is"),
          ("my brother", "我的哥哥", "is"), ("the child", "孩子", "is"), ("my mother", "我的妈妈", "is"),
          ("my father", "我的爸爸", "is"), ("the doctor", "医生", "is"), ("the student", "这个学生", "is"),
          ("our class", "我们班", "is"), ("the students", "学生们", "are"), ("my parents", "我的父母", "are")]
NAMES = [("Alice", "爱丽丝"), ("Bob", "鲍勃"), ("Tom", "汤姆"), ("Lily", "莉莉"), ("Mary", "玛丽"), ("Jack", "杰克"),
         ("David", "大卫"), ("Emma", "艾玛"), ("Li Ming", "李明"), ("Wang Fang", "王芳"), ("Xiao Hong", "小红"),
         ("Zhang Wei", "张伟")]
CITIES = [("Beijing", "北京"), ("Shanghai", "上海"), ("London", "伦敦"), ("Paris", "巴黎"), ("New York", "纽约"),
          ("Tokyo", "东京"), ("Hangzhou", "杭州"), ("Sydney", "悉尼")]
COUNTRIES = [("China", "中国"), ("England", "英国"), ("France", "法国"), ("Japan", "日本"), ("Canada", "加拿大"),
             ("America", "美国")]
PLACES = [("the park", "公园"), ("the river", "河边"), ("school", "学校"), ("the garden", "花园"),
          ("the market", "市场"), ("the library", "图书馆"), ("the beach", "海边"), ("the zoo", "动物园"),
          ("the station", "车站"), ("the hospital", "医院")]
ANIMALS = [("cat", "猫"), ("dog", "狗"), ("bird", "鸟"), ("rabbit", "兔子"), ("panda", "熊猫"), ("horse", "马")]
THINGS = [("apples", "苹果"), ("cats", "猫"), ("dogs", "狗"), ("books", "书"), ("music", "音乐"), ("green tea", "绿茶"),
          ("rice", "米饭"), ("noodles", "面条"), ("flowers", "花"), ("math", "数学"), ("stories", "故事"),
          ("games", "游戏"), ("the sea", "大海"), ("rainy days", "下雨天"), ("ice cream", "冰淇淋"),
          ("dumplings", "饺子"), ("science", "科学"), ("computers", "电脑")]
ACTS = [("read books", "看书"), ("play football", "踢足球"), ("sing songs", "唱歌"), ("draw pictures", "画画"),
        ("swim", "游泳"), ("write letters", "写信"), ("learn Chinese", "学中文"), ("learn English", "学英语"),
        ("cook dinner", "做晚饭"), ("listen to music", "听音乐"), ("watch movies", "看电影"), ("take a walk", "散步"),
        ("ride a bike", "骑自行车"), ("play the piano", "弹钢琴"), ("drink tea", "喝茶"), ("write code", "写代码")]
TIMES = [("in the morning", "早上"), ("at night", "晚上"), ("today", "今天"), ("on Sunday", "星期天"),
         ("after school", "放学后"), ("every day", "每天"), ("this afternoon", "今天下午"), ("on the weekend", "周末")]
MOODS = [("happy", "开心"), ("tired", "累"), ("hungry", "饿"), ("busy", "忙"), ("sad", "难过"), ("calm", "平静"),
         ("sleepy", "困"), ("excited", "兴奋")]
LIKE = [("like", "likes", "喜欢"), ("love", "loves", "爱"), ("want", "wants", "想要")]
GO = [("go to", "goes to", "去"), ("walk to", "walks to", "走路去"), ("run to", "runs to", "跑到"),
      ("come to", "comes to", "来")]
ITEMS = [("book", "books", "本", "书"), ("apple", "apples", "个", "苹果"), ("pen", "pens", "支", "笔"),
         ("cup of tea", "cups of tea", "杯", "茶"), ("ticket", "tickets", "张", "票"), ("cake", "cakes", "块", "蛋糕")]
WEATHER = [("nice", "好"), ("cold", "冷"), ("hot", "热"), ("warm", "暖和"), ("cool", "凉快")]
WHEN = [("tomorrow", "明天"), ("next week", "下周"), ("on Monday", "星期一"), ("soon", "回头")]
ADJ = [("interesting", "有趣"), ("useful", "有用"), ("simple", "简单"), ("hard", "难"), ("important", "重要"),
       ("clever", "巧妙")]
TOPICS = [("attention", "注意力"), ("the Transformer", "Transformer"), ("the softmax", "softmax"),
          ("the KV cache", "KV 缓存"), ("positional encoding", "位置编码"), ("the induction head", "归纳头"),
          ("the language model", "语言模型"), ("multi-head attention", "多头注意力"), ("the causal mask", "因果掩码"),
          ("self-attention", "自注意力"), ("the attention matrix", "注意力矩阵")]
TARGETS = [("the previous token", "前一个词元"), ("the first token", "第一个词元"), ("the same word", "相同的词"),
           ("the end of the sentence", "句子的结尾"), ("the subject of the sentence", "句子的主语"),
           ("the token after the last match", "上一次匹配之后的词元")]

# fixed sentences about attention, in both languages
ATTENTION = [
    ("The attention weights of each row sum to one.", "注意力权重每一行的和等于一。"),
    ("The softmax turns the scores into probabilities.", "softmax 把分数变成概率。"),
    ("The causal mask hides the future tokens.", "因果掩码遮住了后面的词元。"),
    ("Attention lets every token look at the other tokens.", "注意力让每个词元都能看到其他词元。"),
    ("We divide the scores by the square root of d_k.", "我们把分数除以 d_k 的平方根。"),
    ("The value vectors are mixed by the attention weights.", "值向量按注意力权重加权混合。"),
    ("A Transformer is built from attention layers and MLPs.", "Transformer 由注意力层和 MLP 组成。"),
    ("The induction head copies the token that came next last time.", "归纳头会复制上一次紧跟在后面的词元。"),
    ("The KV cache keeps the keys and values of the tokens so far.", "KV 缓存保存了之前所有词元的键和值。"),
    ("The language model predicts the next character.", "语言模型预测下一个字符。"),
    ("Positional encoding tells the model where each token is.", "位置编码告诉模型每个词元在哪里。"),
    ("Self-attention compares every token with every other token.", "自注意力把每个词元和其他所有词元进行比较。"),
    ("Training lowers the loss step by step.", "训练让损失一步一步地下降。"),
    ("A high temperature makes the text more random.", "温度越高，生成的文本越随机。"),
    ("The learning rate controls the size of each step.", "学习率决定每一步走多大。"),
    ("LayerNorm keeps the numbers in a good range.", "LayerNorm 让数值保持在合适的范围内。"),
    ("The query asks a question and the keys answer it.", "查询提出问题，键来回答它。"),
    ("Each head learns its own pattern of attention.", "每个头都会学到自己的注意力模式。"),
    ("The attention matrix has one row for every query.", "注意力矩阵的每一行对应一个查询。"),
    ("A token cannot see the tokens after it.", "一个词元看不到它后面的词元。"),
    ("Multi-head attention runs several heads side by side.", "多头注意力让几个头并行工作。"),
    ("The residual stream carries the information from layer to layer.", "残差流把信息一层一层地传下去。"),
    ("Greedy decoding always takes the most likely token.", "贪心解码总是选择概率最大的词元。"),
    ("Top-k sampling keeps only the k most likely tokens.", "top-k 抽样只保留概率最高的 k 个词元。"),
    ("The model reads the text from left to right.", "模型从左到右读文本。"),
    ("Attention is all you need.", "注意力就是你所需要的一切。"),
    ("The dot product of a query and a key is a score.", "查询和键的点积就是一个分数。"),
    ("Without the scale, the softmax saturates.", "如果不缩放，softmax 就会饱和。"),
]


def _subject(rng: random.Random) -> tuple[str, str, str]:
    """A pronoun, a person or a name, with its form of "to be"."""
    pick = rng.random()
    if pick < 0.4:
        return rng.choice(PRONOUNS)
    if pick < 0.7:
        return rng.choice(PEOPLE)
    en, zh = rng.choice(NAMES)
    return en, zh, "is"


def _verb(verb: tuple[str, str, str], be: str) -> str:
    """The English verb for a subject: "likes" after he / she / a name, "like" otherwise."""
    return verb[1] if be == "is" else verb[0]


def _everyday(rng: random.Random) -> tuple[str, str]:
    """One everyday sentence pair about a subject: going, liking, doing, feeling, seeing."""
    s, s_zh, be = _subject(rng)
    (pl, pl_zh), (t, t_zh), (th, th_zh), (a, a_zh) = (rng.choice(x) for x in (PLACES, TIMES, THINGS, ACTS))
    like, go, (m, m_zh), (an, an_zh) = rng.choice(LIKE), rng.choice(GO), rng.choice(MOODS), rng.choice(ANIMALS)
    options = [
        (f"{s} {_verb(go, be)} {pl} {t}.", f"{t_zh}{s_zh}{go[2]}{pl_zh}。"),
        (f"{s} {_verb(like, be)} {th}.", f"{s_zh}{like[2]}{th_zh}。"),
        (f"{s} {_verb(LIKE[0], be)} to {a} {t}.", f"{t_zh}{s_zh}喜欢{a_zh}。"),
        (f"{s} {be} {m} {t}.", f"{t_zh}{s_zh}很{m_zh}。"),
        (f"{s} {_verb(('see', 'sees'), be)} a {an} in {pl}.", f"{s_zh}在{pl_zh}看见了一只{an_zh}。"),
        (f"The {an} sleeps in {pl}.", f"{an_zh}在{pl_zh}睡觉。"),
    ]
    return rng.choice(options)


def _greeting(rng: random.Random) -> tuple[str, str]:
    """Hello, goodbye, thanks and introductions."""
    (n, n_zh), (w, w_zh), (c, c_zh) = rng.choice(NAMES), rng.choice(WHEN), rng.choice(COUNTRIES)
    age = rng.randint(6, 18)
    options = [
        (f"Hello, {n}!", f"你好，{n_zh}！"), (f"Hello, {n}. How are you?", f"你好，{n_zh}，你好吗？"),
        ("Hello! How are you today?", "你好！你今天好吗？"), ("I am fine, thank you. And you?", "我很好，谢谢。你呢？"),
        (f"Good morning, {n}!", f"早上好，{n_zh}！"), ("Good evening, everyone.", "大家晚上好。"),
        (f"Hi, my name is {n}.", f"嗨，我叫{n_zh}。"), (f"Nice to meet you, {n}.", f"很高兴认识你，{n_zh}。"),
        (f"Thank you, {n}.", f"谢谢你，{n_zh}。"), (f"Goodbye, {n}. See you {w}.", f"再见，{n_zh}，{w_zh}见。"),
        (f"Hello! I am {n}, and I am {age} years old.", f"你好！我是{n_zh}，今年{age}岁。"),
        (f"Hello, I am {n} and I come from {c}.", f"你好，我是{n_zh}，我来自{c_zh}。"),
        ("Thank you very much.", "非常感谢。"), ("You are welcome.", "不客气。"),
    ]
    return rng.choice(options)


def _numbers(rng: random.Random) -> tuple[str, str]:
    """Sentences with digits: counts, prices, hours and years."""
    (n, n_zh), (c, c_zh), (an, an_zh) = rng.choice(NAMES), rng.choice(CITIES), rng.choice(ANIMALS)
    one, many, mw, item_zh = rng.choice(ITEMS)
    k, h, year = rng.randint(2, 12), rng.randint(1, 12), rng.randint(2010, 2025)
    options = [
        (f"{n} has {k} {an}s.", f"{n_zh}有{k}只{an_zh}。"),
        (f"{n} buys {k} {many} at the market.", f"{n_zh}在市场买了{k}{mw}{item_zh}。"),
        (f"I have one {one} and you have {k}.", f"我有一{mw}{item_zh}，你有{k}{mw}。"),
        (f"There are {k * 3} students in the classroom.", f"教室里有{k * 3}个学生。"),
        (f"It is {h} o'clock now.", f"现在{h}点了。"),
        (f"In {year}, {n} went to {c}.", f"{year}年，{n_zh}去了{c_zh}。"),
        (f"{k} plus {h} is {k + h}.", f"{k}加{h}等于{k + h}。"),
    ]
    return rng.choice(options)


def _world(rng: random.Random) -> tuple[str, str]:
    """Weather, cities, countries and questions."""
    (n, n_zh), (c, c_zh), (co, co_zh), (w, w_zh) = (rng.choice(x) for x in (NAMES, CITIES, COUNTRIES, WEATHER))
    (th, th_zh), (t, t_zh), (pl, pl_zh) = rng.choice(THINGS), rng.choice(TIMES), rng.choice(PLACES)
    options = [
        (f"The weather is {w} today.", f"今天天气很{w_zh}。"), (f"It is raining in {c}.", f"{c_zh}在下雨。"),
        (f"{n} lives in {c}.", f"{n_zh}住在{c_zh}。"), (f"{c} is a big city.", f"{c_zh}是一座大城市。"),
        (f"{n} is from {co}.", f"{n_zh}来自{co_zh}。"), (f"What do you like to do {t}?", f"你{t_zh}喜欢做什么？"),
        (f"Do you like {th}?", f"你喜欢{th_zh}吗？"), (f"Yes, I like {th} very much.", f"是的，我非常喜欢{th_zh}。"),
        (f"Where is {pl}?", f"{pl_zh}在哪里？"), ("Can you help me?", "你能帮我吗？"),
        (f"Is it {w} in {c} today?", f"{c_zh}今天{w_zh}吗？"),
    ]
    return rng.choice(options)


def _attention(rng: random.Random) -> tuple[str, str]:
    """Sentences about attention and Transformers, the subject of the app."""
    (n, n_zh), (tp, tp_zh), (a, a_zh), (tg, tg_zh) = (rng.choice(x) for x in (NAMES, TOPICS, ADJ, TARGETS))
    layers, heads, h, i = rng.randint(1, 12), rng.choice([2, 4, 8, 12]), rng.randint(1, 8), rng.randint(1, 20)
    options = [
        rng.choice(ATTENTION), rng.choice(ATTENTION),
        (f"{n} thinks that {tp} is {a}.", f"{n_zh}觉得{tp_zh}很{a_zh}。"),
        (f"I want to learn about {tp}.", f"我想了解{tp_zh}。"),
        (f"{n} is learning how {tp} works.", f"{n_zh}正在学习{tp_zh}是怎么工作的。"),
        (f"This attention head looks at {tg}.", f"这个注意力头关注{tg_zh}。"),
        (f"Head {h} in layer {layers} looks at {tg}.", f"第{layers}层的第{h}个头关注{tg_zh}。"),
        (f"The model has {layers} layers and {heads} heads.", f"这个模型有{layers}层，每层{heads}个头。"),
        (f"The query of token {i} is compared with every key.", f"第{i}个词元的查询会和每一个键比较。"),
    ]
    return rng.choice(options)


KINDS = [(_everyday, 4), (_greeting, 2), (_numbers, 1), (_world, 2), (_attention, 3)]  # (maker, weight)


def sentence_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """n (English, Chinese) pairs drawn with a fixed seed; English starts with a capital letter."""
    rng = random.Random(seed)
    makers, weights = zip(*KINDS)
    pairs = []
    for _ in range(n):
        en, zh = rng.choices(makers, weights)[0](rng)
        pairs.append((en[0].upper() + en[1:], zh))
    return pairs
