"""Train page: train a small encoder-decoder Transformer on a toy task, then look inside it.

Reads top to bottom: task -> the running job's progress -> tabs (train, decode, attention, snapshots, save/load,
compare; only the open one is drawn). A training job runs in its own thread (app_pages/_ui/training_job.py, shared
with the Language-model page): no click, page switch or language switch touches it; only Stop does. A fragment draws
its progress; the page keeps its result.
"""
from functools import partial

import numpy as np
import streamlit as st
from streamlit.runtime.uploaded_file_manager import UploadedFile

from app_pages import _ui as ui
from app_pages._ui import device as devices
from app_pages._ui import train as cached
from app_pages._ui import serving
from viz_core.errors import InputError
from viz_core.io.export import csv_text, npz_bytes
from viz_core.plots import train as plots
from viz_core.seq2seq.model import ModelConfig
from viz_core.seq2seq.tasks import TASKS, make_task
from viz_core.seq2seq.checkpoint import checkpoint_zip, load_checkpoint_files, read_upload
from viz_core.seq2seq.training import TrainConfig, check_fits, noam_lr

ui.setup("train")
t = ui.t
shared = ui.SharedFigures(plots)  # figures cached by their inputs

PRESETS = {  # d_model, heads, layers (encoder and decoder each), d_ff
    "tiny": (32, 2, 1, 64),
    "small": (64, 4, 2, 128),
    "medium": (128, 8, 3, 512),
}
GPU_PRESETS = {  # offered only where a GPU trains: 4x and 8x the small preset's width, twice its depth
    "large": (256, 8, 4, 1024),  # about 7 M parameters
    "xl": (512, 8, 3, 2048),     # about 22 M parameters (a float16 download: 44 MB, within the upload limit)
}
KINDS = ("enc", "dec", "cross")
CAPTURE = {"enc": "enc.{}.self_attn", "dec": "dec.{}.self_attn", "cross": "dec.{}.cross_attn"}
COMPARISONS = ("heads", "norm", "scale")


# ---------------------------------------------------------------- task
def choose_task():
    name = ui.selectbox(t("train.task"), list(TASKS), "task", default="reverse",
                        format_func=lambda n: t(f"train.task_{n}"))
    st.caption(t(f"train.task_{name}_help"))
    if name in ("copy", "reverse", "sort"):
        cls = TASKS[name]
        lo, hi = ui.span(t("train.lengths"), 1, 16, "lengths", ("min_len", "max_len"), (cls.min_len, cls.max_len),
                         help=t("train.lengths_help"))
        return make_task(name, min_len=lo, max_len=hi)
    if name == "addition":
        return make_task(name, max_len=ui.slider(t("train.digits"), 1, 4, "digits", 2))
    return make_task(name)


def pct(x: float) -> str:
    """0.9875 -> "98.8"; never rounds a miss up to 100 (0.9996 -> "99.9")."""
    return "100" if x >= 1 else f"{min(100 * x, 99.9):.1f}"


def describe_model(model, origin: str) -> None:
    info = model.info
    st.badge(t("common.looking_at"), icon=":material/visibility:", color="blue")
    # a checkpoint's values are shown as written, never read as markdown (an upload's are checked too, on load)
    shown = {k: ui.plain_md(str(info.get(k, default))) for k, default in (("steps", "?"), ("seconds", "?"),
                                                                          ("device", "cpu"))}
    st.info(t(f"train.origin_{origin}", **shown))
    accuracy_by_length(model)
    if origin != "shipped" and cached.shipped(model.task.name) is not None:
        st.button(t("train.reset"), key="train.reset", on_click=cached.training.forget, args=(model.task.name,))


