"""Trained tokens/s: our TRL path (LoRA and full fine-tune) beside a plain PyTorch loop and the CPU FLOP limit.

Same rows, same batch size, same precision (training/device.py's choice). The limit: a full fine-tune costs about
6 x parameters FLOPs per trained token; a large fp32 matmul gives the machine's FLOP/s.
Two clocks: wall seconds, and CPU seconds / threads (what the numbers would be on an otherwise idle machine;
the shared 2-core machine's load swings the wall figures by 5x between runs).
OpenMP threads wait passively (OMP_WAIT_POLICY=PASSIVE unless set): with libgomp's default spinning, a thread
whose partner was descheduled by other load burns its CPU time at every barrier, which made even the CPU clock
swing 4x between identical steps on the shared machine (wall too). Passive waiting leaves out the time a thread
idles for the other (load imbalance) that spinning would count, so the CPU figures are optimistic by that share
for every path alike; the big matmul of the limit has the least imbalance, so full_vs_flop_limit leans high.
"summary" holds the two targets' ratios per clock: trl_vs_plain_lora (>= 0.9) and full_vs_flop_limit (>= 0.4).
Run: .venv/bin/python benchmarks/bench_training.py [--steps 6] [--batch 4]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read when torch loads libgomp: before `import torch`
import torch  # noqa: E402

from lamarck.platform.cpu import cpu_summary  # noqa: E402
from lamarck.platform.llm.model_store import ModelStore  # noqa: E402
from lamarck.platform.settings import TrainingSettings  # noqa: E402
from lamarck.training.device import choose_device  # noqa: E402
from lamarck.training.sft import LORA_TARGETS, tokenized_rows, train_sft  # noqa: E402
from lamarck.training.traces_to_rows import TrainingRow  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def rows(n: int) -> list[TrainingRow]:
    out = []
    for i in range(n):
        question = f"Ana has {i + 7} apples and buys {3 * i + 2} more, then gives away {i % 5}. How many are left?"
        steps = " ".join(f"Step {k}: we add and subtract the numbers carefully to keep track." for k in range(3))
        out.append(
            TrainingRow(
                task_id=str(i),
                episode_id=str(i),
                environment="arithmetic",
                difficulty=1,
                train_turns=[2, 4],
                messages=[
                    {"role": "system", "content": "You are a careful problem solver. Use CALL calc: expr."},
                    {"role": "user", "content": question},
                    {"role": "assistant", "content": f"{steps}\nCALL calc: {i + 7}+{3 * i + 2}-{i % 5}"},
                    {"role": "user", "content": f"RESULT: {i + 7 + 3 * i + 2 - i % 5}"},
                    {"role": "assistant", "content": f"ANSWER: {i + 7 + 3 * i + 2 - i % 5}"},
                ],
            )
        )
    return out


Rate = dict[str, float]  # "wall": per wall second; "cpu": per CPU second / threads (robust to other load)


def _rate(amount: float, wall: float, cpu: float) -> Rate:
    return {"wall": amount / wall, "cpu": amount / (cpu / torch.get_num_threads())}


def flop_limit() -> Rate:
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    a @ b
    wall, cpu, n = time.perf_counter(), time.process_time(), 5
    for _ in range(n):
        a @ b
    return _rate(2 * 2048**3 * n, time.perf_counter() - wall, time.process_time() - cpu)


def plain_loop(base: Path, data: list[dict], batch: int, steps: int, lora: bool, lr: float) -> Rate:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32, local_files_only=True)
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(
            model, LoraConfig(r=16, lora_alpha=32, target_modules=LORA_TARGETS, task_type="CAUSAL_LM")
        )
    model.train()
    optim = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    ordered = sorted(data, key=lambda r: len(r["input_ids"]))  # the same length grouping the TRL path uses
    tokens, seconds, cpu_seconds = 0, 0.0, 0.0
    for step in range(steps + 1):
        chunk = [ordered[(step * batch + k) % len(ordered)] for k in range(batch)]
        width = max(len(r["input_ids"]) for r in chunk)
        ids = torch.tensor([r["input_ids"] + [0] * (width - len(r["input_ids"])) for r in chunk])
        labels = torch.tensor([r["labels"] + [-100] * (width - len(r["labels"])) for r in chunk])
        mask = torch.tensor([[1] * len(r["input_ids"]) + [0] * (width - len(r["input_ids"])) for r in chunk])
        started, cpu = time.perf_counter(), time.process_time()
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optim.step()
        optim.zero_grad(set_to_none=True)
        if step > 0:  # the first step warms up allocators and kernels
            seconds += time.perf_counter() - started
            cpu_seconds += time.process_time() - cpu
            tokens += int(mask.sum())
    return _rate(tokens, seconds, cpu_seconds)


def trl_path(base: Path, batch: int, steps: int, full: bool, lr: float, train_rows: list[TrainingRow]) -> Rate:
    work = Path(tempfile.mkdtemp(prefix="bench-trl-"))
    try:
        settings = TrainingSettings(  # no validation split: the plain loop trains on every row and never evaluates
            max_steps=steps,
            batch_size=batch,
            learning_rate=lr,
            full_finetune=full,
            save_steps=10_000,
            validation_share=0.0,
        )
        seen: list[tuple[float, float, float]] = []  # (tokens seen, wall, cpu) after each step

        def sink(m: dict) -> None:
            if "loss" in m:
                seen.append((float(m["num_input_tokens_seen"]), time.perf_counter(), time.process_time()))

        train_sft(base_dir=base, rows=train_rows, work_dir=work, settings=settings, on_metrics=sink)
        (tokens0, wall0, cpu0), (tokens1, wall1, cpu1) = seen[0], seen[-1]  # step 1 warms up, as in the plain loop
        return _rate(tokens1 - tokens0, wall1 - wall0, cpu1 - cpu0)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch", type=int, default=4)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    store = ModelStore(Path(os.environ.get("LAMARCK_TEST_MODEL_STORE", ROOT / ".cache" / "test-models")))
    base = store.import_default(progress=False).base_dir
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
    train_rows = rows(args.batch * (args.steps + 1))
    data = tokenized_rows(tokenizer, train_rows, 1024)
    params = sum(
        p.numel()
        for p in __import__("transformers")
        .AutoModelForCausalLM.from_pretrained(base, local_files_only=True)
        .parameters()
    )
    limit_flops = flop_limit()
    limit_tokens = {clock: value / (6 * params) for clock, value in limit_flops.items()}
    load = os.getloadavg()
    results = {}
    for name, full in (("lora", False), ("full", True)):
        plain = plain_loop(base, data, args.batch, args.steps, lora=not full, lr=1e-4)
        trl = trl_path(base, args.batch, args.steps + 1, full, 1e-4, train_rows)
        results[name] = {
            clock: {
                "plain_tokens_per_s": plain[clock],
                "trl_tokens_per_s": trl[clock],
                "trl_vs_plain": trl[clock] / plain[clock],
                "trl_vs_limit": trl[clock] / limit_tokens[clock],
            }
            for clock in ("wall", "cpu")
        }
    summary = {
        key: {clock: results[path][clock][field] for clock in ("cpu", "wall")}
        for key, path, field in (
            ("trl_vs_plain_lora", "lora", "trl_vs_plain"),
            ("full_vs_flop_limit", "full", "trl_vs_limit"),
        )
    }
    report = {
        "summary": summary,
        "device": choose_device().__dict__,
        "cpu": cpu_summary(),
        "params": params,
        "threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "matmul_gflops": {k: v / 1e9 for k, v in limit_flops.items()},
        "limit_tokens_per_s_full": limit_tokens,
        "loadavg_start": load,
        "loadavg_end": os.getloadavg(),
        "steps": args.steps,
        "batch": args.batch,
        "mean_row_tokens": sum(len(r["input_ids"]) for r in data) / len(data),
        "results": results,
        "targets": {"trl_vs_plain_lora": 0.9, "full_vs_flop_limit": 0.4},
    }
    print(
        f"device {report['device']}; load {load[0]:.2f} -> {report['loadavg_end'][0]:.2f}; "
        f"matmul {limit_flops['wall'] / 1e9:.0f} (wall) / {limit_flops['cpu'] / 1e9:.0f} (cpu) GFLOP/s; "
        f"full fine-tune = 6 x {params / 1e6:.0f}M FLOP/token"
    )
    print(
        f"{'path':6} {'clock':5} {'plain tok/s':>12} {'TRL tok/s':>10} {'limit tok/s':>12} "
        f"{'TRL/plain':>10} {'TRL/limit':>10}"
    )
    for name, by_clock in results.items():
        for clock, r in by_clock.items():
            print(
                f"{name:6} {clock:5} {r['plain_tokens_per_s']:12.1f} {r['trl_tokens_per_s']:10.1f} "
                f"{limit_tokens[clock]:12.1f} {r['trl_vs_plain']:10.2f} {r['trl_vs_limit']:10.2f}"
            )
    for key, target in (("trl_vs_plain_lora", 0.9), ("full_vs_flop_limit", 0.4)):
        print(f"summary {key:19} cpu {summary[key]['cpu']:.2f}  wall {summary[key]['wall']:.2f}  (target >= {target})")
    out = ROOT / "benchmarks" / "results" / "bench_training.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
