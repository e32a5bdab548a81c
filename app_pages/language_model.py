"""Language-model page: our own small GPT-style decoder. Induction heads forming during training, generation step
by step (our character model, or a packaged real decoder: Gemma 3 270M, SmolLM2 135M), and the KV cache (growth,
exactness, speed, and the real models' cache sizes).

Reads top to bottom: intro -> the running job's progress (a fragment, seen from every tab) -> tabs (induction,
your sequence, generate, KV cache); only the open tab is drawn. Training runs in its own thread
(app_pages/_ui/training_job.py, shared with the Train page).
"""
from dataclasses import replace
from functools import partial

import time

import numpy as np
import streamlit as st

from app_pages import _ui as ui
from app_pages._ui import decoder as decoder_view
from app_pages._ui import device as devices
from app_pages._ui import language_model as cached
from app_pages._ui import models
from app_pages._ui.language_model import figures
from viz_core.io.export import columns_csv, npz_bytes, records_csv
from viz_core.lm import cache_bytes
from viz_core.lm.charset import never_generated
from viz_core.lm.generate import PROMPT_MAX_CHARS, context_window, generate
from viz_core.lm.induction import (induction_score, induction_targets, phase_change_step, repeat_length,
                                  repeated_text, target_cells, transformer_lens_induction)
from viz_core.lm.lens import architecture_of
from viz_core.lm.training import SIZES as LM_SIZES, LMTrainConfig, check_fits, probe_ids
from viz_core.pretrained import generate as real
from viz_core.pretrained import packaged
from viz_core.runtime.threads import thread_budget
from viz_core.pretrained.head_analysis import sink_shares

ui.setup("language_model")  # state under the page's url path; its title in locales/language_model.json,
# every other string in locales/lm.json
t = ui.t

TABS = ("induction", "sequence", "generate", "cache", "decoder")
DECODER_MODELS = ("chars", "induction")  # the models the "inside the decoder" tab reads
DECODER_VIEWS = ("lens", "sinks")
CHARS_DEFAULT = "The cat sleeps in the library. 猫在图书馆睡觉。"
KV_CHOICES = {"mha": None, "gqa": 2, "mqa": 1}  # with 4 query heads


# ---------------------------------------------------------------- shared pieces
def describe(lm, origin: str, task: str) -> None:
    info = lm.info
    st.badge(t("common.looking_at"), icon=":material/visibility:", color="blue")
    st.info(t(f"lm.origin_{origin}", steps=info.get("steps", "?"), seconds=info.get("seconds", "?"),
              device=info.get("device", "cpu"), params=f"{info.get('params', 0):,}"))
    if origin == "trained" and cached.shipped(task) is not None:
        st.button(t("lm.reset"), key=f"lm.reset_{task}", on_click=cached.training.forget, args=(task,))


def trainable_model(task: str):
    """The model of a task (the session's own, else the shipped one) below its training controls, with a line on
    where it comes from; None (and a note) when there is none."""
    lm, origin = cached.training.current(task)
    train_controls(task)
    if lm is None:
        st.warning(t("lm.no_model"))
        return None
    describe(lm, origin, task)
    return lm


def train_controls(task: str) -> None:
    """Settings (frozen when the run starts), the device, and the Train / Stop buttons."""
    opened, box = ui.fold(t("lm.settings"), f"{task}_set")  # drawn only while open; closed, they hold
    where = box if opened else ui.HIDDEN
    c = where.columns(4)
    seconds = ui.slider(t("lm.seconds"), 5, 120, f"{task}_seconds", 60 if task == "induction" else 30,
                        container=c[0], help=t("lm.seconds_help"))
    gpu = devices.gpu_present()
    batch = ui.selectbox(t("lm.batch"), [16, 32, 64] + ([128, 256] if gpu else []), f"{task}_batch", 32,
                         container=c[1])
    lr = ui.select_slider(t("lm.lr"), [3e-4, 1e-3, 2e-3, 3e-3], f"{task}_lr", 1e-3, container=c[2],
                          format_func=lambda v: f"{v:g}")
    seed = ui.number(t("lm.seed"), 0, 10_000, f"{task}_seed", 0, container=c[3])
    c = where.columns(2)
    kv = ui.radio(t("lm.kv_kind"), list(KV_CHOICES), f"{task}_kv", "mha", container=c[0],
                  format_func=lambda k: t(f"lm.kv_{k}"))
    force_cpu = ui.checkbox(t("lm.force_cpu"), f"{task}_cpu", False, container=c[1])
    size = "base"
    if task == "chars" and gpu:  # the larger character models train in minutes only on a GPU
        size = ui.radio(t("lm.size"), list(LM_SIZES), f"{task}_size", "base", container=where,
                        format_func=lambda s: t(f"lm.size_{s}", d=LM_SIZES[s][0], layers=LM_SIZES[s][2]))
    cfg = LMTrainConfig(task=task, max_seconds=float(seconds), batch_size=batch, lr=lr, seed=int(seed), size=size,
                        force_cpu=force_cpu)
    fits, err = ui.safe(check_fits, cfg)
    # what a run needs and the device it runs on, in one caption (as on Train: each element costs a page switch)
    lines = [] if err is not None else [devices.memory_caption(t, *fits, force_cpu)]
    st.caption(ui.sentences(*lines, devices.caption(t, force_cpu)))
    if err is not None:
        ui.show_error(err)
    cached.training.buttons(t("lm.train"), f"lm.go_{task}", cached.build_run, (cfg.to_dict(), kv),
                            refused=err is not None)


