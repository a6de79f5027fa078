"""Fuzz the format parsers with mutated real files (issue 9, item 4).

Seeds come from the shared corpus; hypothesis flips bytes, truncates, duplicates chunks and
inserts bytes, and for Office packages also mutates the XML inside a member (mutating the
compressed bytes mostly just fails the zip's CRC). Each input goes through the function
the pipeline uses, ``parse_outcome(path, parse_file)`` (what each pool worker runs), and
must come back parsed or quarantined with a known reason, never raise; a parsed document
must also survive the parse cache (JSON, UTF-8) and chunking, the next things a run does
with it.

Bounded for CI: ~150 inputs in all, each stopped after PER_INPUT_S (as the pool would stop
it at parse_timeout_s). Runs are deterministic (derandomized); RAG_FUZZ_SCALE=10 runs ten
times as many inputs. Each test prints how many inputs it executed and what became of them.
"""

from __future__ import annotations

import functools
import io
import os
import signal
import time
import typing
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_pipeline.chunking import chunk_document
from rag_pipeline.config import ChunkingSettings
from rag_pipeline.ingest.document import ParsedDocument, QuarantineReason, UnreadableDocument
from rag_pipeline.ingest.parsers import parse_file
from rag_pipeline.ingest.serialize import outcome_from_json, outcome_to_json
from rag_pipeline.ingest.triage import parse_outcome

PER_INPUT_S = 15
SCALE = float(os.environ.get("RAG_FUZZ_SCALE") or 1)
REASONS = set(typing.get_args(QuarantineReason))
# format -> (seed files in the shared corpus, inputs to run)
FORMATS = {
    "pdf": (["pdf/word_example.pdf", "pdf/layout-parser-paper-fast.pdf"], 25),
    "docx": (["docx/handbook-1p.docx", "docx/docx-tables.docx"], 20),
    "xlsx": (["xlsx/vodafone.xlsx", "xlsx/2023-half-year-analyses-by-segment.xlsx"], 20),
    "pptx": (["pptx/sample-presentation.pptx", "pptx/powerpoint_sample.pptx"], 20),
    "html": (["html/ideas-page.html", "html/fake-html-cp1252.html"], 15),
    "md": (["md/wiki.md", "md/unstructured_example_README.md"], 15),
    "csv": (["csv/csv-comma.csv", "csv/stanley-cups-utf-16.csv"], 15),
    "txt": (["txt/book-war-and-peace-1p.txt", "txt/fake-text-utf-16.txt"], 10),
    "image": (["image/chi_sim_image.jpeg", "image/return_word_debug.jpg"], 10),
}
PACKAGES = {"docx", "xlsx", "pptx"}


def mutate(draw: st.DrawFn, data: bytes) -> bytes:
    """One to three of: byte flips, truncation, chunk duplication, insertion."""
    buf = bytearray(data)
    for op in draw(st.lists(st.sampled_from(["flip", "truncate", "duplicate", "insert"]), min_size=1, max_size=3)):
        n = len(buf)
        if n == 0:
            break
        if op == "flip":
            flips = st.lists(st.tuples(st.integers(0, n - 1), st.integers(1, 255)), min_size=1, max_size=16)
            for pos, mask in draw(flips):
                buf[pos] ^= mask
        elif op == "truncate":
            del buf[draw(st.integers(0, n - 1)):]
        elif op == "duplicate":
            start = draw(st.integers(0, n - 1))
            chunk = buf[start : start + draw(st.integers(1, 4096))]
            at = draw(st.integers(0, n))
            buf[at:at] = chunk * draw(st.integers(1, 8))
        else:
            at = draw(st.integers(0, n))
            buf[at:at] = draw(st.binary(min_size=1, max_size=64))
    return bytes(buf)


def mutate_member(draw: st.DrawFn, package: bytes) -> bytes:
    """Rebuild an Office package with one XML member mutated (a valid zip, hostile XML)."""
    with zipfile.ZipFile(io.BytesIO(package)) as src:
        members = {info.filename: src.read(info.filename) for info in src.infolist()}
    victim = draw(st.sampled_from(sorted(name for name in members if name.endswith((".xml", ".rels")))))
    members[victim] = mutate(draw, members[victim])
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for name, data in members.items():
            dst.writestr(name, data)
    return out.getvalue()


@st.composite
def mutated(draw: st.DrawFn, seeds: tuple[bytes, ...], package: bool) -> bytes:
    seed = draw(st.sampled_from(seeds))
    if package and draw(st.booleans()):
        return mutate_member(draw, seed)
    return mutate(draw, seed)


class _Overtime(BaseException):
    """Raised by the alarm; a BaseException so parse_outcome's `except Exception` lets it through."""


def _overtime(signum, frame):  # noqa: ARG001
    raise _Overtime


def bounded_outcome(path: Path) -> tuple[ParsedDocument | UnreadableDocument, float]:
    """parse_outcome with a per-input time limit (the pool's parse_timeout_s, in miniature)."""
    parse = functools.partial(parse_file, ocr_lang="chi_sim+eng")
    previous = signal.signal(signal.SIGALRM, _overtime)
    signal.setitimer(signal.ITIMER_REAL, PER_INPUT_S)
    started = time.perf_counter()
    try:
        outcome = parse_outcome(path, parse)
    except _Overtime:
        outcome = UnreadableDocument("timeout", f"over {PER_INPUT_S} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return outcome, time.perf_counter() - started


def check(outcome: ParsedDocument | UnreadableDocument) -> str:
    """What a run does next with an outcome must work; returns a label for the tally."""
    assert isinstance(outcome, (ParsedDocument, UnreadableDocument)), type(outcome)
    stored = outcome_to_json(outcome).encode("utf-8")  # the parse cache and Arrow need valid UTF-8
    if isinstance(outcome, UnreadableDocument):
        assert outcome.reason in REASONS, outcome.reason
        if outcome.reason == "corrupt":  # which error it was: parser bugs show up as odd exception types
            return f"corrupt:{outcome.detail.split(':', 1)[0][:40]}"
        return outcome.reason
    assert outcome.text.strip()
    assert outcome_from_json(stored.decode("utf-8")) == outcome
    assert chunk_document("fuzz", outcome, ChunkingSettings(max_tokens=300, overlap_tokens=40))
    return "parsed"


@pytest.mark.timeout(300, method="thread")  # the signal method would take SIGALRM from bounded_outcome
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_mutated_files_are_parsed_or_quarantined_never_raise(fmt, shared_corpus, tmp_path):
    rels, examples = FORMATS[fmt]
    examples = max(1, int(examples * SCALE))
    seeds = tuple((shared_corpus / rel).read_bytes() for rel in rels)
    ext = Path(rels[0]).suffix
    tally: Counter[str] = Counter()
    slowest = [0.0]

    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=mutated(seeds, fmt in PACKAGES))
    def run(data: bytes) -> None:
        path = tmp_path / f"fuzz{ext}"
        path.write_bytes(data)
        outcome, seconds = bounded_outcome(path)
        slowest[0] = max(slowest[0], seconds)
        tally[check(outcome)] += 1

    run()
    inputs = sum(tally.values())
    print(f"\nfuzz {fmt}: {inputs} inputs, slowest {slowest[0]:.1f} s: {dict(tally.most_common())}")
    assert inputs >= examples // 2  # hypothesis may stop early when it runs out of distinct inputs
