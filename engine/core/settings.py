"""The settings schema: how to load the models, and how to run one request.

Each field carries its help text, label, range and choices (`Option`), so the command
line (engine.cli.options), the app's Settings persistence (desktop.settings_store) and
validation are all generated from here: every default and every limit is written once.
Both dataclasses validate themselves when built, so a bad value never reaches a model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, get_args

from engine.core.endpoints import Endpoint, parse_endpoints, parse_split
from engine.core.setting_schema import options, setting, validate

PositionMode = Literal["auto", "restore", "renumber", "compress"]
RunMode = Literal["baseline", "spec", "both"]
Device = Literal["auto", "cuda", "mps", "cpu"]
DraftQuant = Literal["auto", "int8", "bf16", "none"]
FlashAttn = Literal["auto", "on", "off"]

RUN_MODES: tuple[str, ...] = get_args(RunMode)
DEFAULT_MIN_TOKENS = 4096  # below about 4K tokens the draft costs more than it saves
DRAFT_PREFILL_CHUNK = 1024  # tokens per draft prefill step: bounds memory, lets Cancel in between
DRAFT_WINDOW_SINKS = 64  # first prompt tokens every query sees when the draft's prefill is windowed
# The most question rows the draft scores: the last tokens before the final one. SnapKV's observation
# window is 32-64 tokens; 128 holds every question measured whole (20-60 rows with the assistant
# header), and bounds their attention at 3 x 128 x heads x prompt tokens x 4 bytes (0.7 GB at 32K
# tokens for the default draft) where a document pasted as the question would need its square.
DRAFT_QUESTION_ROWS_MAX = 128
TIMED_QUESTION_ROWS = (
    32  # a timed draft pass scores like a question of about 25 tokens and the assistant header
)
MAX_CONTEXT_DEFAULT = 32768  # n_ctx when unset: the target's trained window, at most this
AUTO_KEEP = "auto"  # keep chosen per request from the draft's scores (engine.draft.keep_policy)
AUTO_KEEP_FLOOR, AUTO_KEEP_CEILING = 0.1, 0.4  # the range auto chooses in for a look-up
# A broad question's keep. Coverage already spreads it over every part, and on the fidelity suite's
# 17 broad questions the ceiling's extra chunks found no more key points or counts than 0.2 did.
AUTO_KEEP_BROAD = 0.2
# A question joining two facts (multi-hop): on the probe's 7, answer text kept in 4 at 0.2, 6 at 0.3;
# on the fidelity suite's 11 joined ones the full prefill answers, 9 right at 0.3, all 11 at 0.4 (measured 2026-12-05).
AUTO_KEEP_JOINED = 0.4
# From this many prompt tokens on, a look-up keeps the floor: 0.1 of them is 31+ chunks, and on the
# fidelity suite's 27 look-ups in 13K-22K-token prompts the spread's keeps (1.6 times the floor's
# tokens) answered 17 of the full prefill's 19, as the floor did (measured 2026-12-05). Only for prompts that fit
# the target's window: past it a 48K needle at 0.1 was lost (selection_plan.long_lookup_tokens).
AUTO_LONG_LOOKUP_TOKENS = 10_000
AUTO_KEEP_NOMINAL = 0.2  # what predictions made before the draft has scored assume auto keeps
Coverage = Literal["auto", "on", "off"]
NamedFiles = Literal["auto", "off"]
PENALTY_WINDOW = 64  # the answer's last tokens the penalties count (llama.cpp's and Ollama's default)
SAMPLING = "Sampling"  # the Settings dialog's group of the settings that choose each answer token
SEED_MAX = 2**32 - 2  # llama.cpp's seeds are 32-bit; the largest one stands for "random"


def sampling(default: Any, **option: Any) -> Any:
    """A setting of the Sampling group: how each answer token is chosen from the target's logits."""
    return setting(default, group=SAMPLING, **option)


def gigabytes_setting(default: float, zero_means: str, **option) -> float:
    """A cache size in GB: any size from 0 (`zero_means` says what 0 turns off) up."""
    return setting(default, minimum=0.0, maximum=1 << 20, zero_means=zero_means, **option)


