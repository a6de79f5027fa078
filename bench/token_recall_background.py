"""Does token recall separate answerable from close-but-unanswerable questions better once the
question's own baseline is taken off? (Tried for issue 14, session 45; not built: bench/README.md.)

Dense cosines mean nothing without the question's background (a Chinese question scores unrelated
text higher than an English one: `dense_z`). Token recall might have the same bias — short or
common-word questions restating any text well, a question restating other-language text less —
so this probe computes, per golden question, the gate's token recall of the first context passage
and three baselines: the question's recall on a deterministic sample of the lake's chunks, and on
fixed unrelated sentences in the passage's language (none corpus-specific). It prints each
variant's AUC (answerable above unanswerable) by set, half, kind and language.

    .venv/bin/python bench/token_recall_background.py --golden data/golden/sample_golden.jsonl=<sample lake> \\
        --golden data/golden/corpus_golden.jsonl=<corpus lake>
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BACKGROUND_CHUNKS = 64
UNRELATED = {
    "en": [
        "The museum opens at nine in the morning and closes at five in the afternoon.",
        "Heavy rain is expected across the northern region over the weekend.",
        "She planted tomatoes, beans and basil in the small garden behind the house.",
        "The recipe calls for two cups of flour, one egg and a pinch of salt.",
        "The team won the final match after a penalty shootout.",
        "Most trains to the airport leave from platform four every twenty minutes.",
        "The library lends books, music and films to anyone with a membership card.",
        "He repaired the old bicycle and rode it to work every day.",
        "The river freezes in winter and floods in early spring.",
        "The concert was postponed because the singer had a sore throat.",
        "Bees collect nectar from flowers and turn it into honey.",
        "The committee will publish its report at the end of the month.",
    ],
    "zh": [
        "博物馆早上九点开门，下午五点关门。", "周末北方地区预计将有大雨。", "她在屋后的小花园里种了番茄、豆角和罗勒。",
        "这道菜需要两杯面粉、一个鸡蛋和少许盐。", "球队在点球大战后赢得了决赛。", "去机场的大多数列车每二十分钟从四号站台发车。",
        "图书馆向所有持卡读者出借图书、音乐和电影。", "他修好了那辆旧自行车，每天骑车上班。", "这条河冬天结冰，早春时节会发洪水。",
        "因为歌手嗓子疼，音乐会推迟了。", "蜜蜂从花朵中采集花蜜并酿成蜂蜜。", "委员会将在月底发布报告。",
    ],
}


def auc(positives: list[float], negatives: list[float]) -> float:
    if not positives or not negatives:
        return float("nan")
    p, n = np.asarray(positives)[:, None], np.asarray(negatives)[None, :]
    return float((p > n).mean() + 0.5 * (p == n).mean())


def variants(index, questions: list[dict]) -> list[dict]:
    """Per question: answerable, kind, lang, split and each variant's value."""
    from rag_pipeline.query.answer import context_hits
    from rag_pipeline.query.token_recall import question_recall, token_recall

    states, identity = index.encoder.token_states, index.encoder.identity
    table = index.chunks.to_lance().to_table(columns=["chunk_id", "text"])
    order = np.argsort(np.asarray(table.column("chunk_id").to_pylist(), dtype=object), kind="stable")
    texts = table.column("text").to_pylist()
    sample = [texts[i] for i in order[:: max(1, table.num_rows // BACKGROUND_CHUNKS)]][:BACKGROUND_CHUNKS]
    unrelated = {lang: [states.states(s, identity.passage_prompt)[0] for s in sents] for lang, sents in UNRELATED.items()}
    rows = []
    for q in questions:
        query = index._rewritten(q["question"])
        hits, _ = index._retrieve(query, "hybrid", 5, None, None)
        top = context_hits([h.__dict__ for h in hits])
        if not top:
            continue
        recall = token_recall(states, query, top[0]["text"], identity.query_prompt, identity.passage_prompt)
        lake = [token_recall(states, query, t, identity.query_prompt, identity.passage_prompt) for t in sample]
        q_states, _ = states.states(query, identity.query_prompt)
        own = unrelated.get(top[0]["language"]) or unrelated["en"] + unrelated["zh"]
        generic = [question_recall(q_states, s) for s in own]
        rows.append({
            **{k: q.get(k) for k in ("answerable", "kind", "lang", "split")},
            "token recall": recall,
            "− lake sample mean": recall - float(np.mean(lake)),
            "− unrelated mean": recall - float(np.mean(generic)),
            "z over unrelated": (recall - float(np.mean(generic))) / (float(np.std(generic)) + 1e-6),
        })
    return rows


def main() -> int:
    from rag_pipeline.eval.golden import load_golden
    from rag_pipeline.query import RagIndex

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden", action="append", required=True, help="GOLDEN_FILE=LAKE (repeatable)")
    args = parser.parse_args()
    names = ["token recall", "− lake sample mean", "− unrelated mean", "z over unrelated"]
    print("| set | part | n | " + " | ".join(names) + " |")
    print("|---|---|---:|" + "---:|" * len(names))
    for spec in args.golden:
        file, lake = spec.split("=", 1)
        rows = variants(RagIndex.open(lake), load_golden(Path(file)))
        parts = {"all": rows, "fit half": [r for r in rows if r["split"] == "fit"], "report half": [r for r in rows if r["split"] != "fit"],
                 "cross-lingual": [r for r in rows if r["kind"] == "cross-lingual"], "other kinds": [r for r in rows if r["kind"] != "cross-lingual"],
                 "en": [r for r in rows if r["lang"] == "en"], "zh": [r for r in rows if r["lang"] == "zh"]}
        for part, sel in parts.items():
            cells = " | ".join(f"{auc([r[v] for r in sel if r['answerable']], [r[v] for r in sel if not r['answerable']]):.3f}" for v in names)
            print(f"| {Path(file).stem} | {part} | {len(sel)} | {cells} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
