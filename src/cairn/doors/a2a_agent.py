"""The A2A door: an agent with the skills ``research``, ``remember``, ``recall`` and ``why``.

Built on the ``a2a-sdk`` request handler and JSON-RPC dispatcher, which speak A2A 1.0
(``SendMessage``, ``GetTask``, …) and 0.3 (``message/send``, ``tasks/get``, …) on one endpoint.
Three things are cairn's own:

- ``MemoryTaskStore``: tasks live in the main store (SQLite or PostgreSQL), outside the memory
  tables, so a task survives a restart, every server on one database answers for it, and
  memory stays governed by the gate alone.
- ``CairnExecutor``: one skill call per message, one ``Memory`` call per skill (research →
  ``Memory.research``, recall → ``Memory.retrieve``, remember → ``Memory.remember``). A
  message whose skill is unclear moves the task to ``input-required`` and the task can be
  continued by id.
- ``A2AEndpoint``: the edge. It refuses a missing or wrong key with HTTP 401 before anything
  runs, and answers invalid 0.3 params with -32602 (the SDK's 0.3 layer says -32600), among
  them a 0.3 part without ``kind`` and a data part with an integer a double cannot hold.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any

from a2a.compat.v0_3 import types as v03
from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes.agent_card_routes import create_agent_card_routes
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.server.tasks.task_store import TaskStore
from a2a.server.tasks.task_updater import TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    HTTPAuthSecurityScheme,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SecurityRequirement,
    SecurityScheme,
    StringList,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from cairn.doors._errors import error_body
from cairn.doors.http import authenticate_http, error_response
from cairn.errors import CairnError, InvalidInput, PermissionDenied
from cairn.graph.why import WhyRequest
from cairn.limits import MAX_REQUEST_DEPTH, LimitExceeded, check_depth, load_json
from cairn.memory import MAX_TASK_BYTES, Memory
from cairn.model import Content, Principal, Verdict
from cairn.workspace import Workspace

__all__ = [
    "A2A_RPC_PATH",
    "CairnExecutor",
    "MemoryTaskStore",
    "build_a2a_routes",
    "build_agent_card",
]

A2A_RPC_PATH = "/"  # the TCK and most clients POST JSON-RPC to the card's url
PRINCIPAL_STATE = "cairn_principal"
# What the card says of each skill: (id, tags, description, an example message).
_SKILL_CARDS = (
    (
        "research",
        ["memory", "retrieval"],
        "Hybrid retrieval with provenance, temporal validity and contradiction checks; cited "
        "results. Text 'research: <query>' or data {skill, query, top_k, max_tokens}.",
        "research: what did we decide about the database?",
    ),
    (
        "remember",
        ["memory", "write"],
        "Propose a new memory (decision, belief, episode, skill); the gate approves, queues or "
        "rejects it. Text 'remember: <content>' or data {skill, type, content, scope, metadata}.",
        "remember: we release on Tuesdays",
    ),
    (
        "recall",
        ["memory", "search"],
        "Simple search (vector, keyword or hybrid) without validation. Text 'recall: <query>' "
        "or data {skill, query, mode, top_k}.",
        "recall: release schedule",
    ),
    (
        "why",
        ["memory", "decision-graph"],
        "Why a decision was taken, at the fidelity the caller's role may see: a short answer "
        "from the decisions and events the role may read, with a note when something was "
        "withheld. Text 'why: <decision key>' or data {skill, anchor, question, role, hops}.",
        "why: acme-prod-sunset-onprem-connectors-2024",
    ),
)
SKILLS = tuple(skill for skill, *_ in _SKILL_CARDS)
_PREFIX = re.compile(rf"^\s*({'|'.join(SKILLS)})\s*[:\-]\s*(.*)$", re.IGNORECASE | re.DOTALL)
_HELP = (
    "Which skill? Start the text with 'research:', 'recall:', 'remember:' or 'why:', or send "
    'a data part such as {"skill": "recall", "query": "database choice"}.'
)


# ---- the durable task store ---------------------------------------------------------------

# States a task ends in: once saved in one, another server's save cannot take it elsewhere.
_FINISHED = frozenset(
    int(state)
    for state in (
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    )
)


class MemoryTaskStore(TaskStore):
    """The SDK's task store over ``Memory``: tasks live in the main store, so every server on
    one database answers for the same tasks, each task its owner's alone."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    @staticmethod
    def _principal(context: ServerCallContext | None) -> Principal:
        principal = context.state.get(PRINCIPAL_STATE) if context is not None else None
        if not isinstance(principal, Principal):
            # The endpoint authenticates before the SDK runs: no principal means a bug, and
            # a task is never kept or shown without an owner.
            raise PermissionDenied("no principal for this task")
        return principal

    # The store's reads and writes and the (de)serialising of a task, up to 8 MiB, run on a
    # worker thread: on the event loop they would hold every door of the server meanwhile.

    async def save(self, task: Task, context: ServerCallContext) -> None:
        principal = self._principal(context)
        # The endpoint refuses a message that would take its task past this before it runs;
        # here is where every way of growing a task meets, the reply's own parts included.
        if _parts_of(task) > MAX_TASK_PARTS:
            raise InvalidParamsError(
                message=f"Invalid params: a task holds at most {MAX_TASK_PARTS:,} parts; "
                "start a new task"
            )

        def save() -> None:
            self.memory.save_task(
                task.id,
                task.context_id,
                int(task.status.state),
                task.SerializeToString(),
                principal=principal,
                final_states=_FINISHED,
            )

        try:
            await asyncio.to_thread(save)
        except InvalidInput as exc:
            # A task grown past its limit by the reply itself (the endpoint refuses a message
            # that would take it there): the caller's input, so -32602 and not -32603.
            raise InvalidParamsError(message=f"Invalid params: {exc}") from exc

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        principal = self._principal(context)

        def get() -> Task | None:
            body = self.memory.task(task_id, principal=principal)
            return Task.FromString(body) if body is not None else None

        return await asyncio.to_thread(get)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        principal = self._principal(context)
        size = params.page_size or 50
        if params.page_token and not _PAGE_TOKEN.fullmatch(params.page_token):
            raise InvalidParamsError(
                message="Invalid params: pageToken is the nextPageToken of the page before"
            )
        start = int(params.page_token or 0)

        def page() -> list[Task]:
            bodies = self.memory.tasks(
                principal=principal,
                context_id=params.context_id or None,
                state=int(params.status) if params.status else None,
                limit=min(size + 1, 1000),
                offset=start,
            )
            return [Task.FromString(body) for body in bodies]

        try:
            found = await asyncio.to_thread(page)
        except InvalidInput as exc:
            raise InvalidParamsError(message=f"Invalid params: {exc}") from exc
        tasks = found[:size]
        more = len(found) > size
        return ListTasksResponse(
            tasks=tasks,
            next_page_token=str(start + size) if more else "",
            page_size=size,
            total_size=start + len(tasks) + (1 if more else 0),
        )

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        principal = self._principal(context)
        await asyncio.to_thread(self.memory.delete_task, task_id, principal=principal)


