"""Query rewriting: the conversational wrapper of a question is not what it asks.

People type into a chat box "hi, quick question — could you tell me how many days of leave I
get? thanks!", "您好，麻烦帮我查一下年假有几天，谢谢啦", or tell a story first: "Our X-2000 stopped
mid-cycle and shows E-58. What should I check?". The greeting, the request around the question,
the thanks and the background story are words no answer holds. Weighted by idf they are heavy
(rare in documents), so they pull the keyword arm toward chatty passages and lower the share of
the question an answer covers, which the refusal gate reads: a colloquial question is refused
where its plain form is answered.

Two rules, written from how people phrase requests (not fitted on a question set):
1. **Filler goes**: greetings, apologies, thanks and the request around the question ("could you
   tell me", "do you know", "帮我查一下", "想确认一下"), in English, Simplified and Traditional.
2. **The question sentence is the query**: when a message holds statements and then a question
   (a sentence ending in "?"), the question sentence is searched, with the product and error
   codes the statements named ("it", "that code" refer back to them); unless it would be left
   with fewer than two search terms, when the whole message is its own question.

The rewrite feeds retrieval, the evidence and the choice of quoted sentences; the answer, and an
LLM if one is configured, see the original question. Nothing left to search: the original.
"""

from __future__ import annotations

import re

from rag_pipeline.text import is_identifier, question_tokens

_EN_FILLER = [
    # greetings, sign-offs, apologies and remarks about the question itself
    r"^\s*(?:hi|hello|hey|hiya|howdy|greetings)(?: there| all| team| everyone| folks| guys)?\b[,!.:]*",  # "Ly6C hi" is content
    r"^\s*good (?:morning|afternoon|evening)\b[,!.:]*",
    r"\b(?:many )?thanks?(?: you)?(?: (?:so|very) much| a lot| a ton| in advance)?\b[!.]*",
    r"\b(?:thx|cheers|lol)\b[!.]*",
    r"\b(?:i(?:'d)? )?(?:really )?appreciate (?:it|any help|your help)\b[!.]*",
    r"\bsorry(?: to bother you| to ask| if this is (?:a )?(?:dumb|silly|stupid|basic|obvious) question"
    r"| (?:for|about) (?:the |this |my )?(?:\w+ ){0,2}\w+(?=\s*[,.!;:—–-]))?\b[,!.]*(?: but\b)?",
    r"\b(?:a )?(?:(?:quick|simple|small|silly|dumb|basic|slightly awkward|awkward) )+question\b[:,!.]*",
    r"\bi (?:just )?(?:have|got) a question\b[:,!.]*",
    # the request around the question
    r"\b(?:can|could|would|will) (?:you|someone|anyone|somebody) (?:please |kindly )?"
    r"(?:tell|let|show|remind|give|send) (?:me|us)(?: know)?\b(?: (?:if|whether))?",
    r"\b(?:can|could|would|will) (?:you|someone|anyone|somebody) (?:please |kindly )?(?:help (?:me|us) )?"
    r"(?:check|find(?: out)?|look up|confirm|clarify|explain)(?: (?:for )?(?:me|us))?\b(?: (?:if|whether))?",
    r"\blet (?:me|us) know\b(?: (?:if|whether))?",
    r"\b(?:do|does) (?:you|anyone|anybody|someone) (?:happen to )?know\b(?: (?:if|whether))?",
    r"\bany(?: ?one| ?body)? (?:idea|ideas|clue)\b(?: (?:if|whether|on|about))?",
    r"\bi(?:'m| am|'d| would| was| wanted| want| need| needed)(?: just| really)?(?: like| love| trying| have)?(?: to)? "
    r"(?:know|ask|check|confirm|find out|understand|wondering|curious)\b(?: (?:about|if|whether))?",
    r"\b(?:please|pls|plz|kindly)\b[,!.]*",
    r"\bby any chance\b",
]
_ZH_FILLER = [  # Simplified and Traditional forms
    r"[您你]好[呀啊哈]?|嗨|哈[喽囉]",
    r"(?:非常|十分)?(?:[谢謝][谢謝]|感[谢謝]|多[谢謝])(?:[您你]|啦|了|哈|大家)*",
    r"不好意思|打[扰擾](?:一下|了)|麻[烦煩](?:[您你]|大家)?了?",
    r"我?(?:想|想要|需要|要)(?:[请請]教|[咨諮][询詢]|[问問]|了解|[确確][认認]|知道|打[听聽])(?:一下|下)?(?![题題])",
    r"(?:[请請]教|[咨諮][询詢]|[问問]|了解|[确確][认認]|打[听聽])(?:一下|下)(?![题題])",
    r"(?:能|能不能|可以|可不可以)?[请請]?[您你]?[帮幫][我忙]?(?:查|看|找|[问問]|[确確][认認])(?:一下|下)?",
    r"(?:能|能不能|可以|可不可以)?[请請]?[您你]?告[诉訴](?:我|一下)",
    r"(?:有人|有[谁誰]|[谁誰]|[您你])(?:知道|清楚)",
    r"一下|的[话話](?=[，,])|咋",
    r"(?<=[\u4e00-\u9fff])[呀啦哈嘛呗唄哦噢喔]+(?=[\s，。？！?!,.~～]|$)",  # sentence-final particles only (not 哈尔滨)
]
_FILLER = re.compile("|".join(f"(?:{p})" for p in _EN_FILLER + _ZH_FILLER), re.IGNORECASE)
_SPACES = re.compile(r"\s{2,}")
_LOOSE_PUNCT = re.compile(r"^[\s,.;:!?，。；：！？、—–-]+|(?<=[，,、])\s*[，,、]+|\s+(?=[?？，,])")
# A sentence ends at 。！？!? or at a full stop after a lower-case word ("trip. Does"), not after
# an abbreviation ("U.S. entity", "Dr. Li"): only a real statement before the question is background.
_SENTENCE_END = re.compile(r"(?<=[。！？!?])\s*|(?<=[a-z0-9)\]]{2}[.])\s+(?=[A-Z\u4e00-\u9fff])")
MIN_FOCUS_TERMS = 2


def tidy(text: str) -> str:
    return _LOOSE_PUNCT.sub("", _SPACES.sub(" ", text)).strip()


def without_filler(text: str) -> str:
    return tidy(_FILLER.sub(" ", text))


def question_focus(text: str) -> str:
    """The question sentences of a message that tells its background first, with the codes the
    background named; the message itself when it is one sentence or the question alone is too thin."""
    sentences = [p.strip() for p in _SENTENCE_END.split(text) if p.strip()]
    asked = [s for s in sentences if s.rstrip().endswith(("?", "？"))]
    background = [s for s in sentences if s not in asked and question_tokens(s)]
    if not asked or not background:
        return text
    held = set(question_tokens(" ".join(asked)))
    codes = [t for s in background for t in re.findall(r"[\w-]+", s) if is_identifier(t.lower()) and t.lower() not in held]
    focus = " ".join(dict.fromkeys(codes)) + (" " if codes else "") + " ".join(asked)
    return focus if len(set(question_tokens(without_filler(focus)))) >= MIN_FOCUS_TERMS else text


def rewrite_query(question: str) -> str:
    """What retrieval searches for: the question without its wrapper; the original when nothing is left."""
    rewritten = without_filler(question_focus(question))  # sentences are told apart before filler goes
    if not rewritten or not question_tokens(rewritten) or rewritten == tidy(question):
        return question  # nothing left, or nothing but spacing changed: searched as asked
    return rewritten
