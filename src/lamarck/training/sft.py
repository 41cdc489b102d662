"""LoRA SFT with TRL on the executor's current model.

The base is the fp32 safetensors model in the ModelStore. When the parent (the champion) is itself an adapter,
training continues from that adapter (loaded trainable) instead of stacking a second one: the result is again a
single LoRA adapter on the unchanged base, which is what the local engine and vLLM serve per version. A full
fine-tune (``training.full_finetune``) exists for benchmarks; it writes full weights the engine does not serve.

The recipe (``training/recipe.py``): LoRA on every linear layer of the decoder (attention and MLP), a warmup then
cosine decay, steps from the data size, and a validation split by task. The parent's validation loss is measured
before the first step; the trainer evaluates every few steps, stops after ``early_stopping_patience`` evaluations
without a new best and returns the best checkpoint. ``TrainResult.validation`` carries the curve, so the pipeline
can refuse a job whose validation loss only rose.

A killed job resumes: checkpoints go to ``work_dir/checkpoint-*`` (every evaluation when there is a validation side,
else every ``save_steps``) and the next run of the same job (same work_dir, keyed by parent and dataset digest)
passes ``resume_from_checkpoint``.

Speed on CPU: TRL's SFTTrainer computes the loss through its "fused LM head" (``add_fused_lm_head``), built for
GPUs: without Triton it scores every position (prompt and padding too), recomputes the head's matmul in the
backward pass and folds each vocabulary tile with a dozen full-size elementwise torch ops. That cost about 25% more
CPU per step than a plain ``model(labels=...)`` loop (LoRA; 35% for a full fine-tune). ``compact_lm_loss`` runs the
backbone, projects only the labelled positions through the head and takes log-softmax + NLL (cross-entropy's own
two steps): the same loss and gradients as the model's own loss (tests/training/test_sft_compact_loss.py) and fewer
FLOPs than the plain loop: the head is a fifth of SmolLM2's matmuls, and prompt tokens (half of the benchmark's
rows) no longer go through it.
CUDA keeps TRL's Triton head. The other Trainer costs per step (logging, clipping, collation, fused AdamW) are
about 2% of a step; benchmarks/bench_training.py compares the path with a plain loop and the FLOP limit.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from lamarck.platform.settings import TrainingSettings
from lamarck.training import recipe
from lamarck.training.device import TrainDevice, choose_device
from lamarck.training.recipe import Evaluation, ValidationReport
from lamarck.training.traces_to_rows import TrainingRow, tokenize_row

log = logging.getLogger(__name__)

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]  # all linear but the head
MetricSink = Callable[[dict[str, Any]], None]


class TrainResult(BaseModel):
    output_dir: str  # the adapter (or full model) directory
    steps: int
    first_loss: float | None
    last_loss: float | None
    train_tokens: int
    seconds: float
    tokens_per_second: float
    device: str
    precision: str
    resumed: bool
    train_rows: int = 0
    planned_steps: int = 0  # before early stopping
    learning_rate: float = 0.0
    lr_scheduler: str = ""
    warmup_steps: int = 0
    validation: ValidationReport | None = None  # None: too few tasks to hold any out (see ``validation_note``)
    validation_note: str = ""


def tokenized_rows(tokenizer: Any, rows: list[TrainingRow], max_length: int) -> list[dict[str, list[int]]]:
    """input_ids/labels per row; rows over ``max_length`` are dropped (a cut-off answer teaches nothing)."""
    out = []
    for row in rows:
        if row.weight <= 0.0:
            continue
        ids, labels = tokenize_row(tokenizer, row.messages, row.train_turns)
        if len(ids) > max_length:
            log.info("sft: row %s has %d tokens > max_length %d; dropped", row.episode_id, len(ids), max_length)
            continue
        out.append({"input_ids": ids, "labels": labels})
    return out


def compact_head_supported(model: Any) -> bool:
    """Whether the LM head is a plain linear map of the last hidden state (no logit scaling or soft-capping)."""
    import torch

    core = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = core.config.get_text_config()
    scaling = ("final_logit_softcapping", "logit_scale", "output_multiplier", "lm_head_multiplier", "logits_scaling")
    if any(getattr(config, name, None) not in (None, 1.0) for name in scaling):
        return False
    return core.base_model is not core and type(core.get_output_embeddings()) is torch.nn.Linear


def compact_lm_loss(model: Any, inputs: dict[str, Any], num_items_in_batch: Any = None) -> tuple[Any, dict[str, Any]]:
    """Causal-LM loss that projects only the labelled positions through the LM head.

    Returns ``(loss, stats)``: the summed next-token cross-entropy over positions whose label is not -100, divided by
    ``num_items_in_batch`` (the Trainer's count across gradient accumulation) or else by this batch's label count,
    as TRL's loss is; ``stats`` holds detached ``label_count``, ``correct`` (argmax hits) and ``entropy_sum``.
    """
    import torch
    import torch.nn.functional as F

    core = model.get_base_model() if hasattr(model, "get_base_model") else model  # LoRA layers sit inside it
    backbone_inputs = {k: v for k, v in inputs.items() if k != "labels"}
    hidden = core.base_model(**backbone_inputs, use_cache=False).last_hidden_state
    targets = inputs["labels"][:, 1:]
    mask = targets != -100
    picked, targets = hidden[:, :-1][mask], targets[mask]  # [labelled positions, hidden], [labelled positions]
    log_probs = core.get_output_embeddings()(picked).float().log_softmax(-1)  # cross_entropy's own two steps
    count = mask.sum()
    denominator = count if num_items_in_batch is None else num_items_in_batch
    loss = F.nll_loss(log_probs, targets, reduction="sum") / torch.as_tensor(denominator).clamp(min=1)
    with torch.no_grad():  # the metrics TRL logs, from the same log-probs: one exp pass and a dot product
        flat = log_probs.detach().reshape(-1)
        stats = {
            "label_count": count,
            "correct": (log_probs.detach().argmax(-1) == targets).sum(),
            "entropy_sum": -torch.dot(flat.exp(), flat),
        }
    return loss, stats


def trainer_class(device: TrainDevice) -> Any:
    """TRL's SFTTrainer on CUDA (its Triton fused head); off CUDA, the same trainer with ``compact_lm_loss``."""
    from trl.trainer.sft_trainer import SFTTrainer

    return SFTTrainer if device.device == "cuda" else _compact_head_trainer()


@functools.cache
def _compact_head_trainer() -> Any:  # the class is built on first use: importing sft does not import TRL
    import torch
    from trl.trainer.sft_config import SFTConfig
    from trl.trainer.sft_trainer import SFTTrainer

    class CompactHeadSFTTrainer(SFTTrainer):
        """SFTTrainer whose training and validation loss is ``compact_lm_loss``; anything it does not cover goes to
        TRL's."""

        def compute_loss(
            self,
            model: torch.nn.Module,
            inputs: dict[str, Any],
            return_outputs: bool = False,
            num_items_in_batch: torch.Tensor | int | None = None,
        ) -> Any:
            unwrapped = self.accelerator.unwrap_model(model)
            if (
                return_outputs
                or "labels" not in inputs
                or "shift_labels" in inputs
                or self.aux_loss_enabled
                or self.compute_loss_func is not None
                or self.label_smoother is not None
                or not isinstance(self.args, SFTConfig)
                or self.args.loss_type != "nll"
                or self.accelerator.num_processes != 1
                or not compact_head_supported(unwrapped)
            ):
                # TRL's compute_loss is unannotated (a stub gap; untyped_calls_exclude does not reach super() calls)
                return super().compute_loss(  # type: ignore[no-untyped-call]
                    model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch
                )
            loss, stats = compact_lm_loss(unwrapped, inputs, num_items_in_batch)
            count = int(stats["label_count"])
            metrics = self._metrics["train" if model.training else "eval"]
            metrics["entropy"].append(float(stats["entropy_sum"]) / count if count else 0.0)
            metrics["mean_token_accuracy"].append(int(stats["correct"]) / count if count else 0.0)
            if not model.training:
                return loss
            mask = inputs.get("attention_mask")
            self._total_train_tokens += int(mask.sum()) if mask is not None else int(inputs["input_ids"].numel())
            metrics["num_tokens"] = [self._total_train_tokens]
            return loss

    return CompactHeadSFTTrainer


def load_model(base_dir: Path, parent_adapter: Path | None, settings: TrainingSettings, device: TrainDevice) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.bfloat16 if device.bf16 and device.device == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=dtype, local_files_only=True)
    if settings.full_finetune:
        return model
    from peft import LoraConfig, PeftModel, get_peft_model

    if parent_adapter is not None:
        return PeftModel.from_pretrained(model, str(parent_adapter), is_trainable=True)
    config = LoraConfig(
        r=settings.lora_rank,
        lora_alpha=settings.lora_alpha,
        lora_dropout=settings.lora_dropout,
        target_modules=LORA_TARGETS,
        bias="none",
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


class Plan(BaseModel):
    """What one SFT job will do: its step budget, schedule and evaluation cadence."""

    steps: int
    warmup_steps: int
    scheduler: str
    eval_steps: int | None  # None: no validation side


def plan(settings: TrainingSettings, train_rows: int, *, validation: bool, max_steps: int | None = None) -> Plan:
    """``max_steps`` (a job's explicit override) replaces the steps planned from the data size."""
    steps = max_steps or recipe.planned_steps(train_rows, settings)
    return Plan(
        steps=steps,
        warmup_steps=recipe.warmup_steps(steps, settings.warmup_ratio),
        scheduler=recipe.scheduler_type(settings),
        eval_steps=recipe.eval_every(steps, settings.evaluations) if validation else None,
    )


def sft_config(work_dir: Path, settings: TrainingSettings, device: TrainDevice, job: Plan) -> Any:
    from trl.trainer.sft_config import SFTConfig

    validation: dict[str, Any] = {}
    if job.eval_steps is not None:
        validation = {
            "eval_strategy": "steps",
            "eval_steps": job.eval_steps,
            "per_device_eval_batch_size": settings.batch_size,
            "prediction_loss_only": True,
            "metric_for_best_model": "eval_loss",
            "greater_is_better": False,
            "load_best_model_at_end": settings.keep_best or settings.early_stopping_patience > 0,
        }
    return SFTConfig(
        output_dir=str(work_dir),
        max_steps=job.steps,
        learning_rate=settings.learning_rate,
        per_device_train_batch_size=settings.batch_size,
        gradient_accumulation_steps=settings.grad_accum,
        optim="adamw_torch_fused",  # one kernel over all tensors (also on CPU): ~5x faster than the for-loop AdamW
        lr_scheduler_type=job.scheduler,
        warmup_steps=job.warmup_steps,
        weight_decay=0.0,
        logging_steps=1,
        save_strategy="steps",
        save_steps=job.eval_steps or settings.save_steps,  # the best checkpoint is only known at a save
        save_total_limit=2,  # with load_best_model_at_end the best checkpoint is kept besides the latest
        report_to="none",  # the TensorBoard callback is added with an explicit log dir
        seed=settings.seed,
        max_length=settings.max_length,
        packing=False,
        train_sampling_strategy="group_by_length",  # batches of similar length: little padding, no packing needed
        include_num_input_tokens_seen="non_padding",
        disable_tqdm=True,
        **validation,
        **device.trainer_kwargs(),
    )


def train_sft(
    *,
    base_dir: Path,
    rows: list[TrainingRow],
    work_dir: Path,
    settings: TrainingSettings,
    parent_adapter: Path | None = None,
    tensorboard_dir: Path | None = None,
    on_metrics: MetricSink | None = None,
    max_steps: int | None = None,
) -> TrainResult:
    from datasets import Dataset
    from transformers import AutoTokenizer, EarlyStoppingCallback

    device = choose_device(settings.precision)
    tokenizer = AutoTokenizer.from_pretrained(base_dir, local_files_only=True)
    split = recipe.split_by_task(rows, settings.validation_share, seed=settings.seed)
    data = tokenized_rows(tokenizer, split.train, settings.max_length)
    if not data:
        raise ValueError("no trainable rows (all empty, zero-weight or longer than training.max_length)")
    held = tokenized_rows(tokenizer, split.validation, settings.max_length)
    job = plan(settings, len(data), validation=bool(held), max_steps=max_steps)
    model = load_model(base_dir, parent_adapter, settings, device)
    extra = callbacks(tensorboard_dir, on_metrics)
    if held and settings.early_stopping_patience > 0:
        extra.append(EarlyStoppingCallback(early_stopping_patience=settings.early_stopping_patience))
    trainer = trainer_class(device)(
        model=model,
        args=sft_config(work_dir, settings, device, job),
        train_dataset=Dataset.from_list(data),
        eval_dataset=Dataset.from_list(held) if held else None,
        processing_class=tokenizer,
        callbacks=extra,
    )
    start_loss = float(trainer.evaluate()["eval_loss"]) if held else None  # the parent's, before any step
    result = run_trainer(trainer, work_dir, device, "adapter" if not settings.full_finetune else "model")
    validation = None
    if start_loss is not None:
        validation = ValidationReport.of(
            rows=len(held),
            tasks=len(split.validation_tasks),
            start_loss=start_loss,
            evaluations=evaluations(trainer.state.log_history),
            planned_steps=job.steps,
            kept="best" if trainer.args.load_best_model_at_end else "last",
        )
    return result.model_copy(
        update={
            "train_rows": len(data),
            "planned_steps": job.steps,
            "learning_rate": settings.learning_rate,
            "lr_scheduler": job.scheduler,
            "warmup_steps": job.warmup_steps,
            "validation": validation,
            "validation_note": split.note,
        }
    )


def evaluations(log_history: list[dict[str, Any]]) -> list[Evaluation]:
    """The trainer's validation losses by step (a resumed job's history includes the evaluations before the kill)."""
    by_step = {int(entry["step"]): float(entry["eval_loss"]) for entry in log_history if "eval_loss" in entry}
    return [Evaluation(step=step, loss=loss) for step, loss in sorted(by_step.items())]


def callbacks(tensorboard_dir: Path | None, on_metrics: MetricSink | None) -> list[Any]:
    from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

    found: list[Any] = []
    if tensorboard_dir is not None:
        from torch.utils.tensorboard import SummaryWriter
        from transformers.integrations.integration_utils import TensorBoardCallback

        tensorboard_dir.mkdir(parents=True, exist_ok=True)
        found.append(TensorBoardCallback(tb_writer=SummaryWriter(log_dir=str(tensorboard_dir))))
    if on_metrics is not None:
        emit = on_metrics

        class _Sink(TrainerCallback):
            def on_log(
                self,
                args: TrainingArguments,
                state: TrainerState,
                control: TrainerControl,
                logs: dict[str, object] | None = None,
                **kwargs: Any,
            ) -> None:
                if logs:
                    emit({"step": state.global_step, **{k: v for k, v in logs.items() if isinstance(v, int | float)}})

        found.append(_Sink())
    return found


def latest_checkpoint(work_dir: Path) -> Path | None:
    checkpoints = [p for p in work_dir.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()]
    return max(checkpoints, key=lambda p: int(p.name.split("-")[-1])) if checkpoints else None


def run_trainer(trainer: Any, work_dir: Path, device: TrainDevice, kind: str) -> TrainResult:
    resume = latest_checkpoint(work_dir)
    if resume is not None:
        log.info("training: resuming from %s", resume)
    started = time.perf_counter()
    trainer.train(resume_from_checkpoint=str(resume) if resume is not None else None)
    seconds = time.perf_counter() - started
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    out = work_dir / kind
    trainer.save_model(str(out))
    tokens = int(getattr(trainer.state, "num_input_tokens_seen", 0) or 0)
    return TrainResult(
        output_dir=str(out),
        steps=trainer.state.global_step,
        first_loss=losses[0] if losses else None,
        last_loss=losses[-1] if losses else None,
        train_tokens=tokens,
        seconds=seconds,
        tokens_per_second=tokens / seconds if seconds > 0 else 0.0,
        device=device.device,
        precision=device.precision,
        resumed=resume is not None,
    )