def phase_figs(history, marker_x=None, task: str | None = None) -> list:
    """Losses and best scores over training (two figures); task: history is that of the model shown for it."""
    px = phase_change_step(history)
    return list(cached.phase_panels(history, task, x_title=t("lm.step"), loss_title=t("lm.loss"),
                                    first_name=t("lm.first_loss"), repeat_name=t("lm.repeat_loss"),
                                    score_title=t("lm.score"), prev_name=t("lm.best_prev"),
                                    ind_name=t("lm.best_ind"), marker_x=marker_x, phase_x=px,
                                    phase_name=t("lm.phase", step=px) if px else ""))


def map_figs(prev, ind) -> list:
    """The previous-token and induction score of every head (layer x head), two figures."""
    return [figures.score_map(z, title=t(f"lm.{name}_score"), x_title=t("lm.head"), y_title=t("lm.layer"),
                              value_name=t("lm.score")) for z, name in ((prev, "prev"), (ind, "ind"))]


def phase_figures(history, key: str, marker_x=None, task: str | None = None) -> None:
    draw_pairs(phase_figs(history, marker_x, task), key)


def score_maps(prev, ind, key: str) -> None:
    draw_pairs(map_figs(prev, ind), key)


def draw_pairs(figs: list, key: str) -> None:
    """Figures two by two in columns (a phone stacks them)."""
    for start in range(0, len(figs), 2):
        for col, fig, i in zip(st.columns(2), figs[start: start + 2], range(start, start + 2)):
            with col:
                ui.plot(fig, key=f"{key}_{i}")


def chars_loss_figure(history):
    return figures.loss_curves(history, x_title=t("lm.step"), y_title=t("lm.loss"), train_name=t("lm.train_loss"),
                               val_name=t("lm.val_loss"))


# ---------------------------------------------------------------- the running job (a fragment redraws it)
def draw_job(job, run) -> None:
    trainer, task = run.trainer, run.task
    m = job.latest
    share = min(1.0, trainer.seconds / trainer.train_cfg.max_seconds)
    text = t("lm.progress", task=t(f"lm.task_{task}"), step=trainer.step, seconds=f"{trainer.seconds:.1f}",
             total=f"{trainer.train_cfg.max_seconds:.0f}")
    if m is not None and m.induction is not None:
        text += " · " + t("lm.progress_ind", first=f"{m.first_loss:.2f}", rep=f"{m.repeat_loss:.2f}",
                          ind=f"{m.induction:.2f}")
    st.progress(1.0 if job.done else share, text=text)
    draw_pairs(live_figures(job, task, list(trainer.history)), "lm.live")


def live_figures(job, task: str, history: list) -> list:
    """The live charts, rebuilt only when a new evaluation arrived: building plotly figures holds the GIL, and
    redrawing them every REFRESH_S would slow the training thread down."""
    evals = [h for h in history if h.get("evaluated")]
    stamp = (job.id, len(evals), ui.lang())
    cached = st.session_state.get("lm.live_figs")
    if cached is not None and cached[0] == stamp:
        return cached[1]
    if not evals:
        figs = []
    elif task == "induction":
        figs = phase_figs(history) + map_figs(evals[-1]["prev_map"], evals[-1]["ind_map"])
    else:
        figs = [chars_loss_figure(history)]
    st.session_state["lm.live_figs"] = (stamp, figs)
    return figs


def result_text(result) -> str | None:
    """Why the last run stopped (a run stopped while it waited in line trained nothing: nothing to say)."""
    if result.reason == "unstarted":
        return None
    return t(f"lm.reason_{result.reason}", step=result.step, task=t(f"lm.task_{result.task}"))


# ---------------------------------------------------------------- induction tab
def induction_tab() -> None:
    ui.prose(ui.glossed(t("lm.ind_intro")))
    opened, box = ui.fold(t("lm.scores_fold"), "scores")  # drawn only while open: the first view shows the story
    if opened:
        with box:
            score_definition()
    lm = trainable_model("induction")
    if lm is not None:
        story(lm)


def score_definition() -> None:
    """The two scores (viz_core.lm.induction): the previous-token score, and the induction score's two rules (the
    standard test x = s s, and any other text)."""
    ui.latex(r"\mathrm{prev}(h) = \frac{1}{N-1}\sum_{i=1}^{N-1} A^h_{i,\,i-1}")
    ui.prose(t("lm.ind_definition"))
    ui.latex(r"\begin{aligned}x = s\,s,\ |s| = L:\quad \mathrm{ind}(h) &= \frac{1}{L}\sum_{i=L}^{2L-1}"
             r" A^h_{i,\,i-L+1} \\[14pt] \forall x:\quad \mathrm{ind}(h) &= \frac{1}{|S|}\sum_{i \in S}\ "
             r"\sum_{j < i,\ x_j = x_i} A^h_{i,\,j+1}\end{aligned}")  # the two rules: one display


