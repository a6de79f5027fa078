"""Pipeline at scale (issue 16, item 8): the *pipeline's* cost at N documents, not the model's.

Reproduce::

    .venv/bin/python bench/pipeline_scale.py --docs 2000 10000 [--seed 16] [--keep]
    .venv/bin/python bench/pipeline_scale.py --docs 100000          # the issue's target size
    .venv/bin/python bench/pipeline_scale.py --docs 2000 --shards 1 8   # the shard count's effect
    .venv/bin/python bench/pipeline_scale.py --docs 100000 --shards 40 --runs first --keep   # prints its work folder
    .venv/bin/python bench/pipeline_scale.py --reuse <work folder> --runs noop   # again on the kept lake, e.g. after a change

For each N it

1. generates a deterministic corpus of N documents (seeded) under a temp folder: Chinese and
   English paragraphs recombined from the sentences of ``data/sample`` (md/txt/html/docx there),
   each document a few hundred to a few thousand characters; ~45 % .txt, ~40 % .md, ~10 % .html,
   ~5 % .docx (python-docx), in nested department folders;
2. builds, at run time, a tiny random-weight embedding model in sentence-transformers format
   (2-layer BertModel, hidden 32, the XLM-R tokenizer of ``data/models/multilingual-e5-small``,
   mean pooling, normalized) and points the pipeline at it with ``RAG_EMBEDDING_MODEL=<folder>``
   (a local folder is loaded as is; nothing downloads) — so embedding costs almost nothing and
   what is left is parsing, chunking, fingerprints, caches, LanceDB writes, checks, Dagster;
3. runs the real ``rag index --raw <corpus> --lake <lake> --json -q`` as a subprocess, with its
   own ``DAGSTER_HOME`` in the temp dir and ``RAG_GOLDEN_FILE=none``, four times:
   ``first`` (fresh lake), ``noop`` (nothing changed), ``change1pct`` (1 % of the documents
   get a new paragraph appended) and ``change1pct_again`` (another 1 %, on caches the previous
   run's housekeeping pruned: what every nightly run after the first change meets).

Per run it records wall seconds, the peak RSS of the whole process tree (also per Dagster step:
the samples taken between the step's start and end) (the sum of VmRSS of
``rag`` and its descendants — the parse workers — sampled from /proc every 0.2 s; also the
largest single process), the lake's size on disk (``du -sb``), the summary ``rag index --json``
prints (chunks, parsed, embedded, ...) and seconds per Dagster step (the run's step statistics
from its own ``DAGSTER_HOME`` instance).

Output: a markdown table on stdout and ``bench/results/pipeline_scale.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from html import escape
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
TOKENIZER_DIR = ROOT / "data" / "models" / "multilingual-e5-small"
RAG = ROOT / ".venv" / "bin" / "rag"
PY = ROOT / ".venv" / "bin" / "python"
RESULTS = ROOT / "bench" / "results" / "pipeline_scale.json"
RUNS = ("first", "noop", "change1pct", "change1pct_again")

FOLDERS = ["handbook", "finance", "it", "products", "legal", "sales", "hr/policies", "hr/forms", "eng/notes", "eng/specs"]


# ---------------------------------------------------------------- corpus

def _sample_texts() -> list[str]:
    texts = []
    for path in sorted(SAMPLE.rglob("*")):
        if path.suffix in (".md", ".txt"):
            texts.append(path.read_text(encoding="utf-8", errors="ignore"))
        elif path.suffix == ".html":
            raw = path.read_text(encoding="utf-8", errors="ignore")
            raw = re.sub(r"(?is)<(script|style)[^>]*>.*?</\1>", " ", raw)
            texts.append(re.sub(r"<[^>]+>", "\n", raw))
        elif path.suffix == ".docx":
            import docx

            texts.append("\n".join(p.text for p in docx.Document(str(path)).paragraphs))
    return texts


def sentence_pools() -> tuple[list[str], list[str]]:
    """English and Chinese sentences from data/sample (markup stripped, 20–300 chars)."""
    en, zh = set(), set()
    for text in _sample_texts():
        for line in text.splitlines():
            line = re.sub(r"^[#>*\-\d.|\s]+", "", line).replace("|", " ").strip()
            if not line:
                continue
            if re.search(r"[\u4e00-\u9fff]", line):
                parts = [p + "。" for p in re.split(r"[。！？]", line) if len(p.strip()) >= 6]
                zh.update(p.strip() for p in parts if len(p) <= 300)
            else:
                parts = re.split(r"(?<=[.!?])\s+", line)
                en.update(p.strip() for p in parts if 20 <= len(p.strip()) <= 300 and " " in p)
    return sorted(en), sorted(zh)


def paragraph(rng: random.Random, pool: list[str], zh: bool) -> str:
    return ("" if zh else " ").join(rng.choice(pool) for _ in range(rng.randint(2, 6)))


def document(rng: random.Random, en: list[str], zh: list[str], i: int) -> tuple[str, list[tuple[str, str]]]:
    """(title, [(heading, paragraph text)...]) of 300–4000 characters."""
    is_zh = rng.random() < 0.4
    pool = zh if is_zh else en
    target = int(rng.uniform(300, 4000) ** 1.0)
    title = (f"文档 {i:06d} " if is_zh else f"Document {i:06d} ") + rng.choice(pool)[:30]
    sections, size, s = [], 0, 0
    while size < target:
        s += 1
        heading = (f"第 {s} 节" if is_zh else f"Section {s}")
        body = "\n\n".join(paragraph(rng, pool, is_zh) for _ in range(rng.randint(1, 3)))
        sections.append((heading, body))
        size += len(body)
    return title, sections


def write_doc(path: Path, title: str, sections: list[tuple[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    ext = path.suffix
    if ext == ".md":
        path.write_text(f"# {title}\n\n" + "\n\n".join(f"## {h}\n\n{b}" for h, b in sections) + "\n", encoding="utf-8")
    elif ext == ".txt":
        path.write_text(title + "\n\n" + "\n\n".join(b for _, b in sections) + "\n", encoding="utf-8")
    elif ext == ".html":
        body = "".join(f"<h2>{escape(h)}</h2>" + "".join(f"<p>{escape(p)}</p>" for p in b.split("\n\n")) for h, b in sections)
        path.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title></head>"
                        f"<body><h1>{escape(title)}</h1>{body}</body></html>\n", encoding="utf-8")
    elif ext == ".docx":
        import docx

        d = docx.Document()
        d.add_heading(title, 1)
        for h, b in sections:
            d.add_heading(h, 2)
            for p in b.split("\n\n"):
                d.add_paragraph(p)
        d.save(str(path))


def generate_corpus(dest: Path, n: int, seed: int) -> list[Path]:
    rng = random.Random(seed)
    en, zh = sentence_pools()
    paths = []
    for i in range(n):
        r = rng.random()
        ext = ".txt" if r < 0.45 else ".md" if r < 0.85 else ".html" if r < 0.95 else ".docx"
        folder = FOLDERS[rng.randrange(len(FOLDERS))]
        path = dest / folder / f"d{i // 1000:03d}" / f"doc_{i:06d}{ext}"
        title, sections = document(rng, en, zh, i)
        write_doc(path, title, sections)
        paths.append(path)
    return paths


def change_one_percent(paths: list[Path], seed: int) -> int:
    """Append a new paragraph to 1 % of the .txt/.md documents (at least one)."""
    rng = random.Random(seed + 1)
    en, zh = sentence_pools()
    plain = [p for p in paths if p.suffix in (".txt", ".md")]
    chosen = rng.sample(plain, max(1, len(paths) // 100))
    for p in chosen:
        with p.open("a", encoding="utf-8") as fh:
            fh.write("\n" + paragraph(rng, en, False) + " " + f"(revision {rng.randrange(10**9)})\n")
    return len(chosen)


# ---------------------------------------------------------------- model

def build_tiny_model(dest: Path, seed: int) -> Path:
    """A 2-layer, hidden-32 random BertModel with the e5 tokenizer, saved as sentence-transformers."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize, Pooling, Transformer
    from transformers import AutoTokenizer, BertConfig, BertModel

    torch.manual_seed(seed)
    hf = dest / "hf"
    tok = AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))
    config = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=514, pad_token_id=tok.pad_token_id)
    BertModel(config).save_pretrained(str(hf))
    tok.save_pretrained(str(hf))
    transformer = Transformer(str(hf), max_seq_length=512)
    model = SentenceTransformer(modules=[transformer, Pooling(32, "mean"), Normalize()], device="cpu")
    out = dest / "tiny-bert-h32"
    model.save(str(out))
    shutil.rmtree(hf)
    return out


