"""Optional DPO after SFT (TRL DPOTrainer) on passed-vs-failed pairs at the same task.

It continues the SFT adapter: the policy is base + the SFT adapter (trainable), and with peft the reference is the
same model with the adapter disabled, so no second copy of the weights is held.
"""

from __future__ import annotations

import logging
from pathlib import Path

from lamarck.platform.settings import TrainingSettings
from lamarck.training.device import choose_device
from lamarck.training.sft import MetricSink, TrainResult, callbacks, run_trainer
from lamarck.training.traces_to_rows import PreferencePair

log = logging.getLogger(__name__)


def train_dpo(
    *,
    base_dir: Path,
    adapter_dir: Path,
    pairs: list[PreferencePair],
    work_dir: Path,
    settings: TrainingSettings,
    tensorboard_dir: Path | None = None,
    on_metrics: MetricSink | None = None,
) -> TrainResult:
    from datasets import Dataset
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.trainer.dpo_config import DPOConfig
    from trl.trainer.dpo_trainer import DPOTrainer

    if not pairs:
        raise ValueError("no preference pairs: DPO needs passed and failed attempts at the same task")
    device = choose_device(settings.precision)
    tokenizer = AutoTokenizer.from_pretrained(base_dir, local_files_only=True)
    base = AutoModelForCausalLM.from_pretrained(base_dir, local_files_only=True)
    model = PeftModel.from_pretrained(base, str(adapter_dir), is_trainable=True)
    data = Dataset.from_list([{"prompt": p.prompt, "chosen": p.chosen, "rejected": p.rejected} for p in pairs])
    config = DPOConfig(
        output_dir=str(work_dir),
        max_steps=settings.dpo_steps,
        learning_rate=settings.learning_rate / 4,
        per_device_train_batch_size=max(1, settings.batch_size // 2),
        beta=settings.dpo_beta,
        max_length=settings.max_length,
        logging_steps=1,
        save_strategy="steps",
        save_steps=settings.save_steps,
        save_total_limit=2,
        report_to="none",
        seed=settings.seed,
        disable_tqdm=True,
        **device.trainer_kwargs(),
    )
    trainer = DPOTrainer(
        model=model,
        args=config,
        train_dataset=data,
        processing_class=tokenizer,
        callbacks=callbacks(tensorboard_dir, on_metrics),
    )
    return run_trainer(trainer, work_dir, device, "adapter")