def accuracy_by_length(model) -> None:
    """The model's held-out exact accuracy at every input length of its trained range: the weak lengths show."""
    measured = model.by_length
    if measured is None:
        acc = model.info.get("val_exact")
        st.caption(t("train.acc_unmeasured") if acc is None else t("train.acc_overall_only", acc=pct(acc)))
        return
    by_length, n = measured
    worst_n = min(by_length, key=lambda k: (by_length[k], -k))
    weak = worst_n if by_length[worst_n] < 1 else None  # the worst length, marked unless all are perfect
    # a static markdown table: one row of numbers needs no data grid, nor an Arrow table to decode;
    # the first column names the rows (input length -> 3 4 5 ...), the weak length is bold and red in either theme
    cells = [ui.Md(f"**:red[{pct(v)}]**") if k == weak else pct(v) for k, v in by_length.items()]
    # in a "whole_words" container (app_pages/_ui PAGE_CSS): on a phone, the cells keep their numbers whole ("100",
    # not "1/0/0" down the cell) and the table scrolls in its own box if it is still too wide
    with st.container(key="whole_words_train_accuracy"):
        ui.table([dict(zip([t("train.length_row"), *map(str, by_length)], [t("train.exact_row"), *cells]))],
                 title=t("train.by_length_title"))
    notes = [t("train.by_length", n=n, worst_n=worst_n, worst=pct(by_length[worst_n]),
               all=pct(sum(by_length.values()) / len(by_length)))]
    if model.info.get("by_length_step") is not None:
        notes.append(t("train.by_length_step", step=model.info["by_length_step"]))
    if model.task.name == "addition":
        notes.append(t("train.by_length_addition"))
    st.caption(ui.sentences(*notes))


# ---------------------------------------------------------------- train tab
def model_settings(task_name: str, where=st) -> tuple[ModelConfig, str | None]:
    """The model's settings, drawn in `where` (ui.HIDDEN: not drawn, their held values), and a preset's sizes in
    words for the caller to write (None for custom settings: their controls show them)."""
    presets = PRESETS | (GPU_PRESETS if devices.gpu_present() else {})
    preset = ui.radio(t("train.preset"), list(presets) + ["custom"], "preset", default="small",
                      format_func=lambda p: t(f"train.preset_{p}"), container=where)
    if preset != "custom":
        d, h, layers, ff = presets[preset]
        sizes = t("train.preset_caption", d=d, h=h, layers=layers, ff=ff)
        return ModelConfig(d_model=d, n_heads=h, n_enc_layers=layers, n_dec_layers=layers, d_ff=ff), sizes
    return custom_settings(where), None


def custom_settings(where=st) -> ModelConfig:
    c = where.columns(4)
    d = ui.selectbox(t("train.d_model"), [16, 32, 64, 128, 256, 512, 1024], "d_model", 64, container=c[0])
    heads = ui.selectbox(t("train.heads"), [h for h in (1, 2, 4, 8, 16) if h <= d], "heads", 4, container=c[1])
    kv = ui.selectbox(t("train.kv_heads"), [k for k in (16, 8, 4, 2, 1) if heads % k == 0 and k <= heads],
                      "kv_heads", heads, container=c[2], help=t("train.kv_heads_help"))
    layers = ui.slider(t("train.layers"), 1, 8, "layers", 2, container=c[3])
    c = where.columns(4)
    ff = ui.selectbox(t("train.d_ff"), [32, 64, 128, 256, 512, 1024, 2048, 4096], "d_ff", 128, container=c[0])
    pos = ui.selectbox(t("train.positions"), ["sinusoidal", "learned"], "pos", container=c[1],
                       format_func=lambda p: t(f"train.pos_{p}"))
    norm = ui.selectbox(t("train.norm"), ["pre", "post"], "norm", container=c[2],
                        format_func=lambda n: t(f"train.norm_{n}"))
    drop = ui.slider(t("train.dropout"), 0.0, 0.5, "dropout", 0.0, step=0.05, container=c[3])
    c = where.columns(2)
    scale = ui.checkbox(t("train.scale"), "scale", True, container=c[0], help=t("train.scale_help"))
    tie = ui.checkbox(t("train.tie"), "tie", False, container=c[1], help=t("train.tie_help"))
    return ModelConfig(d_model=d, n_heads=heads, n_kv_heads=kv, n_enc_layers=layers, n_dec_layers=layers,
                       d_ff=ff, positions=pos, norm=norm, scale=scale, emb_dropout=drop, attn_dropout=drop,
                       resid_dropout=drop, tie_weights=tie)