# A page token is the offset ``list`` handed out: ASCII digits, never past a page offset's
# bound (``str.isdigit`` would take "²", which ``int`` refuses).
_PAGE_TOKEN = re.compile(r"[0-9]{1,15}")


# ---- the executor ---------------------------------------------------------------------------

# Every integer up to 2**53 has an exact double; past it a double skips integers.
EXACT_INTEGERS = 2**53
# The protocol's counts (a history length, a page size) are protobuf int32 fields.
INT32_MAX = 2**31 - 1


def _json_numbers(value: Any) -> Any:
    """A data part's JSON with its integers back.

    The SDK carries a data part as a protobuf ``Struct``/``Value``, whose only number type is
    a double: ``{"count": 3}`` arrives here as ``3.0``, and ``metadata`` would be stored so.
    Turn every integral double back into an int, at any depth. JSON itself does not tell 3
    from 3.0, so a ``3.0`` that was sent as such comes back as 3 (the same JSON number).
    Integers past 2**53 cannot survive the ``Struct`` at all: ``A2AEndpoint`` refuses them
    before they reach it (``_inexact_integer``), so none is silently rounded here.
    """
    if isinstance(value, float) and value.is_integer() and abs(value) <= EXACT_INTEGERS:
        return int(value)
    if isinstance(value, dict):
        return {key: _json_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_numbers(item) for item in value]
    return value


