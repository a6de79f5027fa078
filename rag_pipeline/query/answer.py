"""Refuse or answer: an extractive answer built only from retrieved chunks, always cited.

Refusal uses evidence that does not depend on a model's absolute cosine scale (e5 scores
unrelated text ≈ 0.83): whether the question names a code (X-3000, E-99) that no indexed chunk
contains, how many query terms the best keyword hits contain, and how far the best dense hit
stands above the query's similarity to the corpus at large.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass, field
from functools import lru_cache

from rag_pipeline.query.answer_type import (
    asked_measures,
    asks_for_address,
    asks_for_identifier,
    asks_for_number,
    asks_when,
    numbers,
    states_address,
    states_asked_cell,
    states_measure,
    states_new_identifier,
    states_new_number,
    without_dates_and_links,
)
from rag_pipeline.query.retrieve import code_found, query_term_groups
from rag_pipeline.query.translate import translate_query
from rag_pipeline.text import search_tokens


GATE_FEATURES = (
    "lexical_coverage",  # idf-weighted share of the question's terms in the best keyword hit
    "sentence_coverage",  # ... in one quotable sentence: "is the asked fact here", not "is this on topic"
    "dense_z",  # best dense cosine in spreads above the asker's own background (language-free scale)
    "dense_gap_z",  # how far the best passage stands out from the 5th (answerable ones stand out)
    "cross_lingual",  # the best passage is in another language than the question: keyword evidence is void
    "cross_lingual_dense_z",  # ... so dense evidence must carry the decision alone
    "cross_lingual_translated_coverage",  # ... with the share of the question's dictionary renderings one sentence holds
    "token_recall",  # how much of the question one sentence restates, token by token, in any language (query.token_recall)
)


# What the gate reads for token_recall when the model gives no token states (`null` in the evidence:
# a folder that is not the BERT + mean pooling layout): the mean over the cases the shipped weights
# were fitted on (bench/refusal_gate.py prints it), so its absence neither opens nor shuts the gate.
TOKEN_RECALL_WHEN_MISSING = 0.8041


def gate_features(evidence: dict) -> list[float]:
    cross = float(bool(evidence.get("cross_lingual")))
    recall = evidence.get("token_recall")
    values = {
        **evidence,
        "token_recall": TOKEN_RECALL_WHEN_MISSING if recall is None else recall,
        "cross_lingual": cross,
        "cross_lingual_dense_z": cross * evidence.get("dense_z", 0.0),
        "cross_lingual_translated_coverage": cross * evidence.get("translated_sentence_coverage", 0.0),
    }
    return [float(values.get(name) or 0.0) for name in GATE_FEATURES]


@dataclass(frozen=True)
class RefusalPolicy:
    """Answer when the evidence's log-odds that a passage holds the asked fact reach `min_score`.

    A logistic model over GATE_FEATURES, fitted by `bench/refusal_gate.py` on benchmark questions
    made answerable and close-but-unanswerable by hiding their gold passages (XQuAD zh, en→zh,
    SciFact claims) and on the sample golden set, fit halves only (599 cases), and reported on
    their other halves and on the corpus golden set (bench/README.md, "Refusal gate"). Every feature
    is scale-free or a share, so it transfers across corpora; `rag calibrate` refits it on a
    golden set of one's own.
    """

    weights: tuple[float, ...] = (2.1789, 1.0836, 0.0362, 0.1884, 1.6631, 0.1864, 1.5416, 18.4789)
    intercept: float = -17.3018
    min_score: float = 0.0  # log-odds; 0 = even odds
    refuse_unknown_identifiers: bool = True  # a code (X-3000, E-99) no chunk the asker may read contains
    refuse_missing_number: bool = True  # the question asks for a number and the quote states none (quote_states_number)
    refuse_missing_address: bool = True  # the question asks for an address and the quote states none (quote_states_address)

    def score(self, evidence: dict) -> float:
        return self.intercept + sum(w * x for w, x in zip(self.weights, gate_features(evidence)))

    def to_record(self) -> dict:
        return {"features": list(GATE_FEATURES), "weights": list(self.weights), "intercept": self.intercept, "min_score": self.min_score}

    @classmethod
    def from_record(cls, record: dict) -> "RefusalPolicy | None":
        """The stored policy, or None when it was fitted over other features (refit it)."""
        if record.get("features") != list(GATE_FEATURES):
            return None
        return cls(tuple(record["weights"]), record["intercept"], record["min_score"])


MAX_CANDIDATE_SENTENCES = 40  # bounds the per-answer cost (and the encode, when one is needed)


@dataclass
class Citation:
    doc_id: str
    source: str
    title: str
    page: int | None
    chunk_id: str
    text: str


@dataclass
class Answer:
    question: str
    answer: str
    refused: bool
    reason: str
    citations: list[Citation] = field(default_factory=list)
    evidence: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "question": self.question,
            "answer": self.answer,
            "refused": self.refused,
            "reason": self.reason,
            "citations": [asdict(c) for c in self.citations],
            "evidence": self.evidence,
        }


def quote_states_number(question: str, picked: list[tuple[int, str]]) -> bool | None:
    """Whether the sentences to be quoted state a number the question did not already hold — with
    a unit of the measure when the question names one ("in US dollars", "多少分贝"); None when the
    question asks for no number (answer_type); an identifier asked for ("the document number",
    "文档编号是什么") is stated by a code the question does not hold, or a number. Recorded in the
    evidence, so a replay of refusal_reason (rag calibrate, rag eval) applies the rule as `ask` did."""
    identifier = asks_for_identifier(question)
    if not identifier and not asks_for_number(question):
        return None
    asked, measures = numbers(question), asked_measures(question)
    if not measures and any(states_asked_cell(sentence, question) for _, sentence in picked):
        return True
    if identifier and any(states_new_identifier(sentence, question) for _, sentence in picked):
        return True
    counts = not asks_when(question)  # a date is no count or amount
    return any(
        states_new_number(without_dates_and_links(sentence) if counts else sentence, asked) and (not measures or states_measure(sentence, measures))
        for _, sentence in picked
    )


def quote_states_address(question: str, picked: list[tuple[int, str]]) -> bool | None:
    """Whether the sentences to be quoted state an address (street, e-mail, web, IP: answer_type);
    None when the question asks for none. Recorded in the evidence as quote_states_number is."""
    if not asks_for_address(question):
        return None
    return any(states_address(sentence) for _, sentence in picked)


def refusal_reason(evidence: dict, policy: RefusalPolicy) -> str | None:
    """None when the evidence supports answering, else a sentence saying why not."""
    if evidence["candidates"] == 0:
        return "no document you may read matches this question"
    if policy.refuse_unknown_identifiers and evidence.get("unknown_identifiers"):
        return f"no indexed document mentions {', '.join(evidence['unknown_identifiers'])}"
    if policy.refuse_missing_number and evidence.get("quote_states_number") is False:
        if evidence.get("asked_measures"):
            return f"the question asks for a figure in {' or '.join(evidence['asked_measures'])} and no passage you may read states one"
        return "the question asks for a number and no passage you may read states one"  # the quote cannot hold it
    if policy.refuse_missing_address and evidence.get("quote_states_address") is False:
        return "the question asks for an address and no passage you may read states one"
    if policy.score(evidence) >= policy.min_score:
        return None
    return (
        "no passage appears to hold the answer: the best sentence covers "
        f"{evidence.get('sentence_coverage', 0.0):.0%} of the question's terms, the best keyword match "
        f"{evidence['lexical_coverage']:.0%}, and the best passage stands {evidence['dense_z']:.1f} spreads "
        "above unrelated text"
    )


# a full stop ends a sentence unless it ends an initial ("Mukesh D. Ambani", "F.C.", "U.S.")
_UNIT_END = re.compile(r"(?<=[。！？!?])|(?<=[.])(?<!\b[A-Z]\.)(?=\s)")
_CELL_SPLIT = re.compile(r"\s*[;；|\t]\s*")
_LABELLED_CELL = re.compile(r"^[^:：]{1,40}[:：]\s*\S")
_WRAPPED_END = re.compile(r"[A-Za-z0-9,\-)\]]$")  # a prose line cut by a hard wrap ends inside a clause
_CONTINUATION = re.compile(r"^[a-z(]")  # ... and the next line goes on in lower case
_WRAP_WIDTH = 60  # ... or the line above filled the width a wrap leaves (infobox and list lines are shorter)
_RULE_LINE = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?$")

MAX_CHUNKS_PER_DOCUMENT = 2  # post-rank rule of the reference design: the context is not one document's echo
NEAR_DUPLICATE_JACCARD = 0.8  # chunks whose search terms overlap this much say the same thing: keep the better-ranked
CONTEXT_CHUNKS = 3  # chunks the extractive answer quotes from
TOKEN_SETS_CACHED = 4096  # chunks' and sentences' token sets kept in-process (token_set: ~1.4 KB a sentence, ~5.5 KB a chunk)
# A question word found in a sentence only through its dictionary rendering counts this share of
# its weight (renderings match loosely: 长 for "long", 常 for "often"); a concept counts once,
# whichever language holds it. Fitted on the sample golden set's fit half; bench/README.md,
# "Quoting across languages with concept alignment".
RENDERED_CONCEPT_SHARE = 0.75


def _cells(line: str) -> list[str]:
    return [c.strip() for c in _CELL_SPLIT.split(line.strip().strip("|")) if c.strip()]


def _is_table_line(line: str) -> bool:
    return len(_cells(line)) >= 2 and not _UNIT_END.search(line.rstrip(".。"))


def _is_header(cells: list[str]) -> bool:
    """Labels, not data: short cells, none already "label: value", none a clause, most without digits."""
    if any(len(c) > 24 or _LABELLED_CELL.match(c) or re.search(r"[,，、。]", c) for c in cells):
        return False
    return sum(any(ch.isdigit() for ch in c) for c in cells) * 2 < len(cells)


def _with_header(lines: list[str]) -> list[str]:
    """Table rows carry their header: under a header line, "v1; v2" becomes "h1: v1; h2: v2".

    Ingestion already folds a detected header into every row; this covers chunk text where a
    header line stands above plain "; "/"|"/tab separated rows (a header-less fold, a Markdown
    table). Rows with another cell count than the header are left as they are.
    """
    out, header = [], None
    for line in lines:
        if _RULE_LINE.match(line.strip()):
            continue  # a Markdown table's |---|---| line
        cells = _cells(line) if _is_table_line(line) else []
        if not cells:
            header = None
            out.append(line)
        elif header is None and _is_header(cells):
            header = cells
            out.append(line)
        elif header is not None and len(cells) == len(header):
            out.append("; ".join(f"{h}: {v}" if h != v else v for h, v in zip(header, cells)))
        else:
            out.append(line)
    return out


def _unwrapped(lines: list[str]) -> list[str]:
    """Hard-wrapped prose joined back into its sentences: plain-text files and mail wrap at ~80
    columns, and a quote cut at the wrap ("… a Welsh former professional footballer who") loses
    the clause that held the fact. A line continues the one above when that one ends inside a
    clause and either it goes on in lower case or the line above is as long as a wrapped line;
    short lines (headings, list items, infobox fields) and table rows stay apart."""
    out: list[str] = []
    previous, previous_is_row = "", True
    for line in lines:
        is_row = _is_table_line(line)
        continues = _CONTINUATION.match(line) or (len(previous) >= _WRAP_WIDTH and line[:1].isalnum())
        if out and continues and _WRAPPED_END.search(previous) and not previous_is_row and not is_row:
            out[-1] = f"{out[-1]} {line}"
        else:
            out.append(line)
        previous, previous_is_row = line, is_row
    return out


def answer_units(text: str) -> list[str]:
    """Sentences, but a table row stays whole ("城市: 深圳; 电话: …") and carries its header."""
    units = []
    for line in _with_header(_unwrapped([line.strip() for line in text.splitlines() if line.strip()])):
        if _is_table_line(line) or _LABELLED_CELL.match(line) and ";" in line:
            units.append(line)  # a row: never split inside it ("Approx. 6 h")
        else:
            units.extend(u.strip() for u in _UNIT_END.split(line) if u.strip())
    return units


def normalized_unit(sentence: str) -> str:
    """What makes two quotes the same: width, case, spacing and end punctuation aside."""
    text = unicodedata.normalize("NFKC", sentence).lower()
    return re.sub(r"\s+", " ", text).strip().rstrip(".。!！?？;；")


def context_hits(hits: list[dict], limit: int = CONTEXT_CHUNKS, per_document: int = MAX_CHUNKS_PER_DOCUMENT) -> list[dict]:
    """The ranked hits an answer may quote: at most `per_document` chunks per document, near-duplicates
    rolled up into the better-ranked one (the same text in two files or two versions).

    A hit only the dictionary-translated arm found (matched by renderings of the question's words,
    loosely) is quoted only when such a hit ranks first, i.e. when the other language is where the
    question's best evidence is; otherwise a same-language question would quote, after its answer,
    an other-language sentence that shares a rendered word (measured: bench/README.md).
    """
    if hits and not _translated_only(hits[0]):
        hits = [h for h in hits if not _translated_only(h)]
    kept: list[dict] = []
    kept_terms: list[set[str]] = []
    per_doc: dict[str, int] = {}
    for hit in hits:
        if per_doc.get(hit["doc_id"], 0) >= per_document:
            continue
        terms = token_set(hit["text"])
        if any(_jaccard(terms, other) >= NEAR_DUPLICATE_JACCARD for other in kept_terms):
            continue
        kept.append(hit)
        kept_terms.append(terms)
        per_doc[hit["doc_id"]] = per_doc.get(hit["doc_id"], 0) + 1
        if len(kept) == limit:
            break
    return kept


@lru_cache(maxsize=TOKEN_SETS_CACHED)
def token_set(text: str) -> frozenset[str]:
    """The search tokens of a context chunk or a quotable sentence, kept: one `ask` reads the same
    candidate sentences up to three times (the two sentence coverages and the quote choice), and
    later questions the same chunks again; jieba's cut was ~a fifth of a warm `ask`'s time."""
    return frozenset(search_tokens(text))


def _translated_only(hit: dict) -> bool:
    return hit.get("translated_rank") is not None and hit.get("dense_rank") is None and hit.get("keyword_rank") is None


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else float(a == b)


def candidate_sentences(hits: list[dict]) -> list[tuple[int, int, str]]:
    """(hit index, position, sentence) of the hits' distinct sentences, best-ranked first, bounded."""
    seen: set[str] = set()
    candidates: list[tuple[int, int, str]] = []
    for i, hit in enumerate(hits):
        for position, unit in enumerate(answer_units(hit["text"])):
            key = normalized_unit(unit)
            if len(key) <= 3 or key in seen:
                continue
            seen.add(key)
            candidates.append((i, position, unit))
    return candidates[:MAX_CANDIDATE_SENTENCES]


