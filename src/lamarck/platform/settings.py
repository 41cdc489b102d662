"""One place for every setting: ``LAMARCK_`` environment variables, then ``lamarck.toml``, then defaults.

Nested sections use ``__`` in environment variables, for example
``LAMARCK_MODELS__EXECUTOR__MODEL=openai/qwen`` or ``LAMARCK_SANDBOX__MODE=limits_only``.
"""

from __future__ import annotations

import os
import re
import string
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

ROLES: tuple[str, ...] = ("curriculum", "executor", "critic", "harness_critic")
DEFAULT_MODEL_VERSION = "smollm2-135m"
DEFAULT_LOCAL_MODEL = f"lamarck/{DEFAULT_MODEL_VERSION}"


class SamplingDefaults(BaseModel):
    temperature: float = Field(0.0, ge=0.0, le=5.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(256, ge=1, le=32768)


class ModelRoute(BaseModel):
    """Where one role's calls go: a litellm model name, optionally an api_base and key.

    ``version_model`` is the litellm model name the route asks for a Lamarck model version under, with
    ``{version}`` where the version's name goes: ``openai/{version}`` with an ``api_base`` asks an OpenAI-compatible
    server (vLLM with one LoRA adapter per version, named by version) for the release's version by name. Unset, a
    ``lamarck/...`` route asks for ``lamarck/<version>`` in-process, or for ``<version>`` at its ``api_base``
    (``lamarck serve-model``), and any other route asks for ``model`` whatever the version
    (``lamarck.platform.llm.version_names`` is the rule).
    """

    model: str = DEFAULT_LOCAL_MODEL
    api_base: str | None = None
    api_key: SecretStr | None = None
    version_model: str | None = None
    sampling: SamplingDefaults = Field(default_factory=SamplingDefaults)

    @field_validator("model")
    @classmethod
    def _model_named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("model must be a litellm model name such as 'lamarck/smollm2-135m'")
        return value.strip()

    @field_validator("version_model")
    @classmethod
    def _one_version_field(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()
        try:
            fields = {name for _, name, _, _ in string.Formatter().parse(value) if name is not None}
        except ValueError as exc:
            raise ValueError(
                f"version_model {value!r} is not a template ({exc}): write e.g. 'openai/{{version}}'"
            ) from None
        if fields != {"version"}:
            raise ValueError(
                f"version_model {value!r} must contain {{version}} and no other field: write e.g. 'openai/{{version}}'"
            )
        return value


class ModelRoutes(BaseModel):
    curriculum: ModelRoute = Field(
        default_factory=lambda: ModelRoute(sampling=SamplingDefaults(temperature=0.8, top_p=0.95))
    )
    executor: ModelRoute = Field(default_factory=ModelRoute)
    critic: ModelRoute = Field(default_factory=ModelRoute)
    harness_critic: ModelRoute = Field(
        default_factory=lambda: ModelRoute(sampling=SamplingDefaults(temperature=0.7, top_p=0.95))
    )

    def route(self, role: str) -> ModelRoute:
        if role not in ROLES:
            raise KeyError(f"unknown role {role!r}: use one of {', '.join(ROLES)}")
        routes = {
            "curriculum": self.curriculum,
            "executor": self.executor,
            "critic": self.critic,
            "harness_critic": self.harness_critic,
        }
        return routes[role]


class EngineSettings(BaseModel):
    """The in-process local engine that serves ``lamarck/<version>`` models.

    ``llamacpp`` (the default) serves GGUF files through llama.cpp with continuous batching: ``slots`` sequences
    generate at once, each with room for ``slot_tokens`` tokens of prompt and answer, and one step feeds at most
    ``batch_tokens`` tokens. ``torch`` is the project's own fp32 PyTorch engine, which batches requests that arrive
    within ``batch_window_ms`` (up to ``max_batch_size`` rows).
    """

    backend: Literal["llamacpp", "torch"] = "llamacpp"
    format: Literal["q8_0", "f32"] = "q8_0"
    slots: int = Field(64, ge=1, le=256)
    slot_tokens: int = Field(2048, ge=64, le=32768)
    batch_tokens: int = Field(2048, ge=32, le=65536)
    device: str = "cpu"
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    max_batch_size: int = Field(32, ge=1, le=1024)
    batch_window_ms: float = Field(5.0, ge=0.0, le=1000.0)
    threads: int | None = Field(None, ge=1)

    @property
    def rollout_concurrency(self) -> int:
        """Rollouts run at once by default: one per llama.cpp slot, so no slot idles while episodes wait for a
        thread; the torch engine's largest batch."""
        return self.slots if self.backend == "llamacpp" else self.max_batch_size


class GatewaySettings(BaseModel):
    retries: int = Field(3, ge=0, le=20)
    backoff_seconds: float = Field(0.5, ge=0.0)
    timeout_seconds: float = Field(600.0, gt=0.0)


class SandboxSettings(BaseModel):
    """Limits for untrusted code. ``limits_only`` skips namespaces and warns on every run."""

    mode: Literal["bubblewrap", "limits_only"] = "bubblewrap"
    user: str = "nobody"
    cpu_seconds: int = Field(5, ge=1)
    wall_seconds: float = Field(10.0, gt=0.0)
    memory_mb: int = Field(512, ge=32)
    file_size_mb: int = Field(16, ge=1)
    open_files: int = Field(64, ge=16)
    processes: int = Field(32, ge=1)
    output_bytes: int = Field(1_000_000, ge=1024)  # per stream; more is cut off and reported as limit "output"
    scratch_mb: int = Field(64, ge=1)  # size of the in-memory scratch directory (bubblewrap mode)
    site_packages: bool = True  # let code import the venv's packages (read-only); False starts python with -S
    python: str | None = None  # interpreter to run; default: the one running lamarck
    bwrap: str = "bwrap"  # bubblewrap command or path


class ApiSettings(BaseModel):
    """The REST API (``lamarck serve``). ``api_key``, when set, is accepted with every scope besides the stored keys
    (``lamarck keys create``)."""

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    api_key: SecretStr | None = None
    max_body_bytes: int = Field(1_000_000, ge=1024)  # larger request bodies get 413, chunked ones too
    task_workers: int = Field(2, ge=1, le=64)  # tasks solved at once (embedded mode: threads of the API process)
    sse_poll_seconds: float = Field(0.5, gt=0.0, le=30.0)  # how often an event stream looks for new events
    # Per key, a token bucket: requests a second, and how many may come at once; 0 turns the limit off. Over it,
    # 429 with Retry-After. The buckets live in the server's memory in embedded mode, in Redis (shared by every API
    # process) when rate_limit_redis_url names one or the platform runs distributed (then the broker's Redis).
    rate_limit_per_second: float = Field(0.0, ge=0.0, le=100_000.0)
    rate_limit_burst: int = Field(0, ge=0, le=1_000_000)  # 0: one second's worth of requests
    rate_limit_redis_url: str | None = None  # e.g. "redis://127.0.0.1:6379/0"
    # Browser origins allowed to call the API (e.g. "https://ui.example.org"); empty: no cross-origin access.
    cors_origins: list[str] = Field(default_factory=list)

    @field_validator("cors_origins")
    @classmethod
    def _exact_origins(cls, origins: list[str]) -> list[str]:
        for origin in origins:
            if not re.fullmatch(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?", origin):
                raise ValueError(
                    f"CORS origin {origin!r} must be an exact origin like https://ui.example.org[:port], no path or *"
                )
        return origins

    @field_validator("rate_limit_redis_url")
    @classmethod
    def _redis_url(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must be a Redis URL such as redis://127.0.0.1:6379/0 (redis://, rediss:// or unix://)")
        return url


class ApprovalSettings(BaseModel):
    """Human in the loop. ``required``: the loop's model promotions (the gate passed), harness promotions (a
    harness-critic round's winner) and skill additions (induced skills the critic approved) wait as pending
    approvals until someone approves or rejects each (``lamarck approvals``, ``/v1/approvals``); off, the loop
    applies them at once. Promotions and additions made by hand never wait."""

    required: bool = False


class MemorySettings(BaseModel):
    """Vector memory bounds. Over its bound a collection evicts lowest ``utility``, then least recently used."""

    max_lessons: int = Field(10_000, ge=1)
    max_episodes: int = Field(50_000, ge=1)
    max_entries: int = Field(20_000, ge=1)  # any other collection (e.g. skills)
    evict_headroom: float = Field(0.05, ge=0.0, lt=1.0)  # evict this far below the bound, so adds there rarely rescan
    dedup_threshold: float = Field(0.15, ge=0.0, le=2.0)  # cosine distance under which two lessons count as duplicates
    embedding_batch_size: int = Field(64, ge=1, le=4096)
    collection_prefix: str = ""  # namespaces the collections when several deployments share one Chroma server
    http_timeout_seconds: float = Field(60.0, gt=0.0)  # per request to a Chroma server; a hung server fails


class WorkerSettings(BaseModel):
    """Celery workers. Embedded mode (no ``broker_url``) uses a SQLite broker file and a worker the platform starts."""

    queues: list[str] = Field(default_factory=lambda: ["rollout", "train"])
    concurrency: int = Field(1, ge=1, le=64)
    visibility_timeout_seconds: int = Field(6 * 3600, ge=1)  # above the longest job, or Redis redelivers it
    lease_ttl_seconds: int = Field(120, ge=2)  # a job's lease expires this long after its worker stops renewing
    heartbeat_seconds: float = Field(20.0, gt=0.0)  # lease renewal period; well under lease_ttl_seconds
    max_attempts: int = Field(3, ge=1, le=20)  # a job that fails this often ends failed (poison)
    retry_backoff_seconds: float = Field(30.0, ge=0.0)  # first retry delay, doubled per attempt
    retry_backoff_max_seconds: float = Field(1800.0, ge=0.0)
    embedded_autostart: bool = True
    torch_threads: int | None = Field(None, ge=1)  # per worker process; None: half the cores in embedded mode
    broker_key_prefix: str = ""  # namespaces broker keys when deployments (or test runs) share one Redis
    # where a generation's rollouts run: "in_process" in the run's own process; "queue": one lamarck.rollout.run task
    # per generation task on the rollout queue, for any number of `lamarck worker --queues rollout` hosts
    rollouts: Literal["in_process", "queue"] = "in_process"
    rollout_timeout_seconds: float = Field(3600.0, gt=0.0)  # the execute node's wait for a generation's rollouts
    rollout_poll_seconds: float = Field(0.5, gt=0.0, le=60.0)  # how often it looks for newly recorded episodes
    # a job still unrecorded this long after it was sent, with no delivery holding its lease, is sent again: a worker
    # host that died is not waited for until the broker's visibility timeout (duplicates record nothing)
    rollout_resend_seconds: float = Field(300.0, gt=0.0)


class TrainingSettings(BaseModel):
    """Distillation: dataset building, TRL SFT/DPO with LoRA, and the evaluation gate."""

    min_new_episodes: int = Field(32, ge=1)
    cap_per_cell: int = Field(64, ge=1)  # rows per environment x difficulty
    rows_per_task: int = Field(2, ge=1)  # distinct passing rows kept per task
    anchor_levels: int = Field(1, ge=0)  # levels 1..n are anchors against forgetting: capped, not the target
    anchor_share: float = Field(0.2, ge=0.0, le=1.0)  # anchor rows at most this share of a dataset
    process_filter: bool = True  # a pass becomes a row only if its answer follows from its work
    stepwise_rows: bool = False  # ... and its multi-operation calls become one call per operation (process_filter)
    repaired_weight: float = Field(0.5, ge=0.0, le=1.0)  # share of critic-repaired rows trained (0: none, 1: all)
    max_length: int = Field(1024, ge=64)
    # the recipe (training/recipe.py): steps from the data, warmup and decay, a validation split by task
    epochs: float = Field(2.0, gt=0.0)  # passes over the training side: steps = ceil(epochs * rows / (batch * accum))
    min_steps: int = Field(10, ge=1)
    max_steps: int = Field(60, ge=1)  # the cap on a job's steps, whatever its size
    learning_rate: float = Field(1e-3, gt=0.0)  # peak, after warmup
    lr_scheduler: Literal["cosine", "constant"] = "cosine"
    warmup_ratio: float = Field(0.1, ge=0.0, lt=1.0)  # share of the steps spent ramping up from 0
    validation_share: float = Field(0.15, ge=0.0, lt=1.0)  # share of tasks (not rows) held out; 0: no split
    evaluations: int = Field(6, ge=1)  # validation passes per job, evenly spaced (the last at the last step)
    early_stopping_patience: int = Field(2, ge=0)  # evaluations without a new best before stopping; 0: never
    keep_best: bool = True  # return the best evaluated weights, not the last (early stopping always does)
    refuse_rise: float = Field(0.05, ge=0.0)  # refused if the last validation loss ends this far above the parent's
    batch_size: int = Field(4, ge=1)
    grad_accum: int = Field(1, ge=1)
    lora_rank: int = Field(16, ge=1, le=256)
    lora_alpha: int = Field(32, ge=1)
    lora_dropout: float = Field(0.0, ge=0.0, lt=1.0)
    full_finetune: bool = False
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    save_steps: int = Field(20, ge=1)
    dpo: bool = False
    dpo_steps: int = Field(20, ge=1)
    dpo_beta: float = Field(0.1, gt=0.0)
    seed: int = 0
    gate_per_level: int = Field(5, ge=1, le=50)  # held-out tasks per difficulty level for the gate
    gate_focus_per_level: int = Field(30, ge=1, le=50)  # ... on the levels the candidate's dataset covers
    gate_focus_min_share: float = Field(0.1, ge=0.0, le=1.0)  # ... that hold at least this share of its rows there
    gate_alpha: float = Field(0.05, gt=0.0, lt=1.0)  # total significance over all planned looks (alpha spending)
    gate_looks: int = Field(10, ge=1)  # gate decisions planned in advance; each is tested at gate_alpha / gate_looks
    gate_effect: float = Field(0.15, gt=0.0, le=1.0)  # the pass-rate gain the gate's power is computed for
    sampler_dev_per_level: int = Field(5, ge=1, le=50)  # dev tasks per level that pick a refused candidate as sampler
    # new rows a job needs, per row of its largest sibling: above 1, each retry from the same parent waits for more
    # data than the last (fewer, bigger jobs; on 2 cores a job and its gate cost minutes of rollouts)
    min_new_row_share: float = Field(0.5, ge=0.0, le=10.0)
    # where a job's weights start: "champion" continues the champion's adapter on the rows since it (warm start);
    # "base" trains a fresh adapter on the base model over every row so far (ReST-EM). The lineage parent, and so
    # the gate's opponent, is the champion either way.
    train_from: Literal["champion", "base"] = "champion"
    replay_share: float = Field(0.0, ge=0.0, le=4.0)  # warm start: earlier rows replayed per new row (0: none)
    phases: bool = True  # embedded mode: rollouts pause while a job trains, since both would share the same cores
    gate_tolerance: float = Field(0.05, ge=0.0, le=1.0)  # a smaller pass-rate drop elsewhere never refuses
    gate_harm_alpha: float = Field(0.1, gt=0.0, lt=1.0)  # a larger one refuses only if the harm test is this sure
    gate_environments: list[str] | None = None  # held-out sets the gate also checks (None: every training env)
    schedule: bool = True  # runs queue distillation jobs and gate their candidates between generations


class HarnessCriticSettings(BaseModel):
    """The harness-critic's rounds: how many challengers from each source, and the champion/challenger
    test on the development slice (agents/harness_critic.py)."""

    dev_per_level: int = Field(4, ge=1, le=50)  # development-slice tasks per level (training seeds only)
    edge_tasks: int = Field(12, ge=0, le=50)  # more dev tasks at each level of the champion's edge (0: none)
    demonstration_proposals: int = Field(2, ge=0, le=32)
    knob_proposals: int = Field(4, ge=0, le=64)
    rewrite_proposals: int = Field(1, ge=0, le=8)
    rewrite_max_tokens: int = Field(512, ge=16)
    early_tasks: int = Field(8, ge=1)  # the small batch every challenger meets first
    early_needs_a_win: bool = True  # a challenger that ties the champion on the small batch with no win stops there
    keep: int = Field(2, ge=1)  # challengers that go on to the whole slice
    alpha: float = Field(0.05, gt=0.0, lt=1.0)  # split evenly over the challengers judged on the whole slice
    max_token_increase: float = Field(0.25, ge=0.0)  # a promoted challenger spends at most this much more per task
    max_answer_drop: float = Field(0.1, ge=0.0, le=1.0)  # a challenger whose outputs parse to an answer this much
    # less often than the champion's (share of samples) is rejected, whatever it wins
    budget_tasks: int = Field(400, ge=1)  # task evaluations per round, champion included
    seed: int = 0


class TracingSettings(BaseModel):
    """Traces of model calls, tool calls, sandbox runs and graph nodes. ``store_text``: each ``LLMCall`` row keeps the
    prompt and the reply (secrets redacted) and spans carry them; off, only counts and timings are kept.
    ``otlp_endpoint``: an OTLP/HTTP collector (``http://host:4318``, or a full URL ending in ``/v1/traces``) that
    receives the spans; unset, spans are made but sent nowhere. A collector that is down never stops a run: its spans
    are held (up to ``held_spans``) and sent once it answers."""

    store_text: bool = True
    otlp_endpoint: str | None = None
    service_name: str = Field("lamarck", min_length=1, max_length=200)
    export_timeout_seconds: float = Field(5.0, gt=0.0, le=120.0)  # per export, retries included
    held_spans: int = Field(10_000, ge=0, le=1_000_000)  # spans kept while the collector is down; older ones drop

    @field_validator("otlp_endpoint")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        if url is None or not url.strip():
            return None
        url = url.strip()
        if not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", url):
            raise ValueError(
                f"OTLP endpoint {url!r} must be an http(s) URL such as http://127.0.0.1:4318 (OTLP over HTTP)"
            )
        return url


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="LAMARCK_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    data_dir: Path = Path(".lamarck")
    model_store_dir: Path | None = None
    database_url: str | None = None
    broker_url: str | None = None
    chroma_path: Path | None = None
    chroma_url: str | None = None
    models: ModelRoutes = Field(default_factory=ModelRoutes)
    engine: EngineSettings = Field(default_factory=EngineSettings)
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    approvals: ApprovalSettings = Field(default_factory=ApprovalSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    workers: WorkerSettings = Field(default_factory=WorkerSettings)
    training: TrainingSettings = Field(default_factory=TrainingSettings)
    harness_critic: HarnessCriticSettings = Field(default_factory=HarnessCriticSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    openai_api_key: SecretStr | None = None

    @model_validator(mode="after")
    def _derive_paths(self) -> Settings:
        self.data_dir = self.data_dir.expanduser()
        if self.model_store_dir is None:
            self.model_store_dir = self.data_dir / "models"
        if self.database_url is None:
            self.database_url = f"sqlite:///{(self.data_dir / 'lamarck.db').as_posix()}"
        if self.chroma_path is None and self.chroma_url is None:
            self.chroma_path = self.data_dir / "chroma"
        return self

    @property
    def mode(self) -> Literal["embedded", "distributed"]:
        return "distributed" if self.broker_url else "embedded"

    @property
    def models_dir(self) -> Path:
        assert self.model_store_dir is not None
        return self.model_store_dir

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls, toml_file=config_file()))


def config_file() -> Path:
    """The TOML file: ``LAMARCK_CONFIG`` names it; otherwise ``lamarck.toml`` in the working directory."""
    return Path(os.environ.get("LAMARCK_CONFIG", "lamarck.toml"))


class SettingsError(ValueError):
    """Settings that cannot be used; the message is one line and names the fix."""


def load_settings(**overrides: object) -> Settings:
    path = config_file()
    if "LAMARCK_CONFIG" in os.environ and not path.is_file():
        raise SettingsError(f"config file {path} does not exist: create it with `lamarck init` or unset LAMARCK_CONFIG")
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except Exception as exc:
        raise SettingsError(_one_line(exc, path)) from exc


def _one_line(exc: Exception, path: Path) -> str:
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "settings"
        env = "LAMARCK_" + "__".join(str(part).upper() for part in first["loc"])
        return f"invalid setting {where}: {first['msg']} (fix {env} or [{where}] in {path})"
    return f"cannot read settings from {path}: {str(exc).splitlines()[0]}"
