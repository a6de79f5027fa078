"""What a question asks for: a quantity ("how many", "多少", "哪一年") is answered only by a
passage that states one.

The gate's evidence says whether a passage is about the question; it cannot see that the passage
about Norwich City's striker never states his salary. A question that asks for a number whose
quote (the sentences `select_sentences` picked) states no number the question did not already
hold is that case, by construction: the quote cannot hold the answer, so it is refused
(`answer.quote_states_number`). A question that names the measure's unit ("in US dollars",
"多少分贝", "how many kilograms") is answered only by a number stated with a unit of that measure:
a list price in CNY does not answer "in US dollars"; one about money with no currency named (a
salary, a fee, 票房) only by an amount with a currency or in millions/亿 ("in 1990" is no fee). A table row ("姓名: 蔡徐坤; 数学: D") that holds
the row the question names and the column it asks about answers it whatever the cell holds (a
letter grade answers "数学成绩是多少"; `states_asked_cell`). A question for an address (street,
e-mail, web, IP) is answered only by a quote that states one (`states_address`). Sentence choice is
unchanged: preferring a number-stating sentence quoted "Figure 2" (bench/README.md). Rules of the
language, not fitted thresholds.
"""

from __future__ import annotations

import re
import unicodedata

from rag_pipeline.text import is_code_term, is_joined_form, search_tokens

_ASKS_EN = re.compile(
    r"\bhow (?:many|much|long|old|far|big|large|tall|high|heavy|wide|deep)\b"
    r"|\b(?:what|which|in which|in what) (?:year|percentage|percent|time)\b"
    r"|\bwhat (?:is|was|are|were) (?:\S+ ){0,4}?(?:number|amount|price|cost|fee|salary|revenue|income|profit|budget|rate"
    r"|percentage|population|temperature|weight|length|duration|voltage|wattage|noise level)\b"
    r"|\bwhat (?:\S+ )?(?:voltage|wattage|temperature|weight)\b",
    re.IGNORECASE,
)
# 几/幾 as a number word (几名, 幾年), not 几乎 ("almost"), 几何 ("geometry") or 几内亚 (Guinea);
# 多重 is "multiple" (多重认证), "how heavy" only as 有多重 or at the question's end; Traditional forms too (幾, 號碼, 多長, 多遠)
_ASKS_ZH = re.compile(r"多少|[几幾](?![乎何]|[内內]亞|内亚)|哪一?年|多[大长長久远遠高宽寬深]|百分之[几幾]|[号號][码碼]|有多重|多重[吗嗎？?]?$")

_DIGITS = re.compile(r"\d+(?:[.,:]\d+)*")
_EN_NUMBER_WORDS = frozenset(
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand "
    "million billion trillion dozen half once twice".split()
)
_EN_WORD = re.compile(r"[a-z]+")
_ZH_NUMERAL = "〇零一二两兩三四五六七八九十百千万萬亿億"
# a Chinese numeral counts with a unit or counter after it (三天, 十五名, 半年, 两所) or as a run (二十五): 一边, 统一 are words
_ZH_NUMBER = re.compile(
    f"[{_ZH_NUMERAL}半]+(?=[个個名位人年月日天周週小时時分钟鐘秒次元块塊米里斤克吨噸岁歲倍成家种種类類项項条條部本张張台臺件层層度所座支场場届屆首篇期批架艘辆輛只隻匹头頭枚颗顆份册冊卷集轮輪局栋棟间間%％])|[{_ZH_NUMERAL}]{{2,}}"
)


