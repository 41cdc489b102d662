"""A real ``lamarck serve-model`` app on a free port, over the shared local engine, with one adapter version of its
own in the model store. Import ``remote_models_fixture`` into a test module to use
``remote_models`` there (module scope)."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from lamarck.platform.llm.engine import LocalEngine
    from lamarck.platform.llm.model_store import ModelStore

BASE = "smollm2-135m"


@dataclass
class RemoteModelServer:
    base_url: str
    adapter_version: str
    served: list[str] = field(default_factory=list)  # the version each chat call was answered by, server side


class _RecordingEngine:
    """The real engine, noting which version answered each chat request (the server's own record)."""

    def __init__(self, engine: LocalEngine, served: list[str]) -> None:
        self._engine = engine
        self._served = served

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def chat(self, model: str, messages: Any, params: Any = None) -> Any:
        completions = self._engine.chat(model, messages, params)
        self._served.append(model)
        return completions


def strong_adapter(model_store: ModelStore, out: Path) -> Path:
    """A small LoRA adapter with large random B matrices, so its greedy output differs from the base model's."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(model_store.resolve(BASE).base_dir, local_files_only=True)
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "o_proj"]))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.2)
    model.save_pretrained(out)
    return out


@pytest.fixture(scope="module", name="remote_models")
def remote_models_fixture(
    model_store: ModelStore, local_engine: LocalEngine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RemoteModelServer]:
    import uvicorn

    from lamarck.platform.llm.server import create_app

    version = f"test-remote-{uuid.uuid4().hex[:8]}"
    model_store.add_adapter(version, strong_adapter(model_store, tmp_path_factory.mktemp("adapter")), base=BASE)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    remote = RemoteModelServer(f"http://127.0.0.1:{port}/v1", version)
    app = create_app(_RecordingEngine(local_engine, remote.served))  # type: ignore[arg-type]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline, "the model server did not start"
        time.sleep(0.05)
    try:
        yield remote
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        local_engine.forget_adapter(version)
        model_store.remove_adapter(version)