def _sentence_coverages(groups, candidates, term_weights: dict[str, float], renderings=None, rendered_share: float = 0.0):
    """Per candidate: the weight found of each query term group, and its share of the question.

    `renderings[g]` (Translation.aligned): the dictionary renderings of group g's words. A sentence
    holding none of g's own spellings but some of its renderings finds g at `rendered_share` of
    its weight, times the share of g's rendered words it holds (服务中心, rendered as 服务 and 中心,
    is found whole only with both). Each question concept counts once, in either language.
    """
    heaviest = [max(term_weights.get(t, 0.0) for t in members) for members in groups]
    total = sum(heaviest)
    found: list[list[float]] = []  # per candidate, per group: the weight of the heaviest spelling it holds
    for _, _, unit in candidates:
        tokens = token_set(unit)
        held = [members & tokens for members in groups]
        row = [max((term_weights.get(t, 0.0) for t in h), default=0.0) if code_found(members, h) else 0.0 for members, h in zip(groups, held)]
        if renderings and rendered_share > 0.0:
            for g, rendered in enumerate(renderings):
                if rendered and row[g] < heaviest[g]:
                    held = sum(1 for r in rendered if r & tokens) / len(rendered)
                    row[g] = max(row[g], rendered_share * heaviest[g] * held)
        found.append(row)
    return groups, found, [sum(f) / total if total else 0.0 for f in found]