def _intent(message: Message | None) -> tuple[str | None, dict[str, Any]]:
    """The skill and its arguments: a data part's ``skill`` wins, then a text prefix."""
    if message is None:
        return None, {}
    params: dict[str, Any] = {}
    texts: list[str] = []
    for part in message.parts:
        if part.HasField("data"):
            data = _json_numbers(MessageToDict(part.data))
            if isinstance(data, dict):
                params.update(data)
        elif part.HasField("text"):
            texts.append(part.text)
    meta = MessageToDict(message.metadata) if message.HasField("metadata") else {}
    skill = params.pop("skill", None) or (meta.get("skill") if isinstance(meta, dict) else None)
    text = "\n".join(texts).strip()
    found = _PREFIX.match(text)
    if found:
        skill = skill or found.group(1).lower()
        text = found.group(2).strip()
    if isinstance(skill, str) and skill.lower() in SKILLS:
        key = {"remember": "content", "why": "anchor"}.get(skill.lower(), "query")
        if text and key not in params:
            params[key] = text
        return skill.lower(), params
    return None, params


def _carriable(found: BaseModel) -> dict[str, Any]:
    """``found`` as JSON, every item's metadata in a form A2A can carry.

    The kernel stores metadata up to 32 levels deep; an answer travels as a protobuf
    ``Struct``, which holds an item's metadata only up to ``A2A_MAX_DATA_DEPTH - 1`` levels
    (the same depth a request may send). Deeper metadata goes as its JSON text instead, a
    string, rather than failing the whole answer inside the protobuf decoder."""
    answer: dict[str, Any] = found.model_dump(mode="json")
    for item in answer.get("items", ()):
        metadata = item.get("metadata")
        if isinstance(metadata, dict):
            try:
                check_depth(metadata, "metadata", A2A_MAX_DATA_DEPTH - 1)
            except LimitExceeded:
                item["metadata"] = json.dumps(metadata, ensure_ascii=False)
    return answer


