"""The web page in real Chromium (Debian's, headless): ask, stream, citations, refusal, the admin
debug table, retrieve-only and the Chinese labels. Screenshots go to data/test-artifacts/."""

from __future__ import annotations

import re
import shutil
import subprocess
import urllib.parse
from pathlib import Path

import pytest

from rag_pipeline_tests.conftest import REPO

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = REPO / "data" / "test-artifacts"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1200,1600"]


def open_page(served, tmp: Path, who: str, query: dict, screenshot: str | None = None) -> str:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (Debian package chromium)")
    url = f"{served.url}/?{urllib.parse.urlencode(query)}#token={served.tokens[who]}"
    base = [CHROMIUM, *FLAGS, f"--user-data-dir={tmp / ('chrome-' + who)}", "--virtual-time-budget=30000"]
    dom = subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True, timeout=180).stdout
    if screenshot:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        subprocess.run([*base, f"--screenshot={ARTIFACTS / screenshot}", url], capture_output=True, timeout=180)
    return dom


def section(dom: str, element_id: str) -> str:
    match = re.search(rf'<(\w+) id="{element_id}"[^>]*>(.*?)</\1>', dom, re.S)
    assert match, f"no #{element_id} in the page"
    return match.group(0)


def test_the_page_streams_a_cited_answer(served, tmp_path):
    dom = open_page(served, tmp_path, "staff", {"q": "How many days of annual leave do I get?", "lang": "en"}, "serve_page_answer.png")
    assert 'data-state="done"' in dom, dom[-2000:]
    assert "15 working days" in section(dom, "answer")
    citations = section(dom, "citations")
    assert "employee_handbook_en.md" in citations and "<blockquote>" in citations  # source and the passage
    assert 'id="refusal" class="hidden"' in dom
    assert 'id="debug_box" class="hidden"' in dom  # not an admin: no debug table
    assert "budget_memo_2026" not in dom


def test_the_page_shows_the_refusal_reason_in_chinese(served, tmp_path):
    dom = open_page(served, tmp_path, "staff", {"q": "错误代码 E-99 是什么意思？", "lang": "zh"}, "serve_page_refusal_zh.png")
    assert 'data-state="done"' in dom
    assert 'lang="zh-CN"' in dom and "向文档提问" in dom and "无法回答" in dom
    refusal = section(dom, "refusal")
    assert 'class="hidden"' not in refusal.split(">")[0] and "e-99" in refusal.lower()


def test_admins_get_the_per_arm_debug_table_and_the_mode_switch_works(served, tmp_path):
    dom = open_page(served, tmp_path, "cfo", {"q": "2026 budget travel", "mode": "keyword", "lang": "en"}, "serve_page_debug.png")
    assert 'data-state="done"' in dom
    assert 'id="debug_box" class=""' in dom or 'id="debug_box">' in dom
    rows = re.findall(r'<tr class="debug-row">(.*?)</tr>', dom, re.S)
    assert rows and "budget_memo_2026.md" in dom  # the cleared admin sees the confidential memo
    cells = re.findall(r"<td>(.*?)</td>", rows[0])
    assert cells[6] != "–" and cells[4] == "–"  # keyword mode: a keyword rank, no dense rank
    assert 'id="hits_mode">keyword<' in dom


def test_retrieve_only_shows_passages_without_an_answer(served, tmp_path):
    dom = open_page(served, tmp_path, "staff", {"q": "VPN password", "retrieve_only": "1", "mode": "vector"})
    assert 'data-state="done"' in dom
    assert 'id="answer_box" class="hidden"' in dom
    assert re.search(r'<details class="hit">', dom)