# ---------------------------------------------------------------- measuring

def _tree_rss(root_pid: int) -> tuple[int, int, int]:
    """(sum of VmRSS over root_pid and its descendants, largest single VmRSS, sum of their
    anonymous RSS), bytes. Anonymous = resident minus file-backed and shared pages (statm): the
    memory-mapped stage files a step reads count in VmRSS but the kernel can drop them."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
            children.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    page = os.sysconf("SC_PAGE_SIZE")
    total = biggest = anon = 0
    stack = [root_pid]
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/statm", "rb") as fh:
                resident, shared = (int(v) * page for v in fh.read().split()[1:3])
        except (OSError, ValueError):
            continue
        total += resident
        biggest = max(biggest, resident)
        anon += resident - shared
    return total, biggest, anon


def du_bytes(path: Path) -> int:
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def step_windows(dagster_home: Path, run_id: str) -> dict[str, list[float]]:
    """Each step's [start, end] wall-clock time, from the run's own instance."""
    code = (
        "import json,sys\nfrom dagster import DagsterInstance\n"
        "inst = DagsterInstance.from_config(sys.argv[1])\n"
        "print(json.dumps({s.step_key: [s.start_time or 0, s.end_time or 0] "
        "for s in inst.get_run_step_stats(sys.argv[2])}))"
    )
    try:
        out = subprocess.run([str(PY), "-c", code, str(dagster_home), run_id], capture_output=True, text=True, timeout=300)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except Exception as exc:  # noqa: BLE001 - step timings are a nice-to-have
        return {"error": str(exc)[:200]}


def run_index(raw: Path, lake: Path, env: dict) -> dict:
    start = time.perf_counter()
    proc = subprocess.Popen([str(RAG), "index", "--raw", str(raw), "--lake", str(lake), "--json", "-q"],
                            cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = {"tree": 0, "single": 0, "anon": 0}
    samples: list[tuple[float, int, int]] = []  # (wall-clock time, tree RSS, its anonymous part): peaks per step afterwards
    done = threading.Event()

    def sample():
        while not done.is_set():
            total, biggest, anon = _tree_rss(proc.pid)
            peak["tree"] = max(peak["tree"], total)
            peak["single"] = max(peak["single"], biggest)
            peak["anon"] = max(peak["anon"], anon)
            samples.append((time.time(), total, anon))
            done.wait(0.2)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - start
    done.set()
    t.join()
    try:
        summary = json.loads(stdout)
    except json.JSONDecodeError:
        summary = {"unparsed_stdout": stdout[-2000:]}
    return {"rc": proc.returncode, "seconds": round(wall, 2), "peak_rss_tree_mb": round(peak["tree"] / 2**20, 1),
            "peak_rss_single_mb": round(peak["single"] / 2**20, 1), "peak_anon_tree_mb": round(peak["anon"] / 2**20, 1), "summary": summary, "stderr_tail": stderr[-1500:],
            "rss_samples": samples}


STATE = "pipeline_scale_state.json"  # in a kept work folder: what --reuse needs to run on it again


def bench_size(n: int, seed: int, keep: bool, model_dir: Path, shards: int | None = None, run_names: tuple[str, ...] = RUNS,
               reuse: Path | None = None) -> dict:
    """The runs on a fresh corpus, or (`reuse`) on a folder a `--keep` run left: its corpus, lake,
    instance and model as they are (a 100k no-op measured in a minute instead of after a 30-minute build)."""
    work = reuse or Path(tempfile.mkdtemp(prefix=f"pipeline_scale_{n}_"))
    raw, lake, home = work / "raw", work / "lake", work / "dagster_home"
    t0 = time.perf_counter()
    if reuse:
        paths = sorted(p for p in raw.rglob("*") if p.is_file())
    else:
        home.mkdir()
        paths = generate_corpus(raw, n, seed)
    gen_s = time.perf_counter() - t0
    if keep and not reuse:
        (work / STATE).write_text(json.dumps({"docs": n, "seed": seed, "shards": shards, "model_dir": str(model_dir)}))
    corpus_mb = du_bytes(raw) / 2**20
    chars = sum(p.stat().st_size for p in paths)
    print(f"[{n}] corpus: {len(paths)} files, {corpus_mb:.1f} MB on disk, generated in {gen_s:.1f} s ({work})", file=sys.stderr, flush=True)
    env = dict(os.environ, DAGSTER_HOME=str(home), RAG_GOLDEN_FILE="none", RAG_EMBEDDING_MODEL=str(model_dir),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", RAG_PROGRESS="0")
    env.pop("RAG_RAW_DIR", None)
    env.pop("RAG_LAKE_DIR", None)
    if shards:
        env["RAG_SHARDS"] = str(shards)
    runs = {}
    for name in run_names:
        # the second change runs on caches the first one's housekeeping pruned (deletion files in
        # Lance fragments), as every nightly run after the first change does
        changed = change_one_percent(paths, seed + (name == "change1pct_again")) if name.startswith("change1pct") else 0
        r = run_index(raw, lake, env)
        r["changed_docs"] = changed
        r["lake_mb"] = round(du_bytes(lake) / 2**20, 1) if lake.exists() else None
        r["dagster_home_mb"] = round(du_bytes(home) / 2**20, 1)
        run_id = r["summary"].get("run_id")
        windows = step_windows(home, run_id) if run_id else {}
        samples = r.pop("rss_samples")
        if "error" in windows:
            r["steps_s"], r["steps_peak_mb"] = windows, {}
        else:
            r["steps_s"] = {k: round(end - start, 2) for k, (start, end) in windows.items()}
            r["steps_peak_mb"] = {k: round(max((rss for t, rss, _ in samples if start <= t <= end), default=0) / 2**20)
                                  for k, (start, end) in windows.items()}  # 0: the step was shorter than a sample
            r["steps_peak_anon_mb"] = {k: round(max((anon for t, _, anon in samples if start <= t <= end), default=0) / 2**20)
                                       for k, (start, end) in windows.items()}
        runs[name] = r
        s = r["summary"]
        print(f"[{n}, {shards or 'default'} shards] {name}: rc {r['rc']}, {r['seconds']} s, peak tree RSS {r['peak_rss_tree_mb']} MB, "
              f"lake {r['lake_mb']} MB, chunks {s.get('chunks')}, parsed {s.get('parsed_now')}, "
              f"embedded {s.get('embedded')}, new_generation {s.get('new_generation')}", file=sys.stderr, flush=True)
        if r["rc"] != 0:
            print(r["stderr_tail"], file=sys.stderr)
    if not keep and not reuse:
        shutil.rmtree(work, ignore_errors=True)
    return {"docs": n, "shards": shards, "reused": bool(reuse), "corpus_mb": round(corpus_mb, 1), "corpus_bytes": chars, "generate_s": round(gen_s, 1),
            "work_dir": str(work) if keep else None, "runs": runs}


def markdown(results: list[dict]) -> str:
    lines = ["| docs | shards | chunks | run | s | peak RSS tree MB | largest process MB | anonymous MB | lake MB | parsed | embedded |",
             "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for res in results:
        for name, r in res["runs"].items():
            s = r["summary"]
            lines.append(f"| {res['docs']:,} | {res.get('shards') or 'default'} | {s.get('chunks', '-')} | {name} | {r['seconds']} | {r['peak_rss_tree_mb']} | "
                         f"{r['peak_rss_single_mb']} | {r.get('peak_anon_tree_mb', '-')} | {r['lake_mb']} | {s.get('parsed_now', '-')} | {s.get('embedded', '-')} |")
    steps = sorted({k for res in results for r in res["runs"].values() for k in r["steps_s"] if k != "error"})
    if steps:
        lines += ["", "| docs | shards | run | " + " | ".join(steps) + " |", "|---:|---:|---|" + "---:|" * len(steps)]
        for res in results:
            for name, r in res["runs"].items():
                lines.append(f"| {res['docs']:,} | {res.get('shards') or 'default'} | {name} | " + " | ".join(str(r["steps_s"].get(k, "-")) for k in steps) + " |")
    heavy = [k for k in steps if any(r.get("steps_peak_mb", {}).get(k) for res in results for r in res["runs"].values())]
    if heavy:
        lines += ["", "Peak RSS of the process tree while each step ran, all / anonymous (MB; sampled every 0.2 s):", "",
                  "| docs | shards | run | " + " | ".join(heavy) + " |", "|---:|---:|---|" + "---:|" * len(heavy)]
        for res in results:
            for name, r in res["runs"].items():
                lines.append(f"| {res['docs']:,} | {res.get('shards') or 'default'} | {name} | "
                             + " | ".join(f"{r.get('steps_peak_mb', {}).get(k, '-')} / {r.get('steps_peak_anon_mb', {}).get(k, '-')}" for k in heavy) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, nargs="+", default=[2000, 10000])
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--keep", action="store_true", help="keep the temp corpus, lake and DAGSTER_HOME")
    ap.add_argument("--shards", type=int, nargs="+", default=[None], help="RAG_SHARDS values to run each size with")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--runs", nargs="+", choices=RUNS, default=list(RUNS),
                    help="the runs to make, in this order (e.g. `first noop --keep`: a lake to probe its first 1 %% change on)")
    ap.add_argument("--reuse", type=Path, nargs="+", default=[],
                    help="work folders a --keep run printed: run --runs on each as it is (its corpus, lake, model, shards)")
    args = ap.parse_args()
    if args.reuse:
        states = [json.loads((w / STATE).read_text()) for w in args.reuse]
        sizes = [(st["docs"], st["shards"], Path(st["model_dir"]), w, st["seed"]) for st, w in zip(states, args.reuse)]
        model_root = None
    else:
        model_root = Path(tempfile.mkdtemp(prefix="pipeline_scale_model_"))
        model_dir = build_tiny_model(model_root, args.seed)
        sizes = [(n, shards, model_dir, None, args.seed) for n in args.docs for shards in args.shards]
    results = []
    try:
        for n, shards, model, work, seed in sizes:
            results.append(bench_size(n, seed, args.keep, model, shards, tuple(args.runs), reuse=work))
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({"seed": args.seed, "model": "random BertModel 2 layers hidden 32 (e5 tokenizer)",
                                            "cpus": os.cpu_count(), "results": results}, indent=2, ensure_ascii=False))
    finally:
        if model_root and not args.keep:
            shutil.rmtree(model_root, ignore_errors=True)
    print(markdown(results))


if __name__ == "__main__":
    main()
