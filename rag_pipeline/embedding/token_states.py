"""Last-layer token states of the embedding model, for token recall (query/token_recall.py).

From the int8 ONNX export of the model (`onnx_backend.export_onnx_int8`, the file the int8-onnx
passage backend uses; made once by scripts/install.sh or `encoder.export_query_graphs`), one thread: ~70 ms
for a 170-token passage on a busy 2-core machine (bench/README.md, "Token recall in the gate");
without it, from the query encoder's numpy layers (fp32, several times slower).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

from rag_pipeline.config import compute_threads
from rag_pipeline.embedding.query_encoder import one_blas_thread

WORD_TOKEN = re.compile(r"[0-9A-Za-z\u3400-\u4dbf\u4e00-\u9fff]")  # a token that holds a letter, digit or CJK character


def word_token_states(hidden: np.ndarray, offsets: list[tuple[int, int]], text: str, prompt_length: int):
    """(L2-normalized states, character spans in `text`) of the tokens of `text` that hold a word
    character: special tokens, the prompt's tokens and punctuation are dropped."""
    keep, spans = [], []
    for i, (a, b) in enumerate(offsets):
        a, b = a - prompt_length, b - prompt_length
        if a >= 0 and b > a and WORD_TOKEN.search(text[a:b]):
            keep.append(i)
            spans.append((a, b))
    states = hidden[keep].astype(np.float32)
    norms = np.linalg.norm(states, axis=1, keepdims=True)
    return states / np.clip(norms, 1e-12, None), np.asarray(spans, dtype=np.int64).reshape(-1, 2)


PASSAGES_CACHED = 128  # passages' states kept in-process (~0.25 MB each): a chunk asked about again costs nothing
# Threads of one token-state run (at most RAG_COMPUTE_THREADS). On 2 cores two threads that sleep
# when idle took the sample's 40 longest passages from 56 to 37 ms (median) idle and from 91 to 72 ms
# with both cores busy, questions 8.7 -> 7.9 and 15.4 -> 12.1 ms, with identical states; two spinning
# threads lost under load (122 ms). bench/token_state_threads.py; more cores: not measured.
TOKEN_STATE_THREADS = 2
SENTENCES_CACHED = 512  # answer sentences' states, read alone (~45 KB each, ~23 MB full): a dozen answers' candidates


class TokenStates:
    """Last-layer token states of one model folder, by the ONNX export when given, else numpy.

    Passages' and sentences' states are kept for the next question that reads them (an LRU of
    PASSAGES_CACHED and one of SENTENCES_CACHED): identical to computing them again, so an answer
    does not depend on what was asked before."""

    def __init__(self, folder: Path, max_length: int, onnx_path: Path | None = None, tokenizer=None):
        """`tokenizer`: the folder's `tokenizers.Tokenizer`, unpadded and truncated at `max_length`
        (the query encoder's), else it is loaded here."""
        if tokenizer is None:
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
            tokenizer.no_padding()
            tokenizer.enable_truncation(max_length=max_length)
        self.tokenizer = tokenizer
        self.backend = "onnx-int8" if onnx_path is not None else "numpy-fp32"
        self._lock = threading.Lock()  # one ONNX session / numpy model, called from server threads
        self._cached: dict[str, OrderedDict[tuple[str, str], tuple[np.ndarray, np.ndarray]]] = {
            "passage": OrderedDict(), "sentence": OrderedDict(),
        }
        self._limits = {"passage": PASSAGES_CACHED, "sentence": SENTENCES_CACHED}
        # The recall's products (question × passage tokens) are small: on OpenBLAS's default threads
        # they cost a second core's spinning (ask's CPU time 98 ms for 66 ms of wall clock).
        self.one_blas_thread = one_blas_thread()
        if onnx_path is not None:
            import onnxruntime as ort

            from rag_pipeline.embedding.onnx_backend import session_options

            options = session_options(min(compute_threads(), TOKEN_STATE_THREADS), spin=False)
            self._session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
            self._numpy = None
        else:
            from rag_pipeline.embedding.query_encoder import QueryEncoder

            self._session = None
            self._numpy = QueryEncoder(folder, max_length)  # its own tokenizer: a second copy on this slow path

    def states(self, text: str, prompt: str, cache: str | None = None):
        """(normalized word-token states, their character spans in `text`) of `prompt + text`;
        `cache` ("passage" or "sentence"): keep them for the next call with the same text (not for
        questions, which rarely repeat)."""
        key = (prompt, text)
        kept = self._cached[cache] if cache else None
        if kept is not None:
            with self._lock:
                if key in kept:
                    kept.move_to_end(key)
                    return kept[key]
        found = self._compute(text, prompt)
        if kept is not None:
            with self._lock:
                kept[key] = found
                while len(kept) > self._limits[cache]:
                    kept.popitem(last=False)
        return found

    def forget(self) -> None:
        """Drop the kept passages' and sentences' states (bench/ask_latency.py --cold-passages)."""
        with self._lock:
            for kept in self._cached.values():
                kept.clear()

    def _compute(self, text: str, prompt: str):
        encoding = self.tokenizer.encode(prompt + text)
        ids = np.asarray([encoding.ids], dtype=np.int64)
        with self._lock:
            if self._session is not None:
                hidden = self._session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0][0]
            else:
                hidden = self._numpy.hidden_states(ids[0])
        return word_token_states(hidden, encoding.offsets, text, len(prompt))