@dataclass
class ModelSettings:
    """How to load the target and the draft. None paths mean the default models."""

    target_path: Path | None = setting(
        None,
        flag="--target",
        none_means="the default target",
        help="target GGUF (default: Qwen2.5-Coder-1.5B-Instruct Q4_K_M)",
        label="Target model",
    )
    draft_path: Path | None = setting(
        None,
        flag="--draft",
        none_means="the default draft",
        help="draft GGUF or transformers model folder (default: Qwen2.5-Coder-0.5B-Instruct Q4_K_M)",
        label="Draft model",
    )
    device: Device = setting(
        "auto",
        choices=get_args(Device),
        label="Device",
        choice_labels=(("auto", "Auto"), ("cuda", "CUDA"), ("mps", "Apple GPU (MPS)"), ("cpu", "CPU")),
        help="where the draft runs (auto: CUDA, then Apple MPS, when torch sees one); "
        "the target joins it on the GPU when llama.cpp can offload",
    )
    draft_quant: DraftQuant = setting(
        "auto",
        choices=get_args(DraftQuant),
        label="Draft precision",
        choice_labels=(
            ("auto", "Auto (the fastest on this CPU, measured once)"),
            ("int8", "int8 (dynamic quantization)"),
            ("bf16", "bf16 (fast where the CPU has AMX or AVX512-BF16)"),
            ("none", "fp32"),
        ),
        help="the draft's number format on the CPU. auto (default): the fastest of int8, bf16 and fp32 on "
        "this CPU that keeps at least 95 in 100 of fp32's chunks, measured once per CPU, torch and draft; int8: dynamic "
        "int8 Linear layers; bf16; none: fp32. A GPU runs the draft in half precision",
    )
    n_threads: int | None = setting(
        None,
        flag="--threads",
        what="threads",
        minimum=1,
        maximum=1024,
        label="Threads",
        none_means="the physical cores",
        help="CPU threads (default: physical cores)",
    )
    n_ctx: int | None = setting(
        None,
        minimum=256,
        what="context size",
        label="Context size (tokens)",
        none_means=f"the target's trained window, at most {MAX_CONTEXT_DEFAULT}",
        help=f"the target's context window in tokens (default: its trained window, at most "
        f"{MAX_CONTEXT_DEFAULT}); at most what the target was trained for",
    )
    flash_attn: FlashAttn = setting(
        "auto",
        choices=get_args(FlashAttn),
        label="Flash attention",
        choice_labels=(("auto", "Auto (on a GPU only)"), ("on", "On"), ("off", "Off")),
        help="llama.cpp's flash attention for the target (auto: on when the target runs on a GPU, off on "
        "the CPU, where llama.cpp's kernel made a follow-up over a cached 4K document 2.2x slower)",
    )
    n_batch: int = setting(
        512, minimum=1, maximum=1 << 16, flag="", what="batch size", help="tokens per llama.cpp decode call"
    )
    state_cache_gb: float = gigabytes_setting(
        4.0,
        "off: never saved or loaded",
        what="saved-state cache size",
        label="Saved document states (GB)",
        help="GB of documents' saved prefix states kept in the cache, least recently used evicted first "
        "(0 = off: never saved or loaded)",
    )
    draft_cache_gb: float = gigabytes_setting(
        1.0,
        "off: the draft scores every question from scratch",
        what="draft cache size",
        label="Draft cache (GB)",
        help="GB of memory for the draft's keys and values of open documents, so a follow-up SpecPrefill "
        "scores only its question; least recently used dropped first (0 = off)",
    )

    rpc: str = setting(
        "",
        flag="--rpc",
        what="RPC workers",
        help="llama.cpp RPC workers for the target, HOST:PORT[,HOST:PORT...] (start one with `specprefill "
        "worker`): the target's layers are split between this machine and them; the draft stays here. "
        "The RPC protocol has no authentication: trusted networks only",
    )
    rpc_split: str = setting(
        "",
        flag="--rpc-split",
        what="RPC split",
        help="the target's layer split, this machine's weight first, then one per worker (e.g. 2,1,1); "
        "default: in proportion to each one's free memory",
    )
    rpc_timeout: float = setting(
        180.0,
        minimum=1.0,
        maximum=86400.0,
        what="RPC timeout",
        help="seconds the target may go without an answer from its RPC workers before the run is ended",
    )

    def __post_init__(self) -> None:
        for name in ("target_path", "draft_path"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Path):
                setattr(self, name, Path(value))
        validate(self)
        parse_split(self.rpc_split, len(parse_endpoints(self.rpc)))  # raises SettingsError when malformed

    @property
    def workers(self) -> tuple[Endpoint, ...]:
        return parse_endpoints(self.rpc)


