"""Token recall: how much of the question one sentence of the first context passage restates.

The gate's other evidence reads words (keyword and sentence coverage: void across languages and
for paraphrases) or whole-passage vectors (on topic, not "the asked fact is here"). BERTScore
recall (Zhang et al., ICLR 2020) reads the embedding model's own last-layer token states: each
question token's best cosine to a token of a sentence, averaged over the question's word tokens,
the best sentence of the first passage `ask` quotes from. The passage is read whole (its tokens
keep their context) and only the sentence's tokens are compared. Multilingual states align across
languages, so "鸭子在生物分类上属于哪个科？" finds "Ducks are in the family Anatidae".
Measured before it was built: bench/README.md, "Token alignment as gate evidence".

The states: embedding/token_states.py. A model folder it cannot run (not the BERT + mean pooling
layout) gives none, and the evidence records `token_recall: null` (the gate reads it as the fitted
cases' mean: answer.TOKEN_RECALL_WHEN_MISSING).
"""

from __future__ import annotations

import re

import numpy as np

_SENTENCE_END = re.compile(r"[。！？!?；;]+|\.(?=\s)|\n+")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences (and lines) of `text`."""
    spans, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        if text[start:m.end()].strip():
            spans.append((start, m.end()))
        start = m.end()
    if text[start:].strip():
        spans.append((start, len(text)))
    return spans


def question_recall(question: np.ndarray, tokens: np.ndarray) -> float:
    """Mean over question tokens of the best cosine to one of `tokens` (rows L2-normalized); 0 when either is empty."""
    if not len(question) or not len(tokens):
        return 0.0
    return float((question @ tokens.T).max(1).mean())


def best_sentence_recall(question: np.ndarray, passage: np.ndarray, passage_spans: np.ndarray, text: str) -> float:
    """Max over the sentences of `text` of the question's recall in the sentence's tokens."""
    if not len(question) or not len(passage):
        return 0.0
    best = 0.0
    for a, b in sentence_spans(text):
        inside = (passage_spans[:, 0] >= a) & (passage_spans[:, 1] <= b)
        best = max(best, question_recall(question, passage[inside]))
    return best


def token_recall(states, question: str, passage: str, query_prompt: str, passage_prompt: str) -> float:
    """Best-sentence token recall of `question` in `passage` (`states`: embedding.token_states.TokenStates)."""
    with states.one_blas_thread():
        q_states, _ = states.states(question, query_prompt)
        p_states, p_spans = states.states(passage, passage_prompt, cache="passage")
        return round(best_sentence_recall(q_states, p_states, p_spans, passage), 4)


def sentence_recalls(states, question: str, sentences: list[str], query_prompt: str, passage_prompt: str) -> list[float]:
    """Token recall of `question` in each sentence, read alone: how `ask` picks the quote when words
    cannot (the best passage in another language, a paraphrase). It held the answer more often
    than the sentences' embedding cosine, which it replaces (bench/README.md, "Choosing the quote
    by token recall"), and costs one short run per sentence not seen before."""
    with states.one_blas_thread():
        q_states, _ = states.states(question, query_prompt)
        if not len(q_states):
            return [0.0] * len(sentences)
        return [question_recall(q_states, states.states(s, passage_prompt, cache="sentence")[0]) for s in sentences]
