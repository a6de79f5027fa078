"""What OCR of the pictures inside text-layer PDF pages would add: per PDF, its images (listed and
decoded by pypdfium2, installed with pdfplumber), the seconds tesseract takes over them, and the
paragraphs it reads at or above the triage threshold. The pipeline OCRs only pages without a
usable text layer; this measures the other pages' pictures (bench/README.md, session 50).

    .venv/bin/python bench/pdf_images.py                     # the shared corpus's text-layer PDFs, ~3 min
    .venv/bin/python bench/pdf_images.py path/to/a.pdf ...
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_raw

from rag_pipeline.ingest.ocr import ocr_image
from rag_pipeline.ingest.pictures import MIN_SIDE

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "pdf"
KEEP = 60.0  # the default ocr_min_confidence: what triage would keep


def measure(path: Path, lang: str) -> dict:
    images, seconds, kept = 0, 0.0, []
    pdf = pdfium.PdfDocument(str(path))
    try:
        for page in pdf:
            for obj in page.get_objects(filter=[pdfium_raw.FPDF_PAGEOBJ_IMAGE], max_depth=3):
                try:
                    img = obj.get_bitmap(render=False).to_pil()
                except Exception:  # an encoding pdfium cannot decode alone
                    continue
                if min(img.size) < MIN_SIDE:
                    continue
                images += 1
                started = time.perf_counter()
                read = ocr_image(img, lang)
                seconds += time.perf_counter() - started
                kept += [p.text for p in read.paragraphs if p.text.strip() and p.confidence >= KEEP]
    finally:
        pdf.close()
    return {"pdf": path.name, "images": images, "ocr_s": seconds, "kept": kept}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pdfs", nargs="*", type=Path)
    ap.add_argument("--lang", default="eng+chi_sim")
    args = ap.parse_args()
    pdfs = args.pdfs or sorted(CORPUS.glob("*.pdf"))
    print(f"| PDF | images | OCR s | paragraphs read at confidence ≥ {KEEP:g} | first of them |")
    print("|---|---:|---:|---:|---|")
    for path in pdfs:
        row = measure(path, args.lang)
        first = row["kept"][0][:60].replace("|", "/") if row["kept"] else ""
        print(f"| `{row['pdf']}` | {row['images']} | {row['ocr_s']:.1f} | {len(row['kept'])} | {first} |")


if __name__ == "__main__":
    main()
