"""What kind of Transformer a model is: attention variant, positions, norm and where the norm sits. Torch-free.

Attention variant (Shazeer 2019 for MQA, Ainslie et al. 2023 for GQA): H query heads share H_kv key/value heads,
query head i reading key/value head

    g(i) = floor(i / (H / H_kv))        MHA: H_kv = H,  MQA: H_kv = 1,  GQA: 1 < H_kv < H

Read from a transformers config (num_key_value_heads, multi_query, rope_*, *_eps, ...) and, where a model is given,
from its module class names (LlamaRMSNorm, T5LayerNorm, nn.LayerNorm): plain facts for the page to state.
"""
from __future__ import annotations

from dataclasses import dataclass

# families by position encoding (config.model_type)
_RELATIVE = {"t5", "mt5", "umt5", "longt5", "deberta", "deberta-v2", "transfo-xl", "transformer-xl"}
_ROPE = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3",
         "gemma3_text", "phi", "phi3", "olmo", "olmo2", "smollm3", "granite", "cohere", "starcoder2", "gpt_neox",
         "gptj", "stablelm", "codegen", "persimmon", "falcon"}
_LEARNED = {"bert", "roberta", "distilbert", "electra", "xlm-roberta", "albert", "camembert", "gpt2", "opt",
            "gpt_neo", "gpt_bigcode", "bart", "mbart", "biogpt"}
_SINUSOIDAL = {"marian", "fsmt", "xglm", "ctrl"}
# families by norm and its place
_T5 = {"t5", "mt5", "umt5", "longt5"}
_LAYERNORM = {"bart", "mbart", "marian", "fsmt", "opt", "xglm", "biogpt", "ctrl"}  # configs without an *_eps field
_POST = {"bert", "roberta", "distilbert", "electra", "xlm-roberta", "albert", "camembert", "marian", "bart",
         "deberta", "deberta-v2", "mpnet", "fsmt", "xlm", "ernie"}
_PRE = _ROPE | _T5 | {"gpt2", "gpt_neo", "gpt_bigcode", "opt", "bloom", "mbart", "xglm", "biogpt", "ctrl", "mpt"}


@dataclass(frozen=True)
class Architecture:
    """The attention variant, positions and norms of a model: what the page says about the model loaded."""
    family: str        # config.model_type ("gpt2", "llama", "qwen2", "bert", "t5"...), "lm" for our own decoder
    n_heads: int       # query heads H
    n_kv_heads: int    # key/value heads H_kv (= H for multi-head attention)
    positions: str     # "learned", "sinusoidal", "rope", "relative", "alibi" or "unknown"
    norm: str          # "layernorm", "rmsnorm" or "unknown"
    norm_place: str    # "pre", "post" or "unknown"
    head_dim: int = 0  # d_head of a query / key vector (0: not known)
    scale: float = 0.0  # the factor on q . k before softmax, 1/sqrt(d_head) or 1/sqrt(query_pre_attn_scalar) (0: ?)
    sliding_window: int = 0  # W of the sliding-window layers: query i sees keys i-W+1..i (0: none)
    sliding_layers: tuple[int, ...] = ()  # the layers that use the window; the others see every earlier key
    qk_norm: bool = False  # q and k are RMS-normalised per head before the dot product (Gemma 3, Qwen3, OLMo 2)

    def __post_init__(self):
        if self.n_heads < 1 or self.n_kv_heads < 1 or self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads ({self.n_heads}) must be a positive multiple of n_kv_heads ({self.n_kv_heads})")

    @property
    def variant(self) -> str:
        """"mha" (H_kv = H), "mqa" (H_kv = 1 < H) or "gqa" (1 < H_kv < H)."""
        if self.n_kv_heads == self.n_heads:
            return "mha"
        return "mqa" if self.n_kv_heads == 1 else "gqa"

    def kv_head_of(self, head: int) -> int:
        """The key/value head that query head i reads: g(i) = floor(i / (H / H_kv))."""
        if not 0 <= head < self.n_heads:
            raise ValueError(f"head must be in 0..{self.n_heads - 1}, got {head}")
        return head // (self.n_heads // self.n_kv_heads)

    def groups(self) -> list[list[int]]:
        """The query heads sharing each key/value head, in order: H_kv lists of H / H_kv heads."""
        size = self.n_heads // self.n_kv_heads
        return [list(range(g * size, (g + 1) * size)) for g in range(self.n_kv_heads)]


MINILM = Architecture("bert", 12, 12, "learned", "layernorm", "post")  # the packaged all-MiniLM-L6-v2