CURRENCY = "a currency"
# A measure: what names it in a question, and the units a sentence states it in. Units of one
# letter count only after a digit ("5 m", "12V"); the rest as words. Loose on purpose: the rule
# refuses only a quote with no unit of the measure at all.
_MEASURES = {
    "units of weight": (
        r"\b(?:kg|kilo(?:gram)?s|kilograms?|pounds|lbs?|tons|tonnes|grams)\b|\bhow heavy\b|\bweigh|重量|公斤|千克|重多少|有多重|多少斤|多少[吨噸]",
        r"\b(?:kgs?|kilo(?:gram)?s?|grams?|lbs?|pounds?|tons?|tonnes?)\b|\d\s*[gt]\b|公斤|千克|克|斤|[吨噸]",
    ),
    "US dollars": (r"\b(?:us dollars?|usd|dollars)\b|us\$|美元|美金", r"\busd\b|\$|\bdollars?\b|美元|美金"),
    "euros": (r"\b(?:euros?|eur)\b|€|[欧歐]元", r"\beur\b|€|\beuros?\b|[欧歐]元"),
    "yuan": (r"\b(?:rmb|cny|yuan|renminbi)\b|人民[币幣]|(?:多少|[几幾])元", r"\b(?:cny|rmb|yuan)\b|[¥￥元]|人民[币幣]"),
    "volts": (r"\bvolt(?:s|age)?\b|[电電][压壓]|多少伏", r"\bk?v(?:ac|dc)?\b|\d\s*k?v|\bvolts?\b|伏"),
    "watts": (r"\bwatt(?:s|age)?\b|\b(?:power (?:consumption|rating|draw)|rated power)\b|功率|多少瓦", r"\bk?w\b|\d\s*k?w|\bwatts?\b|瓦"),
    "decibels": (r"\b(?:decibels?|db|how loud|noise level)\b|分[贝貝]|噪音|噪[声聲]", r"\bdb\b|\d\s*db|\bdecibels?\b|分[贝貝]"),
    # any money: a salary, fee, price or box office with no currency named; stated by a currency
    # sign or word, or an amount in millions/亿 (box office and revenue often drop the currency)
    CURRENCY: (
        r"\b(?:salar(?:y|ies)|wages?|fees?|prices?|priced|costs?|revenues?|income|profits?|earnings|budget|worth|turnover"
        r"|box[- ]office|valuation|how much money|how much (?:\S+ ){0,4}?(?:pay|paid|spend|spent|earn|earned|make|made|charge|charged))\b"
        r"|工[资資]|薪[水资資酬金]|[价價](?:格|[钱錢])|[售造报報定][价價]|[费費]用|(?<=[\u4e00-\u9fff])(?<!浪)[费費](?![城尔爾德曼弗舍雪米马馬希里罗羅])"
        r"|票房|收入|[营營]收|利[润潤]|多少[钱錢]|成本|[预預]算|市值|身[价價]|[罚罰]款|[奖獎]金|租金|[赚賺]了?多少|花了?多少[钱錢]",
        r"[$£€¥￥]|\b(?:usd|gbp|eur|cny|rmb|jpy|hkd|dollars?|pounds?|euros?|yuan|pence|cents?|million|billion)\b|\d\s*(?:bn|m|k)\b"
        r"|[元圆圓]|美金|英[镑鎊]|人民[币幣]|港[币幣]|\d\s*[万萬]|[亿億]",
    ),
    "degrees": (r"\btemperature\b|温度|溫度|多少度", r"°|℃|℉|\bdegrees?\b|度"),
    "units of time": (
        r"\bhow many (?:hours|minutes|days|weeks|months|years|seconds|working days|business days)\b"
        r"|(?:多少|[几幾])[个個]?(?:小[时時]|分[钟鐘]|天|日|周|週|星期|月|年|秒|工作日)",
        r"\b(?:hrs?|hours?|mins?|minutes?|days?|weeks?|months?|years?|yrs?|secs?|seconds?)\b|\d\s*[hs]\b|小[时時]|分[钟鐘]|天|日|周|週|星期|月|年|秒",
    ),
    "units of length": (
        r"\b(?:how (?:far|tall|wide|deep)|met(?:er|re)s|kilomet(?:er|re)s|km|miles|centimet(?:er|re)s|cm|millimet(?:er|re)s|mm|inches|feet)\b"
        r"|多[远遠高宽寬深]|多少(?:米|公里|厘米|毫米)",
        r"\b(?:mm|cm|km|inch(?:es)?|ft|feet|foot|miles?|met(?:er|re)s?|kilomet(?:er|re)s?)\b|\d\s*m\b|米|公里|厘米|毫米|千米|英[里尺寸]",
    ),
}
_CURRENCIES = frozenset({"US dollars", "euros", "yuan"})
_MEASURE_PATTERNS = {name: (re.compile(asked), re.compile(stated)) for name, (asked, stated) in _MEASURES.items()}