class CairnExecutor(AgentExecutor):
    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    def _run_skill(self, skill: str, args: dict[str, Any], principal: Principal) -> Any:
        def text(name: str) -> str:
            value = args.get(name)
            if not isinstance(value, str) or not value.strip():
                raise InvalidInput(f"{skill} needs '{name}'", field=name)
            return value

        def number(name: str, default: int) -> int:
            # Integers arrive as ints (see _json_numbers), so 2.5 is a real fraction: refuse
            # it rather than round it down.
            value = args.get(name, default)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInput(f"{skill}: '{name}' must be a positive integer", field=name)
            return value

        scope = args.get("scope")
        if scope is not None and not isinstance(scope, str):
            raise InvalidInput(f"{skill}: 'scope' must be a string", field="scope")
        if skill == "research":
            answer = self.memory.research(
                text("query"),
                principal=principal,
                scope=scope,
                max_tokens=number("max_tokens", 4000),
            )
            return _carriable(answer)
        if skill == "recall":
            mode = args.get("mode", "hybrid")
            if mode not in ("hybrid", "keyword", "vector"):
                raise InvalidInput("recall: mode is hybrid, keyword or vector", field="mode")
            found = self.memory.retrieve(
                text("query"),
                principal=principal,
                mode=mode,
                k=number("top_k", 10),
                max_tokens=number("max_tokens", 8000),
                scope=scope,
            )
            return _carriable(found)
        if skill == "why":
            role = args.get("role")
            if role is not None and not isinstance(role, str):
                raise InvalidInput("why: 'role' must be a string", field="role")
            question = args.get("question")
            if question is not None and not isinstance(question, str):
                raise InvalidInput("why: 'question' must be a string", field="question")
            request = WhyRequest(anchor=text("anchor"), question=question, hops=number("hops", 1))
            return self.memory.why(request, principal=principal, role=role)
        body = text("content")
        title = args.get("title") or body.strip().splitlines()[0][:120]
        content = Content(
            kind=str(args.get("type") or args.get("kind") or "episode"),
            scope=str(args.get("scope") or self.memory.default_scope(principal=principal)),
            title=title,
            body=body,
            metadata=args.get("metadata") or {},
        )
        outcome = self.memory.remember(content, principal=principal)
        words = {
            Verdict.APPROVE: "approved",
            Verdict.QUEUE: "pending",
            Verdict.REJECT: "rejected",
        }
        return {
            "id": outcome.record.id if outcome.record else None,
            "status": words[outcome.decision],
            "proposal_id": outcome.proposal.id,
            "reason": outcome.feedback or outcome.proposal.reason,
        }

    @staticmethod
    def _summary(skill: str, data: dict[str, Any]) -> str:
        if skill == "remember":
            return f"Memory {data['status']}: {data.get('id') or data['proposal_id']}"
        if skill == "why":
            return str(data["answer"])
        items = data.get("items", [])
        lines = [data["summary"]] if skill == "research" else [f"Found {len(items)} item(s)."]
        if skill == "recall":
            lines += [f"- {i['title']} [{i['record_id']}@{i['version_id']}]" for i in items[:10]]
        return "\n".join(lines)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        # A follow-up that names only the task (no contextId) continues the task's context.
        current = context.current_task
        context_id = (current.context_id if current is not None else context.context_id) or ""
        updater = TaskUpdater(event_queue, task_id, context_id)
        if context.current_task is None:
            history = [context.message] if context.message is not None else []
            task = Task(
                id=task_id,
                context_id=context_id,
                history=history,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
            )
            await event_queue.enqueue_event(task)
        principal = context.call_context.state.get(PRINCIPAL_STATE)
        skill, args = _intent(context.message)
        if skill is None:
            await updater.requires_input(updater.new_agent_message([new_text_part(_HELP)]))
            return
        await updater.start_work(updater.new_agent_message([new_text_part(f"Running {skill}…")]))
        try:
            if not isinstance(principal, Principal):
                raise PermissionDenied("no identity on this request")
            data = await asyncio.to_thread(self._run_skill, skill, args, principal)
        except CairnError as exc:
            body = error_body(exc).model_dump(exclude_none=True)
            await updater.failed(
                updater.new_agent_message(
                    [new_text_part(f"[{exc.code}] {exc.public_message}"), new_data_part(body)]
                )
            )
            return
        except ValueError as exc:  # a model validator refused the skill's arguments
            refusal = (
                InvalidInput.from_validation(exc)
                if isinstance(exc, ValidationError)
                else InvalidInput(str(exc))
            )
            await updater.failed(
                updater.new_agent_message(
                    [new_text_part(f"[{refusal.code}] {refusal.public_message}")]
                )
            )
            return
        await updater.add_artifact(
            [new_data_part(data)],
            name=f"{skill}-results.json",
            metadata={"mimeType": "application/json"},
        )
        await updater.complete(
            updater.new_agent_message(
                [new_text_part(self._summary(skill, data)), new_data_part(data)]
            )
        )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        current = context.current_task
        context_id = (current.context_id if current is not None else context.context_id) or ""
        updater = TaskUpdater(event_queue, context.task_id or "", context_id)
        await updater.cancel(updater.new_agent_message([new_text_part("Canceled.")]))


# ---- the card and the edge ----------------------------------------------------------------


