"""One graph answer, end to end: pre-selector → selector → budget gate → templater (or an
LLM), with the meta and every trace file.

Each stage is a pure function of what the previous one produced; only the pre-selector
reads the store, and it hands on nothing the view may not read. The meta exists in two
copies: the asker's, where a withheld vertex or edge is a per-answer handle
(``withheld-1``) and never its id, and the audit copy (the trace's ``_meta.json``), whose
``policy_trace`` alone names withheld ids, for curators replaying what was shown and why.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from cairn.graph.llm import ChatAnswerer, LlmUnavailable
from cairn.graph.passport import GraphView
from cairn.graph.preselect import (
    Candidate,
    CandidateSet,
    GraphReader,
    PolicyTrace,
    preselect,
)
from cairn.graph.schema import meta_errors
from cairn.graph.select import RANKING_POLICY, WEIGHTS, Selection, rank
from cairn.graph.template import Envelope, compose, scrub
from cairn.model import CairnModel
from cairn.retrieval.budget import apply_budget, estimate_item_tokens

__all__ = [
    "WhyAnswer",
    "WhyBudgets",
    "WhyRequest",
    "answer",
    "canonical",
    "fingerprint",
]

log = logging.getLogger("cairn.graph")
POLICY_ID = "why_v1"
# How many ranked ids (and their signals) a selector log line carries.
LOG_SAMPLE = 5
PROMPT_ID = "why_v1.0"
_LLM_INSTRUCTIONS = (
    "You explain why an organisational decision was taken, from the numbered evidence "
    "below only. Answer in at most five sentences. Do not mention evidence that is not "
    "listed, and never write an id."
)


class WhyBudgets(CairnModel):
    """The token arithmetic: what is left for evidence is ``context_window`` minus the
    completion, a guard and the fixed overhead of the prompt."""

    context_window: int = Field(default=2048, ge=64, le=1_000_000)
    desired_completion_tokens: int = Field(default=256, ge=0, le=100_000)
    guard_tokens: int = Field(default=64, ge=0, le=100_000)
    overhead_tokens: int = Field(default=128, ge=0, le=100_000)

    @property
    def evidence_tokens(self) -> int:
        return max(
            0,
            self.context_window
            - self.desired_completion_tokens
            - self.guard_tokens
            - self.overhead_tokens,
        )


class WhyRequest(CairnModel):
    """Why a decision (or event) came about. ``anchor`` is its record id or its graph key;
    ``question`` steers the ranking (and is what a query's LLM answers)."""

    anchor: str = Field(min_length=1, max_length=200)
    question: str | None = Field(default=None, max_length=2_000)
    hops: int = Field(default=1, ge=1, le=3)
    budgets: WhyBudgets = Field(default_factory=WhyBudgets)


@dataclass
class WhyAnswer:
    """The body a door returns (``body``), the trace files to keep, and their names."""

    trace_id: str
    body: dict[str, Any]
    files: dict[str, Any] = field(default_factory=dict)


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def fingerprint(value: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical(value)).hexdigest()


def _item(c: Candidate) -> dict[str, Any]:
    """A candidate as the payload shows it: its citation and its allowed fields."""
    item: dict[str, Any] = {
        "id": c.id,
        "version_id": c.version_id,
        "cite": f"{c.id}@{c.version_id}",
        "key": c.key,
        "kind": c.kind,
        "scope": c.scope,
        "shown": c.shown,
        "hops": c.hops,
        "via": c.via,
    }
    item.update(c.fields)
    return item


def _cost(c: Candidate) -> int:
    return estimate_item_tokens(json.dumps(c.fields, sort_keys=True, ensure_ascii=False))


@dataclass(frozen=True)
class _Stages:
    candidates: CandidateSet
    trace: PolicyTrace
    selection: Selection
    included: tuple[Candidate, ...]
    excluded: tuple[tuple[str, str], ...]
    tokens_used: int
    tokens_max: int


def _handles(trace: PolicyTrace) -> dict[str, str]:
    """withheld id → its per-answer handle, in a fixed order (reason, then id)."""
    ordered = sorted(trace.reasons, key=lambda i: (trace.reasons[i], i))
    return {wid: f"withheld-{n}" for n, wid in enumerate(ordered, 1)}


def answer(
    store: GraphReader,
    view: GraphView,
    request: WhyRequest,
    anchor_id: str,
    *,
    mode: Literal["ask", "query"],
    trace_id: str,
    now: datetime,
    snapshot_etag: str,
    answerer: ChatAnswerer | None,
    cached: Callable[[], tuple[CandidateSet, PolicyTrace] | None] | None = None,
    remember: Callable[[tuple[CandidateSet, PolicyTrace]], None] | None = None,
) -> WhyAnswer:
    started = time.perf_counter()
    lap = started
    latencies: dict[str, float] = {}

    def mark(stage: str, **fields: object) -> None:
        """Time ``stage`` and log what it did, under the request's trace id."""
        nonlocal lap
        moment = time.perf_counter()
        latencies[stage] = round((moment - lap) * 1000, 3)
        lap = moment
        log.info(f"graph {stage}", extra={"fields": {"trace_id": trace_id, **fields}})

    hit = cached() if cached is not None else None
    if hit is None:
        walked = preselect(
            store, anchor_id, _with_hops(view, request.hops), now=now, asked=request.anchor
        )
        if remember is not None:
            remember(walked)
    else:
        walked = hit
    candidates, trace = walked
    # Defence in depth: whatever the cache or the walk handed on, every candidate is in the
    # view's domains and within what the role's field rule shows.
    for c in candidates.all():
        if not view.in_domain(c.scope) or (
            c.shown == "headers" and set(c.fields) - {"title", "date"}
        ):
            raise AssertionError("the pre-selector handed on something the view may not read")
    mark(
        "preselector",
        policy_key=view.policy_key,
        role=view.role,
        edge_types_used=sorted(trace.edge_types_used),
        neighbours_scanned=trace.neighbours_scanned,
        hidden_vertices=len(trace.hidden_vertices),
        hidden_edges=len(trace.hidden_edges),
        cache="hit" if hit is not None else "miss",
    )

    selection = rank(candidates, request.question)
    sample = selection.ordered[:LOG_SAMPLE]
    mark(
        "selector",
        ranking_policy=RANKING_POLICY,
        ordered_sample=[r.candidate.id for r in sample],
        signals_sample={r.candidate.id: r.signals for r in sample},
        duplicates=len(selection.duplicates),
    )

    ordered = [candidates.anchor, *(r.candidate for r in selection.ordered)]
    budget = apply_budget(ordered, _cost, request.budgets.evidence_tokens)
    included = tuple(budget.included)
    excluded = [(e.item.id, "token_budget") for e in budget.excluded]
    excluded += [(i, "duplicate") for i in selection.duplicates]
    excluded += [(i, "policy_cap") for i in trace.capped]
    stages = _Stages(
        candidates, trace, selection, included, tuple(excluded), budget.used_tokens,
        budget.max_tokens,
    )  # fmt: skip
    mark(
        "gate",
        max_tokens=budget.max_tokens,
        used_tokens=budget.used_tokens,
        included=len(included),
        dropped=len(budget.excluded),
        context_window=request.budgets.context_window,
        desired_completion_tokens=request.budgets.desired_completion_tokens,
        guard_tokens=request.budgets.guard_tokens,
        overhead_tokens=request.budgets.overhead_tokens,
    )

    neighbours_in = [c for c in included if c.id != candidates.anchor.id]
    anchor_in = bool(included) and included[0].id == candidates.anchor.id
    keys = [c.key for c in candidates.all() if c.key] + list(trace.reasons)
    keys += list(trace.keys.values())
    envelope = compose(
        candidates.anchor,
        neighbours_in,
        candidates.steps,
        withheld=bool(trace.reasons),
        scrub_ids=keys,
    )
    if not anchor_in:
        # The permission note stays in the text: the policy withheld something whatever
        # the budget let in (the note is there iff payload_excluded_ids is not empty).
        lines = ("The token budget is too small for any evidence.",) + (
            (envelope.note,) if envelope.note else ()
        )
        envelope = Envelope(
            text="\n".join(lines),
            lines=lines,
            note=envelope.note,
            cited_ids=(),
            clamps=0,
        )
    prompt = _prompt(candidates.anchor if anchor_in else None, neighbours_in, request.question)
    completion = None
    fallback_reason: str | None = None
    if mode == "query":
        if answerer is None:
            fallback_reason = "llm:not_configured"
        elif not anchor_in:
            fallback_reason = "token_budget:no_evidence"
        else:
            try:
                completion = answerer.complete(
                    prompt, max_tokens=max(16, request.budgets.desired_completion_tokens)
                )
            except LlmUnavailable as exc:
                fallback_reason = exc.reason
    mark(
        "templater",
        clamps=envelope.clamps,
        cited_ids=list(envelope.cited_ids),
        mode="llm" if completion is not None else "templater",
        fallback_reason=fallback_reason,
    )

    llm_text = scrub(completion.text, keys) if completion is not None else None
    if llm_text is not None and trace.reasons:
        llm_text = f"{llm_text}\n{envelope.note}"
    handles = _handles(trace)
    files = _files(
        stages, view, request, envelope, mode, completion, llm_text, fallback_reason, prompt,
        handles,
    )  # fmt: skip
    response_mode = "llm" if completion is not None else "templater"
    latency_total = round((time.perf_counter() - started) * 1000, 3)
    common = {
        "trace_id": trace_id,
        "request": {
            "intent": "why_decision",
            "mode": mode,
            "anchor_id": candidates.anchor.id,
            "request_id": view.request_id or trace_id,
            "trace_id": view.trace_id or trace_id,
            "ts_utc": now.isoformat().replace("+00:00", "Z"),
        },
        "latency_ms_total": latency_total,
        "latencies": latencies,
        "fallback_reason": fallback_reason,
        "response_mode": response_mode,
        "snapshot_etag": snapshot_etag,
        "cache": "hit" if hit is not None else "miss",
    }
    asker = _meta(stages, view, request, files, common, handles, audit=False)
    audit = _meta(stages, view, request, files, common, handles, audit=True)
    report = meta_errors(asker)
    asker["validator"] = audit["validator"] = {
        "error_count": len(report),
        "warnings": report,
    }
    files["validator_report.json"] = {
        "error_count": len(report),
        "warnings": report,
        "checked": ["_meta.json"],
    }
    files["_meta.json"] = audit
    files["_meta.asker.json"] = asker
    body = {
        "trace_id": trace_id,
        "answer": llm_text if llm_text is not None else envelope.text,
        "envelope": files["envelope.json"],
        "evidence": files["evidence_canonical.json"]["items"],
        "_meta": asker,
    }
    return WhyAnswer(trace_id=trace_id, body=body, files=files)


def _with_hops(view: GraphView, hops: int) -> GraphView:
    return replace(view, max_hops=min(view.max_hops, hops))


def _prompt(
    anchor: Candidate | None, neighbours: list[Candidate], question: str | None
) -> list[dict[str, str]]:
    """The chat messages a query sends: only included, masked fields, numbered, no ids."""
    lines = []
    for n, c in enumerate([anchor, *neighbours] if anchor else [], 1):
        fields = {k: v for k, v in c.fields.items()}
        lines.append(f"[{n}] {c.kind}: {json.dumps(fields, sort_keys=True, ensure_ascii=False)}")
    ask = question or "Why was the first decision taken?"
    return [
        {"role": "system", "content": _LLM_INSTRUCTIONS},
        {"role": "user", "content": f"Question: {ask}\n\nEvidence:\n" + "\n".join(lines)},
    ]


def _files(
    stages: _Stages,
    view: GraphView,
    request: WhyRequest,
    envelope: Envelope,
    mode: str,
    completion: Any,
    llm_text: str | None,
    fallback_reason: str | None,
    prompt: list[dict[str, str]],
    handles: Mapping[str, str],
) -> dict[str, Any]:
    candidates, trace, selection = stages.candidates, stages.trace, stages.selection
    scores = {r.candidate.id: {"score": r.score, **r.signals} for r in selection.ordered}
    included_ids = [c.id for c in stages.included]
    files: dict[str, Any] = {
        "envelope.json": {
            "text": envelope.text,
            "lines": list(envelope.lines),
            "note": envelope.note,
            "cited_ids": list(envelope.cited_ids),
        },
        "evidence_pre.json": {
            "anchor": _item(candidates.anchor),
            "neighbours": [_item(c) for c in candidates.neighbours],
            "edges": [asdict(s) for s in candidates.steps],
            "role": view.role,
            "hops": min(view.max_hops, request.hops),
        },
        "plan.json": {
            "ranking_policy": RANKING_POLICY,
            "weights": WEIGHTS,
            "order": [r.candidate.id for r in selection.ordered],
            "scores": scores,
            "anchor_completeness": selection.anchor_completeness,
            "duplicates": list(selection.duplicates),
        },
        "evidence_post.json": {
            "included": included_ids,
            "excluded": [{"id": i, "reason": r} for i, r in stages.excluded],
            "tokens": {"used": stages.tokens_used, "max": stages.tokens_max},
        },
        "evidence_canonical.json": {
            "items": [_item(c) for c in stages.included],
            "edges": [
                asdict(s)
                for s in candidates.steps
                if s.src in included_ids and s.dst in included_ids
            ],
            "withheld": [{"id": handles[i], "reason": trace.reasons[i]} for i in handles],
        },
        "response.json": {
            "mode": "llm" if completion is not None else "templater",
            "short_answer": envelope.text if completion is None else None,
            "llm_completion": (
                {
                    "text": llm_text,
                    "model": completion.model,
                    "token_usage": {
                        "prompt": completion.prompt_tokens,
                        "completion": completion.completion_tokens,
                    },
                }
                if completion is not None
                else None
            ),
            "cited_ids": list(envelope.cited_ids),
            "fallback_reason": fallback_reason,
        },
    }
    if mode == "query":
        files["prompt.json"] = prompt
    if completion is not None:
        files["llm_raw.json"] = completion.raw
    files["_fingerprints"] = {
        "prompt_fp": fingerprint(prompt if mode == "query" else files["evidence_canonical.json"]),
        "bundle_fp": fingerprint(
            {
                name: files[name]
                for name in (
                    "envelope.json", "evidence_pre.json", "plan.json", "evidence_post.json",
                    "evidence_canonical.json", "response.json",
                )
            }
        ),
    }  # fmt: skip
    return files


def _downloads(view: GraphView, trace_id: str) -> list[dict[str, Any]]:
    href = f"/v1/traces/{trace_id}/downloads/"
    allowed_view = "bundle_view" in view.profile.downloads
    # Both bundles are built from the sanitized trace (withheld items are handles, masked
    # fields absent), so the role's profile alone decides who may take the full one.
    full_reason = None if "bundle_full" in view.profile.downloads else "acl:role_missing"
    return [
        {
            "name": "bundle_view",
            "allowed": allowed_view,
            "reason": None if allowed_view else "acl:role_missing",
            "href": href + "bundle_view" if allowed_view else None,
        },
        {
            "name": "bundle_full",
            "allowed": full_reason is None,
            "reason": full_reason,
            "href": href + "bundle_full" if full_reason is None else None,
        },
    ]


def _meta(
    stages: _Stages,
    view: GraphView,
    request: WhyRequest,
    files: dict[str, Any],
    common: dict[str, Any],
    handles: Mapping[str, str],
    *,
    audit: bool,
) -> dict[str, Any]:
    candidates, trace = stages.candidates, stages.trace

    def named(wid: str) -> str:
        return wid if audit else handles[wid]

    withheld = [named(i) for i in handles]
    events = [c for c in candidates.neighbours if c.kind == "event"]
    decisions = [c for c in candidates.neighbours if c.kind != "event"]
    included_events = [c for c in stages.included if c.kind == "event"]
    budgets = request.budgets
    policy_trace: dict[str, Any] = {
        "withheld_ids": withheld,
        "reasons_by_id": {named(i): trace.reasons[i] for i in handles},
        "counts": {
            "hidden_vertices": len(trace.hidden_vertices),
            "hidden_edges": len(trace.hidden_edges),
        },
        "edge_types_used": sorted(trace.edge_types_used),
        "masked_fields": {i: list(f) for i, f in sorted(trace.masked.items())},
        "neighbors_scanned": trace.neighbours_scanned,
        "truncated": trace.truncated,
    }
    if audit:
        policy_trace["handles"] = {handles[i]: i for i in handles}
    response = files["response.json"]
    fingerprints = files["_fingerprints"]
    return {
        "request": {
            "intent": common["request"]["intent"],
            "anchor_id": common["request"]["anchor_id"],
            "request_id": common["request"]["request_id"],
            "trace_id": common["request"]["trace_id"],
            "ts_utc": common["request"]["ts_utc"],
            "mode": common["request"]["mode"],
            "question": request.question,
        },
        "actor": {
            "user_id": view.user_id,
            "role": view.role,
            "namespaces": list(view.reader.labels),
            "policy_version": view.policy_version,
            "policy_key": view.policy_key,
        },
        "policy": {
            "policy_id": POLICY_ID,
            "prompt_id": PROMPT_ID,
            "selector_policy_id": RANKING_POLICY,
            "allowed_ids_policy": {
                "mode": "include_all",
                "cap_k": view.profile.per_type_cap,
                "cap_basis": "per_edge_type_per_hop",
                "cap_reason": "policy_cap" if trace.capped else None,
            },
            "edge_allowlist": sorted({rule.type for rule in view.edges}),
            "max_hops": min(view.max_hops, request.hops),
            "sensitivity_ceiling": view.reader.sensitivity.value,
            "llm": {
                "mode": "auto" if common["request"]["mode"] == "query" else "off",
                "model": (response["llm_completion"] or {}).get("model"),
            },
            "env": {"cite_all_ids": False, "load_shed": False},
        },
        "budgets": {
            "context_window": budgets.context_window,
            "desired_completion_tokens": budgets.desired_completion_tokens,
            "guard_tokens": budgets.guard_tokens,
            "overhead_tokens": budgets.overhead_tokens,
        },
        "fingerprints": {
            "prompt_fp": fingerprints["prompt_fp"],
            "bundle_fp": fingerprints["bundle_fp"],
            "snapshot_etag": common["snapshot_etag"],
        },
        "policy_trace": policy_trace,
        "evidence_counts": {
            "pool": {
                "anchor": 1,
                "events": len(events),
                "transitions": len(candidates.steps),
                "neighbors": len(decisions),
                "total": 1 + len(candidates.neighbours),
            },
            "prompt_included": {"events": len(included_events), "total": len(stages.included)},
            "payload_serialized": {
                "events": len(included_events),
                "total": len(stages.included),
            },
        },
        "evidence_sets": {
            "pool_ids": [c.id for c in candidates.all()],
            "prompt_included_ids": [c.id for c in stages.included],
            "prompt_excluded_ids": [{"id": i, "reason": r} for i, r in stages.excluded],
            "payload_included_ids": [c.id for c in stages.included],
            "payload_excluded_ids": [
                {"id": handles[i], "reason": trace.reasons[i]} for i in handles
            ],
        },
        "selection_metrics": {
            "ranking_policy": RANKING_POLICY,
            "scores": files["plan.json"]["scores"],
        },
        "truncation_metrics": {
            "passes": [
                {
                    "prompt_tokens": stages.tokens_used,
                    "max_prompt_tokens": stages.tokens_max,
                    "action": "rank_and_trim",
                }
            ],
            "selector_truncation": bool(stages.selection.duplicates) or trace.truncated,
            "prompt_selector_truncation": any(r == "token_budget" for _, r in stages.excluded),
        },
        "response": {
            "mode": response["mode"],
            "short_answer": response["short_answer"],
            "llm_completion": (
                {
                    "text": response["llm_completion"]["text"],
                    "token_usage": response["llm_completion"]["token_usage"],
                }
                if response["llm_completion"]
                else None
            ),
            "cited_ids": response["cited_ids"],
        },
        "runtime": {
            "latency_ms_total": common["latency_ms_total"],
            "stage_latencies_ms": common["latencies"],
            "fallback_used": common["fallback_reason"] is not None,
            "fallback_reason": common["fallback_reason"],
            "retries": 0,
            "candidate_cache": common["cache"],
        },
        "validator": {"error_count": 0, "warnings": []},
        "downloads": {"artifacts": _downloads(view, common["trace_id"])},
    }
