"""Vector memory benchmark: embedding throughput, indexing rate, and query latency at 10k and 100k lessons.

What is measured (embedded mode, a Chroma persistent directory in a temporary folder, CPU only):

1. embedding throughput: the offline all-MiniLM-L6-v2 function on ``--pool`` synthetic lesson texts (texts/s).
2. lessons indexed per second, end to end: ``lessons.add(records)`` with embedding done by the memory (texts in,
   embedding + insert), on ``--e2e`` lessons.
3. for each size in ``--sizes``: the collection is filled to that size with *precomputed* vectors (insert rate
   reported separately), then query latency is measured: end to end (query text -> embedding -> search, k=5),
   search only (precomputed query vector), and search with a metadata filter; plus the time the eviction policy
   needs to rank the whole collection.

4. batching: ``--prompts`` task prompts from the curriculum's environments embedded one call each (as the executor
   used to, per task) vs in one call (as a generation now does), median of ``--batching-repeats``, with the
   embedding cache off; then the same prompts again through the cache. ``summary.embedding_seconds_per_episode`` is
   the batched cost per episode, one episode per prompt (``--samples`` more per prompt divide it further).
   ``--only-batching`` measures just this and merges it into the existing JSON.

Unless ``--real-vectors`` is given, index vectors are derived from the real embeddings of the ``--pool`` texts
(pool vector + Gaussian noise, renormalised), because embedding 100k texts takes far too long on 2 CPU cores.
Query texts are always embedded for real. The output says which was used.

    nice -n 10 .venv/bin/python benchmarks/bench_memory.py [--sizes 10000 100000] [--pool 2000]
    nice -n 10 .venv/bin/python benchmarks/bench_memory.py --only-batching [--prompts 64]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from lamarck.curriculum.registry import get_environment
from lamarck.memory.base import MemoryRecord
from lamarck.memory.chroma import ChromaMemory
from lamarck.memory.embeddings import MiniLMEmbedding
from lamarck.platform.settings import MemorySettings

RESULTS = Path(__file__).resolve().parent / "results" / "bench_memory.json"
ENVIRONMENTS = ["arithmetic", "python", "sql", "regex", "units", "dates", "tools", "strings"]
SITUATIONS = [
    "the verifier rejected the answer to {a} + {b}",
    "a test failed on an empty list of {a} items",
    "the tool call to {tool} returned an error about argument {arg}",
    "the query returned {a} rows instead of {b}",
    "the pattern did not match the input at position {a}",
    "the total mixed {unit} and {unit2} values",
    "the timestamp for run {a} was {b} hours off",
    "the output string was truncated after {a} characters",
    "the function recursed {a} times before failing",
    "the comparison of {a}.1 and {b}.3 came out false",
]
ADVICE = [
    "recheck the carry in the tens column before answering",
    "handle the empty case before indexing into it",
    "read the error message and fix the arguments before retrying",
    "use bound parameters instead of string formatting",
    "escape special characters and anchor the pattern",
    "convert every quantity to one unit first",
    "store times in UTC and convert only for display",
    "check the length limit and stream the output in parts",
    "add a base case that stops the recursion",
    "compare with a tolerance instead of exact equality",
]
TOOLS = ["calculator", "python", "search", "sql", "files"]
UNITS = ["meters", "feet", "seconds", "minutes", "grams", "pounds"]


def lesson_text(rng: random.Random) -> tuple[str, dict[str, Any]]:
    situation = rng.choice(SITUATIONS).format(
        a=rng.randint(2, 9999),
        b=rng.randint(2, 9999),
        tool=rng.choice(TOOLS),
        arg=rng.choice("xyzn"),
        unit=rng.choice(UNITS),
        unit2=rng.choice(UNITS),
    )
    environment = rng.choice(ENVIRONMENTS)
    text = f"In the {environment} environment, when {situation}, {rng.choice(ADVICE)}."
    metadata = {
        "environment": environment,
        "difficulty": rng.randint(1, 5),
        "outcome": rng.choice(["passed", "failed"]),
        "kind": "lesson",
        "utility": round(rng.random(), 3),
    }
    return text, metadata


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def percentiles(samples_s: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples_s)
    return {
        "p50_ms": statistics.median(ms),
        "p95_ms": ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))],
        "mean_ms": statistics.fmean(ms),
        "n": len(ms),
    }


def derived_vectors(pool: np.ndarray, count: int, rng: np.random.Generator, noise: float) -> np.ndarray:
    base = pool[rng.integers(0, len(pool), size=count)]
    vectors = base + rng.normal(0.0, noise, size=base.shape).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    console = Console(stderr=True)
    rng = random.Random(args.seed)
    nprng = np.random.default_rng(args.seed)
    ef = MiniLMEmbedding(batch_size=args.batch_size)
    ef.embed(["warm-up"])  # model load is not part of any measurement
    results: dict[str, Any] = {"config": vars(args) | {"python": platform.python_version(), "cpus": _cpus()}}

    pool = [lesson_text(rng) for _ in range(args.pool)]
    console.log(f"embedding {args.pool} lesson texts")
    pool_vectors, seconds = timed(ef.embed, [text for text, _ in pool])
    results["embedding"] = {
        "texts": args.pool,
        "seconds": seconds,
        "texts_per_s": args.pool / seconds,
        "batch_size": args.batch_size,
    }

    workdir = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    settings = MemorySettings(max_lessons=max(args.sizes) + args.e2e + 1, max_entries=max(args.sizes) + 1)
    try:
        with ChromaMemory.embedded(workdir / "chroma", settings) as memory:
            console.log(f"indexing {args.e2e} lessons end to end (embedding + insert)")
            e2e = [
                MemoryRecord(id=f"e2e-{i}", text=t, metadata=m)
                for i, (t, m) in enumerate(lesson_text(rng) for _ in range(args.e2e))
            ]
            _, seconds = timed(memory.lessons.add, e2e)
            results["index_end_to_end"] = {"lessons": args.e2e, "seconds": seconds, "lessons_per_s": args.e2e / seconds}
            memory.drop("lessons")

            queries = [lesson_text(rng)[0] for _ in range(args.queries)]
            query_vectors = ef.embed(queries)
            collection = memory.collection("bench")
            results["sizes"] = []
            filled = 0
            for size in sorted(args.sizes):
                console.log(f"filling to {size} entries with precomputed vectors")
                insert_seconds = fill(collection, filled, size, pool, pool_vectors, nprng, rng, args)
                added, filled = size - filled, size
                console.log(f"querying at {size} entries")
                row = {
                    "entries": collection.count(),
                    "inserted": added,
                    "insert_seconds": insert_seconds,
                    "insert_vectors_per_s": added / insert_seconds,
                }
                results["sizes"].append(row | measure_queries(collection, queries, query_vectors, args))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    results["vectors"] = (
        "real embeddings of every entry"
        if args.real_vectors
        else (f"derived: real embeddings of {args.pool} texts + N(0, {args.noise}) noise, renormalised")
    )
    return results


def task_prompts(count: int, seed: int) -> list[str]:
    """Distinct task prompts, as a generation's proposer would make them: three environments, levels 1-6."""
    rng = random.Random(seed)
    envs = [get_environment(name) for name in ("arithmetic", "string_ops", "python_functions")]
    prompts: dict[str, None] = {}
    while len(prompts) < count:
        env = envs[len(prompts) % len(envs)]
        prompts[env.generate(1 + len(prompts) % 6, random.Random(rng.randrange(2**31))).prompt] = None
    return list(prompts)


