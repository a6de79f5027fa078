"""The served index, kept warm and kept current.

The model loads once; the lake's served manifest is checked on every request with one `stat`
(a promotion or rollback swaps the file by rename, so its inode and mtime change), and a changed
generation is reopened under a lock while requests in flight finish on the index they started
with. A request takes one `RagIndex` from `current()` and uses only it: one generation per request.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from rag_pipeline.config import Settings
from rag_pipeline.embedding.encoder import ModelMismatchError
from rag_pipeline.query.api import stored_policy
from rag_pipeline.serve.recording import RecordingIndex
from rag_pipeline.store.lake import MANIFEST_NAME


@dataclass
class Snapshot:
    index: RecordingIndex
    generation: int
    promoted_at: str | None
    opened_at: float


class LiveIndex:
    def __init__(self, lake_dir: str | Path | None = None, settings: Settings | None = None):
        self.settings = settings or Settings()
        self.lake_dir = Path(lake_dir) if lake_dir else self.settings.lake_dir
        self.manifest_path = self.lake_dir / MANIFEST_NAME
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._stamp: tuple | None = None
        self.reloads = 0
        self.error: str | None = None  # why the served generation cannot be used (503s say it)

    def _stat(self) -> tuple | None:
        try:
            st = os.stat(self.manifest_path)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def load(self) -> Snapshot:
        """Open the served generation (loads the model the first time) and warm it with one query,
        and open the token states' ONNX session `ask` reads (~0.3 s; a search does not). Not an
        `ask`: with an LLM configured it could call the endpoint."""
        snapshot = self.current()
        snapshot.index.search("warm up", mode="hybrid", k=1)
        snapshot.index.encoder.token_states  # noqa: B018 (the property opens the session)
        return snapshot

    def current(self) -> Snapshot:
        """The snapshot to serve this request with; reopens when the served manifest changed."""
        stamp = self._stat()
        snapshot = self._snapshot
        if snapshot is not None and stamp == self._stamp:
            return snapshot
        with self._lock:
            if self._snapshot is not None and self._stat() == self._stamp:
                return self._snapshot
            self._reopen()
            return self._snapshot

    def _reopen(self) -> None:
        stamp = self._stat()  # taken before reading: a swap after it is seen by the next request
        previous = self._snapshot
        if previous is None:
            index = RecordingIndex.open(self.lake_dir, settings=self.settings)
        else:
            old = previous.index
            manifest = old.lake.read_manifest()
            if manifest["generation"] == previous.generation and manifest.get("promoted_at") == previous.promoted_at:
                self._stamp = stamp
                return
            if manifest["model"]["key"] != old.encoder.identity.key:
                self.error = (
                    f"generation {manifest['generation']} was built with model {manifest['model']['name']} "
                    f"(key {manifest['model']['key']}) but this server runs {old.encoder.identity.name}: restart it "
                    "with that model configured, or roll back"
                )
                raise ModelMismatchError(self.error)
            index = RecordingIndex(
                old.lake, manifest, old.encoder, stored_policy(old.lake, manifest), arm_depth=old.arm_depth,
                llm=old.llm, reranker=old.reranker, rerank_top_n=old.rerank_top_n,
            )
            index._sentence_cache = old._sentence_cache  # keyed by text, same model: still valid
            self.reloads += 1
        self.error = None
        self._snapshot = Snapshot(index, index.manifest["generation"], index.manifest.get("promoted_at"), time.time())
        self._stamp = stamp

    @property
    def snapshot(self) -> Snapshot | None:
        return self._snapshot