def best_sentence_coverage(question: str, hits: list[dict], term_weights: dict[str, float], groups=None) -> float:
    """The idf-weighted share of the question one quotable sentence holds: "is the asked fact here",
    where chunk-level coverage only says "is this on topic" (the terms may sit in separate sentences).

    `groups` replaces the question's own term groups (a dictionary translation: one group per concept).
    """
    candidates = candidate_sentences(hits)
    if not candidates:
        return 0.0
    return max(_sentence_coverages(groups or query_term_groups(question), candidates, term_weights)[2], default=0.0)


def select_sentences(
    question: str,
    hits: list[dict],
    term_weights: dict[str, float],
    model_scores=None,
    max_sentences: int = 2,
    cross_lingual: bool = False,
) -> list[tuple[int, str]]:
    """Pick the sentences of the top hits that hold most of the question's weighted terms.

    Each candidate scores its idf-weighted share of the question's terms (the weights come from
    the chunks the asker may read; a code's spellings count once, see query_term_groups); ties go to
    the better-ranked chunk, then the earlier sentence. Each further sentence is the one adding the
    most weight of question terms the quote still lacks (greedy coverage). No encode: scoring every hit sentence
    with the embedding model cost 0.2-1.2 s per answer on 2 cores.
    A quote is never repeated: overlapping chunks hold the same sentence, kept once (first, best-
    ranked occurrence). When the best passage is in another language than the question
    (`cross_lingual`), or no sentence shares a single term with it (a pure paraphrase),
    `model_scores(sentences)` — how much of the question each sentence restates, read by the model
    (api.RagIndex._sentence_scores: token recall), which costs a short run per new sentence — decides: shared
    terms across languages are names and numbers, not the asked fact (XQuAD en→zh: the quote held
    the answer 0.10 of the time by terms). Without it the best-ranked chunk's first sentences are quoted.
    Otherwise a question word also counts when a sentence holds its dictionary rendering
    (RENDERED_CONCEPT_SHARE of its weight): an English datasheet ranked first for
    "X-2000 的防护等级是多少？" shares only the code with the question, and was quoted by its title.
    """
    candidates = candidate_sentences(hits)
    if not candidates:
        return []
    groups, found, scores = _sentence_coverages(query_term_groups(question), candidates, term_weights)
    # a rendering never decides alone: with no own term anywhere (a paraphrase) the embedding does
    matched = max(scores, default=0.0) > 0.0
    translation = translate_query(question) if RENDERED_CONCEPT_SHARE > 0.0 and matched and not cross_lingual else None
    if translation:
        groups, found, scores = _sentence_coverages(groups, candidates, term_weights, translation.aligned(groups), RENDERED_CONCEPT_SHARE)
    if cross_lingual or max(scores, default=0.0) <= 0.0:
        if model_scores is not None:
            scores = [float(x) for x in model_scores([unit for _, _, unit in candidates])]
        found = [[0.0] * len(groups) for _ in candidates]
    picked: list[int] = []
    covered = [0.0] * len(groups)
    while len(picked) < min(max_sentences, len(candidates)):
        # greedy coverage: after the best sentence, prefer one that adds what the question asked
        # and the quote so far lacks ("深圳" after "各地服务中心的地址和电话…"), then the best score
        def key(n: int):
            gain = sum(max(0.0, f - c) for f, c in zip(found[n], covered))
            return (-gain, -scores[n], candidates[n][0], candidates[n][1])

        best = min((n for n in range(len(candidates)) if n not in picked), key=key)
        picked.append(best)
        covered = [max(c, f) for c, f in zip(covered, found[best])]
    return [(candidates[n][0], candidates[n][2]) for n in picked]


_MARKER = re.compile(r"\[(\s*\d+\s*)\]")


def defang_markers(sentence: str) -> str:
    """A quoted sentence's own "[7]" would read as one of our citations: show it as "(7)" instead."""
    return _MARKER.sub(r"(\1)", sentence)


def compose(picked: list[tuple[int, str]], hits: list[dict]) -> tuple[str, list[Citation]]:
    """Answer text with [n] markers; citations list exactly the chunks the sentences came from."""
    order: list[int] = []
    for i, _ in picked:
        if i not in order:
            order.append(i)
    parts = [f"{defang_markers(sentence)} [{order.index(i) + 1}]" for i, sentence in picked]
    citations = [
        Citation(
            doc_id=hits[i]["doc_id"],
            source=hits[i]["source"],
            title=hits[i]["title"],
            page=hits[i]["page"],
            chunk_id=hits[i]["chunk_id"],
            text=hits[i]["text"],
        )
        for i in order
    ]
    return " ".join(parts), citations
