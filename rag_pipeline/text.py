"""Language-aware text helpers shared by chunking, the keyword index and the query side.

The keyword arm must tokenize documents and queries identically, so both go through
`search_tokens`: Chinese runs folded to Simplified script (OpenCC t2s) then segmented by jieba,
lower-cased Latin words reduced to their English Snowball stem (``studies`` -> ``studi``), and
product codes such as ``X-2000`` kept whole *and* split so ``x2000``-style typing still hits.
Anything holding a digit (codes, numbers, ``il6``) is never stemmed.

`ANALYZER_VERSION` names what `search_tokens` produces: an index whose ``search_text`` column was
written by another version must be re-tokenized (vectors stay valid) before it is queried.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import unicodedata
from functools import lru_cache

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_CJK_CHAR = re.compile(f"[{_CJK}]")
_WORD = re.compile(r"[^\W_]+(?:[-_./][^\W_]+)*", re.UNICODE)
_SPACE_BETWEEN_CJK = re.compile(f"(?<=[{_CJK}，。！？；：、（）])[ \\t]+(?=[{_CJK}，。！？；：、（）])")
_SENTENCE_END = re.compile(r"(?<=[。！？；!?;])|(?<=[.])(?=\s)")
_LATIN_WORD = re.compile(r"[a-z\u00df-\u00f6\u00f8-\u024f]+")  # lower-cased Latin letters only
_CODE_SEPARATORS = re.compile(r"[-_./]")

# 1: lower-cased words + jieba; 2: + English Snowball stems, + Traditional->Simplified folding
ANALYZER_VERSION = 2

EN_STOPWORDS = frozenset(
    """a an and are as at be been by can could do does did for from has have how i if in
    into is it its me my of on or our should so than that the their them there these they
    this to was we were what when where which who whom why will with would you your about
    after any before between both each few more most other same some such only own very
    just also may must shall per up down out over under again further then once here all""".split()
)
ZH_STOPWORDS = frozenset(
    "的 了 是 在 和 与 及 或 吗 呢 吧 啊 么 什么 多少 如何 怎么 怎样 哪些 哪个 哪里 为什么 "
    "是否 有 有没有 能 可以 需要 要 我 你 他 她 它 我们 你们 他们 这 那 这个 那个 一个 "
    "请问 请 就 都 也 还 被 把 对 从 向 让 给 几 多久 多长 多长时间 多大 多远 多高 多重 "
    "什么时候 怎么办 哪儿 意思 是不是".split()
)


def normalize(text: str) -> str:
    """NFKC, collapse whitespace, drop spaces between CJK characters (OCR inserts them)."""
    text = unicodedata.normalize("NFKC", text)
    text = re.sub(r"[ \t\u00a0\u3000]+", " ", text)
    text = re.sub(r"\s*\n\s*", "\n", text).strip()
    return _SPACE_BETWEEN_CJK.sub("", text)


def fingerprint(text: str) -> str:
    """Content address of a chunk: sha256 of its normalized text."""
    return hashlib.sha256(normalize(text).encode("utf-8")).hexdigest()


def approx_tokens(text: str) -> float:
    """Cheap model-token estimate: one per CJK character, ~1.3 per other word."""
    cjk = len(_CJK_CHAR.findall(text))
    words = len(_WORD.findall(_CJK_RUN.sub(" ", text)))
    return cjk + 1.3 * words


def first_line(text: str) -> str:
    """A message's first non-blank line: an error's SQL, parameters and links follow it."""
    return (text.strip().splitlines() or [""])[0]


def split_sentences(text: str) -> list[str]:
    """Split on Chinese and Western sentence ends (。！？； . ! ? ;), keeping the punctuation."""
    parts = [p.strip() for p in _SENTENCE_END.split(text)]
    return [p for p in parts if p]


@lru_cache(maxsize=1)
def _jieba():
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def is_chinese(text: str) -> bool:
    """The whole string is one run of Chinese characters (a word jieba would segment)."""
    return bool(_CJK_RUN.fullmatch(text))


def word_frequencies() -> dict[str, int]:
    """jieba's dictionary counts: how common a Chinese word is (picks the usual rendering)."""
    return _jieba().dt.FREQ


@lru_cache(maxsize=1)
def _to_simplified():
    import opencc

    return opencc.OpenCC("t2s")


_STEMMERS = threading.local()


def _english_stemmer():
    """This thread's Porter2 stemmer (the one LanceDB/tantivy use for English). A snowballstemmer
    object keeps the word it is working on in itself, so threads sharing one (the server's
    workers) corrupt each other's words: an IndexError mid-stem was a 500 in CI."""
    stemmer = getattr(_STEMMERS, "english", None)
    if stemmer is None:
        import snowballstemmer

        stemmer = _STEMMERS.english = snowballstemmer.stemmer("english")
    return stemmer


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """English Snowball stem of a lower-cased Latin-script word; anything else comes back as is."""
    if len(word) < 3 or not _LATIN_WORD.fullmatch(word):
        return word
    return _english_stemmer().stemWord(word)


