"""Last-layer token states of the embedding model, for token recall (query/token_recall.py).

From the int8 ONNX export of the model (`onnx_backend.export_onnx_int8`, the file the int8-onnx
passage backend uses; made once by scripts/install.sh or `export_token_states`), one thread: ~70 ms
for a 170-token passage on a busy 2-core machine (bench/README.md, "Token recall in the gate");
without it, from the numpy query encoder (fp32, several times slower).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

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


class TokenStates:
    """Last-layer token states of one model folder, by the ONNX export when given, else numpy.

    A passage's states are kept for the next question that quotes it (an LRU of PASSAGES_CACHED):
    identical to computing them again, so an answer does not depend on what was asked before."""

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
        self._cached: OrderedDict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = OrderedDict()
        # The recall's products (question × passage tokens) are small: on OpenBLAS's default threads
        # they cost a second core's spinning (ask's CPU time 98 ms for 66 ms of wall clock).
        self.one_blas_thread = one_blas_thread()
        if onnx_path is not None:
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads = 1  # one short sequence: a second thread measured slower on 2 shared cores
            options.inter_op_num_threads = 1
            self._session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
            self._numpy = None
        else:
            from rag_pipeline.embedding.query_encoder import NumpyQueryEncoder

            self._session = None
            self._numpy = NumpyQueryEncoder(folder, max_length)  # its own tokenizer: a second copy on this slow path

    def states(self, text: str, prompt: str, cache: bool = False):
        """(normalized word-token states, their character spans in `text`) of `prompt + text`;
        `cache`: keep them for the next call with the same text (passages, not questions)."""
        key = (prompt, text)
        if cache:
            with self._lock:
                if key in self._cached:
                    self._cached.move_to_end(key)
                    return self._cached[key]
        found = self._compute(text, prompt)
        if cache:
            with self._lock:
                self._cached[key] = found
                while len(self._cached) > PASSAGES_CACHED:
                    self._cached.popitem(last=False)
        return found

    def sentence_vectors(self, texts: list[str], prompt: str) -> np.ndarray | None:
        """Unit mean-pooled vectors of `prompt + text` (the model's text embedding) from the int8
        graph; None on the numpy path (fp32, one text at a time: slower than the model itself) or for no texts.

        For the few short sentences an answer weighs at query time (api.RagIndex._sentence_vectors):
        27 sentences in ~150 ms where the torch model costs ~280 ms warm and ~5 s to load into the
        query process (bench/README.md, "Sentence vectors at query time"). One text a run: batch
        partners would change int8's activation scales, so a sentence's vector, cached by its text,
        would depend on what it was first encoded with."""
        if self._session is None or not texts:
            return None
        rows = []
        for text in texts:
            ids = np.asarray([self.tokenizer.encode(prompt + text).ids], dtype=np.int64)
            with self._lock:
                hidden = self._session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0][0]
            pooled = hidden.mean(0)
            rows.append(pooled / max(float(np.linalg.norm(pooled)), 1e-12))
        return np.asarray(rows, dtype=np.float32)

    def forget(self) -> None:
        """Drop the kept passages' states (bench/ask_latency.py --cold-passages)."""
        with self._lock:
            self._cached.clear()

    def _compute(self, text: str, prompt: str):
        encoding = self.tokenizer.encode(prompt + text)
        ids = np.asarray([encoding.ids], dtype=np.int64)
        with self._lock:
            if self._session is not None:
                hidden = self._session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0][0]
            else:
                hidden = self._numpy.hidden_states(ids[0])
        return word_token_states(hidden, encoding.offsets, text, len(prompt))

