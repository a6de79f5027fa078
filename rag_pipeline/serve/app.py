"""The HTTP API over the published index: search, ask (JSON or SSE), OpenAI-compatible chat,
status, health, feedback and the web page. Every request is authenticated by a bearer token that
maps to a principal (auth.py), served by one warm index generation (live.py) in a worker thread,
and appended to the query log (querylog.py)."""

from __future__ import annotations

import asyncio
import copy
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from weakref import WeakKeyDictionary

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from rag_pipeline.config import Settings, export_serve_worker_options, serve_tokens_file, serve_worker_options
from rag_pipeline.embedding.encoder import ModelLoadError, ModelMismatchError
from rag_pipeline.query.generate import context_sources, stream_answer
from rag_pipeline.serve import chat, recording
from rag_pipeline.serve.auth import AuthError, Identity, TokenStore
from rag_pipeline.serve.live import LiveIndex
from rag_pipeline.serve.page import PAGE
from rag_pipeline.serve.querylog import QueryLog
from rag_pipeline.serve.schemas import AskRequest, ChatRequest, FeedbackRequest, SearchRequest
from rag_pipeline.serve.sse import answer_events, in_thread, llm_answer_events, sse
from rag_pipeline.store.lake import IndexNotFoundError, IndexUnreadableError

try:  # /docs with Swagger UI and ReDoc served from the package, not from a CDN (machines here are offline)
    from fastapi_offline import FastAPIOffline as _FastAPI
except ImportError:  # pragma: no cover - the dependency is declared; plain FastAPI still serves the API
    _FastAPI = FastAPI

PUBLIC_FIELDS = ("chunk_id", "doc_id", "source", "title", "page", "heading_path", "text", "language", "score")
DEFAULT_WORKERS = 4


class ServiceUnavailable(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def error_body(code: str, message: str, kind: str) -> dict:
    """OpenAI's error shape, so chat front ends show the message; `code` is stable for programs."""
    return {"error": {"code": code, "message": message, "type": kind}}


def public_hit(hit: dict, debug: bool) -> dict:
    return dict(hit) if debug else {k: hit[k] for k in PUBLIC_FIELDS}


_extractive: WeakKeyDictionary = WeakKeyDictionary()


def extractive_index(index):
    """The served index without its LLM (same tables, model and caches): a streamed request takes
    the extractive answer and the hits from it, then streams the model's reply itself."""
    plain = _extractive.get(index)
    if plain is None:
        plain = copy.copy(index)
        plain.llm = None
        _extractive[index] = plain
    return plain


class Service:
    """What the routes share: tokens, the live index, the worker pool, the query log."""

    def __init__(self, lake: Path, tokens_file: Path, settings: Settings, log_questions: bool, workers: int):
        self.lake = lake
        self.tokens = TokenStore(tokens_file)
        self.live = LiveIndex(lake, settings)
        self.log = QueryLog(lake, log_questions=log_questions)
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rag-serve")
        self.ready = threading.Event()
        self.load_error: str | None = None
        self._retry = threading.Lock()
        self.started = time.time()

    def warm(self) -> None:
        try:
            self.live.load()
            self.ready.set()
        except Exception as exc:  # reported by /readyz and every 503
            self.load_error = f"{type(exc).__name__}: {exc}"

    async def run(self, fn, *args):
        """A model or index call on the worker pool: the event loop keeps serving meanwhile."""
        try:
            return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)
        except (IndexNotFoundError, IndexUnreadableError) as exc:  # e.g. a table of the served generation was damaged
            raise ServiceUnavailable("index_unavailable", str(exc)) from exc

    def snapshot(self):
        if not self.ready.is_set():
            if self.load_error and self.live.manifest_path.exists() and self._retry.acquire(blocking=False):
                try:  # the first load failed (no index yet, unreadable): try again now that there is a manifest
                    self.load_error = None
                    self.warm()
                finally:
                    self._retry.release()
                if self.ready.is_set():
                    return self.live.current()
            if self.load_error:
                raise ServiceUnavailable("index_unavailable", self.load_error)
            raise ServiceUnavailable("warming_up", "the index is loading; retry in a few seconds")
        try:
            return self.live.current()
        except (IndexNotFoundError, IndexUnreadableError, ModelMismatchError, ModelLoadError, OSError, ValueError) as exc:
            raise ServiceUnavailable("index_unavailable", str(exc)) from exc


def _lake_and_tokens(lake: str | Path | None, tokens_file: str | Path | None, settings: Settings) -> tuple[Path, Path]:
    """The lake (default: the configured one) and the tokens file (default: RAG_SERVE_TOKENS; required)."""
    tokens_file = tokens_file or serve_tokens_file()
    if not tokens_file:
        raise ValueError("a tokens file is required (--tokens FILE or RAG_SERVE_TOKENS); create one with python -m rag_pipeline.serve.tokens add")
    return (Path(lake) if lake else settings.lake_dir), Path(tokens_file)