def train_settings(where=st) -> TrainConfig:
    """The training settings, drawn in `where` (ui.HIDDEN: not drawn, their held values); the optimizer's are in a
    fold of their own, drawn only while open (a closed section costs the browser nothing on a page switch)."""
    c = where.columns(3)
    seconds = ui.slider(t("train.seconds"), 1, 120, "seconds", 20, container=c[0], help=t("train.seconds_help"))
    batch = ui.selectbox(t("train.batch"), [16, 32, 64, 128, 256, 512, 1024, 4096], "batch", TrainConfig.batch_size,
                         container=c[1])
    target = ui.slider(t("train.target"), 0.5, 1.0, "target", 0.99, step=0.01, container=c[2],
                       help=t("train.target_help", every=TrainConfig.eval_every, n=TrainConfig.eval_per_length,
                              patience=TrainConfig.target_patience))
    opened, box = ui.fold(t("train.optimizer"), "optim") if where is not ui.HIDDEN else (False, ui.HIDDEN)
    inner = box if opened else ui.HIDDEN
    if opened:
        with box:
            ui.latex(r"\mathrm{lr}(s) = f \cdot d_{\mathrm{model}}^{-0.5}\cdot\min\!\left(s^{-0.5},\; "
                     r"s\cdot \mathrm{warmup}^{-1.5}\right)")
    c = inner.columns(4)
    factor = ui.slider(t("train.lr_factor"), 0.05, 3.0, "lr", TrainConfig.lr_factor, step=0.05, container=c[0])
    warmup = ui.slider(t("train.warmup"), 1, 2000, "warmup", TrainConfig.warmup, container=c[1])
    smooth = ui.slider(t("train.smoothing"), 0.0, 0.5, "smooth", 0.1, step=0.05, container=c[2])
    seed = ui.number(t("train.seed"), 0, 10_000, "seed", 0, container=c[3])
    force_cpu = ui.checkbox(t("train.force_cpu"), "cpu", False, container=where)
    return TrainConfig(batch_size=batch, max_seconds=float(seconds), target_accuracy=target, lr_factor=factor,
                       warmup=warmup, label_smoothing=smooth, seed=int(seed), force_cpu=force_cpu)


def schedule_figure(model_cfg: ModelConfig, train_cfg: TrainConfig):
    steps = np.arange(1, 4 * train_cfg.warmup + 200)
    lr = [noam_lr(int(s), model_cfg.d_model, train_cfg.warmup, train_cfg.lr_factor) for s in steps]
    return shared.schedule_curve(steps, lr, warmup=train_cfg.warmup, x_title=t("train.step"), y_title=t("train.lr"))


def train_tab(task):
    model_cfg, sizes = model_settings(task.name)
    # every element drawn costs the browser time on a page switch: under the model's settings one caption says the
    # preset's sizes, the parameters and memory a run needs and the device (written once the run's settings are
    # read), and the training's own settings are in a section drawn only while open, as on the Language model page
    note = st.empty()
    opened, box = ui.fold(t("train.settings"), "train_set")
    where = box if opened else ui.HIDDEN
    with where:  # (the optimizer's own section opens inside it)
        train_cfg = train_settings(where)
    fits, err = ui.safe(check_fits, task, model_cfg, train_cfg)
    lines = [sizes] if sizes else []
    if err is None:
        lines.append(devices.memory_caption(t, *fits, train_cfg.force_cpu))
    note.caption(ui.sentences(*lines, devices.caption(t, train_cfg.force_cpu)))
    if err is not None:
        ui.show_error(err)
    opened, box = ui.fold(t("train.schedule"), "sched")  # the chart is drawn only while open
    if opened:
        with box:
            ui.plot(schedule_figure(model_cfg, train_cfg), key="train.schedule_fig")
    if cached.training.running():
        st.caption(t("train.running_note"))
    cached.training.buttons(t("train.go"), "train.go", cached.build_run,
                            ("train", task, [("run", model_cfg, train_cfg)]), refused=err is not None)
    return model_cfg, train_cfg


# ---------------------------------------------------------------- decode tab
def source_text(model) -> str:
    """The source sequence the person types (one per task, shared by Decode and Attention)."""
    return ui.text(t("train.input"), f"src_{model.task.name}", model.task.example, max_chars=200,
                   help=t("train.input_help"))


