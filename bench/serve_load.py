"""Load on the HTTP API (loopback only, bounded): 1, 4 and 16 concurrent clients per endpoint.

    .venv/bin/python bench/serve_load.py --lake /path/to/indexed/lake [--duration 60] [--clients 1,4,16]

Starts `python -m rag_pipeline.serve` on a free 127.0.0.1 port with a fresh tokens file, waits
until /readyz says the index is warm, then for each endpoint (search, ask) and each client count
runs that many closed-loop clients (each sends its next request when the last one returned) for
`--duration` seconds, cycling through English and Chinese questions. Reports throughput,
p50/p95/p99 latency, errors, the server's RSS (sampled every second; first, last and max), and
the time to the first streamed answer event of `ask` with `stream: true` at one client. Every
loop is bounded in time and count; the server is stopped at the end. JSON goes to --out.

The load generator shares the machine's cores with the server, so its own CPU is measured per
level (`client_cpu_ms_per_request`, from getrusage) beside the server's (`server_cpu_ms_per_request`,
from /proc). `--client raw` (the default) sends prebuilt HTTP/1.1 requests on keep-alive sockets and
reads each response by its Content-Length: a few times less CPU per request than `--client httpx`,
so less of the server's share is taken by the measurement itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

QUESTIONS = [
    "How many days of annual leave do I get?",
    "What does error code E-45 mean?",
    "How do I reset my VPN password?",
    "员工每年有多少天年假？",
    "服务器多久备份一次？",
    "What is the price of the X-2000?",
    "Who approves travel expenses?",
    "R-500 滚刷多久更换一次？",
]
MAX_REQUESTS_PER_RUN = 100_000
# Client n opens its connection n × RAMP_S after the first. Sixteen connects at the same instant
# are taken by whichever worker process's accept loop wakes first (asyncio accepts a burst in one
# go), so `--processes 2` could get a 16/0 split and one process did all the work.
RAMP_S = 0.025


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = q * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def rss_mb(pid: int) -> float:
    """Resident memory of the server: the process and its children (the worker processes of
    `rag serve --processes N`), summed."""
    total = 0.0
    for member in (pid, *children(pid)):
        try:
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:  # exited meanwhile
            continue
    return total


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return [d for c in found for d in (c, *children(c))]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def running_server(lake, tokens_file: Path, *, workers: int = 4, processes: int = 1, env: dict | None = None):
    """`python -m rag_pipeline.serve` on a free 127.0.0.1 port, warm in every process (each new
    connection may reach another one), stopped on exit; yields (url, the Popen, seconds to ready)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "DO_NOT_TRACK": "1", "LANCEDB_LOG": "error", **(env or {})}
    server = subprocess.Popen(
        [sys.executable, "-m", "rag_pipeline.serve", "--host", "127.0.0.1", "--port", str(port), "--lake", str(lake),
         "--tokens", str(tokens_file), "--workers", str(workers), "--processes", str(processes), "--log-level", "warning"],
        cwd=REPO, env=env,
    )
    try:
        started = time.perf_counter()
        ready_in_a_row = 0
        while time.perf_counter() - started < 300:
            try:
                ready_in_a_row = ready_in_a_row + 1 if httpx.get(url + "/readyz", timeout=5).status_code == 200 else 0
            except httpx.HTTPError:
                ready_in_a_row = 0
            if ready_in_a_row >= 1 + 10 * (processes - 1):
                break
            time.sleep(0.5 if ready_in_a_row == 0 else 0.02)
        else:
            raise SystemExit("the server did not become ready within 300 s")
        yield url, server, time.perf_counter() - started
    finally:
        server.terminate()
        server.wait(timeout=30)


def body_for(endpoint: str, question: str) -> tuple[str, dict]:
    if endpoint == "search":
        return "/v1/search", {"query": question, "mode": "hybrid", "k": 10}
    return "/v1/ask", {"question": question}


