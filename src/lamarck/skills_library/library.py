"""The skill library: verified skills in SQL, indexed by meaning in the vector memory, offered to the executor.

``add`` is the one way in (built-ins, plug-ins, induced candidates the critic approved, files from the CLI): it
parses the code, checks the name, runs the tests in the sandbox, and only then writes. A rejection carries a
one-line reason and changes nothing. ``retrieve`` implements the executor's ``SkillSource`` protocol, and
``retrieve_many`` its batch form (a generation's prompts embedded in one call).
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lamarck.memory.base import MemoryCollection, MemoryStoreError, RetrievalQuery, VectorMemory
from lamarck.platform.event_types import SkillDeprecated
from lamarck.platform.sandbox import Sandbox, SandboxUnavailable
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import SkillVersion
from lamarck.skills_library import store
from lamarck.skills_library.builtin import builtin_skills
from lamarck.skills_library.plugins import PluginProblem, discover
from lamarck.skills_library.retrieval import (
    SKILLS_COLLECTION,
    RankingConfig,
    document,
    lexical_similarity,
    record,
    score,
)
from lamarck.skills_library.skill import (
    AddResult,
    FunctionInfo,
    SkillCandidate,
    SkillError,
    SkillHandle,
    SkillView,
    analyse,
    call_expression,
    check_tests,
    code_digest,
    format_result,
    parse_argument,
)
from lamarck.skills_library.verify import call_in_sandbox, run_tests

log = logging.getLogger(__name__)

INDEX_ATTEMPTS = 5  # writes of one skill's index while SQL keeps changing under it


class UnknownSkill(LookupError):
    """No skill by that name; the message is one line."""


@dataclass(frozen=True)
class LibraryConfig:
    deprecate_below: float = 0.2  # success-when-used under this ...
    min_uses: int = 5  # ... after at least this many uses deprecates a skill
    test_wall_seconds: float | None = None  # per verification run; default: the sandbox's setting
    call_wall_seconds: float | None = None  # per skill call from the executor
    ranking: RankingConfig = field(default_factory=RankingConfig)


@dataclass(frozen=True)
class _Host:
    digest: str  # the built-in's code digest: a stored version with other code does not run in-process
    fn: Callable[..., Any]


class SkillLibrary:
    def __init__(
        self, db: Database, sandbox: Sandbox, memory: VectorMemory | None = None, config: LibraryConfig | None = None
    ) -> None:
        self.db = db
        self.sandbox = sandbox
        self.memory = memory
        self.config = config or LibraryConfig()
        self._indexed = False
        # Built-ins run through their host callables: in-process when safe, run_python straight to the sandbox.
        self._hosts = {
            b.candidate.name: _Host(code_digest(b.candidate.code), b.host(sandbox)) for b in builtin_skills()
        }

    # adding

    def add(self, candidate: SkillCandidate) -> AddResult:
        name = candidate.name
        try:
            info = analyse(candidate.code, name)
            check_tests(candidate.tests)
        except SkillError as exc:
            return _rejected(name, str(exc))
        digest = code_digest(candidate.code)
        with self.db.session() as session:
            existing = store.find_skill(session, name=name)
            if existing is not None:
                label = store.skill_provenance(existing)
                if label != candidate.provenance_label:
                    return _rejected(name, f"name clash: {name!r} already exists with provenance {label}")
                if store.current_version(existing).code_digest == digest:
                    return AddResult(status="unchanged", name=name, version=existing.current_version)
        try:
            run = run_tests(self.sandbox, candidate.code, candidate.tests, wall_seconds=self.config.test_wall_seconds)
        except SandboxUnavailable as exc:
            return _rejected(name, f"cannot verify: {exc}")
        if not run.passed:
            return _rejected(name, run.summary)
        version = SkillVersion(
            signature=info.signature,
            docstring=info.docstring or candidate.description,
            code=candidate.code,
            tests=candidate.tests,
            code_digest=digest,
            source_episode_ids=list(candidate.source_episode_ids),
            package=candidate.package,
        )
        with self.db.session() as session:
            existing = store.find_skill(session, name=name)
            if existing is None:
                skill = store.create_skill(session, name=name, provenance=candidate.provenance, version=version)
                status = "added"
            elif store.skill_provenance(existing) != candidate.provenance_label:
                return _rejected(
                    name, f"name clash: {name!r} was just added with provenance {store.skill_provenance(existing)}"
                )
            elif store.current_version(existing).code_digest == digest:
                return AddResult(status="unchanged", name=name, version=existing.current_version)
            else:
                store.add_version(session, skill=existing, version=version)
                skill, status = existing, "new_version"
            view = store.to_view(skill)
        self._index(view, candidate.environment)
        log.info("skill %s %s (version %d, %s)", name, status, view.version, view.provenance)
        return AddResult(status=status, name=name, version=view.version)

    def ensure_builtins(self) -> list[AddResult]:
        """Seed the built-in skills; a second call changes nothing (and runs no tests) unless their code changed."""
        results = []
        for builtin in builtin_skills():
            results.append(self.add(builtin.candidate))
        return results

    def install_plugins(self) -> tuple[list[AddResult], list[PluginProblem]]:
        """Discover the installed plug-ins' skills and add each through ``add``."""
        candidates, problems = discover()
        return [self.add(candidate) for candidate in candidates], problems

    def deprecate(self, name: str, *, reason: str, by: str) -> SkillView:
        """Retire an active skill from retrieval by hand, with its ``skill.deprecated`` audit event in the same
        transaction; UnknownSkill when there is none, SkillError when it is already deprecated."""
        with self.db.session() as session:
            skill = store.find_skill(session, name=name)
            if skill is None:
                raise UnknownSkill(f"no skill {name!r}: list them with `lamarck skills list`")
            if skill.status == store.DEPRECATED:
                raise SkillError(f"skill {name!r} is already deprecated: add a new version of its code to revive it")
            skill.status = store.DEPRECATED
            event = SkillDeprecated(name=name, version=skill.current_version, reason=reason, deprecated_by=by)
            repo.append_event(session, type=event.TYPE, payload=event.model_dump(mode="json"))
            view = store.to_view(skill)
        self._update_index(view)
        log.info("skill %s deprecated by %s: %s", name, by, reason)
        return view

    def index(self, name: str) -> None:
        """Index one stored skill as it is now (its status too), e.g. one that a library without the vector memory
        added or deprecated; nothing without memory or without the skill.

        Two indexings of one skill can overlap (an addition's, still loading the embedder, and a deprecation's):
        the one that read SQL first may write last. So each reads SQL again after writing and writes again while
        what it wrote is no longer what SQL holds; the last writer always sees the last state."""
        view = self.get(name)
        for _ in range(INDEX_ATTEMPTS):
            if view is None:
                return
            self._index(view, None)
            now = self.get(name)
            if now is None or record(now) == record(view):
                return
            view = now
        log.warning(
            "skill %s changed %d times while being indexed: its index may lag SQL, which retrieval reads",
            name,
            INDEX_ATTEMPTS,
        )

    # reading

    def get(self, name: str) -> SkillView | None:
        with self.db.session() as session:
            skill = store.find_skill(session, name=name)
            return store.to_view(skill) if skill is not None else None

    def list(self, include_deprecated: bool = False) -> list[SkillView]:
        with self.db.session() as session:
            return [store.to_view(s) for s in store.list_skills(session, include_deprecated=include_deprecated)]

    # usage

    def record_use(self, name: str, success: bool, *, use_key: str | None = None) -> SkillView:
        """Count one use; deprecate the skill when its success rate falls below the threshold after enough uses.
        A use with a ``use_key`` (what used it, e.g. an episode) is counted once, however often it is reported."""
        with self.db.session() as session:
            skill, counted = store.record_use(session, name=name, success=success, use_key=use_key)
            if skill is None:
                raise UnknownSkill(f"no skill {name!r}: list them with `lamarck skills list`")
            if not counted:  # reported again (a resumed node): nothing changed, nothing to re-index
                return store.to_view(skill)
            rate = skill.times_succeeded / skill.times_used
            if (
                skill.status == store.ACTIVE
                and skill.times_used >= self.config.min_uses
                and rate < self.config.deprecate_below
            ):
                skill.status = store.DEPRECATED
                log.info("skill %s deprecated: success rate %.2f after %d uses", name, rate, skill.times_used)
            view = store.to_view(skill)
        self._update_index(view)
        return view

    # retrieval (the executor's SkillSource)

    def retrieve(self, query: str, *, environment: str | None = None, k: int = 3) -> builtins.list[SkillHandle]:
        return self.retrieve_many([RetrievalQuery(query, environment, k)])[0]

    def retrieve_many(self, queries: Sequence[RetrievalQuery]) -> builtins.list[builtins.list[SkillHandle]]:
        """Each query's best ``k`` active skills (see ``retrieval.score``); all texts embedded in one call."""
        found: builtins.list[builtins.list[SkillHandle]] = [[] for _ in queries]
        live = [index for index, query in enumerate(queries) if query.k > 0]
        if not live:
            return found
        similarities = self._similarities([queries[index] for index in live])
        with self.db.session() as session:
            wanted = {name for near in similarities for name in near}
            views = {s.name: store.to_view(s) for s in store.list_skills(session) if s.name in wanted}
        for index, near in zip(live, similarities, strict=True):
            found[index] = [self.handle(view) for view in self._ranked(views, near, queries[index])]
        return found

    def _ranked(
        self, views: dict[str, SkillView], near: dict[str, tuple[float, str | None]], query: RetrievalQuery
    ) -> builtins.list[SkillView]:
        config = self.config.ranking
        candidates = [view for name, view in views.items() if name in near]  # by name, so ties keep that order
        ranked = sorted(
            candidates, key=lambda v: -score(near[v.name][0], v, near[v.name][1] == query.environment, config)
        )
        return ranked[: query.k]

    def handle(self, view: SkillView) -> SkillHandle:
        info = analyse(view.code, view.name)
        host = self._hosts.get(view.name)
        in_process = host is not None and view.provenance == "builtin" and host.digest == code_digest(view.code)
        fn = host.fn if host is not None and in_process else None

        def call(argument: str) -> str:
            return self._call(view, info, fn, argument)

        return SkillHandle(name=view.name, signature=info.signature, description=view.description, call=call)

    def call(self, name: str, argument: str) -> str:
        """Run a skill on the executor's text argument (see ``skill.parse_argument``); errors come back as text."""
        view = self.get(name)
        if view is None:
            raise UnknownSkill(f"no skill {name!r}: list them with `lamarck skills list`")
        return self.handle(view).call(argument)

    def reindex(self) -> int:
        """Rebuild the ``skills`` collection from SQL (e.g. after the vector store was lost)."""
        views = self.list(include_deprecated=True)
        for view in views:
            self._index(view, None)
        return len(views)

    # internals

    def _call(self, view: SkillView, info: FunctionInfo, fn: Callable[..., Any] | None, argument: str) -> str:
        try:
            args, kwargs = parse_argument(argument, info)
            if fn is not None:
                return format_result(fn(*args, **kwargs))
            expression = call_expression(view.name, args, kwargs)
        except SkillError as exc:
            return f"error: {exc}"
        except Exception as exc:  # an in-process built-in's failure is information for the model
            return f"error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
        return call_in_sandbox(self.sandbox, view.code, expression, wall_seconds=self.config.call_wall_seconds)

    def _similarities(self, queries: Sequence[RetrievalQuery]) -> builtins.list[dict[str, tuple[float, str | None]]]:
        """Per query: name -> (similarity, environment the skill was learned in) for the active skills near it."""
        collection = self._collection()
        if collection is not None and not self._indexed:
            self._heal_index(collection)
        if collection is None:
            with self.db.session() as session:
                views = [store.to_view(s) for s in store.list_skills(session)]
            return [{v.name: (lexical_similarity(q.text, document(v)), None) for v in views} for q in queries]
        found: builtins.list[dict[str, tuple[float, str | None]]] = [{} for _ in queries]
        by_k: dict[int, builtins.list[int]] = {}
        for index, query in enumerate(queries):
            by_k.setdefault(query.k * self.config.ranking.candidates_per_slot, []).append(index)
        try:
            texts = list(dict.fromkeys(query.text for query in queries))
            vectors = dict(zip(texts, collection.embed(texts), strict=True))
            for k, indices in by_k.items():
                rows = collection.query_vectors(
                    [vectors[queries[i].text] for i in indices], k=k, where={"status": store.ACTIVE}
                )
                for index, hits in zip(indices, rows, strict=True):
                    for hit in hits:
                        environment = hit.record.metadata.get("environment")
                        found[index][hit.record.id] = (hit.score, str(environment) if environment is not None else None)
        except MemoryStoreError as exc:
            log.warning("skill retrieval without memory: %s", exc)
            return [{} for _ in queries]
        return found

    def _heal_index(self, collection: MemoryCollection) -> None:
        """Once per library: index skills that SQL has and the memory lacks (e.g. added while it was down)."""
        self._indexed = True
        try:
            names = [view.name for view in self.list(include_deprecated=True)]
            present = {record.id for record in collection.get(names)}
        except MemoryStoreError as exc:
            log.warning("skill index not checked: %s", exc)
            return
        for view in self.list(include_deprecated=True):
            if view.name not in present:
                self._index(view, None)

    def _collection(self) -> MemoryCollection | None:
        return self.memory.collection(SKILLS_COLLECTION) if self.memory is not None else None

    def _index(self, view: SkillView, environment: str | None) -> None:
        collection = self._collection()
        if collection is None:
            return
        try:
            if environment is None:
                previous = collection.get([view.name])
                if previous and "environment" in previous[0].metadata:
                    environment = str(previous[0].metadata["environment"])
            collection.upsert([record(view, environment)])
        except MemoryStoreError as exc:  # SQL is the source of truth; `reindex` repairs the index
            log.warning("skill %s stored but not indexed: %s", view.name, exc)

    def _update_index(self, view: SkillView) -> None:
        collection = self._collection()
        if collection is None:
            return
        fresh = record(view).metadata
        try:
            collection.update_metadata([view.name], {key: fresh[key] for key in ("status", "utility", "version")})
        except MemoryStoreError as exc:
            log.warning("skill %s: index not updated: %s", view.name, exc)


def _rejected(name: str, reason: str) -> AddResult:
    reason = " ".join(reason.split())
    log.info("skill %s rejected: %s", name, reason)
    return AddResult(status="rejected", name=name, reason=reason)
