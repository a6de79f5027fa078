"""Token alignment as refusal-gate evidence: how much of the question one sentence restates.

BERTScore recall (Zhang et al., ICLR 2020) read off the bundled multilingual-e5-small: each
question token's best cosine to a token of the passage, both as contextual states of a layer of
the model (the passage read whole with its `passage: ` prompt, the question with `query: `),
averaged over the question's word tokens; a sentence's score restricts the passage tokens to that
sentence's span. Language-free by construction (multilingual states align across languages,
cf. SimAlign), so it speaks where keyword coverage is void: cross-lingual and paraphrased
questions. Used by `bench/gate_feature_cv.py --token-alignment` on recorded cases, every layer
and passage; the product computes the last layer's over the first context passage
(query/token_recall.py; bench/README.md, "Token alignment as gate evidence").
"""

from __future__ import annotations

import numpy as np

from rag_pipeline.embedding.token_states import WORD_TOKEN
from rag_pipeline.query.token_recall import sentence_spans

LAYERS = (4, 8, 10, 12)  # 12 = the last layer; SimAlign found middle layers of XLM-R align words best


def recall(question: np.ndarray, passage: np.ndarray) -> float:
    """Mean over question tokens of the best cosine to a passage token (rows L2-normalized)."""
    if not len(question) or not len(passage):
        return 0.0
    return float((question @ passage.T).max(1).mean())


class TokenAligner:
    """Contextual token states of the built-in e5 (torch, cached per text) and their recall."""

    def __init__(self, folder: str, layers=LAYERS):
        import torch
        from transformers import AutoModel, AutoTokenizer

        torch.set_num_threads(2)
        self.torch, self.layers = torch, layers
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.model = AutoModel.from_pretrained(folder).eval()
        self._cache: dict[tuple[str, str], tuple[dict[int, np.ndarray], np.ndarray]] = {}

    def states(self, text: str, prompt: str):
        """({layer: normalized states of the word tokens}, their character offsets in `text`)."""
        key = (prompt, text)
        if key not in self._cache:
            enc = self.tokenizer(prompt + text, return_offsets_mapping=True, truncation=True, max_length=512, return_tensors="pt")
            with self.torch.no_grad():
                out = self.model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], output_hidden_states=True)
            offsets = enc["offset_mapping"][0].numpy() - len(prompt)
            keep = [i for i, (a, b) in enumerate(offsets) if a >= 0 and b > a and WORD_TOKEN.search(text[a:b])]
            layers = {}
            for layer in self.layers:
                h = out.hidden_states[layer][0].numpy()[keep]
                layers[layer] = h / np.linalg.norm(h, axis=1, keepdims=True)
            self._cache[key] = (layers, offsets[keep])
        return self._cache[key]

    def scores(self, question: str, passages: list[str]) -> dict[int, tuple[float, float]]:
        """Per layer: (best sentence recall, best passage recall) over `passages`."""
        q_states, _ = self.states(question, "query: ")
        out = {}
        for layer in self.layers:
            best_sentence = best_passage = 0.0
            for text in passages:
                states, offsets = self.states(text, "passage: ")
                best_passage = max(best_passage, recall(q_states[layer], states[layer]))
                for a, b in sentence_spans(text):
                    inside = (offsets[:, 0] >= a) & (offsets[:, 1] <= b)
                    best_sentence = max(best_sentence, recall(q_states[layer], states[layer][inside]))
            out[layer] = (best_sentence, best_passage)
        return out