def decode_tab(model) -> str:
    text = source_text(model)
    trace, err = ui.safe(model.decode_trace, text)
    if err is not None:
        ui.show_error(err)
        return ""
    out = [tok for tok in trace.out if tok != "<eos>"]
    answer = model.task.detokenize(out)
    st.markdown(t("train.output"))
    st.code(answer or " ", language=None)
    if trace.outside is not None:
        st.info(t(f"train.outside_{trace.outside.what}", **trace.outside.params()))
    expected = model.task.solve(trace.src)
    if expected is not None:
        ok = expected == out
        (st.success if ok else st.warning)(t("train.correct" if ok else "train.wrong",
                                             expected=model.task.detokenize(expected)))
    step_view(trace)
    return text


def step_view(trace) -> None:
    ui.prose(ui.glossed(t("train.decode_explain")))
    ui.latex(r"y_t = \arg\max_{v} \; p(v \mid y_{<t}, x)")
    n = len(trace.out)
    step = ui.slider(t("train.decode_step"), 1, max(n, 2), "step", 1) if n > 1 else 1
    step = min(step, n)
    so_far = " ".join(["<bos>"] + trace.out[: step - 1])
    st.caption(t("train.so_far", tokens=so_far, chosen=trace.out[step - 1]))
    chosen = trace.vocab.index(trace.out[step - 1])
    c1, c2 = st.columns(2)
    with c1:
        ui.plot(plots.next_token_bars(trace.probs[step - 1], trace.vocab, chosen, x_title=t("train.probability"),
                                      y_title=t("train.token"), title=t("train.bars_title", step=step)),
                key="train.bars")
    labels = [f"{i + 1}: {tok}" for i, tok in enumerate(trace.out)]
    with c2:
        ui.plot(plots.decoding_heatmap(trace.probs, labels, trace.vocab, title=t("train.probs_title"),
                                       x_title=t("train.next_token"), y_title=t("train.decode_step"),
                                       value_name=t("train.probability")), key="train.probs")
    csv = csv_text(["step", "chosen", *trace.vocab],
                   ([i + 1, tok, *row] for i, (tok, row) in enumerate(zip(trace.out, trace.probs))))
    ui.download(t("train.download_probs"), csv, "next_token_probs.csv", "text/csv", key="train.dl_probs")


# ---------------------------------------------------------------- attention and snapshots
def kind_layer_head(model, prefix: str, with_head: bool = True):
    c = st.columns(3 if with_head else 2)
    kind = ui.radio(t("train.kind"), list(KINDS), f"{prefix}kind", default="cross", container=c[0],
                    format_func=lambda k: t(f"train.kind_{k}"))
    n_layers = model.config.n_enc_layers if kind == "enc" else model.config.n_dec_layers
    layer = ui.selectbox(t("train.layer"), list(range(n_layers)), f"{prefix}layer", n_layers - 1, container=c[1])
    head = None
    if with_head:
        head = ui.selectbox(t("train.head"), ["all"] + list(range(model.config.n_heads)), f"{prefix}head", "all",
                            container=c[2], format_func=lambda h: t("train.all_heads") if h == "all" else str(h))
    return kind, layer, head


def axes_for(kind: str, src: list, tgt_in: list):
    """(row labels, column labels, x title, y title, mask) of a capture kind."""
    rows = src if kind == "enc" else tgt_in
    cols = tgt_in if kind == "dec" else src
    mask = np.triu(np.ones((len(rows), len(cols)), dtype=bool), 1) if kind == "dec" else None
    y = t("train.query_src") if kind == "enc" else t("train.query_tgt")
    x = t("train.key_tgt") if kind == "dec" else t("train.key_src")
    return rows, cols, x, y, mask


def draw_maps(maps, kind, head, src, tgt_in, key: str) -> None:
    rows, cols, x, y, mask = axes_for(kind, src, tgt_in)
    if head == "all":
        titles = [t("train.head_n", h=h) for h in range(maps.shape[0])]
        fig = plots.attention_heads(maps, rows, cols, titles, x_title=x, y_title=y, value_name=t("train.weight"),
                                    mask=mask)
    else:
        fig = plots.attention_matrix(maps[head], rows, cols, x_title=x, y_title=y, value_name=t("train.weight"),
                                     mask=mask, title=t("train.head_n", h=head))
    ui.plot(fig, key=key)