def create_app(
    lake: str | Path | None = None,
    tokens_file: str | Path | None = None,
    *,
    settings: Settings | None = None,
    log_questions: bool = True,
    workers: int = DEFAULT_WORKERS,
) -> FastAPI:
    """The ASGI app over the lake's served generation; `tokens_file` maps bearer tokens to principals."""
    settings = settings or Settings()
    lake, tokens_file = _lake_and_tokens(lake, tokens_file, settings)
    service = Service(lake, tokens_file, settings, log_questions, workers)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        loader = asyncio.get_running_loop().run_in_executor(service.pool, service.warm)
        app.state.loader = loader
        yield
        service.pool.shutdown(wait=False, cancel_futures=True)

    app = _FastAPI(
        title="rag_pipeline",
        version="1",
        summary="Cited answers and search over the published index, under the caller's permissions.",
        lifespan=lifespan,
    )
    app.state.service = service
    bearer = HTTPBearer(auto_error=False, description="a token from `python -m rag_pipeline.serve.tokens add`")

    def identity(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> Identity:
        header = f"{credentials.scheme} {credentials.credentials}" if credentials else request.headers.get("authorization")
        return service.tokens.authenticate(header)

    def require_debug(who: Identity, debug: bool) -> None:
        if debug and not who.is_admin:
            raise AuthError(403, "admin_scope_required", "debug fields need a token with the admin scope")

    @app.exception_handler(AuthError)
    async def _auth_error(request: Request, exc: AuthError):
        headers = {"WWW-Authenticate": 'Bearer realm="rag"'} if exc.status == 401 else {}
        kind = "authentication_error" if exc.status == 401 else "permission_error"
        return JSONResponse(error_body(exc.code, exc.message, kind), status_code=exc.status, headers=headers)

    @app.exception_handler(ServiceUnavailable)
    async def _unavailable(request: Request, exc: ServiceUnavailable):
        return JSONResponse(error_body(exc.code, exc.message, "unavailable"), status_code=503, headers={"Retry-After": "5"})

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception):
        return JSONResponse(error_body("internal_error", f"{type(exc).__name__}: the server could not answer this request", "server_error"), status_code=500)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:]) or 'body'}: {e['msg']}" for e in exc.errors())
        return JSONResponse(error_body("invalid_request", problems, "invalid_request_error"), status_code=422)

    # --- health ---------------------------------------------------------------------------

    @app.get("/healthz", tags=["health"], summary="the process is up")
    async def healthz():
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], summary="the index is loaded and warm")
    async def readyz():
        try:
            snap = await service.run(service.snapshot)
        except ServiceUnavailable as exc:
            return JSONResponse({"ready": False, "error": exc.message}, status_code=503)
        return {"ready": True, "generation": snap.generation}

    @app.get("/v1/status", tags=["index"], summary="the served generation, model and counts")
    async def status(who: Identity = Depends(identity)):
        snap = await service.run(service.snapshot)
        manifest = snap.index.manifest
        body = {
            "served_generation": snap.generation,
            "promoted_at": snap.promoted_at,
            "opened_at": snap.opened_at,
            "reloads": service.live.reloads,
            "model": {k: manifest["model"].get(k) for k in ("name", "dimension", "key", "precision")},
            "counts": manifest.get("counts", {}),
            "generator": "llm" if snap.index.llm else "extractive",
            "reranker": snap.index.reranker is not None,
            "uptime_s": round(time.time() - service.started, 1),
            "you": {"name": who.name, "admin": who.is_admin, "clearance": who.principal.clearance,
                    "groups": list(who.principal.groups), "departments": list(who.principal.departments)},
        }
        if who.is_admin:
            body["lake"] = str(service.lake)
            body["workers"] = service.pool._max_workers
            body["process"] = os.getpid()  # which server process answered (`rag serve --processes N`)
        return body

    # --- search and ask -------------------------------------------------------------------

    def log_request(rid, endpoint, who, question, mode, hits, refused, reason, started, generation, status=200):
        service.log.query(
            request_id=rid, endpoint=endpoint, principal_hash=who.principal_hash, question=question, mode=mode,
            hits=hits, refused=refused, reason=reason, latency_ms=(time.perf_counter() - started) * 1000,
            generation=generation, status=status,
        )

    def do_search(query: str, mode: str, k: int, who: Identity, retrieve_only: bool):
        snap = service.snapshot()
        result = snap.index.search(query, mode=mode, k=k, principal=who.principal, rerank=False if retrieve_only else None)
        return snap, result

    @app.post("/v1/search", tags=["index"], summary="ranked passages the caller may read")
    async def search(body: SearchRequest, who: Identity = Depends(identity)):
        require_debug(who, body.debug)
        started, rid = time.perf_counter(), uuid.uuid4().hex
        snap, result = await service.run(do_search, body.query, body.mode, body.k, who, body.retrieve_only)
        hits = result.to_dicts()
        log_request(rid, "search", who, body.query, body.mode, hits, None, None, started, snap.generation)
        payload = {
            "request_id": rid,
            "generation": snap.generation,
            "mode": body.mode,
            "hits": [public_hit(h, body.debug) for h in hits],
        }
        if body.debug:
            payload["rerank"] = {"status": result.rerank_status, "note": result.rerank_note}
        return JSONResponse(payload, headers={"X-Request-Id": rid, "X-Generation": str(snap.generation)})

    def do_ask(question: str, k: int, who: Identity):
        snap = service.snapshot()
        answer, hits = recording.ask_with_hits(snap.index, question, k, who.principal)
        return snap, answer, hits

    def do_ask_extractive(question: str, k: int, who: Identity):
        """The extractive answer and the hits, without the model: a streamed answer asks it itself."""
        snap = service.snapshot()
        answer, hits = recording.ask_with_hits(extractive_index(snap.index), question, k, who.principal)
        return snap, answer, hits

    def model_stream(question: str, hits: list[dict], extractive, llm):
        """The model's reply as it arrives, then its checked answer (generate.stream_answer), off the loop."""
        return in_thread(lambda: stream_answer(question, context_sources(hits), extractive, llm))

    @asynccontextmanager
    async def logged_at_end(rid, endpoint, who, question, hits, started, generation):
        """Logs the checked answer when the stream settles on it; a client that left before logs 499."""
        done = []

        def finished(answer):
            done.append(answer)
            log_request(rid, endpoint, who, question, "hybrid", hits, answer.refused, answer.reason, started, generation)

        try:
            yield finished
        finally:
            if not done:
                log_request(rid, endpoint, who, question, "hybrid", hits, None, "the stream ended before the answer was checked", started, generation, status=499)

    async def answer_for(question: str, k: int, who: Identity, endpoint: str, rid: str, started: float):
        snap, answer, hits = await service.run(do_ask, question, k, who)
        log_request(rid, endpoint, who, question, "hybrid", hits, answer.refused, answer.reason, started, snap.generation)
        return snap, answer, hits

    @app.post("/v1/ask", tags=["index"], summary="a cited answer or a refusal (same JSON as `rag ask --json`); SSE with stream=true")
    async def ask(body: AskRequest, who: Identity = Depends(identity)):
        require_debug(who, body.debug)
        started, rid = time.perf_counter(), uuid.uuid4().hex
        if body.retrieve_only:
            snap, result = await service.run(do_search, body.question, body.mode, body.k, who, True)
            hits = result.to_dicts()
            log_request(rid, "ask", who, body.question, body.mode, hits, None, None, started, snap.generation)
            payload = {"question": body.question, "retrieve_only": True, "generation": snap.generation,
                       "hits": [public_hit(h, body.debug) for h in hits]}
            return JSONResponse(payload, headers={"X-Request-Id": rid, "X-Generation": str(snap.generation)})
        if body.stream:
            async def events():
                yield sse("meta", {"request_id": rid})
                try:
                    snap, answer, hits = await service.run(do_ask_extractive, body.question, body.k, who)
                    extra = {"generation": snap.generation}
                    if body.debug:
                        extra["debug"] = {"hits": [public_hit(h, True) for h in hits]}
                    if snap.index.llm is None or answer.refused:  # composed and checked already
                        log_request(rid, "ask-stream", who, body.question, "hybrid", hits, answer.refused, answer.reason, started, snap.generation)
                        async for event in answer_events(answer, extra, started):
                            yield event
                        return
                    async with logged_at_end(rid, "ask-stream", who, body.question, hits, started, snap.generation) as finished:
                        items = model_stream(body.question, hits, answer, snap.index.llm)
                        async for event in llm_answer_events(items, extra, started, finished):
                            yield event
                except ServiceUnavailable as exc:
                    yield sse("error", error_body(exc.code, exc.message, "unavailable"))
                except Exception as exc:  # the stream has begun: the error travels as an event
                    yield sse("error", error_body("internal_error", f"{type(exc).__name__}: the server could not answer", "server_error"))

            return StreamingResponse(events(), media_type="text/event-stream", headers={"X-Request-Id": rid, "Cache-Control": "no-cache"})
        snap, answer, hits = await answer_for(body.question, body.k, who, "ask", rid, started)
        payload = answer.to_dict()
        if body.debug:
            payload["debug"] = {"generation": snap.generation, "hits": [public_hit(h, True) for h in hits]}
        return JSONResponse(payload, headers={"X-Request-Id": rid, "X-Generation": str(snap.generation)})

    @app.post("/v1/chat/completions", tags=["openai"], summary="OpenAI-compatible chat completions; citations in `citations` and `rag`")
    async def chat_completions(body: ChatRequest, who: Identity = Depends(identity)):
        started, rid = time.perf_counter(), uuid.uuid4().hex
        question = body.question().strip()
        if not question:
            return JSONResponse(error_body("invalid_request", "no user message with text", "invalid_request_error"), status_code=422)
        if body.stream:
            async def events():
                yield chat.first_chunk(rid, body.model)
                try:
                    snap, answer, hits = await service.run(do_ask_extractive, question, 5, who)
                    if snap.index.llm is None or answer.refused:  # composed and checked already
                        log_request(rid, "chat-stream", who, question, "hybrid", hits, answer.refused, answer.reason, started, snap.generation)
                        async for event in chat.stream_chunks(rid, body.model, answer, snap.generation):
                            yield event
                        return
                    async with logged_at_end(rid, "chat-stream", who, question, hits, started, snap.generation) as finished:
                        items = model_stream(question, hits, answer, snap.index.llm)
                        async for event in chat.llm_stream_chunks(rid, body.model, items, snap.generation, finished):
                            yield event
                except ServiceUnavailable as exc:
                    yield sse(None, error_body(exc.code, exc.message, "unavailable"))
                except Exception as exc:
                    yield sse(None, error_body("internal_error", f"{type(exc).__name__}: the server could not answer", "server_error"))

            return StreamingResponse(events(), media_type="text/event-stream", headers={"X-Request-Id": rid, "Cache-Control": "no-cache"})
        snap, answer, _ = await answer_for(question, 5, who, "chat", rid, started)
        return JSONResponse(chat.completion(rid, body.model, answer, snap.generation), headers={"X-Request-Id": rid})

    @app.get("/v1/models", tags=["openai"], summary="OpenAI-compatible model list (one model: the index)")
    async def models(who: Identity = Depends(identity)):
        return {"object": "list", "data": [{"id": chat.MODEL_ID, "object": "model", "created": int(service.started), "owned_by": "rag_pipeline"}]}

    @app.post("/v1/feedback", tags=["index"], summary="thumbs up/down (and a comment) on an earlier request")
    async def feedback(body: FeedbackRequest, who: Identity = Depends(identity)):
        await service.run(lambda: service.log.feedback(request_id=body.request_id, principal_hash=who.principal_hash, rating=body.rating, comment=body.comment))
        return {"ok": True}

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page():
        return HTMLResponse(PAGE)

    return app