def measure_batching(args: argparse.Namespace) -> dict[str, Any]:
    prompts = task_prompts(args.prompts, args.seed)
    uncached = MiniLMEmbedding(batch_size=args.batch_size, cache_size=0)
    uncached.embed(["warm-up"])
    one_by_one, batched = [], []
    for _ in range(args.batching_repeats):
        one_by_one.append(sum(timed(uncached.embed, [prompt])[1] for prompt in prompts))
        batched.append(timed(uncached.embed, prompts)[1])
    cached = MiniLMEmbedding(batch_size=args.batch_size)
    cached.embed(prompts)
    before = cached.stats.snapshot()
    _, cached_seconds = timed(cached.embed, prompts)
    again = cached.stats.snapshot() - before
    episodes = len(prompts) * args.samples
    batched_s, one_by_one_s = statistics.median(batched), statistics.median(one_by_one)
    return {
        "prompts": len(prompts),
        "samples_per_prompt": args.samples,
        "repeats": args.batching_repeats,
        "mean_prompt_chars": statistics.fmean(len(p) for p in prompts),
        "one_by_one_seconds": one_by_one_s,
        "batched_seconds": batched_s,
        "speedup": one_by_one_s / batched_s,
        "one_by_one_runs": one_by_one,
        "batched_runs": batched,
        "cached_seconds": cached_seconds,
        "cached_texts_embedded": again.texts,
        "cached_hits": again.cache_hits,
        "one_by_one_seconds_per_episode": one_by_one_s / episodes,
        "batched_seconds_per_episode": batched_s / episodes,
    }


def fill(
    collection: Any,
    start: int,
    end: int,
    pool: list,
    pool_vectors: np.ndarray,
    nprng: np.random.Generator,
    rng: random.Random,
    args: argparse.Namespace,
) -> float:
    """Adds entries start..end-1 in batches; returns seconds spent inserting (vector derivation excluded)."""
    ef = MiniLMEmbedding(batch_size=args.batch_size)
    total = 0.0
    for batch_start in range(start, end, args.insert_batch):
        batch_end = min(end, batch_start + args.insert_batch)
        rows = [pool[rng.randrange(len(pool))] for _ in range(batch_end - batch_start)]
        records = [
            MemoryRecord(id=f"l{i}", text=f"{text} (#{i})", metadata=meta)
            for i, (text, meta) in zip(range(batch_start, batch_end), rows, strict=True)
        ]
        if args.real_vectors:
            vectors = ef.embed([r.text for r in records])
        else:
            vectors = derived_vectors(pool_vectors, len(records), nprng, args.noise)
        _, seconds = timed(collection.add, records, vectors)
        total += seconds
    return total


