"""The four cards as the engine's backend: llama.cpp's RPC split through llama-cpp-python — card registration
(ggml.py, the only ctypes code beside the process lifecycle), the Engine (engine.py) in its worker process
(backend.py), continuous batching (batcher.py, slots.py), the host KV cache, grammars, the model catalog,
GGUF headers and the placement check. Nothing outside this package imports llama_cpp."""