def run(host: str = "127.0.0.1", port: int = 8000, lake: str | Path | None = None, tokens_file: str | Path | None = None,
        *, log_questions: bool = True, workers: int = DEFAULT_WORKERS, processes: int = 1, log_level: str = "info") -> None:
    """Serve the API (blocking) with uvicorn: what `rag serve` runs.

    `processes` > 1 starts that many uvicorn worker processes on one socket, each with its own
    model, index and `workers` threads: a request's Python work holds one interpreter's GIL, so
    threads alone stop scaling at about one core (bench/README.md, "HTTP API under load"). Each
    process picks up promotions on its own (every request still sees one generation) and appends
    to the same query log (whole lines, under a file lock).
    """
    import uvicorn

    if processes < 1:
        raise ValueError(f"processes must be at least 1, got {processes}")
    if processes == 1:
        app = create_app(lake, tokens_file, log_questions=log_questions, workers=workers)
        uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False)
        return
    lake, tokens_file = _lake_and_tokens(lake, tokens_file, Settings())
    TokenStore(tokens_file)  # a bad tokens file fails here, once, not in every worker
    export_serve_worker_options({"lake": str(lake), "tokens_file": str(tokens_file), "log_questions": log_questions, "workers": workers},
                                processes)
    uvicorn.run("rag_pipeline.serve.app:app_from_worker_options", factory=True, workers=processes,
                host=host, port=port, log_level=log_level, access_log=False)


def app_from_worker_options() -> FastAPI:
    """The app one `rag serve --processes N` worker process builds, from the options its parent exported."""
    options = serve_worker_options()
    return create_app(options["lake"], options["tokens_file"], log_questions=options["log_questions"], workers=options["workers"])
