"""Progress of long index runs (issue 19, item 1): the reporter's numbers and throttling with
an injected clock, and a real `rag index` under a pseudo-terminal (bars on stderr, the summary
intact on stdout, the same counts in Dagster's run log)."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rag_pipeline import progress as p
from rag_pipeline.progress import Progress, duration

REPO = Path(__file__).resolve().parents[1]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _reporter(mode="plain", total=3000, unit="files", **kw):
    clock, out, logged = Clock(), io.StringIO(), []
    bar = Progress("parse", total, unit, log=logged.append, mode=mode, stream=out, clock=clock, **kw)
    return bar, clock, out, logged


# ---------------------------------------------------------------- the reporter


def test_rate_and_eta_come_from_the_clock():
    bar, clock, _, _ = _reporter()
    assert bar.rate is None and bar.eta_s is None  # no time has passed
    clock.now += 20
    bar.advance(824)
    assert bar.rate == pytest.approx(41.2)
    assert bar.eta_s == pytest.approx((3000 - 824) / 41.2)
    assert bar.line() == "parse: 824/3000 files, 41.2 files/s, eta 53 s"
    clock.now += 52.8
    bar.advance(2176)
    assert bar.eta_s == 0
    assert bar.line(final=True) == "parse: 3000/3000 files, 41.2 files/s, done in 1 min 13 s"


def test_durations_read_as_people_say_them():
    assert [duration(x) for x in (0, 0.4, 53, 60, 247, 3599, 7500)] == [
        "0 s", "0 s", "53 s", "1 min 00 s", "4 min 07 s", "59 min 59 s", "2 h 05 min",
    ]


def test_unknown_total_and_nothing_done_read_plainly():
    bar, clock, _, _ = _reporter(total=None, unit="chunks")
    clock.now += 2
    assert bar.line() == "parse: 0 chunks"
    bar.advance(10)
    assert bar.line() == "parse: 10 chunks, 5.0 chunks/s"
    empty, _, _, _ = _reporter(total=0)
    assert empty.line(final=True) == "parse: 0/0 files, done in 0 s"


def test_a_note_says_what_the_count_leaves_out():
    bar, clock, _, _ = _reporter(total=2, note="812 from the parse cache")
    clock.now += 1
    bar.advance(2)
    assert bar.line(final=True) == "parse: 2/2 files, 2.0 files/s, done in 1 s (812 from the parse cache)"


def test_the_terminal_mode_holds_only_inside_its_block(monkeypatch):
    monkeypatch.delenv("RAG_PROGRESS", raising=False)
    with p.terminal("plain"):
        inside = Progress("chunk", 1)
        assert inside.mode == "plain" and inside._stream is not sys.stderr  # a duplicate of fd 2
    assert Progress("chunk", 1).mode == "off"
    with pytest.raises(ValueError):
        with p.terminal("loud"):
            pass


def test_plain_lines_at_most_one_per_interval_and_one_at_the_end():
    bar, clock, out, logged = _reporter(total=100, interval_s=10, log_interval_s=10)
    for _ in range(100):  # a file every 0.5 s: 50 s of work
        clock.now += 0.5
        bar.advance()
    bar.close()
    bar.close()  # idempotent
    lines = out.getvalue().splitlines()
    assert lines == [
        "parse: 20/100 files, 2.0 files/s, eta 40 s",
        "parse: 40/100 files, 2.0 files/s, eta 30 s",
        "parse: 60/100 files, 2.0 files/s, eta 20 s",
        "parse: 80/100 files, 2.0 files/s, eta 10 s",
        "parse: 100/100 files, 2.0 files/s, eta 0 s",
        "parse: 100/100 files, 2.0 files/s, done in 50 s",
    ]
    assert logged == lines  # the Dagster log gets the same counts, as often


def test_the_run_log_has_its_own_interval_and_off_prints_nothing():
    bar, clock, out, logged = _reporter(mode="off", total=10, log_interval_s=30)
    for _ in range(10):
        clock.now += 5
        bar.advance()
    bar.close()
    assert out.getvalue() == ""
    assert logged == ["parse: 6/10 files, 0.2 files/s, eta 20 s", "parse: 10/10 files, 0.2 files/s, done in 50 s"]


def test_a_failed_step_says_where_it_stopped_and_an_interrupt_says_nothing():
    bar, clock, out, logged = _reporter(total=10)
    with pytest.raises(RuntimeError):
        with bar:
            clock.now += 3
            bar.advance(4)
            raise RuntimeError("boom")
    assert out.getvalue() == logged[-1] + "\n" == "parse: stopped at 4/10 files after 3 s\n"
    bar, clock, out, logged = _reporter(total=10)
    with pytest.raises(KeyboardInterrupt):
        with bar:
            bar.advance(4)
            raise KeyboardInterrupt
    assert out.getvalue() == "" and logged == []


def test_tty_mode_draws_a_tqdm_bar_with_count_rate_and_eta():
    out = io.StringIO()
    with Progress("embed", 64, "chunks", mode="tty", stream=out) as bar:
        for _ in range(4):
            bar.advance(16)
    text = out.getvalue()
    assert "embed" in text and "64/64" in text and "chunks/s" in text, text


def test_the_mode_follows_the_terminal_and_the_flags(monkeypatch):
    class Stream(io.StringIO):
        def __init__(self, tty: bool):
            super().__init__()
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

    monkeypatch.delenv("RAG_PROGRESS", raising=False)
    assert p.choose_mode(stream=Stream(True)) == "tty"
    assert p.choose_mode(stream=Stream(True), quiet=True) == "off"
    assert p.choose_mode(stream=Stream(False)) == "off"  # logs and pipes stay as they were
    assert p.choose_mode(stream=Stream(False), requested=True) == "plain"
    monkeypatch.setenv("RAG_PROGRESS", "1")
    assert p.choose_mode(stream=Stream(False)) == "plain"
    assert p.choose_mode(stream=Stream(False), quiet=True) == "off"
    # outside `rag index` (UI runs): plain lines only when RAG_PROGRESS asks
    assert Progress("chunk", 1).mode == "plain"
    monkeypatch.setenv("RAG_PROGRESS", "0")
    assert Progress("chunk", 1).mode == "off"


# ---------------------------------------------------------------- a real `rag index` on a terminal


@pytest.fixture(scope="module")
def tty_run(tmp_path_factory) -> dict:
    """`rag index` on 3 Markdown files with stderr on a pseudo-terminal, stdout on a pipe."""
    root = tmp_path_factory.mktemp("progress")
    raw = root / "raw"
    raw.mkdir()
    for i, topic in enumerate(["annual leave", "travel expenses", "error code E-45"]):
        (raw / f"note_{i}.md").write_text(
            f"# Note {i}\n\nThis note explains {topic}. " + "Operators read it during the night shift. " * 20 + "\n",
            encoding="utf-8",
        )
    (root / "home").mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(root / "home"), "RAG_GOLDEN_FILE": "none", "COLUMNS": "100"}
    env.pop("RAG_PROGRESS", None)
    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def drain():
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "rag_pipeline.cli", "index", "--raw", str(raw), "--lake", str(root / "lake")],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=env, cwd=REPO, timeout=900,
        )
    finally:
        os.close(slave)
        reader.join(timeout=10)
        os.close(master)
    err = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    return {"proc": proc, "out": proc.stdout.decode(), "err": err, "home": root / "home"}


@pytest.mark.slow
def test_on_a_terminal_each_step_draws_a_bar_and_stdout_keeps_the_summary(tty_run):
    proc, out, err = tty_run["proc"], tty_run["out"], tty_run["err"]
    assert proc.returncode == 0, err[-3000:]
    finals = {}  # each bar's last state (tqdm redraws it after a carriage return)
    for piece in re.split(r"[\r\n]", err):
        m = re.match(r"\s*(parse|chunk|fingerprint|embed|write):.*?(\d+)/(\d+)", piece)
        if m:
            finals[m.group(1)] = (int(m.group(2)), int(m.group(3)), piece)
    assert finals["parse"][:2] == (3, 3), err
    assert finals["chunk"][:2] == (3, 3), err
    assert finals["embed"][0] == finals["embed"][1] > 0, err
    assert "chunks/s" in finals["embed"][2] and "files/s" in finals["parse"][2], err
    assert {"fingerprint", "write"} <= set(finals), err
    # stdout is the summary alone: no bar, no carriage return
    assert out.startswith("rag index succeeded: run "), out
    assert "\r" not in out and "files/s" not in out and "chunks/s" not in out
    assert "3 files: 3 added" in out


@pytest.mark.slow
def test_the_run_log_has_the_per_step_counts(tty_run):
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    assert tty_run["proc"].returncode == 0, tty_run["err"][-3000:]
    instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(tty_run["home"])))
    runs = instance.get_runs()
    assert len(runs) == 1
    messages = [e.user_message for e in instance.all_logs(runs[0].run_id) if not e.is_dagster_event]
    done = {m.split(":", 1)[0]: m for m in messages if re.match(r"\w+: \d+/\d+ \w+, .*done in ", m)}
    assert set(done) == {"parse", "chunk", "fingerprint", "embed", "write"}, messages
    assert done["parse"].startswith("parse: 3/3 files, ") and "files/s" in done["parse"]
    assert done["chunk"].startswith("chunk: 3/3 documents, ")
    assert re.match(r"embed: (\d+)/\1 chunks, [\d.]+ chunks/s, done in \d+ s$", done["embed"]), done["embed"]