def measure_queries(collection: Any, queries: list[str], vectors: np.ndarray, args: argparse.Namespace) -> dict:
    chroma = collection.chroma
    for vector in vectors[:5]:  # warm the index
        chroma.query(query_embeddings=[vector], n_results=args.k)
    end_to_end = [timed(collection.query, text, args.k)[1] for text in queries[: args.e2e_queries]]
    search = [
        timed(chroma.query, query_embeddings=[v], n_results=args.k, include=["documents", "metadatas", "distances"])[1]
        for v in vectors
    ]
    where = {"$and": [{"environment": {"$eq": "arithmetic"}}, {"difficulty": {"$gte": 2}}, {"difficulty": {"$lte": 4}}]}
    filtered = [
        timed(
            chroma.query,
            query_embeddings=[v],
            n_results=args.k,
            where=where,
            include=["documents", "metadatas", "distances"],
        )[1]
        for v in vectors
    ]
    _, evict_rank_seconds = timed(collection.eviction_candidates, 100)
    return {
        "query_end_to_end": percentiles(end_to_end),
        "search_only": percentiles(search),
        "search_filtered": percentiles(filtered),
        "eviction_rank_seconds": evict_rank_seconds,
    }


def render(results: dict[str, Any]) -> None:
    console = Console(width=120)
    table = Table(title="Vector memory (Chroma embedded, all-MiniLM-L6-v2 on CPU)")
    table.add_column("measure")
    table.add_column("value", justify="right")
    if "batching" in results:
        b = results["batching"]
        table.add_row(
            f"{b['prompts']} task prompts: one by one vs one batch (median of {b['repeats']})",
            f"{b['one_by_one_seconds']:.2f} s vs {b['batched_seconds']:.2f} s ({b['speedup']:.1f}x)",
        )
        table.add_row(
            "  embedding seconds per episode, batched (one episode per prompt)",
            f"{b['batched_seconds_per_episode'] * 1000:.1f} ms",
        )
        table.add_row(
            f"  the same prompts again, through the cache ({b['cached_texts_embedded']} embedded)",
            f"{b['cached_seconds'] * 1000:.1f} ms",
        )
    if "embedding" not in results:
        console.print(table)
        console.print(f"written to {RESULTS}")
        return
    emb = results["embedding"]
    table.add_row(
        f"embedding throughput ({emb['texts']} texts, batch {emb['batch_size']})", f"{emb['texts_per_s']:.0f} texts/s"
    )
    e2e = results["index_end_to_end"]
    table.add_row(
        f"lessons indexed end to end ({e2e['lessons']}, embed + insert)", f"{e2e['lessons_per_s']:.0f} lessons/s"
    )
    for row in results["sizes"]:
        n = f"{row['entries']:,}"
        table.add_row(f"[{n}] insert, precomputed vectors", f"{row['insert_vectors_per_s']:.0f} vectors/s")
        for key, label in (
            ("query_end_to_end", "query p50 / p95, text -> embed -> search, k=5"),
            ("search_only", "search p50 / p95, precomputed vector, k=5"),
            ("search_filtered", "search p50 / p95, env + difficulty filter"),
        ):
            stats = row[key]
            table.add_row(f"[{n}] {label} (n={stats['n']})", f"{stats['p50_ms']:.1f} / {stats['p95_ms']:.1f} ms")
        table.add_row(f"[{n}] eviction ranking (scan all metadata)", f"{row['eviction_rank_seconds']:.2f} s")
    console.print(table)
    console.print(f"index vectors: {results['vectors']}; query texts are embedded for real.")
    console.print(f"written to {RESULTS}")


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--pool", type=int, default=2000, help="texts embedded for real (throughput + vector pool)")
    parser.add_argument("--e2e", type=int, default=500, help="lessons indexed end to end (embedding + insert)")
    parser.add_argument("--queries", type=int, default=200, help="search-only queries per size")
    parser.add_argument("--e2e-queries", type=int, default=100, help="end-to-end text queries per size")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64, help="embedding batch size")
    parser.add_argument("--insert-batch", type=int, default=5000)
    parser.add_argument("--noise", type=float, default=0.02, help="per-dimension noise for derived vectors")
    parser.add_argument("--real-vectors", action="store_true", help="embed every index entry for real (slow)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--prompts", type=int, default=64, help="task prompts in the batching comparison")
    parser.add_argument("--samples", type=int, default=1, help="episodes per prompt, for the per-episode cost")
    parser.add_argument("--batching-repeats", type=int, default=3)
    parser.add_argument(
        "--only-batching",
        action="store_true",
        help="measure only the batching comparison and merge it into the existing JSON",
    )
    args = parser.parse_args()
    previous = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    if args.only_batching:
        results = previous | {"batching_config": vars(args) | {"cpus": _cpus()}}
    else:
        results = run(args)
    results["batching"] = measure_batching(args)
    results["summary"] = {
        **previous.get("summary", {}),
        **results.get("summary", {}),
        "embedding_seconds_per_episode": results["batching"]["batched_seconds_per_episode"],
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))
    render(results)


if __name__ == "__main__":
    main()