def attention_tab(model, text: str) -> None:
    ui.prose(ui.glossed(t("train.attention_explain")))
    ui.latex(r"\mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}} + M\right)V")
    ui.latex(r"M_{ij} \in \{0, -\infty\}")
    kind, layer, head = kind_layer_head(model, "")
    st.caption(t(f"train.kind_{kind}_help"))
    result, err = ui.safe(model.attention, text)
    if err is not None:
        ui.show_error(err)
        return
    draw_maps(result.maps[CAPTURE[kind].format(layer)], kind, head, result.src, result.tgt_in, "train.attn")
    arrays = {name.replace(".", "_"): w for name, w in result.maps.items()}
    ui.download(t("train.download_attn"), partial(npz_bytes, src=result.src, tgt_in=result.tgt_in, **arrays),
                "attention.npz", "application/octet-stream", key="train.dl_attn")


def snapshots_tab(model) -> None:
    st.markdown(t("train.snap_explain", example=model.task.example))
    snaps = model.snapshots
    if not snaps:
        st.info(t("train.no_snapshots"))
        return
    kind, layer, _ = kind_layer_head(model, "snap_", with_head=False)
    i = ui.slider(t("train.snapshot"), 0, len(snaps) - 1, "snap", len(snaps) - 1) if len(snaps) > 1 else 0
    snap = snaps[i]
    src = model.task.tokenize(model.task.example)
    tgt_in = ["<bos>"] + (model.task.solve(src) or [])
    st.caption(t("train.snap_at", step=snap.step))
    name = CAPTURE[kind].format(layer)
    rows, cols, x, y, mask = axes_for(kind, src, tgt_in)
    maps = np.stack([s.maps[name] for s in snaps])  # (S, H, Nq, Nk)
    titles = [t("train.head_n", h=h) for h in range(maps.shape[1])]
    ui.plot(shared.attention_heads_history(maps, [s.step for s in snaps], i, rows, cols, titles,
                                           title=t("train.snap_title"), x_title=x, y_title=y,
                                           value_name=t("train.weight"), mask=mask, play=ui.play_labels()),
            key="train.snap_fig")
    st.caption(t("train.snap_play"))
    if model.history:
        ui.plot(curves([(t("train.this_model"), model.history)], marker_x=snap.step), key="train.snap_curves")


def curves(runs, marker_x=None, live: bool = False):
    """Loss and accuracy curves of runs; cached by their data (shared), except a run's live curves (live=True),
    which change every progress tick and would only push other figures out of the cache."""
    build = plots.training_curves if live else shared.training_curves
    return build(runs, x_title=t("train.step"), loss_title=t("train.loss"), acc_title=t("train.accuracy"),
                 loss_name=t("train.loss"), train_acc_name=t("train.train_acc"), val_name=t("train.val_exact"),
                 marker_x=marker_x)


# ---------------------------------------------------------------- save / load
def on_upload() -> None:
    # files the server no longer holds (read before, or refused) come as placeholders without a name or bytes
    files = [f for f in st.session_state.get("train.upload") or [] if isinstance(f, UploadedFile)]
    st.session_state["train.upload_error"] = None
    if not files:
        return
    model, err = ui.safe(lambda: load_checkpoint_files(read_upload(cached.read_uploads(files))))
    st.session_state["train.upload_error"] = err
    if err is None or err.code != "train.ckpt_missing":  # a part may still come in a second upload: keep it
        serving.forget_uploads(files)
    if model is not None:
        cached.training.keep(model.task.name, model, "uploaded")
        ui.set_value("task", model.task.name)


def save_tab(model) -> None:
    st.markdown(t("train.save_explain"))
    dtype = ui.radio(t("train.save_dtype"), ["float32", "float16"], "dtype")
    ui.download(t("train.download_ckpt"), partial(checkpoint_zip, model, dtype), f"{model.task.name}-checkpoint.zip",
                "application/zip", key="train.dl_ckpt")
    st.file_uploader(t("train.upload"), type=["zip", "json", "safetensors"], accept_multiple_files=True,
                     key="train.upload", on_change=on_upload, help=t("train.upload_help"))
    err = st.session_state.get("train.upload_error")
    if err is not None:
        ui.show_error(err)


