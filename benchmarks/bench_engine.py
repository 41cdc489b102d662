"""Generation throughput: the local engine vs plain transformers ``generate`` (fp32) vs the CPU's matmul limit.

Each row: N prompts of ~60 tokens, 64 new tokens each, greedy, eos ignored; throughput = generated tokens / wall time
(prefill included). Rows "N distinct": N different prompts (they share the chat template's system prompt); rows
"N x 1 prompt (n=N)": one prompt asked for N samples in one call (transformers: the prompt repeated N times).
Engine and transformers are measured interleaved, ``--repeats`` times each, and the medians are reported.
Run: ``python benchmarks/bench_engine.py [--sizes 1 8 32 64] [--shared 32] [--repeats 3] [--store DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from lamarck.platform.llm.engine import LocalEngine  # noqa: E402
from lamarck.platform.llm.model_store import ModelStore  # noqa: E402
from lamarck.platform.llm.sampling import SamplingParams  # noqa: E402
from lamarck.platform.settings import EngineSettings  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
NEW_TOKENS = 64
TOPICS = ["rivers", "volcanoes", "bridges", "the moon", "bees", "glaciers", "libraries", "trains"]


def prompts(count: int, engine: LocalEngine) -> list[str]:
    out = []
    for i in range(count):
        topic = TOPICS[i % len(TOPICS)]
        text = (f"Request {i}: write a short, friendly explanation of {topic} for a curious ten year old. "
                "Mention one surprising fact, one thing people often get wrong, and end with a question.")
        out.append(engine.render_chat([{"role": "user", "content": text}]))
    return out


def cpu_limit(params: int) -> dict:
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    for _ in range(3):
        a @ b
    runs, start = 10, time.perf_counter()
    for _ in range(runs):
        a @ b
    gflops = 2 * 2048**3 * runs / (time.perf_counter() - start) / 1e9
    return {"gflops": gflops, "tokens_per_s": gflops * 1e9 / (2 * params)}


def bench_engine(engine: LocalEngine, texts: list[str], n: int = 1) -> float:
    params = SamplingParams(max_tokens=NEW_TOKENS, ignore_eos=True, n=n)
    start = time.perf_counter()
    results = engine.generate("smollm2-135m", texts, params)
    elapsed = time.perf_counter() - start
    assert all(c.completion_tokens == NEW_TOKENS for r in results for c in r)
    return len(texts) * n * NEW_TOKENS / elapsed


def bench_transformers(model: torch.nn.Module, tokenizer, texts: list[str]) -> float:  # type: ignore[no-untyped-def]
    tokenizer.padding_side = "left"
    batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    start = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(**batch, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
                             pad_token_id=tokenizer.pad_token_id)
    elapsed = time.perf_counter() - start
    assert out.shape[1] - batch["input_ids"].shape[1] == NEW_TOKENS
    return len(texts) * NEW_TOKENS / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--store", type=Path, default=Path(os.environ.get("LAMARCK_TEST_MODEL_STORE",
                                                                           REPO / ".cache" / "test-models")))
    parser.add_argument("--shared", type=int, nargs="*", default=[32], help="n for the one-prompt, n-samples rows")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-transformers", action="store_true")
    args = parser.parse_args()

    from rich.console import Console
    from rich.table import Table
    from transformers import AutoModelForCausalLM

    store = ModelStore(args.store)
    spec = store.import_default()
    engine = LocalEngine(store, EngineSettings(max_batch_size=max(args.sizes + args.shared), batch_window_ms=0))
    model = AutoModelForCausalLM.from_pretrained(spec.base_dir, dtype=torch.float32, local_files_only=True).eval()
    n_params = sum(p.numel() for p in model.parameters())
    limit = cpu_limit(n_params)
    bench_engine(engine, prompts(2, engine))  # warm-up
    cases = [(f"{size} distinct", prompts(size, engine), 1) for size in args.sizes]
    cases += [(f"{size} x 1 prompt (n={size})", prompts(1, engine), size) for size in args.shared]
    rows = []
    for label, texts, n in cases:
        ours, theirs, loads = [], [], []
        for _ in range(args.repeats):  # interleaved, so both see the same machine load
            loads.append(os.getloadavg()[0])
            ours.append(bench_engine(engine, texts, n))
            if not args.skip_transformers:
                theirs.append(bench_transformers(model, engine.tokenizer, texts * n))
        engine_tok_s = statistics.median(ours)
        hf = statistics.median(theirs) if theirs else None
        rows.append({"case": label, "batch": len(texts) * n, "shared_prompt": n > 1,
                     "prompt_tokens": round(sum(engine.count_tokens(t) for t in texts) / len(texts), 1),
                     "engine_tok_s": engine_tok_s, "transformers_tok_s": hf,
                     "speedup": engine_tok_s / hf if hf else None, "engine_runs": ours, "transformers_runs": theirs,
                     "load_average": statistics.median(loads)})
        print(f"{label}: engine {engine_tok_s:.1f} tok/s, transformers {hf or 0:.1f} tok/s, load {rows[-1]['load_average']:.1f}",
              flush=True)
    engine.close()
    distinct = [r for r in rows if not r["shared_prompt"]]
    best = max(distinct, key=lambda r: r["engine_tok_s"])
    result = {
        "new_tokens": NEW_TOKENS, "threads": torch.get_num_threads(), "params": n_params, "repeats": args.repeats,
        "cpu_gflops": limit["gflops"], "cpu_limit_tok_s": limit["tokens_per_s"],
        "load_average": os.getloadavg(), "rows": rows, "best_batch": best["batch"],
        "best_engine_tok_s": best["engine_tok_s"],
    }
    table = Table(title=f"generation throughput, {NEW_TOKENS} new tokens, greedy (tokens/s, median of {args.repeats})")
    for column in ("case", "prompt tok", "engine", "transformers fp32", "speedup", "load avg"):
        table.add_column(column, justify="right")
    for r in rows:
        if r["shared_prompt"] and r is rows[len(distinct)]:
            table.add_section()  # the shared-prompt group
        table.add_row(r["case"] + (" (best)" if r is best else ""), f"{r['prompt_tokens']:.0f}",
                      f"{r['engine_tok_s']:.1f}",
                      f"{r['transformers_tok_s']:.1f}" if r["transformers_tok_s"] else "-",
                      f"{r['speedup']:.2f}x" if r["speedup"] else "-", f"{r['load_average']:.1f}")
    table.add_section()
    table.add_row("CPU FLOP limit", "", f"{limit['tokens_per_s']:.0f}", "", "", "")
    Console().print(table)
    Console().print(f"matmul: {limit['gflops']:.0f} GFLOP/s on {torch.get_num_threads()} threads (2 x params FLOPs per "
                    f"token); load average {os.getloadavg()[0]:.1f}")
    out = REPO / "benchmarks" / "results" / "bench_engine.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