def build_agent_card(base_url: str, *, require_key: bool = True) -> AgentCard:
    """The card. ``require_key=False`` (``cairn serve --a2a-anonymous``) declares no security
    scheme, because the agent then truly answers without one."""
    url = base_url.rstrip("/") + "/"
    bearer = SecurityScheme(
        http_auth_security_scheme=HTTPAuthSecurityScheme(
            scheme="bearer",
            bearer_format="cairn API key",
            description="Authorization: Bearer <key> (cairn keys create)",
        )
    )
    skills = [
        AgentSkill(id=skill, name=skill, tags=tags, description=description, examples=[example])
        for skill, tags, description, example in _SKILL_CARDS
    ]
    card = AgentCard(
        name="cairn",
        description="Governed, citeable memory: research, recall and remember with "
        "version-pinned citations; agents propose, a policy or a curator decides.",
        version="0.1.0",
        # A URL that is true wherever cairn runs: this server's own API documentation.
        provider=AgentProvider(organization="cairn", url=url + "docs"),
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3"),
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=skills,
    )
    if require_key:
        card.security_schemes["bearer"].CopyFrom(bearer)
        card.security_requirements.append(
            SecurityRequirement(schemes={"bearer": StringList(list=[])})
        )
    return card


class _ContextBuilder(DefaultServerCallContextBuilder):
    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[PRINCIPAL_STATE] = request.scope.get("state", {}).get(PRINCIPAL_STATE)
        return context


def _rpc_error(request_id: Any, code: int, message: str, status: int = 200) -> JSONResponse:
    return JSONResponse(
        {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}},
        status_code=status,
    )


# The 0.3 request models, as the SDK's 0.3 adapter validates them (importing the adapter
# itself first would trip a circular import inside the SDK).
_V03_REQUESTS: dict[str, type[BaseModel]] = {
    "message/send": v03.SendMessageRequest,
    "message/stream": v03.SendStreamingMessageRequest,
    "tasks/get": v03.GetTaskRequest,
    "tasks/cancel": v03.CancelTaskRequest,
    "tasks/resubscribe": v03.TaskResubscriptionRequest,
    "tasks/pushNotificationConfig/set": v03.SetTaskPushNotificationConfigRequest,
    "tasks/pushNotificationConfig/get": v03.GetTaskPushNotificationConfigRequest,
    "tasks/pushNotificationConfig/list": v03.ListTaskPushNotificationConfigRequest,
    "tasks/pushNotificationConfig/delete": v03.DeleteTaskPushNotificationConfigRequest,
}


_SEND_METHODS = {"message/send", "message/stream", "SendMessage", "SendStreamingMessage"}


# The most parts one message may have: a message is a turn of a conversation (a question,
# a few files), and every part costs the SDK a conversion and the reply a copy, so a
# message of 300,000 empty parts held the event loop, and every door, for half a minute.
MAX_MESSAGE_PARTS = 256
# The most parts a task may gather over its messages and answers, for the same reason: a task
# is converted whole each time it is read or answered to.
MAX_TASK_PARTS = 4 * MAX_MESSAGE_PARTS
# The most JSON values (object members and array items, at any depth) a request may carry as
# protobuf Structs (data parts and metadata): the SDK converts each one on the event loop,
# so a single data part of 300,000 keys held every door for 13 s. A record's metadata holds
# at most 1,000 keys, so this leaves room for a whole record and its lists.
A2A_MAX_STRUCT_VALUES = 4_096


def _too_many_parts(body: Any) -> str | None:
    if not isinstance(body, dict):
        return None
    count = len(_message_parts(body))
    if count > MAX_MESSAGE_PARTS:
        return f"params.message.parts: {count:,} parts; a message has at most {MAX_MESSAGE_PARTS}"
    return None


def _parts_of(task: Task) -> int:
    """How many parts a task holds, over its messages and its answers."""
    return sum(len(m.parts) for m in task.history) + sum(len(a.parts) for a in task.artifacts)


def _struct_too_wide(body: Any) -> str | None:
    """Why a request carries too many JSON values as Structs, or None. An explicit
    stack, never recursion, that stops as soon as the count passes the limit."""
    if not isinstance(body, dict):
        return None
    count = 0
    stack = [value for _, value in _carried_as_structs(body)]
    while stack:
        value = stack.pop()
        if not isinstance(value, dict | list):
            continue
        count += len(value)
        if count > A2A_MAX_STRUCT_VALUES:
            return (
                "params: data parts and metadata hold more than "
                f"{A2A_MAX_STRUCT_VALUES:,} values in all (object members and array items)"
            )
        stack.extend(value.values() if isinstance(value, dict) else value)
    return None


