"""The target over llama.cpp's RPC backend: workers, the layer split, and a host process.

ggml-rpc aborts its process when a worker stops answering, so the target never runs over RPC in
the app's own process: it runs in a host process (host.py), and the app talks to it through
proxies (proxies.py) that look like LlamaModel and LlamaContext.
"""