@lru_cache(maxsize=50_000)
def fold_chinese(run: str) -> str:
    """Traditional Chinese characters to Simplified (美樹 -> 美树); Simplified text is unchanged."""
    return _to_simplified().convert(run)


def search_tokens(text: str, *, drop_stopwords: bool = True, stemming: bool = True, fold: bool = True) -> list[str]:
    """Tokens for BM25: jieba (search mode) for Chinese runs, stemmed words and codes for the rest.

    `stemming` and `fold` exist for ablations (bench/keyword_ablation.py); the index and the
    queries must be tokenized with the same settings, the defaults.
    """
    text = unicodedata.normalize("NFKC", text).lower()
    tokens: list[str] = []
    pos = 0
    for m in _CJK_RUN.finditer(text):
        tokens.extend(_latin_tokens(text[pos : m.start()], drop_stopwords, stemming))
        run = fold_chinese(m.group()) if fold else m.group()
        tokens.extend(
            t for t in _jieba().cut_for_search(run) if t.strip() and not (drop_stopwords and t in ZH_STOPWORDS)
        )
        pos = m.end()
    tokens.extend(_latin_tokens(text[pos:], drop_stopwords, stemming))
    return tokens


# A question's interrogative stands where the answer will be, so no answer sentence holds it.
# English ones are EN_STOPWORDS (which, who, how); Chinese ones are phrases that jieba cuts into
# parts which would then be asked of the answer ("哪一年" -> 一年, "哪两个部分" -> 两个, "几次", "谁",
# "多长时间" -> 时间, 长时间).
_ZH_INTERROGATIVE = re.compile(
    r"哪[一二两三四五六七八九十几]?(?:[个位种年天条篇些部章次家所样份届名号款类项本首句段页张里儿](?!分))?"
    r"|几[次个年天位种条篇家岁号月日名本首届项步层遍回人]|谁"
    r"|多长时间|多少时间|什么时候|多长|多久|何时"  # jieba keeps 时间, 长时间, 时候 of these
    r"|[这那]一?[篇位部本首份条项张页段句](?!分)"  # and the pointers at the document asked about ("这篇", "那位"; not 这部分)
)
# Verbs that frame a question about a document, not its content: "幻灯片里说…", "提到了哪篇论文".
QUESTION_FRAMING = frozenset("说 里 叫 提到 讲 问".split())


def question_tokens(question: str) -> list[str]:
    """search_tokens of a question without its interrogatives and framing verbs: the terms an
    answer can hold. Documents are tokenized with search_tokens; these words are rare there."""
    text = _ZH_INTERROGATIVE.sub(" ", fold_chinese(unicodedata.normalize("NFKC", question)))
    return [t for t in search_tokens(text) if t not in QUESTION_FRAMING]


def _latin_tokens(text: str, drop_stopwords: bool = True, stemming: bool = True) -> list[str]:
    """Words (stemmed) and codes: a code is kept whole, in its parts and joined up, unstemmed."""
    out: list[str] = []

    def word(w: str) -> None:
        if drop_stopwords and (w in EN_STOPWORDS or w in ZH_STOPWORDS):
            return  # stopwords are matched before stemming: "does" must not survive as "doe"
        out.append(stem(w) if stemming else w)

    for m in _WORD.finditer(text):
        token = m.group()
        if not _CODE_SEPARATORS.search(token):
            word(token)
            continue
        out.append(token)  # x-2000, state-of-the-art: the whole form, unstemmed
        for part in _CODE_SEPARATORS.split(token):
            if part:
                word(part)
        out.append(without_joins(token))
    return out


def is_joined_form(term: str) -> bool:
    """A term written as parts joined by - _ . / (x-2000, v2.1, state-of-the-art): search_tokens
    emits it whole, by parts and with the joins removed, so its spellings are one group."""
    return bool(_CODE_SEPARATORS.search(term))


def without_joins(term: str) -> str:
    """The joined spelling of a joined form: x-2000 -> x2000."""
    return _CODE_SEPARATORS.sub("", term)


def is_code_term(term: str) -> bool:
    """A search term that reads the same in every language: it contains a digit (E-71, 2019, x2000)."""
    return any(ch.isdigit() for ch in term)


def is_identifier(term: str) -> bool:
    """A product, part or error code (x-3000, e-99, tp-30): letters and digits in one term.

    Plain numbers (years, amounts) are not identifiers: a corpus need not contain "2025" to
    answer a question mentioning it, but it must mention "X-3000" to say anything about it.
    """
    return is_code_term(term) and any(ch.isalpha() for ch in term)