def _sent_message(body: dict[str, Any]) -> dict[str, Any]:
    """The message of a send request (0.3 and 1.0 alike), or {} for anything else."""
    if body.get("method") not in _SEND_METHODS:
        return {}
    params = body.get("params")
    message = params.get("message") if isinstance(params, dict) else None
    return message if isinstance(message, dict) else {}


def _message_parts(body: dict[str, Any]) -> list[Any]:
    """The parts of a send request's message, or [] for anything else."""
    parts = _sent_message(body).get("parts")
    return parts if isinstance(parts, list) else []


def _carried_as_structs(body: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """Where a request holds JSON the SDK carries as a protobuf ``Struct`` or ``Value``
    (path, value): the request's own metadata (a send's, a cancel's: any method's), and in a
    send, the message's metadata and each part's data and metadata."""
    params = body.get("params")
    if isinstance(params, dict) and "metadata" in params:
        yield "params.metadata", params["metadata"]
    message = _sent_message(body)
    if "metadata" in message:
        yield "params.message.metadata", message["metadata"]
    for index, part in enumerate(_message_parts(body)):
        if isinstance(part, dict):
            for key in ("data", "metadata"):
                if key in part:
                    yield f"params.message.parts[{index}].{key}", part[key]


def _has_inexact_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) > EXACT_INTEGERS
    if isinstance(value, dict):
        return any(_has_inexact_integer(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_inexact_integer(item) for item in value)
    return False


def _inexact_integer(body: Any) -> str | None:
    """Where a request holds an integer a protobuf ``Struct`` would round, or None.

    Past 2**53 a double cannot hold every integer, and the SDK carries data parts and
    metadata as doubles: ``2**53 + 1`` would be stored as ``2**53`` (and an integer past a
    double's range would not convert at all). A memory must store what it was sent or refuse
    it, so such a request is refused (send the number as a string instead)."""
    if not isinstance(body, dict):
        return None
    for where, value in _carried_as_structs(body):
        if _has_inexact_integer(value):
            exactly = "cannot be carried exactly; send it as a string"
            return f"{where}: an integer beyond +/-2**53 {exactly}"
    return None


def _bad_v03_params(body: Any) -> str | None:
    """Why a well-formed 0.3 request has invalid params, or None (the SDK says -32600)."""
    if not isinstance(body, dict) or body.get("jsonrpc") != "2.0":
        return None
    method = body.get("method")
    request_id = body.get("id")
    if not isinstance(method, str) or isinstance(request_id, bool):
        return None
    if request_id is not None and not isinstance(request_id, str | int):
        return None
    model = _V03_REQUESTS.get(method)
    if model is None:
        return None
    try:
        model.model_validate(body)
    except ValidationError as exc:
        return "; ".join(
            ".".join(str(p) for p in e["loc"]) + ": " + e["msg"] for e in exc.errors()[:5]
        )
    # The SDK's 0.3 models take any integer where the protocol's is 32 bits, so a larger one
    # failed later, inside the conversion, as an internal error.
    params = body.get("params")
    if not isinstance(params, dict):
        params = {}
    lengths = [("params.historyLength", params.get("historyLength"))]
    configuration = params.get("configuration")
    if isinstance(configuration, dict):
        lengths.append(("params.configuration.historyLength", configuration.get("historyLength")))
    for where, length in lengths:
        if isinstance(length, int) and not 0 <= length <= INT32_MAX:
            return f"{where}: a history length is from 0 to {INT32_MAX:,}"
    # In 0.3 ``kind`` is what says a part is text, file or data. The SDK's model defaults a
    # missing ``kind`` to text, so {"type": "image", "text": …} would pass as a text part:
    # refuse it instead of guessing what the caller meant.
    for index, part in enumerate(_message_parts(body)):
        if isinstance(part, dict) and "kind" not in part:
            return f"params.message.parts[{index}]: 'kind' is required (text, file or data)"
    return None


def anonymous_principal(workspace: Workspace, principal_id: str) -> Principal:
    """The named principal unauthenticated A2A requests act as (``--a2a-anonymous``).

    It must exist in the principals file and must not hold a curator or admin role: an
    unauthenticated caller never gets more than an agent could.
    """
    for entry in workspace.principals().principals:
        if entry.id == principal_id:
            principal = entry.principal()
            if principal.can_curate():
                raise InvalidInput(
                    f"principal {principal_id} is a curator or admin; anonymous A2A requests "
                    "may only act as a low-privilege principal",
                    field="a2a_anonymous",
                )
            return principal
    raise InvalidInput(f"no principal {principal_id} in the principals file", field="a2a_anonymous")


class A2AEndpoint:
    """The JSON-RPC endpoint: authenticate, repair 0.3 param errors, hand to the SDK."""

    def __init__(
        self,
        workspace: Workspace,
        memory: Memory,
        dispatcher: JsonRpcDispatcher,
        anonymous: str | None = None,
    ) -> None:
        self.workspace = workspace
        self.memory = memory
        self.dispatcher = dispatcher
        self.anonymous = anonymous

    def _task_too_full(self, body: Any, request_bytes: int, principal: Principal) -> str | None:
        """Why a message may not join the task it names, or None.

        A task keeps every message sent to it, so messages that each fit a request could
        together grow it past what a task may hold, in bytes or in parts (each part costs
        the SDK a conversion whenever the task is read); checked before anything runs, so
        that a refused message has done nothing (a ``remember`` proposes no record)."""
        if not isinstance(body, dict):
            return None
        message = _sent_message(body)
        # protobuf's JSON reader and the SDK's 0.3 models take the field's own name too
        named = [message.get(key) for key in ("taskId", "task_id")]
        task_id = next((name for name in named if isinstance(name, str)), None)
        if task_id is None:
            return None
        held = self.memory.task(task_id, principal=principal)
        if held is None:
            return None  # the SDK answers for a task that is not there (or not the caller's)
        start_anew = "this message would not fit: start a new task"
        if len(held) + request_bytes > MAX_TASK_BYTES:
            return (
                f"params.message.taskId: the task holds {len(held):,} bytes and a task holds "
                f"at most {MAX_TASK_BYTES:,}; {start_anew}"
            )
        parts = _parts_of(Task.FromString(held))
        if parts + len(_message_parts(body)) > MAX_TASK_PARTS:
            return (
                f"params.message.taskId: the task holds {parts:,} parts and a task holds at "
                f"most {MAX_TASK_PARTS:,}; {start_anew}"
            )
        return None

    def _principal(self, key: str | None) -> Principal:
        # A key, when sent, is always checked (a wrong key is refused even in anonymous mode);
        # the principals file is re-read per request, so removing the principal ends it.
        if key is None and self.anonymous is not None:
            return anonymous_principal(self.workspace, self.anonymous)
        return authenticate_http(self.workspace, key)

    async def handle(self, request: Request) -> Response:
        key = _bearer(request.headers.get("authorization"))
        try:
            principal = self._principal(key)
        except CairnError as exc:
            return error_response(exc)
        request.scope.setdefault("state", {})[PRINCIPAL_STATE] = principal
        media = request.headers.get("content-type", "application/json").split(";")[0].strip()
        if media and media != "application/json" and not media.endswith("+json"):
            return _rpc_error(None, -32005, f"Content type not supported: {media}")
        raw = await request.body()  # cached by Starlette: the SDK reads it again
        # Reading and checking up to 8 MiB of JSON takes a while: on a worker thread, so
        # that the event loop, which every door shares, is not held for all of it (it still
        # waits on the interpreter's lock while the JSON parser runs).
        refused = await asyncio.to_thread(self._refusal, raw, principal)
        return refused or await self.dispatcher.handle_requests(request)

    def _refusal(self, raw: bytes, principal: Principal) -> Response | None:
        """The error answer for a request the SDK must not see, or None."""
        try:
            # A request may nest MAX_REQUEST_DEPTH levels: a data part's metadata at the
            # kernel's limit and the envelope around it. Deeper JSON, and numbers JSON has no
            # room for (NaN, 1e999), are refused by name instead of failing in the SDK.
            body = load_json(raw, "the request", max_depth=MAX_REQUEST_DEPTH)
        except LimitExceeded as exc:
            return _rpc_error(None, -32602, f"Invalid params: {exc}")
        except ValueError:
            return _rpc_error(None, -32700, "Parse error: the body is not valid JSON")
        why = (
            _too_many_parts(body)
            or _struct_too_deep(body)
            or _bad_text(body)
            or _bad_v03_params(body)
            or _struct_too_wide(body)
            or _inexact_integer(body)
            or self._task_too_full(body, len(raw), principal)
        )
        if why is not None:
            request_id = body.get("id") if isinstance(body, dict) else None
            return _rpc_error(request_id, -32602, f"Invalid params: {why}")
        return None


# A data part (and a message's or a part's metadata) travels inside the SDK as a protobuf
# Struct, three protobuf levels per JSON level, and protobuf's decoder stops at 100 levels: a
# data part may nest 30 levels (its metadata 29), a little under the kernel's own metadata
# limit, and so may metadata. Deeper JSON is refused here, by name, instead of failing
# inside the decoder.
A2A_MAX_DATA_DEPTH = 30


def _struct_too_deep(body: Any) -> str | None:
    if not isinstance(body, dict):
        return None
    for where, value in _carried_as_structs(body):
        try:
            check_depth(value, where, A2A_MAX_DATA_DEPTH)
        except LimitExceeded as exc:
            if where.endswith(".data"):
                return (
                    f"{exc}: through A2A a data part nests at most {A2A_MAX_DATA_DEPTH} levels, "
                    f"so its metadata at most {A2A_MAX_DATA_DEPTH - 1}"
                )
            return f"{exc}: A2A carries it as a protobuf Struct, which nests at most that deep"
    return None


def _bad_text(body: Any) -> str | None:
    """Where a string holds a lone surrogate (an escape like \\ud800 not part of a pair),
    which no UTF-8 text can carry, or None. An explicit stack, never recursion."""
    stack: list[tuple[Any, str]] = [(body, "request")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return f"{where}: a lone surrogate is not text; send whole characters"
        elif isinstance(item, dict):
            for key, value in item.items():
                stack.append((key, f"{where} (a key)"))
                # the path is sent back: never with a lone surrogate of its own
                shown = key.encode("utf-8", "backslashreplace").decode("utf-8")[:64]
                stack.append((value, f"{where}.{shown}"))
        elif isinstance(item, list):
            stack.extend((value, f"{where}[{i}]") for i, value in enumerate(item))
    return None


def _bearer(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, key = header.partition(" ")
    return key.strip() or None if scheme.lower() == "bearer" else None


def build_a2a_routes(
    workspace: Workspace, memory: Memory, base_url: str, *, anonymous: str | None = None
) -> list[Route]:
    """Routes for the card and the JSON-RPC endpoint (tasks are kept in ``memory``).

    ``anonymous`` names a low-privilege principal that requests without a key act as (off by
    default; only this endpoint, never ``/v1`` or ``/mcp``)."""
    if anonymous is not None:
        anonymous_principal(workspace, anonymous)  # refuse a bad name at start-up
    store = MemoryTaskStore(memory)
    card = build_agent_card(base_url, require_key=anonymous is None)
    handler = DefaultRequestHandler(
        agent_executor=CairnExecutor(memory), task_store=store, agent_card=card
    )
    dispatcher = JsonRpcDispatcher(
        request_handler=handler, context_builder=_ContextBuilder(), enable_v0_3_compat=True
    )
    endpoint = A2AEndpoint(workspace, memory, dispatcher, anonymous)
    routes = [
        *create_agent_card_routes(card, cache_control="public, max-age=300"),
        Route(A2A_RPC_PATH, endpoint=endpoint.handle, methods=["POST"], name="a2a_jsonrpc"),
    ]
    return routes