def of_config(config, model=None) -> Architecture:
    """The Architecture of a transformers config; model (optional) lets the norm be read off its module classes."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    family = str(getattr(text, "model_type", "") or getattr(config, "model_type", "") or "unknown")
    n_heads = _first_int(text, ("num_attention_heads", "n_head", "num_heads", "encoder_attention_heads")) or 1
    head_dim = _head_dim(text, n_heads)
    window, sliding = _sliding(text, family)
    return Architecture(family, n_heads, _kv_heads(text, family, n_heads), _positions(text, family),
                        _norm(text, family, model), _norm_place(text, family), head_dim=head_dim,
                        scale=_scale(text, head_dim), sliding_window=window, sliding_layers=sliding,
                        qk_norm=_qk_norm(model))


def _head_dim(config, n_heads: int) -> int:
    """d_head: the config's head_dim (Gemma's 256 is not d_model / H), else d_model / H."""
    explicit = _first_int(config, ("head_dim",))
    if explicit:
        return explicit
    d_model = _first_int(config, ("hidden_size", "n_embd", "d_model", "dim"))
    return d_model // n_heads if d_model else 0


def _scale(config, head_dim: int) -> float:
    """The score scale: 1/sqrt(query_pre_attn_scalar) where the config sets it (Gemma), else 1/sqrt(d_head)."""
    scalar = getattr(config, "query_pre_attn_scalar", None)
    if isinstance(scalar, (int, float)) and scalar > 0:
        return float(scalar) ** -0.5
    return head_dim ** -0.5 if head_dim else 0.0


def _sliding(config, family: str) -> tuple[int, tuple[int, ...]]:
    """(W, the layers using it) from the config's layer_types ("sliding_attention"), or every layer for Mistral-
    style configs that set sliding_window alone; (0, ()) when no layer uses a window."""
    window = getattr(config, "sliding_window", None)
    if not isinstance(window, int) or window <= 0:
        return 0, ()
    types = getattr(config, "layer_types", None)
    if isinstance(types, (list, tuple)) and types:
        layers = tuple(i for i, kind in enumerate(types) if kind == "sliding_attention")
    elif family in ("mistral", "mixtral") and getattr(config, "use_sliding_window", True):
        layers = tuple(range(_first_int(config, ("num_hidden_layers",)) or 0))
    else:
        layers = ()
    return (window, layers) if layers else (0, ())


def _qk_norm(model) -> bool:
    """Whether the attention modules normalise q and k (modules named q_norm / k_norm inside the layers)."""
    if model is None:
        return False
    return any(name.endswith(("q_norm", "query_norm")) for name, _ in model.named_modules())


def _first_int(config, names: tuple[str, ...]) -> int | None:
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _kv_heads(config, family: str, n_heads: int) -> int:
    """H_kv: num_key_value_heads (Llama, Qwen2, Mistral...), Falcon's num_kv_heads / multi_query, else H."""
    if family == "falcon":
        new = getattr(config, "new_decoder_architecture", False)
        kv = getattr(config, "num_kv_heads", None) if new or not getattr(config, "multi_query", False) else 1
        return kv if isinstance(kv, int) and kv > 0 else n_heads
    if getattr(config, "multi_query", False):
        return 1
    return _first_int(config, ("num_key_value_heads",)) or n_heads


def _positions(config, family: str) -> str:
    if family == "bloom" or (family in ("falcon", "mpt") and _alibi(config)):
        return "alibi"
    if family in _RELATIVE or str(getattr(config, "position_embedding_type", "")).startswith("relative"):
        return "relative"
    if family in _ROPE or any(getattr(config, a, None) is not None
                              for a in ("rope_theta", "rope_parameters", "rope_scaling")):
        return "rope"
    if family in _LEARNED:
        return "learned"
    return "sinusoidal" if family in _SINUSOIDAL else "unknown"


def _alibi(config) -> bool:
    attn = getattr(config, "attn_config", None)  # MPT keeps it in attn_config (an object or a dict)
    nested = attn.get("alibi") if isinstance(attn, dict) else getattr(attn, "alibi", None)
    return bool(getattr(config, "alibi", False) or nested)


def _norm(config, family: str, model=None) -> str:
    """rmsnorm / layernorm from the module classes when a model is given, else from the config's fields."""
    found = _norm_of_modules(model) if model is not None else None
    if found:
        return found
    if family in _T5 or getattr(config, "rms_norm_eps", None) is not None:
        return "rmsnorm"  # T5LayerNorm is an RMSNorm: no mean subtracted, no bias
    if any(getattr(config, a, None) is not None for a in ("layer_norm_eps", "layer_norm_epsilon")) \
            or family in _LAYERNORM:
        return "layernorm"
    return "unknown"


def _norm_of_modules(model) -> str | None:
    """The first norm module's kind by its class name: *RMSNorm or *T5LayerNorm -> rmsnorm, *LayerNorm -> layernorm."""
    for module in model.modules():
        name = type(module).__name__
        if name.endswith("RMSNorm") or name.endswith("T5LayerNorm"):
            return "rmsnorm"
        if name.endswith("LayerNorm"):
            return "layernorm"
    return None


def _norm_place(config, family: str) -> str:
    """pre: x + F(norm(x)); post: norm(x + F(x)). A config's own switch (normalize_before, do_layer_norm_before)
    wins over the family's usual place."""
    for attr in ("normalize_before", "do_layer_norm_before"):
        value = getattr(config, attr, None)
        if isinstance(value, bool):
            return "pre" if value else "post"
    if family in _POST:
        return "post"
    return "pre" if family in _PRE else "unknown"
