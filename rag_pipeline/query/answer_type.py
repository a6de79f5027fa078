"""What a question asks for: a quantity ("how many", "多少", "哪一年") is answered only by a
passage that states one.

The gate's evidence says whether a passage is about the question; it cannot see that the passage
about Norwich City's striker never states his salary. A question that asks for a number whose
quote (the sentences `select_sentences` picked) states no number the question did not already
hold is that case, by construction: the quote cannot hold the answer, so it is refused
(`answer.quote_states_number`). Sentence choice is unchanged: preferring a number-stating sentence
quoted "Figure 2" (bench/README.md). A rule of the language, not a fitted threshold.
"""

from __future__ import annotations

import re
import unicodedata

_ASKS_EN = re.compile(
    r"\bhow (?:many|much|long|old|far|big|large|tall|high|heavy|wide|deep)\b"
    r"|\b(?:what|which|in which|in what) (?:year|percentage|percent|time)\b"
    r"|\bwhat (?:is|was|are|were) (?:\S+ ){0,4}?(?:number|amount|price|cost|fee|salary|revenue|income|profit|budget|rate"
    r"|percentage|population|temperature|weight|length|duration)\b",
    re.IGNORECASE,
)
# 几/幾 as a number word (几名, 幾年), not 几乎 ("almost"), 几何 ("geometry") or 几内亚 (Guinea);
# 多重 is "multiple", not "how heavy"; Traditional forms too (幾, 號碼, 多長, 多遠)
_ASKS_ZH = re.compile(r"多少|[几幾](?![乎何]|[内內]亞|内亚)|哪一?年|多[大长長久远遠高宽寬深]|百分之[几幾]|[号號][码碼]")

_DIGITS = re.compile(r"\d+(?:[.,:]\d+)*")
_EN_NUMBER_WORDS = frozenset(
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand "
    "million billion trillion dozen half once twice".split()
)
_EN_WORD = re.compile(r"[a-z]+")
_ZH_NUMERAL = "〇零一二两兩三四五六七八九十百千万萬亿億"
# a Chinese numeral counts with a unit after it (三天, 十五名, 半年) or as a run (二十五): 一边, 统一 are words
_ZH_NUMBER = re.compile(
    f"[{_ZH_NUMERAL}半]+(?=[个個名位人年月日天周週小时時分钟鐘秒次元块塊米里斤克吨噸岁歲倍成家种種类類项項条條部本张張台臺件层層度%％])|[{_ZH_NUMERAL}]{{2,}}"
)


def asks_for_number(question: str) -> bool:
    """Whether the question's answer is a quantity, a year, a time or a number."""
    return bool(_ASKS_EN.search(question) or _ASKS_ZH.search(question))


def numbers(text: str) -> set[str]:
    """The numbers a text states: digit runs (full-width folded), English number words, Chinese numerals."""
    folded = unicodedata.normalize("NFKC", text).lower()
    found = set(_DIGITS.findall(folded))
    found.update(w for w in _EN_WORD.findall(folded) if w in _EN_NUMBER_WORDS)
    found.update(_ZH_NUMBER.findall(folded))
    return found


def states_new_number(sentence: str, question_numbers: set[str]) -> bool:
    """Whether the sentence states a number the question did not already hold ("revenue in 2023"
    is not answered by a sentence whose only number is 2023)."""
    return bool(numbers(sentence) - question_numbers)
