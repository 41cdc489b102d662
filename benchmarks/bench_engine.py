"""Generation throughput, side by side in one run: the embedded default engine (llama.cpp, Q8_0, continuous batching),
llama.cpp itself driven directly in F32 and Q8_0 (one ``llama_batch`` over B sequences, no scheduler), the project's
previous PyTorch engine, and plain transformers ``generate`` (fp32).

Each row: B prompts of ~68 tokens, 64 new tokens each, greedy, eos ignored; throughput = generated tokens / wall
time, prefill included. "n=B" rows ask one prompt for B samples (transformers: the prompt repeated B times).
Prefill rows: tokens/s to read 32 distinct prompts and produce one token each. Set-up: seconds to write the serving
files (quantize the bundled GGUF, convert a rank-16 LoRA adapter) and to start each engine. Each engine runs in a
process of its own (in one process, torch's and llama.cpp's OpenMP threads spin against each other and halve
llama.cpp's speed), one after the other, ``--repeats`` times per case, and the medians are reported.

At batch 1 the embedded engine decodes with prompt-lookup guesses (``platform/llm/continuous.py``); llama.cpp driven
directly does not. The prompts ignore end-of-sequence, so replies run on and often repeat themselves, which such
guesses predict well: the JSON records how many guesses the embedded engine scored and how many were confirmed.

Run: ``python benchmarks/bench_engine.py [--sizes 1 8 32 64] [--repeats 2] [--store DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from lamarck.platform.llm.engine import LocalEngine  # noqa: E402
from lamarck.platform.llm.gguf_files import base_gguf, write_lora_gguf  # noqa: E402
from lamarck.platform.llm.llama_runtime import LlamaContext, LlamaModel  # noqa: E402
from lamarck.platform.llm.model_store import ModelSpec, ModelStore  # noqa: E402
from lamarck.platform.llm.sampling import SamplingParams  # noqa: E402
from lamarck.platform.llm.torch_engine import TorchEngine  # noqa: E402
from lamarck.platform.settings import EngineSettings  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MODEL = "smollm2-135m"
NEW_TOKENS = 64
PREFILL_PROMPTS = 32
TOPICS = ["rivers", "volcanoes", "bridges", "the moon", "bees", "glaciers", "libraries", "trains"]
Prompts = list[tuple[str, list[int]]]  # rendered text and its token ids
Runner = Callable[[Prompts, int], float]  # (prompts, n samples) -> generated tok/s


def prompt_texts(count: int, tokenizer, salt: str = "") -> list[str]:  # type: ignore[no-untyped-def]
    """Distinct prompts; a new ``salt`` makes them new to every prefix cache (only the chat template's opening and
    the first words repeat, as they would across real requests)."""
    out = []
    for i in range(count):
        topic = TOPICS[i % len(TOPICS)]
        text = (
            f"Request {salt}{i}: write a short, friendly explanation of {topic} for a curious ten "
            "year old. Mention one surprising fact, one thing people often get wrong, and end with a question."
        )
        out.append(
            tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
            )
        )
    return out


class RawLlama:
    """llama.cpp with nothing around it: B sequences in one context, prefill in batches, greedy decode."""

    def __init__(self, path: Path, max_batch: int) -> None:
        self.model = LlamaModel(path)
        self.context = LlamaContext(
            self.model, sequences=max_batch, tokens_per_sequence=256, batch_tokens=2048, threads=os.cpu_count() or 1
        )

    def generate(self, prompts: list[list[int]], new_tokens: int) -> float:
        """Generated tokens/s: prefill every prompt in batches, then ``new_tokens`` greedy steps of all rows."""
        start = time.perf_counter()
        last = self._prefill(prompts)
        for step in range(new_tokens - 1):
            logits = self.context.decode(
                last, [len(p) + step for p in prompts], list(range(len(prompts))), list(range(len(prompts)))
            )
            last = [int(row.argmax()) for row in logits]
        return len(prompts) * new_tokens / (time.perf_counter() - start)

    def prefill_rate(self, prompts: list[list[int]]) -> float:
        start = time.perf_counter()
        self._prefill(prompts)
        return sum(len(p) for p in prompts) / (time.perf_counter() - start)

    def _prefill(self, prompts: list[list[int]]) -> list[int]:
        for sequence in range(len(prompts)):
            self.context.remove(sequence)
        last: list[int] = []
        queue = [(s, i, t) for s, p in enumerate(prompts) for i, t in enumerate(p)]
        while queue:
            chunk, queue = queue[: self.context.batch_tokens], queue[self.context.batch_tokens :]
            outputs = [k for k, (s, i, _) in enumerate(chunk) if i == len(prompts[s]) - 1]
            logits = self.context.decode(
                [t for _, _, t in chunk], [i for _, i, _ in chunk], [s for s, _, _ in chunk], outputs
            )
            last += [int(row.argmax()) for row in logits]
        return last

    def close(self) -> None:
        self.context.close()
        self.model.close()


def engine_runner(engine: LocalEngine | TorchEngine) -> Runner:
    def run(prompts: Prompts, n: int) -> float:
        params = SamplingParams(max_tokens=NEW_TOKENS, ignore_eos=True, n=n)
        start = time.perf_counter()
        results = engine.generate(MODEL, [text for text, _ in prompts], params)
        elapsed = time.perf_counter() - start
        assert all(c.completion_tokens == NEW_TOKENS for r in results for c in r)
        return len(prompts) * n * NEW_TOKENS / elapsed

    return run


def transformers_runner(model: torch.nn.Module, pad: int) -> Runner:
    def run(prompts: Prompts, n: int) -> float:
        rows = [ids for _, ids in prompts for _ in range(n)]
        width = max(len(p) for p in rows)
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in rows])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in rows])
        start = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=NEW_TOKENS,
                min_new_tokens=NEW_TOKENS,
                do_sample=False,
                pad_token_id=pad,
            )
        assert out.shape[1] - width == NEW_TOKENS
        return len(rows) * NEW_TOKENS / (time.perf_counter() - start)

    return run


def raw_runner(raw: RawLlama) -> Runner:
    return lambda prompts, n: raw.generate([ids for _, ids in prompts for _ in range(n)], NEW_TOKENS)


def setup_times(spec: ModelSpec, adapter_dir: Path) -> dict[str, float]:
    times: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        scratch = ModelSpec(spec.version, Path(tmp) / spec.base_dir.name)
        scratch.base_dir.mkdir()
        (scratch.base_dir / "lamarck_model.json").write_text((spec.base_dir / "lamarck_model.json").read_text())
        for fmt in ("q8_0", "f32"):
            start = time.perf_counter()
            base_gguf(scratch, fmt)  # type: ignore[arg-type]
            times[f"quantize_{fmt}_s"] = time.perf_counter() - start
        start = time.perf_counter()
        write_lora_gguf(adapter_dir, spec.base_dir, Path(tmp) / "adapter.gguf")
        times["adapter_to_gguf_s"] = time.perf_counter() - start
    return times


def rank16_adapter(spec: ModelSpec, out: Path) -> Path:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from lamarck.training.sft import LORA_TARGETS

    base = AutoModelForCausalLM.from_pretrained(spec.base_dir, local_files_only=True)
    get_peft_model(base, LoraConfig(r=16, lora_alpha=32, target_modules=LORA_TARGETS)).save_pretrained(out)
    return out


def prefill_rate_engine(engine: LocalEngine | TorchEngine, prompts: Prompts) -> float:
    start = time.perf_counter()
    engine.generate(MODEL, [text for text, _ in prompts], SamplingParams(max_tokens=1))
    return sum(len(ids) for _, ids in prompts) / (time.perf_counter() - start)


def prefill_rate_transformers(model: torch.nn.Module, prompts_: Prompts, pad: int) -> float:
    prompts = [ids for _, ids in prompts_]
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    start = time.perf_counter()
    with torch.inference_mode():
        model(input_ids=ids, attention_mask=mask)
    return sum(len(p) for p in prompts) / (time.perf_counter() - start)


ENGINES = ["embedded", "llama.cpp Q8_0", "llama.cpp F32", "torch engine", "transformers"]


def measure(name: str, args: argparse.Namespace) -> dict:
    """One engine, every case, in this process alone: engines in one process slow each other down (torch's and
    llama.cpp's OpenMP threads spin against each other), so each runs in a process of its own."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    store = ModelStore(args.store)
    spec = store.resolve(MODEL)
    biggest = max(args.sizes + args.shared + [PREFILL_PROMPTS])  # room for the prefill row's prompts too
    tokenizer = AutoTokenizer.from_pretrained(spec.base_dir, local_files_only=True)
    started = time.perf_counter()
    engine: LocalEngine | TorchEngine | None = None
    if name == "embedded":
        engine = LocalEngine(store, EngineSettings(slots=biggest))
        run, prefill = engine_runner(engine), lambda p: prefill_rate_engine(engine, p)
    elif name == "torch engine":
        engine = TorchEngine(store, EngineSettings(backend="torch", max_batch_size=biggest, batch_window_ms=0))
        run, prefill = engine_runner(engine), lambda p: prefill_rate_engine(engine, p)
    elif name.startswith("llama.cpp"):
        raw = RawLlama(base_gguf(spec, "q8_0" if name.endswith("Q8_0") else "f32"), biggest)
        run, prefill = raw_runner(raw), lambda p: raw.prefill_rate([ids for _, ids in p])
    else:
        model = AutoModelForCausalLM.from_pretrained(spec.base_dir, dtype=torch.float32, local_files_only=True).eval()
        pad = tokenizer.eos_token_id
        run, prefill = transformers_runner(model, pad), lambda p: prefill_rate_transformers(model, p, pad)
    start_seconds = time.perf_counter() - started

    def fresh(count: int, salt: str) -> Prompts:
        texts = prompt_texts(count, tokenizer, salt)
        return [(t, tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]

    run(fresh(2, "warm-"), 1)
    rows = []
    for label, count, n in cases(args):
        runs, loads = [], []
        for repeat in range(args.repeats):
            loads.append(os.getloadavg()[0])
            runs.append(run(fresh(count, f"{label}-{repeat}-"), n))
        rows.append({"case": label, "tok_s": statistics.median(runs), "runs": runs, "load": statistics.median(loads)})
        print(f"{name}: {label}: {rows[-1]['tok_s']:.1f} tok/s", flush=True)
    prompts = fresh(PREFILL_PROMPTS, "prefill-")
    result = {
        "rows": rows,
        "prefill_tok_s": prefill(prompts),
        "start_s": start_seconds,
        "prompt_tokens_mean": sum(len(ids) for _, ids in prompts) / len(prompts),
    }
    if isinstance(engine, LocalEngine):  # its lone greedy rows (batch 1) decode with prompt-lookup guesses
        stats = engine.prefix_stats
        result["speculation"] = {k: stats[k] for k in ("drafted_tokens", "confirmed_tokens")}
    if engine is not None:
        engine.close()
    return result


def cases(args: argparse.Namespace) -> list[tuple[str, int, int]]:
    return [(f"{size} distinct", size, 1) for size in args.sizes] + [
        (f"1 prompt, n={size}", 1, size) for size in args.shared
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--shared", type=int, nargs="*", default=[32], help="n for the one-prompt, n-samples rows")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--store", type=Path, default=Path(os.environ.get("LAMARCK_TEST_MODEL_STORE", REPO / ".cache" / "test-models"))
    )
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "bench_engine.json")
    parser.add_argument("--only", choices=ENGINES, help=argparse.SUPPRESS)  # the child process of one engine
    parser.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:
        args.child_out.write_text(json.dumps(measure(args.only, args)))
        return

    store = ModelStore(args.store)
    spec = store.import_default()
    with tempfile.TemporaryDirectory() as tmp:
        setup = setup_times(spec, rank16_adapter(spec, Path(tmp) / "adapter"))
        measured = {}
        for name in ENGINES:
            child = Path(tmp) / "child.json"
            command = [
                sys.executable,
                __file__,
                "--only",
                name,
                "--child-out",
                str(child),
                "--store",
                str(args.store),
                "--repeats",
                str(args.repeats),
                "--sizes",
                *map(str, args.sizes),
                "--shared",
                *map(str, args.shared),
            ]
            subprocess.run(command, check=True)
            measured[name] = json.loads(child.read_text())
    setup["embedded_start_s"] = measured["embedded"]["start_s"]
    setup["torch_engine_start_s"] = measured["torch engine"]["start_s"]
    prefill = {name: measured[name]["prefill_tok_s"] for name in ENGINES}
    rows = []
    for index, (label, count, n) in enumerate(cases(args)):
        rows.append(
            {
                "case": label,
                "batch": count * n,
                "n": n,
                "tok_s": {name: measured[name]["rows"][index]["tok_s"] for name in ENGINES},
                "runs": {name: measured[name]["rows"][index]["runs"] for name in ENGINES},
                "load_average": max(measured[name]["rows"][index]["load"] for name in ENGINES),
            }
        )
    runners = ENGINES

    distinct = [r for r in rows if r["n"] == 1]
    by_batch = {r["batch"]: r for r in distinct}
    best = max(distinct, key=lambda r: r["tok_s"]["embedded"])
    reference_b32 = by_batch.get(32, best)["tok_s"]["transformers"]
    summary = {
        "best_vs_transformers_b32": best["tok_s"]["embedded"] / reference_b32,
        "b1_vs_llamacpp_b1": by_batch[1]["tok_s"]["embedded"] / by_batch[1]["tok_s"]["llama.cpp Q8_0"]
        if 1 in by_batch
        else None,
        "embedded_best_tok_s": best["tok_s"]["embedded"],
        "embedded_best_batch": best["batch"],
        "embedded_b1_tok_s": by_batch[1]["tok_s"]["embedded"] if 1 in by_batch else None,
        "llamacpp_q8_b1_tok_s": by_batch[1]["tok_s"]["llama.cpp Q8_0"] if 1 in by_batch else None,
        "transformers_b32_tok_s": reference_b32,
        "targets": {"best_vs_transformers_b32": 2.0, "b1_vs_llamacpp_b1": 1.0},
    }
    result = {
        "summary": summary,
        "new_tokens": NEW_TOKENS,
        "threads": os.cpu_count(),
        "repeats": args.repeats,
        "prompt_tokens_mean": measured["embedded"]["prompt_tokens_mean"],
        "setup_seconds": setup,
        "prefill_tok_s": prefill,
        "rows": rows,
        "embedded_speculation": measured["embedded"].get("speculation"),  # over all of its cases
        "load_average_end": os.getloadavg(),
    }

    table = Table(
        title=f"generated tokens/s ({NEW_TOKENS} new tokens, greedy, prefill included; median of {args.repeats})"
    )
    table.add_column("case")
    for name in runners:
        table.add_column(name, justify="right")
    table.add_column("load", justify="right")
    for r in rows:
        table.add_row(
            r["case"] + (" (best)" if r is best else ""),
            *[f"{r['tok_s'][n]:.1f}" for n in runners],
            f"{r['load_average']:.1f}",
        )
    table.add_section()
    table.add_row("prefill tok/s (32 prompts)", *[f"{prefill[n]:.0f}" for n in runners], "")
    console = Console()
    console.print(table)
    console.print(f"set-up: {', '.join(f'{k} {v:.2f}' for k, v in setup.items())}")
    console.print(
        f"best embedded / transformers b32 = {summary['best_vs_transformers_b32']:.2f}x (target 2x); "
        f"embedded b1 / llama.cpp Q8_0 b1 = {summary['b1_vs_llamacpp_b1']:.2f} (target 1.0)"
    )
    if speculation := result["embedded_speculation"]:
        console.print(
            f"embedded prompt-lookup guesses: {speculation['confirmed_tokens']} of {speculation['drafted_tokens']} "
            "confirmed (all cases)"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