# ---------------------------------------------------------------- compare
def variants(kind: str, base: ModelConfig) -> list[tuple[str, ModelConfig]]:
    d = base.to_dict()
    heads = max(base.n_heads, 4)
    if kind == "heads":
        return [(t(f"train.variant_{name}"), ModelConfig.from_dict(d | {"n_heads": heads, "n_kv_heads": kv}))
                for name, kv in (("mha", heads), ("gqa", heads // 2), ("mqa", 1))]
    if kind == "norm":
        return [(t(f"train.norm_{n}"), ModelConfig.from_dict(d | {"norm": n})) for n in ("pre", "post")]
    return [(t(f"train.variant_scale_{s}"), ModelConfig.from_dict(d | {"scale": s})) for s in (True, False)]


def compare_tab(task, base: ModelConfig, train_cfg: TrainConfig) -> dict:
    st.markdown(t("train.compare_explain"))
    kind = ui.radio(t("train.comparison"), list(COMPARISONS), "cmp", format_func=lambda k: t(f"train.cmp_{k}"))
    st.caption(t(f"train.cmp_{kind}_help"))
    steps = ui.slider(t("train.cmp_steps"), 20, 1500, "cmp_steps", 300, step=10, help=t("train.cmp_steps_help"))
    cfg = TrainConfig.from_dict(train_cfg.to_dict() | {"max_steps": steps, "max_seconds": 120.0,
                                                        "target_accuracy": None})
    runs = [(label, m, cfg) for label, m in variants(kind, base)]
    errors = (ui.safe(check_fits, task, m, c)[1] for _, m, c in runs)
    refused = next((e for e in errors if e is not None), None)
    if refused is not None:  # the same budget as the Train tab, for every variant
        ui.show_error(refused)
    cached.training.buttons(t("train.cmp_go"), "train.cmp_go", cached.build_run, (f"compare:{kind}", task, runs),
                            refused=refused is not None, primary=False)
    stored = cached.training.comparisons().get((task.name, kind))
    if stored and not cached.training.running():
        ui.plot(curves(stored), key="train.cmp_curves")
        compare_summary(stored)


def compare_summary(stored) -> None:
    """Final held-out accuracy and throughput of each variant, side by side."""
    names = [label for label, _ in stored]
    last = [hist[-1] for _, hist in stored]
    c1, c2 = st.columns(2)
    with c1:
        ui.plot(plots.compare_bars(names, [h.get("val_exact") or 0.0 for h in last], title=t("train.cmp_final_acc"),
                                   x_title=t("train.variant"), y_title=t("train.val_exact")), key="train.cmp_acc")
    with c2:
        ui.plot(plots.compare_bars(names, [h["tokens_per_s"] for h in last], title=t("train.cmp_speed"),
                                   x_title=t("train.variant"), y_title=t("train.tokens_per_s")), key="train.cmp_tps")


# ---------------------------------------------------------------- the running job (its own thread; a fragment draws it)
def draw_job(job, run) -> None:
    """Progress of this session's job: progress bar and live curves (redrawn by a fragment)."""
    index = run.active()
    trainer = run.trainer
    history = list(trainer.history)
    hist = history[-1] if history else None
    share = min(1.0, max(trainer.seconds / trainer.train_cfg.max_seconds,
                         trainer.step / (trainer.train_cfg.max_steps or 10 ** 9)))
    st.progress(1.0 if job.done else share,
                text=t("train.progress", run=index + 1, runs=len(run.trainers), step=trainer.step,
                       seconds=f"{trainer.seconds:.1f}",
                       acc="–" if hist is None or hist.val_exact is None else f"{pct(hist.val_exact)}%",
                       worst="–" if hist is None or hist.val_worst is None
                       else f"{hist.val_worst_len}: {pct(hist.val_worst)}%",
                       tps=f"{trainer.tokens / max(trainer.seconds, 1e-9):,.0f}"))
    drawn = run.curves()
    if drawn:
        ui.plot(curves(drawn, live=True), key="train.live_curves")


def finished_panel() -> bool:
    """After a run ends, its curves stay where the live ones were (the same chart, now under a green "finished"
    badge) instead of reappearing at the bottom of the Train tab; until the next run. True when drawn."""
    result = cached.training.result()
    if result is None or result.status != "ok" or result.reason == "unstarted" or cached.training.running():
        return False
    model, origin = cached.training.current(result.task)
    if origin != "trained" or model is None or not model.history:
        return False
    with st.container(border=True, key="train-finished"):
        st.badge(t("common.finished_badge"), icon=":material/check_circle:", color="green")
        ui.plot(curves([(t("train.this_model"), model.history)]), key="train.live_curves")
    return True


def result_text(result) -> str:
    """Why the last run stopped, in words, and where its last evaluation left it (result.details: the trainer's
    outcome(); a comparison carries none)."""
    o = result.details
    if o is None:
        text = t(f"train.reason_{result.reason}", step=result.step)
        if result.accuracy is not None and result.reason != "target":
            text = ui.sentences(text, t("train.reason_acc", acc=pct(result.accuracy)))
        return text
    text = reason_words(result.reason, o)
    if o["evaluations"]:
        text = ui.sentences(text, t("train.reason_last", eval_step=o["eval_step"], n=o["worst_len"],
                                    acc=pct(o["worst"]), all=pct(o["overall"])))
    return text


def reason_words(reason: str, o: dict) -> str:
    """The first sentence of result_text: why the run ended, with the stop rule where it decided."""
    rule = dict(step=o["step"], patience=o["patience"],
                target="–" if o["target"] is None else f"{100 * o['target']:g}")
    missed = o["target"] is not None and reason in ("time", "steps")
    if reason == "stopped" and not o["evaluations"]:
        return t("train.reason_stopped_early", step=o["step"])
    if reason == "time" and missed and o["hits"]:  # the last evaluation met the target, one of the evaluations in a row it needs
        return t("train.reason_time_hit", **rule)
    if missed and o["best_worst"] is not None:
        key = "train.reason_time" if reason == "time" else "train.reason_steps_missed"
        return t(key, best=pct(o["best_worst"]), best_n=o["best_worst_len"], **rule)
    return t(f"train.reason_{reason}", **rule)


def reached(result) -> bool:
    """Success only when the run reached its target or its step budget (a note when it ran out of time)."""
    return result.reason in ("target", "steps")


TABS = ("train", "decode", "attention", "snapshots", "save", "compare")

# ---------------------------------------------------------------- page
ui.prose(ui.glossed(t("train.intro")))
# the loss and its smoothed target: one display of two equations, side by side where the column has room
ui.latex(r"\mathcal{L} = -\sum_t \sum_{v} q_t(v)\,\log p_\theta(v \mid y_{<t}, x) \qquad "
         r"q_t(v) = (1-\varepsilon)\,\mathbf{1}[v = y_t] + \varepsilon / V")
cached.training.collect()  # a finished job: keep its model (or a comparison's curves) and why it stopped; the
#                            address names a running job
cached.training.live(draw_job)  # progress of a running job, first thing under the intro: seen from every tab, and
#                                 drawn before the rest of the page when Train is pressed (or: a run lost with a
#                                 session that is gone)
finished = finished_panel()  # the run that just ended: its curves stay in place
try:
    task = choose_task()
except InputError as exc:
    ui.show_error(exc)
    task = make_task("reverse")
model, origin = cached.training.current(task.name)
cached.training.show_result(result_text, good=reached)
if model is not None:
    describe_model(model, origin)
else:
    st.warning(t("train.no_model"))

tab, tabs = ui.tabs(TABS, "tab", format_func=lambda k: t(f"train.tab_{k}"))
with tabs[tab]:  # only the open tab is drawn
    if tab == "train":
        model_cfg, train_cfg = train_tab(task)
        if not cached.training.running() and not finished and model is not None and model.history:
            ui.plot(curves([(t("train.this_model"), model.history)]), key="train.curves")
    elif tab == "compare":
        opened, box = ui.fold(t("train.cmp_settings"), "cmp_set")  # drawn only while open; closed, they hold
        where = box if opened else ui.HIDDEN
        with where:
            model_cfg, sizes = model_settings(task.name, where)
            if sizes:
                where.caption(sizes)
            train_cfg = train_settings(where)
        compare_tab(task, model_cfg, train_cfg)
    elif model is None:
        st.warning(t("train.no_model"))
    elif tab == "decode":
        decode_tab(model)
    elif tab == "attention":
        attention_tab(model, source_text(model))
    elif tab == "snapshots":
        snapshots_tab(model)
    else:
        save_tab(model)