def _folded(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def asked_measures(question: str) -> tuple[str, ...]:
    """The measures whose unit a quantity question names ("in US dollars" → US dollars); () when it
    names none or asks for no number."""
    if not asks_for_number(question):
        return ()
    folded = _folded(question)
    named = tuple(name for name, (asked, _) in _MEASURE_PATTERNS.items() if asked.search(folded))
    if _CURRENCIES.intersection(named):  # "the price in US dollars": a CNY price does not answer it
        return tuple(name for name in named if name != CURRENCY)
    return named


def states_measure(sentence: str, measures: tuple[str, ...]) -> bool:
    """Whether the sentence names a unit of one of the measures (its number is checked apart)."""
    folded = _folded(sentence)
    return any(_MEASURE_PATTERNS[name][1].search(folded) for name in measures)


def asks_for_number(question: str) -> bool:
    """Whether the question's answer is a quantity, a year, a time or a number."""
    return bool(_ASKS_EN.search(question) or _ASKS_ZH.search(question))


# "the document number", "part no.", "编号是什么": the answer is an identifier (NW-DS-X2000), whose digits
# may all be the product's own (X-2000): a code the question does not hold states it. In Chinese only
# when it is what is asked ("编号是什么/多少"), not a thing named by one ("编号为 A-12 的设备在哪").
_ASKS_IDENTIFIER = re.compile(
    r"\b(?:document|part|serial|model|order|invoice|ticket|reference|item|catalog(?:ue)?|registration|licen[cs]e"
    r"|account|case|tracking|version)\s+(?:number|no\.?|id)\b"
    r"|(?:编号|編號|型号|型號|单号|單號|文号|文號)(?:是|为|為)?(?:什么|什麼|多少|啥|几|幾)",
    re.IGNORECASE,
)


def asks_for_identifier(question: str) -> bool:
    """Whether the question's "number" is an identifier ("the document number of the X-2000 datasheet")."""
    return bool(_ASKS_IDENTIFIER.search(question))


def states_new_identifier(sentence: str, question: str) -> bool:
    """Whether the sentence names a code (letters and digits joined by - _ . /) the question does not."""
    asked = set(search_tokens(question))
    return any(is_code_term(t) and is_joined_form(t) and t not in asked for t in search_tokens(sentence))


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


# A question about when, how long or how old is answered by a date or a duration; any other
# quantity question ("how many participants", "票房是多少") is not: a calendar date, a link's or
# an identifier's digits (DOI, arXiv) state when or where, not how many. Bare years count as dates only after "in/since/from…".
_ASKS_WHEN = re.compile(
    r"\b(?:when|what (?:year|date|time|age)|which (?:year|date)|how (?:long|old))\b"
    r"|哪一?年|什[么麼]时候|什[么麼]時候|何[时時]|哪一?天|[几幾]月|[几幾][号號日点點]|多久|多[长長][时時]间|多[长長]時間|多大|年[龄齡]|[岁歲]",
    re.IGNORECASE,
)
_MONTH = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_DATE_OR_LINK = re.compile(
    r"https?://\S+|www\.\S+|[\w.+-]+@[\w-]+\.[\w.]+|\b10\.\d{4,9}/\S+|\barxiv:\s*\d{4}\.\d{4,5}(?:v\d+)?"
    r"|\b\d{4}[-/.]\d{1,2}[-/.]\d{1,2}\b"
    rf"|\b{_MONTH}\s+\d{{1,2}}(?:\s*[-–]\s*\d{{1,2}})?(?:st|nd|rd|th)?(?:,?\s*\d{{4}})?\b"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}(?:,?\s*\d{{4}})?\b"
    rf"|\b{_MONTH}\s+\d{{4}}\b"
    r"|\b(?:in|since|from|until|till|during)\s+(?:19|20)\d{2}\b"
    r"|\d{2,4}\s*年\s*(?:\d{1,2}\s*月\s*(?:\d{1,2}\s*[日号號])?)?|\d{1,2}\s*月\s*\d{1,2}\s*[日号號]",
    re.IGNORECASE,
)


def asks_when(question: str) -> bool:
    """Whether the quantity asked is a date, a time, a duration or an age (a question counting
    units of time — "how many days", "几年" — is one through its measure)."""
    return bool(_ASKS_WHEN.search(unicodedata.normalize("NFKC", question))) or "units of time" in asked_measures(question)


def without_dates_and_links(sentence: str) -> str:
    """The sentence less its calendar dates, URLs, e-mail addresses, DOIs and arXiv ids (for a count or an amount)."""
    return _DATE_OR_LINK.sub(" ", unicodedata.normalize("NFKC", sentence))