class RawClient:
    """One keep-alive HTTP/1.1 connection that sends prebuilt POSTs and reads each response by its
    Content-Length (the server always sends one for JSON): the cheapest client asyncio can be."""

    def __init__(self, url: str, headers: dict):
        self.host, self.port = url.removeprefix("http://").split(":")
        self.headers = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.reader = self.writer = None

    def request_bytes(self, path: str, body: dict) -> bytes:
        payload = json.dumps(body).encode()
        head = (f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n{self.headers}"
                f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n")
        return head.encode() + payload

    async def post(self, request: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, int(self.port))
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
        return status, await self.reader.readexactly(length)

    async def close(self):
        if self.writer is not None:
            self.writer.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its children (the server's worker processes)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for member in (pid, *children(pid)):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
        except OSError:
            continue
    return total


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def run_level(url: str, headers: dict, endpoint: str, clients: int, duration: float, pid: int,
                    client_kind: str = "raw") -> dict:
    latencies: list[float] = []
    errors: list[str] = []
    rss: list[float] = []
    deadline = time.perf_counter() + duration
    count = 0

    async def httpx_client(n: int, http: httpx.AsyncClient):
        nonlocal count
        i = n
        while time.perf_counter() < deadline and count < MAX_REQUESTS_PER_RUN:
            path, body = body_for(endpoint, QUESTIONS[i % len(QUESTIONS)])
            started = time.perf_counter()
            try:
                r = await http.post(path, json=body)
                if r.status_code != 200:
                    errors.append(f"{r.status_code}: {r.text[:120]}")
                else:
                    latencies.append((time.perf_counter() - started) * 1000)
            except httpx.HTTPError as exc:
                errors.append(repr(exc)[:120])
            count += 1
            i += clients

    async def raw_client(n: int):
        nonlocal count
        conn = RawClient(url, headers)
        requests = [conn.request_bytes(*body_for(endpoint, q)) for q in QUESTIONS]
        i = n
        await asyncio.sleep(n * RAMP_S)  # see RAMP_S
        try:
            while time.perf_counter() < deadline and count < MAX_REQUESTS_PER_RUN:
                started = time.perf_counter()
                try:
                    status, payload = await conn.post(requests[i % len(requests)])
                    if status != 200:
                        errors.append(f"{status}: {payload[:120]!r}")
                    else:
                        latencies.append((time.perf_counter() - started) * 1000)
                except (OSError, asyncio.IncompleteReadError, ValueError, StopIteration) as exc:
                    errors.append(repr(exc)[:120])
                    await conn.close()
                    conn.writer = None
                count += 1
                i += clients
        finally:
            await conn.close()

    async def sample_rss():
        while time.perf_counter() < deadline:
            rss.append(rss_mb(pid))
            await asyncio.sleep(1)

    server_cpu, client_cpu = cpu_seconds(pid), own_cpu_seconds()
    started = time.perf_counter()
    if client_kind == "raw":
        await asyncio.gather(sample_rss(), *(raw_client(n) for n in range(clients)))
    else:
        limits = httpx.Limits(max_connections=clients + 2, max_keepalive_connections=clients + 2)
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120, limits=limits) as http:
            await asyncio.gather(sample_rss(), *(httpx_client(n, http) for n in range(clients)))
    elapsed = time.perf_counter() - started
    server_cpu, client_cpu = cpu_seconds(pid) - server_cpu, own_cpu_seconds() - client_cpu
    rss.append(rss_mb(pid))
    done = max(len(latencies), 1)
    return {
        "endpoint": endpoint,
        "clients": clients,
        "client": client_kind,
        "seconds": round(elapsed, 1),
        "requests": len(latencies),
        "errors": len(errors),
        "error_samples": errors[:3],
        "throughput_rps": round(len(latencies) / elapsed, 2),
        "p50_ms": round(percentile(latencies, 0.50), 1),
        "p95_ms": round(percentile(latencies, 0.95), 1),
        "p99_ms": round(percentile(latencies, 0.99), 1),
        "server_cpu_ms_per_request": round(server_cpu * 1000 / done, 1),
        "client_cpu_ms_per_request": round(client_cpu * 1000 / done, 2),
        "cores_busy_server": round(server_cpu / elapsed, 2),
        "cores_busy_client": round(client_cpu / elapsed, 2),
        "rss_mb_first": round(rss[0], 1),
        "rss_mb_last": round(rss[-1], 1),
        "rss_mb_max": round(max(rss), 1),
    }


async def first_token_ms(url: str, headers: dict, rounds: int = 10) -> dict:
    """Time to the first streamed `token` event, and to the whole stream, at one client."""
    first, total = [], []
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as http:
        for i in range(rounds):
            started = time.perf_counter()
            seen = None
            async with http.stream("POST", "/v1/ask", json={"question": QUESTIONS[0], "stream": True}) as r:
                async for line in r.aiter_lines():
                    if seen is None and line == "event: token":
                        seen = (time.perf_counter() - started) * 1000
            total.append((time.perf_counter() - started) * 1000)
            if seen is not None:
                first.append(seen)
    return {"first_token_p50_ms": round(percentile(first, 0.5), 1), "stream_total_p50_ms": round(percentile(total, 0.5), 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", required=True, help="an indexed lake (e.g. after `rag index --raw data/sample`)")
    parser.add_argument("--duration", type=float, default=60, help="seconds per endpoint and client count (at most 600)")
    parser.add_argument("--clients", default="1,4,16")
    parser.add_argument("--endpoints", default="search,ask")
    parser.add_argument("--workers", type=int, default=4, help="the server's worker threads (per process)")
    parser.add_argument("--processes", type=int, default=1, help="server processes (rag serve --processes)")
    parser.add_argument("--client", choices=("raw", "httpx"), default="raw",
                        help="load generator: raw keep-alive sockets (least CPU) or httpx.AsyncClient")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "serve_load.json"))
    args = parser.parse_args(argv)
    duration = min(args.duration, 600)
    from rag_pipeline.serve.auth import add_token

    with tempfile.TemporaryDirectory() as tmp:
        tokens_file = Path(tmp) / "tokens.json"
        token = add_token(tokens_file, "bench", groups=("all-staff",), clearance="internal")
        headers = {"Authorization": f"Bearer {token}"}
        with running_server(args.lake, tokens_file, workers=args.workers, processes=args.processes) as (url, server, ready_s):
            for q in QUESTIONS * args.processes:  # warm the per-principal statistics and the sentence cache (per process, roughly)
                httpx.post(url + "/v1/ask", json={"question": q}, headers=headers, timeout=120)
            results = {"ready_s": round(ready_s, 1), "load_average_before": os.getloadavg(), "cores": os.cpu_count(),
                       "duration_s": duration, "workers": args.workers, "processes": args.processes, "client": args.client,
                       "levels": []}
            results.update(asyncio.run(first_token_ms(url, headers)))
            for endpoint in args.endpoints.split(","):
                for clients in (int(c) for c in args.clients.split(",")):
                    level = asyncio.run(run_level(url, headers, endpoint, clients, duration, server.pid, args.client))
                    results["levels"].append(level)
                    print(json.dumps(level), flush=True)
            results["load_average_after"] = os.getloadavg()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2), encoding="utf-8")
    print(f"\nready in {results['ready_s']} s; first streamed token p50 {results['first_token_p50_ms']} ms "
          f"(whole stream {results['stream_total_p50_ms']} ms); load average {results['load_average_before']}")
    print(f"{'endpoint':<8} {'clients':>7} {'req/s':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'errors':>6} "
          f"{'cores srv/cli':>13} {'RSS MB first→last (max)':>26}")
    for r in results["levels"]:
        print(f"{r['endpoint']:<8} {r['clients']:>7} {r['throughput_rps']:>7} {r['p50_ms']:>8} {r['p95_ms']:>8} {r['p99_ms']:>8} "
              f"{r['errors']:>6} {r['cores_busy_server']:>6}/{r['cores_busy_client']:<6} "
              f"{r['rss_mb_first']:>12}→{r['rss_mb_last']} ({r['rss_mb_max']})")
    for endpoint in args.endpoints.split(","):
        by_clients = {r["clients"]: r["throughput_rps"] for r in results["levels"] if r["endpoint"] == endpoint}
        if 1 in by_clients and len(by_clients) > 1:
            top = max(by_clients)
            print(f"{endpoint}: {top} clients / 1 client throughput = {by_clients[top] / by_clients[1]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
