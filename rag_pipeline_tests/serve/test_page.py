"""The web page in real Chromium (Debian's, headless): ask, stream, citations, refusal, the admin
debug table, retrieve-only and the Chinese labels. Screenshots go to data/test-artifacts/."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import time
import urllib.parse
from pathlib import Path

import pytest

from rag_pipeline_tests.conftest import REPO

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = REPO / "data" / "test-artifacts"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1200,1600"]


class Browser:
    """Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`,
    fds 3 and 4): open a page, wait until a JS condition holds in real time, read the DOM, screenshot."""

    def __init__(self, user_data_dir: Path):
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def wire():
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={user_data_dir}", "about:blank"],
            preexec_fn=wire, pass_fds=(3, 4), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._id = 0

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 60) -> dict:
        self._id += 1
        message = {"id": self._id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.time() + timeout
        while time.time() < deadline:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply["result"]
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self._buffer += chunk
        raise TimeoutError(method)

    def open(self, url: str) -> str:
        target = self.send("Target.createTarget", {"url": url})["targetId"]
        return self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

    def evaluate(self, session: str, expression: str):
        return self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)["result"].get("value")

    def wait_for(self, session: str, expression: str, timeout: float = 120) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.evaluate(session, expression):
                return
            time.sleep(0.25)
        raise TimeoutError(expression)

    def screenshot(self, session: str, path: Path) -> None:
        data = self.send("Page.captureScreenshot", {"format": "png"}, session)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        os.close(self._to_chrome)
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self._from_chrome)


def open_page(served, tmp: Path, who: str, query: dict, screenshot: str | None = None) -> str:
    """The page's DOM once its question has been answered (body data-state set), waited for in real time."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (Debian package chromium)")
    url = f"{served.url}/?{urllib.parse.urlencode(query)}#token={served.tokens[who]}"
    browser = Browser(tmp / f"chrome-{who}")
    try:
        session = browser.open(url)
        browser.wait_for(session, "document.body && document.body.dataset.state !== undefined")
        if screenshot:
            browser.screenshot(session, ARTIFACTS / screenshot)
        return browser.evaluate(session, "document.documentElement.outerHTML")
    finally:
        browser.close()


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


def test_the_api_docs_render_offline(served, tmp_path):
    """/docs loads Swagger UI from the server itself (no CDN: these machines are offline) and lists the API."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (Debian package chromium)")
    html = __import__("httpx").get(served.url + "/docs").text
    assert "cdn." not in html and "/static-offline-docs/swagger-ui-bundle.js" in html
    browser = Browser(tmp_path / "chrome-docs")
    try:
        session = browser.open(served.url + "/docs")
        browser.wait_for(session, "document.querySelectorAll('.opblock').length > 5")
        browser.screenshot(session, ARTIFACTS / "serve_docs.png")
        dom = browser.evaluate(session, "document.documentElement.outerHTML")
    finally:
        browser.close()
    assert "/v1/chat/completions" in dom and "/v1/ask" in dom and "/v1/search" in dom