_FIELD = re.compile(r"^\s*([^:：;]{1,40}?)\s*[:：]\s*(.+?)\s*$")


def _row_fields(sentence: str) -> list[tuple[str, str]]:
    """A table row's (column, value) pairs as ingest writes rows ("name: value; name: value");
    [] unless every part of the line is one."""
    fields = [_FIELD.match(part) for part in sentence.split("; ")]
    return [(m.group(1), m.group(2)) for m in fields if m] if len(fields) >= 2 and all(fields) else []


def states_asked_cell(sentence: str, question: str) -> bool:
    """Whether the sentence is a table row that names a value of the question (the row it asks
    about) and holds a column the question names whose cell the question does not already hold:
    that cell is the answer, number or not."""
    folded = _folded(question)
    fields = [(_folded(column), _folded(value)) for column, value in _row_fields(sentence)]
    names_row = any(len(value) >= 2 and _mentions(folded, value) for _, value in fields)
    asked_cell = any(len(column) >= 2 and _mentions(folded, column) and not _mentions(folded, value) for column, value in fields)
    return names_row and asked_cell


def _mentions(text: str, term: str) -> bool:
    """`term` in `text`: as a substring where it holds CJK, else as whole words ("en" is not in "when")."""
    if any(unicodedata.east_asian_width(ch) == "W" for ch in term):
        return term in text
    return re.search(rf"(?<![a-z0-9]){re.escape(term)}(?![a-z0-9])", text) is not None


# A question that asks what or where an address is — street, postal, e-mail, web or IP — is answered
# only by a quote that states one: "苏州研发中心的地址是什么？" is not answered by the sentence naming
# the site among the company's locations. "How do I change my address?" asks for a procedure.
_ASKS_ADDRESS_EN = re.compile(r"^\s*(?:what|which|where)\b.*\baddress(?:es)?\b", re.IGNORECASE)
_ASKS_ADDRESS_ZH = re.compile(r"地址|网址|網址|邮箱|郵箱|住址")
_ASKS_PROCEDURE_ZH = re.compile(r"如何|怎[么麼样樣]|能否|可以|可不可以|是否|为什么|為什麼|要不要")
_STREET_SUFFIX = r"(?:road|rd|street|st|avenue|ave|boulevard|blvd|lane|ln|drive|dr|way|highway|hwy|place|pl|court|ct|square|sq)"
_ADDRESS = re.compile(
    r"[\w.+-]+@[\w-]+\.[\w.]+|https?://\S+|www\.\S+"  # e-mail, web
    r"|\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:com|cn|net|org|io|edu|gov|local|internal|example|corp|lan)\b"  # a host name
    r"|\b\d{1,3}(?:\.\d{1,3}){3}\b"  # IPv4
    r"|\d+\s*[号號弄]|[路街道巷]\s*\d|\d+\s*[层層楼樓室栋棟座]|[省市][^，。,;；\s]{0,10}[区區县縣镇鎮]"  # 碧波路 188 号, 12 层, 浦东新区
    rf"|\b\d+[a-z]?\s+(?:[a-z][\w'-]*\s+){{0,4}}{_STREET_SUFFIX}\b"  # 188 Bibo Road
    r"|\b(?:floor|room|suite|building|bldg|unit|level|no\.)\s*\d+|\bp\.?\s?o\.?\s+box\b"
    r"|(?-i:\b(?:Building|Tower|Block|Floor|Room|Suite|Unit|Gate)\s+[A-Z0-9][A-Z0-9-]*\b)"  # Building C
    r"|\b[a-z]+\s+(?:district|county|province)\b|\b(?:zip|postal|post)\s*code\b",  # Pudong New District
    re.IGNORECASE,
)


def asks_for_address(question: str) -> bool:
    """Whether the question asks what or where an address (street, postal, e-mail, web, IP) is."""
    text = unicodedata.normalize("NFKC", question)
    if _ASKS_ADDRESS_EN.search(text):
        return True
    return bool(_ASKS_ADDRESS_ZH.search(text)) and not _ASKS_PROCEDURE_ZH.search(text)


def states_address(sentence: str) -> bool:
    """Whether the sentence states an address of some kind (a street and number, a floor or room,
    a district, an e-mail address, a URL or host name, an IP address)."""
    return bool(_ADDRESS.search(unicodedata.normalize("NFKC", sentence)))