@dataclass
class RunSettings:
    """One request: how much to keep and how to place the kept tokens."""

    keep: float | Literal["auto"] = setting(
        0.2,
        minimum=0.0,
        maximum=1.0,
        above_minimum=True,
        words=(AUTO_KEEP,),
        help=f"fraction of the prompt's chunks SpecPrefill keeps, or auto: chosen per question from how "
        f"concentrated the draft's scores are, between {AUTO_KEEP_FLOOR} and {AUTO_KEEP_CEILING} "
        f"(a broad question, such as a summary, gets {AUTO_KEEP_BROAD}, which coverage spreads over the "
        f"document; one that joins two facts gets {AUTO_KEEP_JOINED}; a look-up in a prompt of "
        f"{AUTO_LONG_LOOKUP_TOKENS:,} tokens or more that fits the target's window gets {AUTO_KEEP_FLOOR})",
    )
    coverage: Coverage = setting(
        "auto",
        choices=get_args(Coverage),
        label="Coverage",
        choice_labels=(("auto", "Auto (broad questions)"), ("on", "Always"), ("off", "Off")),
        help="give every page of a PDF, every section of a text file (by its headings) and every file of a "
        "folder a share of the kept chunks before the top-scored ones fill the rest (auto: for broad "
        "questions, such as summaries)",
    )
    named_files: NamedFiles = setting(
        "auto",
        choices=get_args(NamedFiles),
        label="Files and definitions named in the question",
        choice_labels=(("auto", "Keep their best chunks first"), ("off", "Draft's scores only")),
        help="when a question names files of a folder (by path, file name or dotted module) or what its Python "
        "files define (a class, function or constant, written as code), their best-scored chunks are kept "
        "first, definitions before files, up to half of what is kept (off: the draft's scores alone)",
    )
    question_words: float = setting(
        1.0,
        minimum=0.0,
        maximum=10.0,
        zero_means="off: the draft's attention alone",
        label="Question words weight",
        help="chunks that share the question's rarer words (BM25) rank higher: their rank among the chunks, "
        "times this weight, adds to their rank by the draft's scores (0 = off: the draft's attention "
        "alone, as the reference)",
    )
    positions: PositionMode = setting(
        "auto",
        choices=get_args(PositionMode),
        help="where kept tokens go: restore their original positions, renumber them 0..n, compress the "
        "gaps between them to fit the window, or auto (restore when the runtime supports it; renumber "
        "for a document longer than the window)",
    )
    min_tokens: int | None = setting(
        None,
        minimum=0,
        maximum=1 << 24,
        label="SpecPrefill threshold",
        none_means=f"the calibrated prediction, else {DEFAULT_MIN_TOKENS}",
        help=f"below this many prompt tokens SpecPrefill is bypassed "
        f"(default: the calibrated prediction, else {DEFAULT_MIN_TOKENS})",
    )
    force: bool = setting(False, help="run SpecPrefill even below the threshold")
    max_new_tokens: int = setting(
        256, minimum=1, maximum=1 << 20, label="Max new tokens", help="tokens to generate at most"
    )
    chunk_size: int = setting(
        32,
        minimum=1,
        maximum=1 << 16,
        label="Chunk size (tokens)",
        help="tokens per chunk the draft keeps or drops",
    )
    kernel: int = setting(
        13, minimum=1, maximum=1023, odd=True, help="average-pool width that smooths the draft's scores (odd)"
    )
    lookahead: int = setting(
        8,
        minimum=1,
        maximum=256,
        label="Draft look-ahead (tokens)",
        help="tokens the draft decodes ahead to score the prompt",
    )
    first_scored_layer: int = setting(
        0,
        minimum=0,
        maximum=1023,
        label="First scored draft layer",
        help="the draft layer from which the look-ahead's attention counts in the scores (0: every layer, "
        "as the reference does); the earlier layers' attention is ignored",
    )
    score_question: bool = setting(
        True,
        label="Score with the question",
        help="the question's own tokens also score the document with their attention, each counting as "
        "much as a look-ahead step (SnapKV's observation window); off: the look-ahead alone, as the reference",
    )
    draft_window: int = setting(
        4096,
        minimum=0,
        maximum=1 << 24,
        label="Draft attention window (tokens)",
        zero_means="Full attention",
        help="tokens each prompt token attends back to in the draft's prefill (0 = full attention)",
    )
    truncate: bool = setting(
        False,
        label="Long documents",
        help="a full prefill alone cuts the end of a document too long for the context window (and says how "
        "much) instead of refusing; SpecPrefill fits it by selection, and a compare always cuts it",
    )
    background_prefill: bool = setting(
        True,
        label="Background full prefill",
        help="in a session (chat, the app), after a SpecPrefill answer prefill the whole document into the "
        "target while idle, so later questions are answered from the full cached document",
    )
    read_ahead: bool = setting(
        True,
        label="Read ahead on open",
        help="in a session (chat, the app), the draft reads the document as soon as it is opened, while the "
        "question is typed, so the first SpecPrefill answer scores only its question; a question "
        "arriving meanwhile takes over what was read",
    )
    temperature: float = sampling(
        0.0,
        minimum=0.0,
        maximum=2.0,
        zero_means="greedy",
        label="Temperature",
        help="how freely the answer's tokens are sampled: higher is more varied (0 = greedy: always the "
        "likeliest token, the same answer every time; compares, A/B suites and benchmarks always run greedy)",
    )
    top_p: float = sampling(
        1.0,
        minimum=0.0,
        maximum=1.0,
        label="Top-p",
        help="nucleus sampling: sample only among the likeliest tokens whose probabilities add up to this "
        "(1 = off)",
    )
    top_k: int = sampling(
        0,
        minimum=0,
        maximum=1 << 20,
        zero_means="off",
        label="Top-k",
        help="sample only among this many likeliest tokens (0 = off)",
    )
    min_p: float = sampling(
        0.0,
        minimum=0.0,
        maximum=1.0,
        zero_means="off",
        label="Min-p",
        help="drop the tokens less likely than this fraction of the likeliest one's probability (0 = off)",
    )
    seed: int | None = sampling(
        None,
        minimum=0,
        maximum=SEED_MAX,
        none_means="a random seed per run",
        label="Seed",
        help="the sampler's random seed: the same seed, prompt and settings give the same answer "
        "(default: a random seed per run)",
    )
    presence_penalty: float = sampling(
        0.0,
        minimum=-2.0,
        maximum=2.0,
        label="Presence penalty",
        help="subtracted from the logit of every token already in the answer's last "
        f"{PENALTY_WINDOW} tokens: above 0 favours new tokens (0 = off)",
    )
    frequency_penalty: float = sampling(
        0.0,
        minimum=-2.0,
        maximum=2.0,
        label="Frequency penalty",
        help=f"subtracted from a token's logit once per time it occurs in the answer's last {PENALTY_WINDOW} "
        "tokens: above 0 discourages repeating (0 = off)",
    )
    repeat_penalty: float = sampling(
        1.0,
        minimum=0.0,
        maximum=2.0,
        above_minimum=True,
        label="Repeat penalty",
        help=f"scales down by this factor the logits of the tokens in the answer's last {PENALTY_WINDOW} tokens "
        "(Ollama's repeat_penalty): above 1 discourages repeating (1 = off)",
    )
    system_prompt: str = setting(
        "You are a helpful assistant. Answer using only the document.",
        flag="",
        help="the system turn of the chat prompt",
    )

    def __post_init__(self) -> None:
        validate(self)


def nominal_keep(keep: float | str) -> float:
    """A keep to predict with: the number, or what auto is expected to keep before the draft has scored."""
    return AUTO_KEEP_NOMINAL if keep == AUTO_KEEP else float(keep)


def sampling_fields() -> tuple[str, ...]:
    """The RunSettings fields that choose each answer token from the target's logits."""
    return tuple(name for name, option, _ in options(RunSettings) if option.group == SAMPLING)


def greedy(settings: RunSettings) -> RunSettings:
    """These settings with every sampling field at its default: greedy decoding, no penalties. Compares
    and benchmarks run this way, so that both sides answer by the same rule and the same prompt gives
    the same answer."""
    defaults = {name: getattr(RunSettings, name) for name in sampling_fields()}
    if all(getattr(settings, name) == value for name, value in defaults.items()):
        return settings  # greedy already
    return replace(settings, **defaults)


# RunSettings that only sessions (chat, the app) use
SESSION_ONLY_SETTINGS = ("background_prefill", "read_ahead")
DEFAULT_DRAFT_WINDOW: int = RunSettings.draft_window  # read from the schema, for the cost model
