"""An answerability cross-encoder cut from the bundled e5: tried for the refusal gate, not shipped.

Two independently computed vectors can say "on topic" but not "the asked fact is in here", so
issue 14 asked for a model that reads the question and the passage together. No cross-encoder
weights ship offline, so `bench/train_relevance.py` trains one from multilingual-e5-small: its
first `layers` transformer layers read `query: <question></s></s>passage: <passage>`,
mean-pooled, one logit; e5's word embeddings stay frozen, so a weights file holds only the
trained layers and the head (fp16, 14 MB for 4 layers) and the rest is read from the e5 folder
the install builds. Measured as gate evidence it did not help (bench/README.md, "Answerability
cross-encoder"), so nothing in `rag_pipeline` uses it; `bench/gate_feature_cv.py --relevance`
replays it on recorded gate cases.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

QUERY_PREFIX, PASSAGE_PREFIX = "query: ", "passage: "
BOS, EOS, PAD = 0, 2, 1  # XLM-R special ids (e5's tokenizer)
NO_PASSAGE = -8.0  # the log-odds given when there is no passage to read (below every trained score)


@dataclass(frozen=True)
class RelevanceSpec:
    """How the shipped model was trained; stored in the weights file's metadata."""

    layers: int = 4
    max_length: int = 192
    pooling: str = "mean"

    def to_metadata(self) -> dict[str, str]:
        return {"relevance_spec": json.dumps(self.__dict__)}

    @classmethod
    def from_metadata(cls, metadata: dict[str, str] | None) -> "RelevanceSpec":
        return cls(**json.loads((metadata or {})["relevance_spec"]))


def encode_pairs(tokenizer, question: str, passages: list[str], max_length: int, windows: bool = False):
    """Token ids, attention mask and owning passage index of `<s> query </s></s> passage </s>` rows.

    A passage longer than the room left by the question is cut (`windows=False`, training) or
    read in overlapping windows (`windows=True`, scoring: a chunk is up to 300 model tokens and
    its answer may sit at the end; the best window speaks for it).
    """
    import torch

    q_ids = tokenizer.encode(QUERY_PREFIX + question, add_special_tokens=False).ids[: max_length // 3]
    room = max(max_length - len(q_ids) - 4, 1)
    rows, owners = [], []
    for owner, passage in enumerate(passages):
        p_ids = tokenizer.encode(PASSAGE_PREFIX + passage, add_special_tokens=False).ids
        starts = range(0, max(len(p_ids) - room, 0) + 1, max(room * 3 // 4, 1)) if windows else [0]
        last = max(len(p_ids) - room, 0)
        for start in sorted({*starts, last} if windows else starts):
            rows.append([BOS, *q_ids, EOS, EOS, *p_ids[start: start + room], EOS])
            owners.append(owner)
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), PAD, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = 1
    return ids, mask, owners


def best_per_passage(logits: list[float], owners: list[int], passages: int) -> list[float]:
    """Each passage's best window."""
    best = [float("-inf")] * passages
    for owner, logit in zip(owners, logits):
        best[owner] = max(best[owner], logit)
    return best


def build_network(e5_dir: Path, spec: RelevanceSpec):
    """e5's embeddings and first `spec.layers` layers, plus a one-logit head (untrained)."""
    import torch
    from safetensors.torch import load_file
    from transformers import BertConfig, BertModel

    config = BertConfig.from_pretrained(str(e5_dir))
    config.num_hidden_layers = spec.layers
    encoder = BertModel(config, add_pooling_layer=False)
    state = load_file(str(e5_dir / "model.safetensors"))
    keep = {k: v for k, v in state.items() if k.startswith("embeddings.") or _layer_of(k) is not None and _layer_of(k) < spec.layers}
    missing, _ = encoder.load_state_dict(keep, strict=False)
    if missing:
        raise RuntimeError(f"e5 weights lack {missing[:3]}")
    return _Network(encoder, torch.nn.Linear(config.hidden_size, 1), spec.pooling)


def _layer_of(key: str) -> int | None:
    if not key.startswith("encoder.layer."):
        return None
    return int(key.split(".")[2])


class _Network:
    """Encoder + head as one callable; a plain class so torch is imported only when used."""

    def __init__(self, encoder, head, pooling: str):
        self.encoder, self.head, self.pooling = encoder, head, pooling

    def parameters_to_train(self):
        return [p for n, p in self.encoder.named_parameters() if not n.startswith("embeddings.")] + list(self.head.parameters())

    def __call__(self, ids, mask):
        hidden = self.encoder(input_ids=ids, attention_mask=mask).last_hidden_state
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            weights = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        return self.head(pooled).squeeze(-1)

    def trained_state(self) -> dict:
        """What ships: the trained layers and the head (embeddings are e5's)."""
        state = {f"encoder.{k}": v for k, v in self.encoder.state_dict().items() if not k.startswith("embeddings.")}
        state.update({f"head.{k}": v for k, v in self.head.state_dict().items()})
        return state

    def load_trained_state(self, state: dict) -> None:
        encoder_state = {k[len("encoder."):]: v.float() for k, v in state.items() if k.startswith("encoder.")}
        head_state = {k[len("head."):]: v.float() for k, v in state.items() if k.startswith("head.")}
        missing, unexpected = self.encoder.load_state_dict(encoder_state, strict=False)
        if unexpected or any(not k.startswith("embeddings.") for k in missing):
            raise RuntimeError(f"relevance weights do not fit: missing {missing[:3]}, unexpected {unexpected[:3]}")
        self.head.load_state_dict(head_state)

    def eval(self):
        self.encoder.eval()
        self.head.eval()
        return self

    def train(self):
        self.encoder.train()
        self.head.train()
        return self


class RelevanceModel:
    """A trained weights file over the e5 folder, loaded on first use (a few hundred ms)."""

    name = "rag-relevance"

    def __init__(self, e5_dir: Path, weights: Path):
        self.e5_dir, self.weights = Path(e5_dir), Path(weights)
        self._lock = threading.Lock()
        self._loaded = None

    def _load(self):
        with self._lock:
            if self._loaded is None:
                from safetensors import safe_open
                from safetensors.torch import load_file
                from tokenizers import Tokenizer

                with safe_open(str(self.weights), "pt") as handle:
                    spec = RelevanceSpec.from_metadata(handle.metadata())
                network = build_network(self.e5_dir, spec)
                network.load_trained_state(load_file(str(self.weights)))
                self._loaded = (network.eval(), Tokenizer.from_file(str(self.e5_dir / "tokenizer.json")), spec)
            return self._loaded

    def score(self, question: str, passages: list[str]) -> list[float]:
        if not passages:
            return []
        import torch

        network, tokenizer, spec = self._load()
        ids, mask, owners = encode_pairs(tokenizer, question, passages, spec.max_length, windows=True)
        with torch.inference_mode():
            return best_per_passage(network(ids, mask).double().tolist(), owners, len(passages))


def builtin_e5_dir() -> Path:
    """The built-in e5 folder (built by the install, rebuilt if missing)."""
    from rag_pipeline.config import BUILTIN_MODEL, default_model_cache_dir
    from rag_pipeline.embedding.encoder import resolve_model_path

    return Path(resolve_model_path(BUILTIN_MODEL, default_model_cache_dir())[0])


def best_relevance(question: str, passages: list[str], model: RelevanceModel) -> float:
    """The highest log-odds that one of `passages` holds the answer (NO_PASSAGE when there are none)."""
    if not passages:
        return NO_PASSAGE
    return max(model.score(question, passages))
