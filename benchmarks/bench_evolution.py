"""The proof: does the loop make the model better? Report-slice success of the base release and of every promoted one.

From the base SmolLM2-135M, the full loop runs on ``arithmetic`` for a fixed wall-clock budget, then on
``python_functions``: the learnable-cells frontier picks cells, the executor rolls out under the teacher's hint ladder,
the critic verifies, skills are induced, and between generations a distillation job (TRL LoRA SFT on rows re-rendered
as the student sees them, sound passes only) trains in its own phase and its candidate goes through the gate. The
budget includes all of it (rollouts, training, gates). Scores come from the report slice (held-out seeds, template
families never trained on, never used for any decision), greedy under the student harness, and from a fixed file of
hand-written arithmetic problems (the transfer probe). At the end: HumanEval pass@1 of the base and final models, and
the ablation: the final champion's lineage retrained without the rows whose rollouts had privileged hints (partial or
full reference solutions), scored on the same slices, so what the privileged teacher bought shows as a number.

Writes benchmarks/results/bench_evolution.json (top-level ``summary``) and bench_evolution.png, and prints a table.
Run: .venv/bin/python benchmarks/bench_evolution.py [--minutes 60] [--python-minutes 30] [--humaneval-limit 164]
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any

from lamarck.agents import harness_archive
from lamarck.agents.distillation import Distillation, open_distillation
from lamarck.agents.evaluation import default_harness_for, evaluate, heldout_tasks, release_harness, store_evaluation
from lamarck.agents.harness import HarnessSpec, save_harness
from lamarck.agents.orchestrator import Orchestrator
from lamarck.agents.runs import parse_config, request_stop
from lamarck.curriculum.environments.arithmetic_probe import transfer_probe
from lamarck.curriculum.heldout import report_set
from lamarck.curriculum.registry import get_environment
from lamarck.platform.container import Container
from lamarck.platform.settings import DEFAULT_MODEL_VERSION, Settings, TrainingSettings
from lamarck.platform.storage import repositories as repo
from lamarck.training import registry
from lamarck.training.ablation import PRIVILEGED_HINTS, ablate

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
log = logging.getLogger("bench_evolution")


def make_container(args: argparse.Namespace) -> Container:
    work = Path(args.work).resolve()
    if work.exists() and not args.keep:
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    training = TrainingSettings(
        min_new_episodes=args.min_new,
        min_new_row_share=args.min_new_row_share,
        max_steps=args.steps,
        batch_size=args.train_batch,
        epochs=args.epochs,
        lora_rank=args.rank,
        lora_alpha=2 * args.rank,
        save_steps=max(5, args.steps // 3),
        gate_per_level=args.gate_per_level,
        gate_environments=args.gate_envs,
        gate_looks=args.gate_looks,
        gate_focus_per_level=args.gate_focus,
        gate_harm_alpha=args.gate_harm_alpha,
        train_from=args.train_from,
        cap_per_cell=args.cap_per_cell,
        replay_share=args.replay_share,
        stepwise_rows=args.stepwise_rows,
    )
    settings = Settings(data_dir=work, training=training)
    container = Container(settings)
    container.model_store.import_default(progress=True)
    with container.db.session() as session:
        repo.register_model_version(
            session, version_id=DEFAULT_MODEL_VERSION, base=DEFAULT_MODEL_VERSION, status="promoted"
        )
    return container


def report_score(
    container: Container, version: str, environment: str, per_level: int, harness: HarnessSpec | None = None
) -> dict[str, Any]:
    """Greedy success on the report slice under a student harness (default: the environment's release harness),
    stored and reused per model and harness."""
    env = get_environment(environment, sandbox=container.sandbox)
    tasks = report_set(environment, per_level=per_level, env=env)
    return cached_evaluation(container, env, tasks, version, f"{environment}-report/pl{per_level}", harness)


def release_summary(container: Container, environment: str, final: str, per_level: int) -> dict[str, Any]:
    """Base and final release on the report slice, and each half alone: the final weights under the base harness
    (``weights_only``) and the base weights under the final harness (``harness_only``)."""
    env = get_environment(environment, sandbox=container.sandbox)
    base_harness, final_harness = default_harness_for(env), release_harness(container.db, env)

    def score(version: str, harness: HarnessSpec) -> float:
        return float(report_score(container, version, environment, per_level, harness)["score"])

    return {
        "base": score(DEFAULT_MODEL_VERSION, base_harness),
        "final": score(final, final_harness),
        "weights_only": score(final, base_harness),
        "harness_only": score(DEFAULT_MODEL_VERSION, final_harness),
        "harness_evolved": final_harness.version_id != base_harness.version_id,
        "base_harness": base_harness.version_id,
        "final_harness": final_harness.version_id,
    }


def transfer_score(container: Container, version: str) -> dict[str, Any]:
    env = get_environment("arithmetic", sandbox=container.sandbox)
    return cached_evaluation(container, env, transfer_probe(), version, "arithmetic-transfer-probe")


def cached_evaluation(
    container: Container, env: Any, tasks: list[Any], version: str, name: str, harness: HarnessSpec | None = None
) -> dict[str, Any]:
    harness = harness or release_harness(container.db, env)
    with container.db.session() as session:
        found = repo.find_evaluation(
            session, model_version=version, harness_version=harness.version_id, eval_set=name, kind="report"
        )
        if found is not None:
            return {"score": found.score, "per_level": (found.decision or {}).get("per_level", {}), "n": found.n_tasks}
    result = evaluate(container.gateway, env, tasks, version, harness, eval_set=name)
    store_evaluation(container.db, result, kind="report")
    return {"score": result.score, "per_level": result.per_level, "n": result.n_tasks}


def humaneval_pass1(container: Container, version: str, limit: int | None) -> dict[str, Any]:
    env = get_environment("humaneval", sandbox=container.sandbox)
    tasks, eval_set = heldout_tasks(env, limit=limit)
    result = evaluate(container.gateway, env, tasks, version, default_harness_for(env), eval_set=eval_set)
    return {
        "version": version,
        "pass_at_1": result.score,
        "n_tasks": result.n_tasks,
        "seconds": round(result.seconds, 1),
    }


def ablation_report(
    container: Container, final: str, environments: list[str], args: argparse.Namespace, summary: dict[str, Any]
) -> dict[str, Any]:
    """The final champion's lineage replayed without privileged-hint rows, scored like the final (report slices)."""
    clock = time.monotonic()
    found = ablate(container, final, dropped=PRIVILEGED_HINTS, max_steps=args.steps)
    scores: dict[str, Any] = {}
    if found.version is not None:
        for env in environments:
            scores[env] = {
                "final": summary[env]["final"],
                "ablated": report_score(container, found.version, env, args.per_level)["score"],
            }
        scores["arithmetic_transfer"] = {
            "final": summary["arithmetic_transfer"]["final"],
            "ablated": transfer_score(container, found.version)["score"],
        }
    return {**found.model_dump(), "scores": scores, "minutes": round((time.monotonic() - clock) / 60, 1)}


def champion(container: Container) -> str:
    with container.db.session() as session:
        return registry.champion(session)


def run_phase(
    container: Container,
    driver: Distillation,
    environment: str,
    minutes: float,
    args: argparse.Namespace,
    clock: float,
) -> dict[str, Any]:
    """One evolution run on one environment until the wall-clock budget is spent; returns its timeline.

    The distillation driver (and its worker) outlives the phase, so a job in flight at the switch goes on."""
    started = time.monotonic()
    deadline = started + minutes * 60
    timeline: list[dict[str, Any]] = []

    def after_generation(run_id: str) -> None:
        with container.db.session() as session:
            run = repo.get_run(session, run_id=run_id)
            generations = run.summary.get("generations", {})
            latest = generations[max(generations, key=int)] if generations else {}
        attempts, successes = latest.get("attempts", 0), latest.get("successes", 0)
        levels = sorted({cell["difficulty"] for cell in latest.get("cells", [])})
        with container.db.session() as session:
            sampler = registry.rollout_sampler(session)
        timeline.append(
            {
                "minutes": round((time.monotonic() - clock) / 60, 2),
                "champion": champion(container),
                "sampler": sampler,
                "generation": len(generations),
                "attempts": attempts,
                "successes": successes,
                "levels": levels,
            }
        )
        driver.notify(
            f"generation {len(generations)}: {successes}/{attempts} attempts passed at levels {levels} · "
            f"champion {timeline[-1]['champion']} · next rollouts by {sampler}"
        )
        if time.monotonic() >= deadline:
            request_stop(container.db, run_id)

    root = default_harness_for(get_environment(environment))
    harness = root.derive(sampling={"temperature": args.temperature})
    pinned: dict[str, str] = {}
    with container.db.session() as session:
        if harness_archive.promoted_harness(session, environment) is None:
            save_harness(session, root, status="promoted", rationale="the environment's default harness")
        if args.harness_every == 0:  # the harness does not evolve: roll out at the bench's temperature
            pinned[environment] = save_harness(
                session,
                harness,
                parent_id=root.version_id,
                rationale=f"bench_evolution: rollout temperature {args.temperature}",
            )
    config = parse_config(
        {
            "environments": [environment],
            "harnesses": pinned,
            "harness_critic_every": args.harness_every,
            "generations": 10_000,
            "batch_size": args.batch,
            "samples_per_task": args.samples,
            "seed": args.seed,
            "model_version": champion(container),
            "follow_champion": True,
            "rollout_sampler": args.sampler,
            "llm_share": args.llm_share,
            "judge": args.judge,
            "repair": args.repair,
            "induce_skills": True,
            "hints": args.hints,
            "rung_skip_after": args.rung_skip_after or None,
            "frontier": "learnable",
        }
    )
    orchestrator = Orchestrator(container, between_generations=[driver.between_generations, after_generation])
    run_id = orchestrator.start(config, name=f"bench-evolution-{environment}")
    driver.notify(f"run {run_id} on {environment} for {minutes:g} min")
    outcome = orchestrator.run(run_id)
    with container.db.session() as session:
        seconds = {"rollouts": 0.0, "critic": 0.0, "other_nodes": 0.0}
        for summary in repo.get_run(session, run_id=run_id).summary.get("generations", {}).values():
            for node, value in (summary.get("node_seconds") or {}).items():
                key = "rollouts" if node == "execute" else "critic" if node == "critique" else "other_nodes"
                seconds[key] += float(value)
    return {
        "environment": environment,
        "run_id": run_id,
        "status": outcome.status,
        "node_seconds": seconds,
        "generations": outcome.generations_done,
        "wall_minutes": round((time.monotonic() - started) / 60, 2),
        "timeline": timeline,
        "training_in_flight_at_end": driver.in_flight(),
    }


def promotions(container: Container) -> list[dict[str, Any]]:
    """Every version that was ever promoted, in promotion order, with the gate's numbers."""
    with container.db.session() as session:
        versions = [registry.VersionView.of(v) for v in repo.list_model_versions(session)]
    out = []
    for version in versions:
        gate = version.eval_scores.get("gate")
        if version.id == DEFAULT_MODEL_VERSION or gate is None or "previous" not in version.eval_scores:
            continue
        out.append(
            {
                "version": version.id,
                "parent": version.parent_id,
                "gate": gate,
                "p_value": version.eval_scores.get("gate_p_value"),
                "rows": version.training_metrics.get("rows"),
                "train_seconds": version.training_metrics.get("sft", {}).get("seconds"),
                "environments": version.training_metrics.get("environments"),
                "by_hint": version.training_metrics.get("by_hint"),
            }
        )
    return out


def candidates(container: Container) -> list[dict[str, Any]]:
    with container.db.session() as session:
        versions = [registry.VersionView.of(v) for v in repo.list_model_versions(session)]
    return [
        {
            "version": v.id,
            "status": v.status,
            "reason": v.reason,
            "gate": v.eval_scores.get("gate"),
            "p_value": v.eval_scores.get("gate_p_value"),
            "rows": v.training_metrics.get("rows"),
            "by_hint": v.training_metrics.get("by_hint"),
            "counts": v.training_metrics.get("counts"),
            "sft": {
                k: v.training_metrics.get("sft", {}).get(k)
                for k in ("first_loss", "last_loss", "steps", "seconds", "validation", "planned_steps")
            },
        }
        for v in versions
        if v.id != DEFAULT_MODEL_VERSION
    ]


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    phases = report["phases"]
    end = max(entry["minutes"] for phase in phases for entry in phase["timeline"]) if phases else 1.0
    figure, axes = plt.subplots(1, len(report["curves"]), figsize=(6.5 * len(report["curves"]), 4.2), squeeze=False)
    for axis, (environment, curve) in zip(axes[0], report["curves"].items(), strict=True):
        xs = [point["minutes"] for point in curve] + [end]
        ys = [100 * point["report"] for point in curve] + [100 * curve[-1]["report"]]
        axis.step(xs, ys, where="post", linewidth=2, label="report-slice success of the champion (unseen families)")
        for point in curve:
            label = "base" if point["version"] == report["base_model"] else point["version"].split("-ft-")[-1][:8]
            axis.annotate(
                f"{label} {100 * point['report']:.0f}%",
                (point["minutes"], 100 * point["report"]),
                textcoords="offset points",
                xytext=(3, 5),
                fontsize=7,
            )
        for phase in phases:
            if phase["environment"] == environment:
                rollouts = [
                    (e["minutes"], 100 * e["successes"] / e["attempts"]) for e in phase["timeline"] if e["attempts"]
                ]
                if rollouts:
                    axis.scatter(
                        *zip(*rollouts, strict=True),
                        s=8,
                        alpha=0.35,
                        color="grey",
                        label="rollout success per generation (frontier tasks)",
                    )
        for phase in phases[1:]:
            axis.axvline(
                phase["timeline"][0]["minutes"] if phase["timeline"] else end, color="black", linestyle=":", linewidth=1
            )
        axis.set_title(f"{environment}")
        axis.set_xlabel("wall-clock minutes on a 2-core CPU (rollouts, training and gates)")
        axis.set_ylabel("success (%)")
        axis.set_xlim(0, max(end, 1.0))
        axis.set_ylim(0, 100)
        axis.grid(alpha=0.3)
        axis.legend(loc="upper left", fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def curve_for(
    container: Container, environment: str, phase_timelines: list[dict[str, Any]], per_level: int
) -> list[dict[str, Any]]:
    """(minutes, champion, report-slice success) at the start and at every change of champion, over all phases."""
    points: list[dict[str, Any]] = [{"minutes": 0.0, "version": DEFAULT_MODEL_VERSION}]
    for phase in phase_timelines:
        for entry in phase["timeline"]:
            if entry["champion"] != points[-1]["version"]:
                points.append({"minutes": entry["minutes"], "version": entry["champion"]})
    for point in points:
        scored = report_score(container, point["version"], environment, per_level)
        point["report"], point["per_level"] = scored["score"], scored["per_level"]
    return points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=60.0, help="wall-clock budget on arithmetic")
    parser.add_argument("--python-minutes", type=float, default=30.0, help="then on python_functions (0: skip)")
    parser.add_argument("--humaneval-limit", type=int, default=164, help="HumanEval tasks (0: skip)")
    parser.add_argument("--per-level", type=int, default=5, help="report-slice tasks per level (the curve)")
    parser.add_argument("--gate-envs", nargs="*", default=["string_ops"], help="other environments the gate checks")
    parser.add_argument(
        "--gate-per-level",
        type=int,
        default=3,
        help="gate tasks per level the candidate did not train on (a check that nothing got worse)",
    )
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument(
        "--temperature", type=float, default=0.7, help="rollout sampling temperature (without --harness-every)"
    )
    parser.add_argument(
        "--harness-every",
        type=int,
        default=0,
        help="a harness-critic round every N episodes (0: the harness does not evolve; the release keeps its root)",
    )
    parser.add_argument(
        "--hints",
        nargs="+",
        default=["none", "glossary", "demonstrations", "partial", "full"],
        help="the teacher's hint ladder (none: no help)",
    )
    parser.add_argument("--llm-share", type=float, default=0.0)
    parser.add_argument("--judge", action="store_true")
    parser.add_argument("--repair", action="store_true")
    parser.add_argument(
        "--rung-skip-after",
        type=float,
        default=4.0,
        help="tasks of a cell that must fail a ladder rung before its tasks enter above it (0: always climb from none)",
    )
    parser.add_argument("--min-new", type=int, default=32)
    parser.add_argument(
        "--min-new-row-share",
        type=float,
        default=TrainingSettings().min_new_row_share,
        help="fresh rows a retry from the same parent needs, per row of its largest earlier job (above 1: bigger jobs)",
    )
    parser.add_argument("--steps", type=int, default=60, help="cap on training steps per job (planned from data)")
    parser.add_argument("--epochs", type=float, default=TrainingSettings().epochs, help="passes over a job's rows")
    parser.add_argument(
        "--sampler",
        choices=["better_candidate", "champion"],
        default="better_candidate",
        help="who rolls out: a refused candidate that beat the champion on the dev slice, or the champion",
    )
    parser.add_argument(
        "--gate-looks",
        type=int,
        default=TrainingSettings().gate_looks,
        help="gate decisions pre-registered for the whole bench (alpha is spent evenly over them)",
    )
    parser.add_argument(
        "--gate-focus",
        type=int,
        default=TrainingSettings().gate_focus_per_level,
        help="gate tasks per level the candidate trained on",
    )
    parser.add_argument(
        "--gate-harm-alpha",
        type=float,
        default=TrainingSettings().gate_harm_alpha,
        help="significance of the harm test that guards the gate's other environments",
    )
    parser.add_argument(
        "--train-from",
        choices=["champion", "base"],
        default=TrainingSettings().train_from,
        help="a job warm-starts from the champion on the rows since it, or trains from the base on every row (ReST-EM)",
    )
    parser.add_argument(
        "--replay-share",
        type=float,
        default=TrainingSettings().replay_share,
        help="warm start: earlier rows replayed per new row (0: none)",
    )
    parser.add_argument(
        "--cap-per-cell",
        type=int,
        default=TrainingSettings().cap_per_cell,
        help="rows per environment x level in one dataset (a job from the base holds every row so far)",
    )
    parser.add_argument(
        "--stepwise-rows",
        action="store_true",
        help="rows teach each multi-operation calculator call as one call per operation (TrainingSettings)",
    )
    parser.add_argument("--train-batch", type=int, default=4)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", default=str(ROOT / ".bench-evolution"))
    parser.add_argument("--keep", action="store_true", help="reuse the work directory (resume a partial bench)")
    parser.add_argument("--out", default=str(RESULTS / "bench_evolution.json"))
    parser.add_argument(
        "--no-ablation", action="store_true", help="skip retraining the final lineage without privileged-hint rows"
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="skip the loop: score the kept work directory's releases from its <out>.phases.json",
    )
    args = parser.parse_args()
    if args.harness_every < 0:
        parser.error(f"--harness-every must be 0 (no harness-critic) or a number of episodes, got {args.harness_every}")
    if args.harness_every and args.temperature != parser.get_default("temperature"):
        parser.error("--temperature pins the rollout harness, which --harness-every lets evolve: give one of them")
    if args.report_only:
        args.keep = True
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")

    container = make_container(args)
    clock = time.monotonic()
    base_arith = report_score(container, DEFAULT_MODEL_VERSION, "arithmetic", args.per_level)["score"]
    print(f"base report-slice arithmetic: {base_arith:.1%} ({(time.monotonic() - clock):.0f}s)", flush=True)
    loop_clock = time.monotonic()

    def note(message: str) -> None:
        print(f"[{(time.monotonic() - loop_clock) / 60:6.1f} min] {message}", flush=True)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    kept = out.with_suffix(".phases.json")  # written before the evaluations, so a failure there loses no loop time
    if args.report_only:
        phases = json.loads(kept.read_text())
        loop_minutes = max(entry["minutes"] for phase in phases for entry in phase["timeline"])
    else:
        with open_distillation(container, container.bus, notify=note) as driver:
            assert driver is not None
            phases = [run_phase(container, driver, "arithmetic", args.minutes, args, loop_clock)]
            if args.python_minutes > 0:
                phases.append(run_phase(container, driver, "python_functions", args.python_minutes, args, loop_clock))
        loop_minutes = (time.monotonic() - loop_clock) / 60
        kept.write_text(json.dumps(phases, indent=2, default=str) + "\n")
    environments = ["arithmetic"] + (["python_functions"] if args.python_minutes > 0 else [])
    curves = {env: curve_for(container, env, phases, args.per_level) for env in environments}
    checked = [*environments, *(env for env in ("python_functions", "string_ops") if env not in environments)]
    final = champion(container)
    # The harness does not evolve yet (no harness-critic): the final harness is the base harness, so the final model
    # under the base harness is the final release, and the base model under the final harness is the base release.
    summary: dict[str, Any] = {}
    for env in checked:
        summary[env] = release_summary(container, env, final, args.per_level)
    summary["arithmetic_transfer"] = {
        "base": transfer_score(container, DEFAULT_MODEL_VERSION)["score"],
        "final": transfer_score(container, final)["score"],
    }
    humaneval = (
        {
            "base": humaneval_pass1(container, DEFAULT_MODEL_VERSION, args.humaneval_limit or None),
            "final": humaneval_pass1(container, final, args.humaneval_limit or None),
        }
        if args.humaneval_limit
        else {}
    )
    if humaneval:
        summary["humaneval"] = {
            "base": humaneval["base"]["pass_at_1"],
            "final": humaneval["final"]["pass_at_1"],
            "tasks": humaneval["base"]["n_tasks"],
        }
    summary["targets"] = {
        "arithmetic_final_minus_base": 0.30,
        "arithmetic_weights_only_minus_base": 0.15,
        "arithmetic_transfer_final_minus_base": 0.10,
        "python_functions_final_minus_base": 0.10,
    }
    summary["final_model"] = final
    summary["loop_minutes"] = round(loop_minutes, 1)
    rows_by_hint: dict[str, int] = {}
    for candidate in candidates(container):
        for hint, count in (candidate.get("by_hint") or {}).items():
            rows_by_hint[hint] = rows_by_hint.get(hint, 0) + count
    report = {
        "summary": summary,
        "benchmark": "bench_evolution",
        "settings": {k: v for k, v in vars(args).items() if k not in ("work", "out")},
        "base_model": DEFAULT_MODEL_VERSION,
        "final_model": final,
        "curves": curves,
        "phases": phases,
        "promotions": promotions(container),
        "candidates": candidates(container),
        "rows_by_hint": rows_by_hint,
        "humaneval": humaneval,
        "seconds": {
            "loop_wall": round(loop_minutes * 60, 1),
            "nodes": {phase["environment"]: phase["node_seconds"] for phase in phases},
            "training": sum((c["sft"].get("seconds") or 0.0) for c in candidates(container)),
        },
        "total_minutes": round((time.monotonic() - clock) / 60, 1),
    }
    out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    plot(report, out.with_suffix(".png"))
    if not args.no_ablation:  # after the report is safe on disk: the ablation trains again
        report["ablation"] = ablation_report(container, final, environments, args, summary)
        summary["ablation_without_privileged_hints"] = report["ablation"]["scores"]
        report["total_minutes"] = round((time.monotonic() - clock) / 60, 1)
        out.write_text(json.dumps(report, indent=2, default=str) + "\n")

    print(f"\n{'environment':<18}{'minutes':>9}  {'version':<40}{'report':>9}")
    for environment, curve in curves.items():
        for point in curve:
            print(f"{environment:<18}{point['minutes']:>9.1f}  {point['version']:<40}{point['report']:>9.1%}")
    for env in checked:
        print(f"{env:<18} base {summary[env]['base']:.1%} -> final {summary[env]['final']:.1%}")
    transfer = summary["arithmetic_transfer"]
    print(f"transfer probe (hand-written arithmetic): base {transfer['base']:.1%} -> final {transfer['final']:.1%}")
    for name, row in humaneval.items():
        print(f"humaneval pass@1 {name:<6} {row['version']:<40}{row['pass_at_1']:>9.1%} ({row['n_tasks']} tasks)")
    for env, pair in (report.get("ablation") or {}).get("scores", {}).items():
        print(f"without privileged-hint rows: {env:<20} final {pair['final']:.1%} -> ablated {pair['ablated']:.1%}")
    print(f"rows by hint source: {rows_by_hint} · wrote {out} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