def sequence_tab() -> None:
    """The induction model of the first tab on a sequence the person types (its own tab: the story above already
    draws four charts, and every chart costs the browser time)."""
    lm, _ = cached.training.current("induction")
    if lm is None:
        st.warning(t("lm.no_model"))
        return
    own_sequence(lm)


def story(lm) -> None:
    snaps = lm.snapshots
    st.subheader(t("lm.story"))
    st.markdown(t("lm.story_explain"))
    if not snaps:
        st.info(t("lm.no_snapshots"))
        return
    i = ui.slider(t("lm.snapshot"), 0, len(snaps) - 1, "snap", len(snaps) - 1) if len(snaps) > 1 else 0
    snap = snaps[i]
    st.caption(t("lm.snap_at", step=snap.step, prev=f"{snap.prev.max():.2f}", ind=f"{snap.induction.max():.2f}"))
    phase_figures(lm.history, "story", marker_x=snap.step, task="induction")
    head_patterns(lm, i)
    opened, box = ui.fold(t("lm.maps_fold"), "maps")  # drawn only while open: every chart costs a page switch
    if opened:
        with box:
            score_maps(snap.prev, snap.induction, "lm.maps")
    downloads(lm)


def head_patterns(lm, i: int) -> None:
    """The previous-token head and the induction head (chosen by the final scores) at snapshot i, with Play: every
    snapshot is a frame of the one figure, so the heads form in the browser without a rerun per frame."""
    snaps = lm.snapshots
    final = snaps[-1]
    heads = [np.unravel_index(np.argmax(final.prev), final.prev.shape),
             np.unravel_index(np.argmax(final.induction), final.induction.shape)]
    probe_ids = _probe_ids(lm)
    probe = lm.tokenizer.labels(probe_ids)
    st.markdown(t("lm.patterns_explain"))
    maps = np.stack([[s.maps[h[0], h[1]] for h in heads] for s in snaps])  # (S, 2, N, N)
    titles = [[t(f"lm.{kind}_head", layer=int(layer), head=int(head), score=f"{score[layer, head]:.2f}")
               for kind, (layer, head), score in (("prev", heads[0], s.prev), ("ind", heads[1], s.induction))]
              for s in snaps]
    marks = [[(r, r - 1) for r in range(1, len(probe))], target_cells(probe_ids)]
    ui.plot(figures.patterns_history(maps, [s.step for s in snaps], i, probe, titles, marks, x_title=t("lm.key"),
                                     y_title=t("lm.query"), value_name=t("lm.weight"),
                                     mark_names=[t("lm.prev_marks"), t("lm.ind_marks")], play=ui.play_labels(),
                                     slider=len(snaps) < 2),  # with two or more, the page's own slider picks one
            key="lm.patterns")
    st.caption(t("lm.patterns_play"))


def _probe_ids(lm) -> list[int]:
    return probe_ids(lm.train_cfg, lm.tokenizer)


def downloads(lm) -> None:
    c1, c2 = st.columns(2)
    with c1:
        ui.download(t("lm.download_snaps"), cached.snapshots_npz(lm, "induction"), "induction_snapshots.npz",
                    "application/octet-stream", key="lm.dl_snaps")
    csv = records_csv([h for h in lm.history if h.get("evaluated")],
                      ["step", "seconds", "loss", "first_loss", "repeat_loss", "prev_token", "induction"])
    with c2:
        ui.download(t("lm.download_curves"), csv, "induction_curves.csv", "text/csv", key="lm.dl_curves")


def own_sequence(lm) -> None:
    st.subheader(t("lm.own"))
    st.markdown(t("lm.own_intro", vocab=lm.config.vocab, vocab_max=lm.config.vocab - 1))
    repeat_maker(lm)
    default = " ".join(lm.tokenizer.itos[i] for i in _probe_ids(lm))
    text = ui.text(t("lm.own_input"), "seq", default, max_chars=600,
                   help=t("lm.own_help", max=lm.config.vocab - 1, n=lm.config.max_len))
    analysis, err = ui.safe(cached.analyse, lm, "induction", text)
    if err is not None:
        ui.show_error(err)
        return
    result, (prev, ind) = analysis
    best = np.unravel_index(np.argmax(ind), ind.shape)
    sequence_summary(lm, result, ind, best)
    score_maps(prev, ind, "lm.own_maps")
    c = st.columns(2)
    layer = ui.selectbox(t("lm.layer"), list(range(lm.config.n_layers)), "layer", int(best[0]), container=c[0])
    head = ui.selectbox(t("lm.head"), list(range(lm.config.n_heads)), "head", int(best[1]), container=c[1])
    ui.plot(figures.attention_marked(result.weights[layer, head], result.tokens, x_title=t("lm.key"),
                                     title=t("lm.layer_head", layer=layer, head=head), y_title=t("lm.query"),
                                     value_name=t("lm.weight"), marks=target_cells(result.ids),
                                     mark_name=t("lm.ind_marks")),
            key="lm.own_attn")
    data = partial(npz_bytes, tokens=result.tokens, weights=result.weights, prev=prev, induction=ind)
    ui.download(t("lm.download_attn"), data, "attention.npz", "application/octet-stream", key="lm.dl_attn")


