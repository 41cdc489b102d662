"""The CPU training loss (compact_lm_loss) equals the model's own and TRL's on a tiny random Llama: loss, gradients,
metrics; the CPU trainer uses it and CUDA keeps TRL's head."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from lamarck.training.device import TrainDevice  # noqa: E402
from lamarck.training.sft import compact_head_supported, compact_lm_loss, trainer_class  # noqa: E402

VOCAB = 96


def tiny_llama(seed: int = 0):  # type: ignore[no-untyped-def]
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=2,
    )
    return LlamaForCausalLM(config).float().train()


def batch(seed: int = 1) -> dict:
    """Three rows of different lengths, right-padded; prompt and padding labelled -100."""
    gen = torch.Generator().manual_seed(seed)
    lengths, prompts, width = (11, 7, 9), (4, 3, 6), 11
    ids = torch.zeros(3, width, dtype=torch.long)
    labels = torch.full((3, width), -100)
    mask = torch.zeros(3, width, dtype=torch.long)
    for i, (n, p) in enumerate(zip(lengths, prompts, strict=True)):
        ids[i, :n] = torch.randint(3, VOCAB, (n,), generator=gen)
        labels[i, p:n] = ids[i, p:n]
        mask[i, :n] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def lora(model):  # type: ignore[no-untyped-def]
    from peft import LoraConfig, get_peft_model

    peft_model = get_peft_model(
        model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"], task_type="CAUSAL_LM")
    )
    for name, p in peft_model.named_parameters():  # lora_B starts at zero: give it values so every grad is non-zero
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.1)
    return peft_model


def grads(model, loss) -> dict:  # type: ignore[no-untyped-def]
    loss.backward()
    out = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return out


@pytest.mark.parametrize("adapter", [False, True], ids=["full", "lora"])
def test_same_loss_and_gradients_as_the_models_own_loss(adapter: bool) -> None:
    model = lora(tiny_llama()) if adapter else tiny_llama()
    inputs = batch()
    reference = model(**inputs).loss
    want = grads(model, reference)
    loss, stats = compact_lm_loss(model, inputs)
    got = grads(model, loss)
    assert float(loss.detach()) == pytest.approx(float(reference.detach()), rel=1e-5)
    assert set(got) == set(want) and want
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=1e-4, atol=1e-6)
    assert int(stats["label_count"]) == int((inputs["labels"][:, 1:] != -100).sum())


def test_num_items_in_batch_divides_the_summed_loss() -> None:
    model, inputs = tiny_llama(), batch()
    mean, stats = compact_lm_loss(model, inputs)
    summed, _ = compact_lm_loss(model, inputs, num_items_in_batch=torch.tensor(100))
    assert float(summed.detach()) == pytest.approx(float(mean.detach()) * int(stats["label_count"]) / 100, rel=1e-5)


def test_a_batch_without_labels_gives_a_differentiable_zero() -> None:
    model, inputs = tiny_llama(), batch()
    inputs["labels"][:] = -100
    loss, stats = compact_lm_loss(model, inputs)
    loss.backward()
    assert float(loss.detach()) == 0.0 and int(stats["label_count"]) == 0 and float(stats["entropy_sum"]) == 0.0


def test_metrics_match_a_direct_computation() -> None:
    model, inputs = tiny_llama(), batch()
    _, stats = compact_lm_loss(model, inputs)
    with torch.no_grad():
        logits = model(**{k: v for k, v in inputs.items() if k != "labels"}).logits[:, :-1]
    targets = inputs["labels"][:, 1:]
    keep = targets != -100
    log_p = logits[keep].log_softmax(-1)
    assert int(stats["correct"]) == int((logits[keep].argmax(-1) == targets[keep]).sum())
    assert float(stats["entropy_sum"]) == pytest.approx(float(-(log_p.exp() * log_p).sum()), rel=1e-4)


def test_scaled_or_soft_capped_heads_are_left_to_trl() -> None:
    model = tiny_llama()
    assert compact_head_supported(model) and compact_head_supported(lora(tiny_llama()))
    model.config.final_logit_softcapping = 30.0
    assert not compact_head_supported(model)


def word_tokenizer():  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "</s>": 1, "<s>": 2, **{f"w{i}": i for i in range(3, VOCAB)}}
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(WordLevel(vocab, unk_token="<pad>")),
        pad_token="<pad>",
        eos_token="</s>",
        bos_token="<s>",
    )


def test_the_cpu_trainer_trains_with_the_compact_loss_and_logs_trls_metrics(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from lamarck.training import sft

    calls = []
    monkeypatch.setattr(sft, "compact_lm_loss", lambda *a, **k: calls.append(1) or compact_lm_loss(*a, **k))

    inputs = batch()
    rows = [
        {"input_ids": ids[m.bool()].tolist(), "labels": lab[m.bool()].tolist()}
        for ids, lab, m in zip(inputs["input_ids"], inputs["labels"], inputs["attention_mask"], strict=True)
    ]
    config = SFTConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=3,
        use_cpu=True,
        bf16=False,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        activation_checkpointing=False,
    )
    cpu = trainer_class(TrainDevice("cpu", "fp32", "test"))
    assert cpu is not SFTTrainer and issubclass(cpu, SFTTrainer)
    assert trainer_class(TrainDevice("cuda", "bf16", "test")) is SFTTrainer
    trainers = [
        cls(model=tiny_llama(), args=config, train_dataset=Dataset.from_list(rows), processing_class=word_tokenizer())
        for cls in (cpu, SFTTrainer)
    ]
    losses, grad_sets = [], []
    for trainer in trainers:
        collated = trainer.data_collator(list(trainer.train_dataset))
        loss = trainer.compute_loss(trainer.model, collated)
        losses.append(float(loss.detach()))
        grad_sets.append(grads(trainer.model, loss))
    assert calls == [1] and losses[0] == pytest.approx(losses[1], rel=1e-4)
    for name, want in grad_sets[1].items():
        torch.testing.assert_close(grad_sets[0][name], want, rtol=1e-3, atol=1e-5)
    ours, trls = (t._metrics["train"] for t in trainers)
    assert ours["mean_token_accuracy"] == pytest.approx(trls["mean_token_accuracy"])
    assert ours["entropy"] == pytest.approx(trls["entropy"], rel=1e-4)
    assert ours["num_tokens"] == trls["num_tokens"] == [int(inputs["attention_mask"].sum())]
    trainers[0].train()  # a whole step through the Trainer
    assert calls == [1, 1]
    assert trainers[0].state.global_step == 1 and trainers[0].state.log_history[-1]["train_loss"] > 0
