"""A long scan attached to an e-mail: how much of it the message's parse reads.

An .eml carrying an N-page scanned PDF (pages repeated from the shared corpus's scans, as in
bench/long_documents.py) is parsed in-process by `parse_file`; the table gives the attachment's
pages read (OCR'd pages with text), the message's blocks and seconds. Run it with another tree's
code first on PYTHONPATH to compare (session 51: 45 s for all attachments before, 45 s without
progress after).

    .venv/bin/python bench/long_attachment.py [--pages 30]                           # ~2 min
    PYTHONPATH=<worktree of an older commit> .venv/bin/python bench/long_attachment.py
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from email.message import EmailMessage
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parent))  # after PYTHONPATH: an older tree's code wins

from long_documents import CORPUS, SCAN_SOURCES, repeated  # noqa: E402

from rag_pipeline.ingest.parsers import parse_file  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=30)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        scan = repeated([CORPUS / s for s in SCAN_SOURCES], args.pages, Path(tmp) / "scan.pdf")
        msg = EmailMessage()
        msg["From"], msg["To"], msg["Subject"] = "records@example.com", "team@example.com", "Signed contract"
        msg.set_content("The signed contract is attached.\n")
        msg.add_attachment(scan.read_bytes(), maintype="application", subtype="pdf", filename="contract.pdf")
        eml = Path(tmp) / "contract.eml"
        eml.write_bytes(msg.as_bytes())
        started = time.perf_counter()
        doc = parse_file(eml, ocr_lang="chi_sim+eng")
        took = time.perf_counter() - started
    pages = {b.page for b in doc.blocks if b.kind == "ocr_text" and b.page}
    stopped = [w for w in doc.warnings if "not read" in w or "timeout" in w.lower()]
    print("| attachment pages | pages read | blocks | s | what a limit stopped |\n|---:|---:|---:|---:|---|")
    print(f"| {args.pages} | {len(pages)} | {len(doc.blocks)} | {took:.0f} | {'; '.join(stopped)[:160] or '-'} |")


if __name__ == "__main__":
    main()