def repeat_maker(lm) -> None:
    """A segment length and a button that writes a fresh random segment, then the same segment again."""
    c = st.columns([2, 1], vertical_alignment="bottom")
    ui.slider(t("lm.repeat_length"), 2, lm.config.max_len // 2, "repeat_len", 8, container=c[0])
    c[1].button(t("lm.make_repeat"), key="lm.make_repeat", on_click=make_repeat, args=(lm.config.vocab,))


def make_repeat(vocab: int) -> None:
    ui.set_value("seq", repeated_text(int(ui.value("repeat_len", 8)), vocab))


def sequence_summary(lm, result, ind, best) -> None:
    """How the text was read, which rule of the score applies to it, and the best head."""
    if result.tokens != [str(i) for i in result.ids]:
        st.caption(t("lm.own_words", n=len(set(result.ids)), vocab=lm.config.vocab))
    length = repeat_length(result.ids)
    counted = len({i for i, _ in target_cells(result.ids)})  # queries whose token occurred before
    if length:
        st.caption(t("lm.own_rule_repeat", length=length, offset=length - 1))
    elif counted:
        st.caption(t("lm.own_rule_free", n=counted))
    else:
        st.warning(t("lm.own_no_repeat"))
        return
    st.markdown(t("lm.own_best", layer=int(best[0]), head=int(best[1]), score=f"{ind[best]:.2f}"))
    w = result.weights[best]  # (N, N) of the best head
    free = float(induction_score(w, result.ids, "free"))
    tl = float(transformer_lens_induction(w, result.ids))
    if length:  # where the two rules meet: both numbers, so an edit that breaks s s does not look like a jump
        st.caption(t("lm.own_rules_both", standard=f"{ind[best]:.2f}", free=f"{free:.2f}"))
    counted_free = sum(bool(keys) for keys in induction_targets(result.ids, "free"))
    st.caption(t("lm.own_transformer_lens", score=f"{tl:.2f}", n=len(result.ids), counted=counted_free))


# ---------------------------------------------------------------- generate tab
def generate_tab() -> None:
    """Our character model or a packaged real decoder, picked at the top; the same sampling rule for both."""
    choice = generation_model()
    if choice != "chars":
        real_generation(choice)
        return
    ui.prose(ui.glossed(t("lm.gen_intro")))
    sampling_formula()
    st.caption(t("lm.gen.live_note"))
    lm = trainable_model("chars")
    if lm is None:
        return
    corpus_note(lm)
    if lm.history:
        opened, box = ui.fold(t("lm.curves"), "gen_curves")  # drawn only while open
        if opened:
            with box:
                ui.plot(chars_loss_figure(lm.history), key="lm.chars_curves")
    prompt, settings = generation_settings(help_text=t("lm.prompt_help", max_len=lm.model.cfg.max_len))
    ids, err = ui.safe(lm.tokenizer.encode, prompt)  # any length: the model reads its end (context_window)
    if err is not None:
        ui.show_error(err)
        return
    replaced_note(lm, prompt)
    window = context_window(ids, lm.model.cfg.max_len, settings["n_new"])
    if len(window) < len(ids):
        st.info(t("lm.gen_window", n=f"{len(ids):,}", kept=len(window), max_len=lm.model.cfg.max_len,
                  n_new=settings["n_new"]))
    with thread_budget(1):  # a tiny model: a second thread only waits for a core another visitor needs
        trace = generate(lm.model, window, never=never_generated(lm.tokenizer), **settings)  # it never writes UNK
    st.markdown(t("lm.output"))
    st.code(lm.tokenizer.decode(trace.ids), language=None, wrap_lines=True)
    if trace.steps:
        step_view(lm, trace)


def sampling_formula() -> None:
    # (in symbols only, the same in both languages: top-k keeps the k most probable tokens, top-p the fewest tokens
    # whose probabilities reach p)
    ui.latex(r"p_i = \frac{e^{z_i / T}}{\sum_j e^{z_j / T}},\qquad "
             r"\text{top-}k:\ S = \operatorname*{arg\,max}_{|S| = k} \sum_{i\in S} p_i,\qquad "
             r"\text{top-}p:\ S = \operatorname*{arg\,min}_{\sum_{i\in S} p_i \,\ge\, p} |S|")


def generation_model() -> str:
    """Our character model, or one of the packaged real decoders that are installed (their ids)."""
    options = ["chars"] + [d.id for d in cached.real_decoders()]
    if len(options) == 1:
        return "chars"
    return ui.radio(t("lm.real_model"), options, "gen_model", "chars", help=t("lm.real_model_help"),
                    format_func=lambda k: t("lm.real_model_chars") if k == "chars" else packaged.by_id(k).title)


def corpus_note(lm) -> None:
    """What the character model read and how much, and its held-out loss per language (when the checkpoint says)."""
    stats, loss = lm.info.get("corpus"), lm.info.get("heldout_loss")
    if stats is None:
        return
    parts = stats["parts"]
    text = t("lm.gen.read", total=stats["total"]["kb"], chars=f"{stats['total']['chars']:,}",
             en=parts["en_explanations"]["kb"], zh=parts["zh_explanations"]["kb"],
             n_en=f"{parts['en_generated']['lines']:,}", n_zh=f"{parts['zh_generated']['lines']:,}",
             gen=round(parts["en_generated"]["kb"] + parts["zh_generated"]["kb"], 1), every=stats["heldout_every"])
    if loss:
        text += t("lm.gen.heldout", en=f"{loss['en']:.2f}", zh=f"{loss['zh']:.2f}")  # its English starts with a space
    st.caption(text)


def replaced_note(lm, prompt: str, shown: int = 20) -> None:
    """Which typed characters the model reads as the unknown token (as typed, never as markup)."""
    unknown = lm.tokenizer.unknown(prompt)
    if not unknown:
        return
    listed = " ".join(unknown[:shown]) + (f" … (+{len(unknown) - shown})" if len(unknown) > shown else "")
    st.info(t("lm.gen.replaced", n=len(unknown), chars=ui.plain_md(listed)))


def generation_settings(help_text: str, param: str = "prompt", default: str = "The cat "):
    """The prompt (its own address parameter per model kind) and the sampling settings (shared by every model).

    The box sets no limit of its own: a browser drops a pasted text longer than a box's limit without a word. A
    prompt over PROMPT_MAX_CHARS is cut here instead, and the page says so."""
    prompt = ui.text(t("lm.prompt"), param, default, area=True, height=80, help=help_text)
    if len(prompt) > PROMPT_MAX_CHARS:
        st.info(t("lm.prompt_cut", n=f"{len(prompt):,}", max=f"{PROMPT_MAX_CHARS:,}"))
        prompt = prompt[:PROMPT_MAX_CHARS]
    c = st.columns(5)
    n_new = ui.slider(t("lm.n_new"), 1, 60, "n_new", 40, container=c[0])
    temp = ui.slider(t("lm.temperature"), 0.0, 2.0, "temp", 0.8, step=0.05, container=c[1],
                     help=t("lm.temperature_help"))
    top_k = ui.slider(t("lm.top_k"), 0, 40, "top_k", 0, container=c[2], help=t("lm.top_k_help"))
    top_p = ui.slider(t("lm.top_p"), 0.05, 1.0, "top_p", 0.95, step=0.05, container=c[3])
    seed = ui.number(t("lm.gen_seed"), 0, 10_000, "gen_seed", 0, container=c[4])
    return prompt, dict(n_new=n_new, temperature=temp, top_k=top_k, top_p=top_p, seed=int(seed))


def step_view(lm, trace) -> None:
    n = len(trace.steps)
    k = ui.slider(t("lm.gen_step"), 1, max(n, 2), "gen_step", 1) if n > 1 else 1
    k = min(k, n)
    s = trace.steps[k - 1]
    chosen = lm.tokenizer.labels([s.token])[0]
    st.caption(t("lm.step_caption", step=k, chosen=ui.plain_md(chosen), p=f"{s.sampled[s.token]:.3f}"))
    vocab = lm.tokenizer.labels(range(lm.tokenizer.size))
    keys = lm.tokenizer.labels(trace.ids[: len(trace.prompt) + n - 1])  # every token any step attends to
    ui.plot(figures.generation_history(
        np.stack([x.probs for x in trace.steps]), np.stack([x.sampled for x in trace.steps]),
        [x.token for x in trace.steps], [x.attention for x in trace.steps], vocab, keys, k - 1,
        titles=[t("lm.row_title", step=j + 1) for j in range(n)], bars_title=t("lm.bars_title"),
        x_prob=t("lm.probability"), y_token=t("lm.token"), model_name=t("lm.model_probs"),
        sampled_name=t("lm.sampled_probs"), x_key=t("lm.key"), y_head=t("lm.layer_head_axis"),
        value_name=t("lm.weight"), play=ui.play_labels(), slider=n < 2), key="lm.generation")  # else the page slider
    st.caption(t("lm.gen_play"))
    csv = columns_csv({"step": list(range(1, n + 1)), "token": [vocab[x.token] for x in trace.steps],
                       "p_token": [x.sampled[x.token] for x in trace.steps]})
    data = partial(npz_bytes, vocab=vocab, tokens=[vocab[i] for i in trace.ids],
                   probs=np.stack([x.probs for x in trace.steps]), sampled=np.stack([x.sampled for x in trace.steps]))
    ui.download(t("lm.download_gen"), data, "generation.npz", "application/octet-stream", key="lm.dl_gen")
    ui.download(t("lm.download_gen_csv"), csv, "generation.csv", "text/csv", key="lm.dl_gen_csv")


# ---------------------------------------------------------------- generate tab: a real decoder
def real_generation(model_id: str) -> None:
    """A packaged real decoder continues the prompt step by step (cached per model, prompt, settings and seed)."""
    d = packaged.by_id(model_id)
    real_notes(d)
    if not models.packaged_gate(model_id):  # still converting: its progress is drawn, nothing else
        return
    with st.spinner(t("lm.real_loading", name=d.title)):
        m, err = ui.safe(models.model, model_id)  # the shared model (loaded once per server)
    if err is not None:
        ui.show_error(err)
        return
    shape = real.kv_shape_of(m.model.config)
    real_intro(d, m, shape)
    prompt, settings = generation_settings(t("lm.real_prompt_help", n=real.MAX_PROMPT_TOKENS), "real_prompt",
                                           t("lm.real_default_prompt"))
    with st.spinner(t("lm.real_generating", name=d.title)):
        trace, err = ui.safe(cached.real_generation, model_id, prompt, **settings)
    if err is not None:
        ui.show_error(err)
        return
    real_output(trace, shape)
    if trace.steps:
        real_step_view(trace, shape)


def real_notes(d) -> None:
    """Where the weights come from (a 4-bit copy, dequantized to 16 bits) and their licence."""
    st.caption(t("lm.real_weights", quant=d.quantization, name=d.title, package=d.package))
    st.caption(t("lm.real_licence_gemma") if d.id == packaged.GEMMA.id else t("lm.real_licence", licence=d.licence))
    if d.languages == ("en",):
        st.caption(t("lm.real_english", name=d.title))


def real_intro(d, m, shape) -> None:
    ui.prose(ui.glossed(t("lm.real_intro", name=d.title, layers=shape.n_layers, heads=shape.n_heads,
                             kv=shape.n_kv_heads, variant=t(f"lm.real_variant_{shape.variant}"),
                             d_head=shape.head_dim, vocab=f"{m.model.config.vocab_size:,}",
                             max_prompt=real.MAX_PROMPT_TOKENS, max_new=real.MAX_NEW_TOKENS)))
    sampling_formula()


def real_output(trace, shape) -> None:
    """The text, how long it took, why it stopped, and the real cache it left."""
    if trace.cut:
        st.info(t("lm.real_cut", n=trace.n_prompt_typed, max=len(trace.prompt_ids)))
    st.markdown(t("lm.output"))
    st.code(trace.text, language=None, wrap_lines=True)
    st.caption(t("lm.real_stats", steps=len(trace.steps), seconds=f"{trace.seconds:.1f}",
                 rate=f"{trace.tokens_per_second:.1f}"))
    if trace.stop == "eos":
        st.caption(t("lm.real_stopped"))
    if trace.cache_shapes:
        k_shape = trace.cache_shapes[-1]  # a full-attention layer's (the last layer of both models)
        key = "lm.real_cache_window" if shape.n_sliding else "lm.real_cache_now"
        st.caption(t(key, tokens=k_shape[2], layers=len(trace.cache_shapes), shape=str(k_shape),
                     total=f"{trace.cache_bytes:,}", kv=shape.n_kv_heads, d_head=shape.head_dim,
                     sliding=shape.n_sliding, window=(shape.window or 1) - 1))


def real_step_view(trace, shape) -> None:
    """Each step's top next tokens and the new token's attention (each layer's mean, or one layer's heads)."""
    n = len(trace.steps)
    k = min(ui.slider(t("lm.gen_step"), 1, max(n, 2), "gen_step", 1) if n > 1 else 1, n)
    s = trace.steps[k - 1]
    st.caption(t("lm.step_caption", step=k, chosen=ui.plain_md(s.label), p=f"{s.p_sampled:.3f}"))
    rows_of = ui.selectbox(t("lm.real_rows"), ["mean"] + list(range(shape.n_layers)), "real_rows", "mean",
                           format_func=lambda v: t("lm.real_rows_mean") if v == "mean"
                           else t("lm.real_rows_layer", layer=v))
    rows, names, titles, axis = real_rows(trace, shape, rows_of)
    ui.plot(figures.generation_steps(
        np.stack([x.top_probs for x in trace.steps]), np.stack([x.top_sampled for x in trace.steps]),
        [x.top_labels for x in trace.steps], [real_chosen_at(x) for x in trace.steps], rows, names, trace.keys,
        k - 1, titles=titles, bars_title=t("lm.bars_title"), x_prob=t("lm.probability"), y_token=t("lm.token"),
        model_name=t("lm.model_probs"), sampled_name=t("lm.sampled_probs"), x_key=t("lm.key"), y_head=axis,
        value_name=t("lm.weight"), play=ui.play_labels(), slider=n < 2), key="lm.real_generation")
    st.caption(t("lm.gen_play"))
    st.caption(ui.glossed(t("lm.real_sink_note")))
    real_downloads(trace)


def real_rows(trace, shape, rows_of) -> tuple[list, list[str], list[str], str]:
    """(rows per step, row names, titles per step, axis title): each layer's mean over its heads (L, T_k), or the
    heads of one layer (H, T_k), each named with the key/value head it reads, g(i) = floor(i / (H / H_kv))."""
    n = len(trace.steps)
    if rows_of == "mean":
        return ([x.attention.mean(axis=1) for x in trace.steps], [f"L{i}" for i in range(shape.n_layers)],
                [t("lm.real_row_title_mean", step=j + 1) for j in range(n)], t("lm.real_axis_layer"))
    group = shape.n_heads // shape.n_kv_heads
    names = [f"L{rows_of} H{h} → KV{h // group}" for h in range(shape.n_heads)]
    return ([x.attention[rows_of] for x in trace.steps], names,
            [t("lm.real_row_title_layer", step=j + 1, layer=rows_of) for j in range(n)], t("lm.real_axis_head"))


def real_chosen_at(step) -> int:
    """Where the chosen token stands among the step's top tokens (-1: below them)."""
    hits = np.flatnonzero(step.top_ids == step.token)
    return int(hits[0]) if hits.size else -1


def real_downloads(trace) -> None:
    steps = trace.steps
    csv = columns_csv({"step": list(range(1, len(steps) + 1)), "token_id": [x.token for x in steps],
                       "token": [x.label for x in steps], "p_model": [x.p_model for x in steps],
                       "p_sampled": [x.p_sampled for x in steps]})
    data = partial(real_npz, trace)
    ui.download(t("lm.real_download_npz"), data, "generation_real.npz", "application/octet-stream",
                key="lm.dl_real_gen")
    ui.download(t("lm.download_gen_csv"), csv, "generation_real.csv", "text/csv", key="lm.dl_real_gen_csv")


def real_npz(trace) -> bytes:
    """Every step's top tokens and probabilities, and its attention (K, L, H, T_max), later keys NaN."""
    steps, t_max = trace.steps, len(trace.keys)
    attention = np.full((len(steps), *steps[-1].attention.shape[:2], t_max), np.nan, dtype=np.float32)
    for k, x in enumerate(steps):
        attention[k, ..., :x.attention.shape[-1]] = x.attention
    return npz_bytes(tokens=trace.prompt_labels + [x.label for x in steps],
                     top_ids=np.stack([x.top_ids for x in steps]), top_labels=[x.top_labels for x in steps],
                     top_probs=np.stack([x.top_probs for x in steps]),
                     top_sampled=np.stack([x.top_sampled for x in steps]), attention=attention)


# ---------------------------------------------------------------- KV-cache tab
def cache_tab() -> None:
    ui.prose(ui.glossed(t("lm.cache_intro")))
    ui.latex(r"\text{bytes} = 2 \cdot L \cdot B \cdot H_{kv} \cdot T \cdot d_k \cdot 4")
    lm, _ = cached.training.current("chars")
    vocab, max_len = (lm.config.vocab, lm.config.max_len) if lm is not None else (128, 96)
    kind = ui.radio(t("lm.kv_kind"), list(KV_CHOICES), "cache_kv", "mha", format_func=lambda k: t(f"lm.kv_{k}"))
    model = cached.variant_model(KV_CHOICES[kind] or 4, vocab, max_len)
    st.caption(t("lm.cache_model", layers=model.cfg.n_layers, heads=model.cfg.n_heads, kv=model.cfg.kv_heads,
                 d_k=model.cfg.d_k))
    # T = the tokens the cache holds: the table, the shapes, the bytes and the exactness check are all for this T
    length = ui.slider(t("lm.cache_len"), 2, max_len - 1, "cache_len", min(48, max_len - 1),
                       help=t("lm.cache_len_help"))
    shapes, sizes, diff = cached.cache_run(KV_CHOICES[kind] or 4, vocab, max_len, length)
    cache_growth(model, length, shapes, sizes)
    real_cache_table(model, length)
    exactness(diff, length)
    speed(kind)


def cache_growth(model, length: int, shapes: list, sizes: list[int]) -> None:
    """The real cache after `length` steps (each layer's K shape; V has the same) and its bytes after each step
    (cached.cache_run), against the formula for MHA, GQA and MQA."""
    rows = [{t("lm.col_layer"): i, t("lm.col_k"): str(shape), t("lm.col_v"): str(shape),
             t("lm.col_bytes"): f"{cache_bytes(model.cfg, shape[2], batch=shape[0], n_layers=1):,}"}
            for i, shape in enumerate(shapes)]
    st.markdown(t("lm.cache_table", tokens=length, total=f"{sizes[-1]:,}"))
    st.dataframe(rows, hide_index=True)
    steps = list(range(1, length + 1))
    series = [(t(f"lm.kv_{k}"), [cache_bytes(replace(model.cfg, n_kv_heads=kv), n) / 1024 for n in steps])
              for k, kv in KV_CHOICES.items()]
    series.append((t("lm.measured"), [b / 1024 for b in sizes]))
    ui.plot(figures.lines(steps, series, x_title=t("lm.tokens_cached"), y_title=t("lm.kib"),
                          title=t("lm.growth_title"), markers_only=[t("lm.measured")]), key="lm.growth")
    ui.download(t("lm.download_cache"), columns_csv({"tokens": steps} | dict(series)), "kv_cache_bytes.csv",
                "text/csv", key="lm.dl_cache")


def real_cache_table(model, length: int) -> None:
    """The formula with the real models' shapes (their converted config.json, no model loaded) next to ours."""
    st.markdown(t("lm.real_kv_intro"))
    ours = real.KVShape(model.cfg.n_layers, model.cfg.n_heads, model.cfg.kv_heads, model.cfg.d_k)
    shapes = [(t("lm.real_kv_ours"), ours)]
    shapes += [(d.title, s) for d in cached.real_decoders() if (s := cached.real_kv_shape(d.id)) is not None]
    ui.table([{t("lm.real_kv_col_model"): name, t("lm.real_kv_col_attention"): s.variant.upper(),
               t("lm.real_kv_col_shape"): f"{s.n_layers} × {s.n_kv_heads} × {s.head_dim} ({s.n_heads})",
               t("lm.real_kv_col_token"): f"{s.bytes_per_token():,}",
               t("lm.real_kv_col_mha"): f"{s.mha_bytes_per_token():,}",
               t("lm.real_kv_col_total"): f"{s.cache_bytes(length):,}"} for name, s in shapes],
             title=t("lm.real_kv_table", tokens=length))
    if len(shapes) == 1:
        st.caption(t("lm.real_kv_none"))
    for _, s in shapes[1:]:
        if s.n_sliding:
            full = s.n_layers - s.n_sliding
            st.caption(t("lm.real_kv_window", sliding=s.n_sliding, window=s.window - 1, full=full,
                         per=f"{2 * full * s.n_kv_heads * s.head_dim * s.bytes_per_value:,}"))


def exactness(diff: float, length: int) -> None:
    st.markdown(t("lm.exact_explain"))
    (st.success if diff < 1e-4 else st.warning)(t("lm.exact", diff=f"{diff:.2e}", n=length))


def speed(kind: str) -> None:
    """Time per new token with and without the cache: measured on this server in the background (cached.Timings),
    drawn when ready; a fragment polls while the measurement runs."""
    st.markdown(t("lm.speed_explain"))
    bench = cached.timings()
    if not bench.results and not bench.running:
        bench.start(KV_COUNTS)
    polling = bench.running
    st.fragment(speed_chart, run_every=1.0 if polling else None)(kind, polling)


KV_COUNTS = tuple(kv or 4 for kv in KV_CHOICES.values())


def remeasure() -> None:
    cached.timings().start(KV_COUNTS)


def speed_chart(kind: str, polling: bool) -> None:
    bench = cached.timings()
    if polling and not bench.running:
        st.rerun()  # measured: the whole page once more, so that this fragment stops polling
    st.button(t("lm.measure_again"), key="lm.remeasure", on_click=remeasure, disabled=bench.running,
              help=t("lm.measure_help"))
    times = bench.results.get(KV_CHOICES[kind] or 4)
    if times is None:
        st.info(t("lm.measuring"))
        return
    if bench.running:
        st.caption(t("lm.measuring_again"))
    else:
        st.caption(t("lm.measured_at", time=time.strftime("%H:%M:%S UTC", time.gmtime(bench.measured_at)),
                     repeats=cached.TIMING_REPEATS))
    series = [(t("lm.with_cache"), [1000 * x for x in times["cache"]]),
              (t("lm.without_cache"), [1000 * x for x in times["full"]])]
    ui.plot(figures.lines(cached.TIMING_LENGTHS, series, x_title=t("lm.tokens_before"), y_title=t("lm.ms_per_token"),
                          title=t("lm.speed_title")), key="lm.speed")
    csv = columns_csv({"tokens_before": cached.TIMING_LENGTHS, "ms_with_cache": series[0][1],
                       "ms_without_cache": series[1][1]})
    ui.download(t("lm.download_speed"), csv, "kv_cache_timing.csv", "text/csv", key="lm.dl_speed")


# ---------------------------------------------------------------- inside the decoder tab
def decoder_tab() -> None:
    """The logit lens and the attention sinks of either of this page's models, on a text the person types, and
    what the model is made of (with links to the pages that teach each part)."""
    ui.prose(ui.glossed(t("lm.dec_intro")))
    task = ui.radio(t("lm.dec_model"), DECODER_MODELS, "dec_model", horizontal=True,
                    format_func=lambda k: t(f"lm.dec_model_{k}"))
    lm, origin = cached.training.current(task)
    if lm is None:
        st.warning(t("lm.no_model"))
        return
    st.caption(t(f"lm.dec_origin_{origin}", steps=lm.info.get("steps", "?")))
    arch = architecture_of(lm.config)
    decoder_view.architecture_box(arch, "dec_arch")
    default = CHARS_DEFAULT if task == "chars" else " ".join(lm.tokenizer.itos[i] for i in _probe_ids(lm))
    text = ui.text(t("lm.dec_text"), f"dec_text_{task}", default, max_chars=600,
                   help=t(f"lm.dec_text_help_{task}", n=lm.config.max_len))
    view = ui.radio(t("lm.dec_view"), DECODER_VIEWS, "dec_view", horizontal=True,
                    format_func=lambda v: t(f"lm.dec_view_{v}"))
    if task == "chars":
        replaced_note(lm, text)
    if view == "lens":
        lens, err = ui.safe(cached.lens, lm, task, text)
        if err is not None:
            ui.show_error(err)
            return
        decoder_view.lens_view(lens, "lm.lens")
        return
    analysis, err = ui.safe(cached.analyse, lm, task, text)
    if err is not None:
        ui.show_error(err)
        return
    result = analysis[0]
    decoder_view.sinks_view(sink_shares(result.weights, np.zeros(len(result.tokens), dtype=bool)), arch, "lm.sinks")


# ---------------------------------------------------------------- page
ui.prose(ui.glossed(t("lm.intro")))
ui.latex(r"x_{\ell+1} = x_\ell + \mathrm{Attn}(\mathrm{LN}(x_\ell)),\qquad "
         r"\mathrm{Attn} = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}} + M\right)V,\qquad "
         r"M_{ij} = \begin{cases} 0 & j \le i \\ -\infty & j > i \end{cases}")
cached.training.collect()  # a finished job: keep its model and why it stopped; the address names a running job
cached.training.show_result(result_text)
cached.training.live(draw_job)  # progress of a running job, above the tabs: seen from every tab (or: a lost run)

tab, boxes = ui.tabs(TABS, "tab", format_func=lambda k: t(f"lm.tab_{k}"))
with boxes[tab]:  # only the open tab is drawn
    {"induction": induction_tab, "sequence": sequence_tab, "generate": generate_tab, "cache": cache_tab,
     "decoder": decoder_tab}[tab]()
