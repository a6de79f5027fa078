"""Token recall (query/token_recall.py): the gate's evidence that one sentence restates the question."""

from pathlib import Path

import numpy as np
import pytest

from rag_pipeline.config import Settings
from rag_pipeline.embedding.encoder import _resolve_or_fail, encoder_for, export_query_graphs, token_states_export_path
from rag_pipeline.embedding.query_encoder import supported_layout
from rag_pipeline.embedding.token_states import TokenStates
from rag_pipeline.query.answer import GATE_FEATURES, RefusalPolicy
from rag_pipeline.query.token_recall import best_sentence_recall, sentence_recalls, sentence_spans, token_recall


def test_recall_is_read_one_sentence_at_a_time():
    e = np.eye(3, dtype=np.float32)
    question = e[:2]  # two question tokens
    text = "alpha one. beta two. alpha beta three."
    spans = sentence_spans(text)
    assert [text[a:b].strip() for a, b in spans] == ["alpha one.", "beta two.", "alpha beta three."]
    # sentence 1 holds token 0's state, sentence 2 token 1's: each restates half of the question
    passage, offsets = np.stack([e[0], e[2], e[1], e[2]]), np.array([(0, 5), (6, 9), (11, 15), (16, 19)])
    assert best_sentence_recall(question, passage, offsets, text) == pytest.approx(0.5)
    # a sentence holding both restates all of it
    both, both_offsets = np.vstack([passage, e[0], e[1]]), np.vstack([offsets, [(21, 26), (27, 31)]])
    assert best_sentence_recall(question, both, both_offsets, text) == pytest.approx(1.0)
    assert best_sentence_recall(question, passage[:0], offsets[:0], text) == 0.0


@pytest.fixture(scope="module")
def model():
    settings = Settings()
    export_query_graphs(settings)  # what scripts/install.sh runs; nothing when the export exists
    encoder = encoder_for(settings)
    path = Path(_resolve_or_fail(settings.embedding_model, str(settings.model_cache_dir))[0])
    return encoder, TokenStates(path, supported_layout(path), None)


# (question, a passage holding the asked fact, the same passage without that sentence)
PAIRS = [
    ("鸭子在生物分类上属于哪个科？",
     "Ducks live near water. Ducks are in the family Anatidae, with swans and geese. A duck can live for ten years.",
     "Ducks live near water. A duck can live for ten years. Many people feed ducks bread in parks."),
    ("How many employees does IBM have?",
     "IBM employs about 280,000 people worldwide. Its headquarters are in Armonk, New York.",
     "IBM was founded in 1911. Its headquarters are in Armonk, New York."),
    ("What is the warranty period of the R-500 vacuum?",
     "R-500 保修期为两年，自购买之日起计算。R-500 的噪音为 65 分贝。",
     "R-500 的噪音为 65 分贝。R-500 重 3 公斤。"),
]


def test_the_passage_that_restates_the_question_scores_higher_in_either_language(model):
    encoder, _ = model
    states, identity = encoder.token_states, encoder.identity
    assert states.backend == "onnx-int8"  # the export exists: the fast path
    margins = []
    for question, holds, lacks in PAIRS:
        with_fact = token_recall(states, question, holds, identity.query_prompt, identity.passage_prompt)
        without = token_recall(states, question, lacks, identity.query_prompt, identity.passage_prompt)
        assert with_fact > without, (question, with_fact, without)
        margins.append(with_fact - without)
    assert np.mean(margins) > 0.02  # English -> Chinese is the weakest direction (~0.006 here)


def test_int8_onnx_states_read_as_the_fp32_model_does(model):
    encoder, numpy_states = model
    identity = encoder.identity
    for question, holds, lacks in PAIRS:
        for passage in (holds, lacks):
            fast = token_recall(encoder.token_states, question, passage, identity.query_prompt, identity.passage_prompt)
            exact = token_recall(numpy_states, question, passage, identity.query_prompt, identity.passage_prompt)
            assert fast == pytest.approx(exact, abs=0.02)


def test_int8_sessions_compute_as_a_vnni_cpu_does_on_any_cpu(model):
    """Without VNNI, onnxruntime's u8 x s8 products saturate and the gate's evidence would depend on
    the CPU (bench/README.md, "The same evidence on every CPU"): every int8 session asks for the
    u8 x u8 path there."""
    from rag_pipeline.embedding.onnx_backend import OnnxPassageEncoder

    encoder, _ = model
    key = "session.x64quantprecision"
    assert encoder.token_states._session.get_session_options().get_session_config_entry(key) == "1"
    path = Path(_resolve_or_fail(Settings().embedding_model, str(Settings().model_cache_dir))[0])
    passage_encoder = OnnxPassageEncoder(path, token_states_export_path(Settings().model_cache_dir, encoder.identity), num_threads=1)
    assert passage_encoder.session.get_session_options().get_session_config_entry(key) == "1"


def test_token_states_on_two_sleeping_threads_are_the_states_of_one(model):
    """The query-time session runs on two threads that sleep when idle (token_states.TOKEN_STATE_THREADS:
    ~1.5x faster on a long passage); the gate's evidence must not depend on that: a long real
    passage and a question give bit-identical states on one thread and on two."""
    import onnxruntime as ort

    from rag_pipeline.embedding.onnx_backend import session_options

    encoder, _ = model
    shipped = encoder.token_states._session
    assert shipped.get_session_options().get_session_config_entry("session.intra_op.allow_spinning") == "0"
    onnx_path = str(token_states_export_path(Settings().model_cache_dir, encoder.identity))
    one, two = (
        ort.InferenceSession(onnx_path, session_options(n, spin=False), providers=["CPUExecutionProvider"]) for n in (1, 2)
    )
    passage = (Path(__file__).parents[2] / "data" / "sample" / "handbook" / "employee_handbook_en.md").read_text(encoding="utf-8")
    for text in (encoder.identity.passage_prompt + passage, encoder.identity.query_prompt + PAIRS[1][0]):
        ids = np.asarray([encoder.token_states.tokenizer.encode(text).ids], dtype=np.int64)
        assert ids.shape[1] > (200 if text.endswith(passage) else 8)  # truncated at the model's length
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        assert np.array_equal(one.run(None, feeds)[0], two.run(None, feeds)[0])


def test_ask_records_token_recall_and_the_gate_weighs_it(sample_index):
    answer = sample_index.ask("How many days of paid annual leave does a full-time employee get?")
    recall = answer.evidence["token_recall"]
    assert isinstance(recall, float) and 0.5 < recall <= 1.0
    off_topic = sample_index.ask("Which river flows through the capital of Mongolia?")
    assert off_topic.evidence["token_recall"] < recall
    policy = RefusalPolicy()
    assert len(policy.weights) == len(GATE_FEATURES) and policy.weights[GATE_FEATURES.index("token_recall")] > 0


def test_a_passage_asked_about_again_reads_from_the_cache_with_the_same_states(model):
    encoder, _ = model
    states, identity = encoder.token_states, encoder.identity
    question, passage, _ = PAIRS[1]
    passage = passage + " (cache probe)"  # a text no other test asked about
    first = token_recall(states, question, passage, identity.query_prompt, identity.passage_prompt)
    computed = states.states(passage, identity.passage_prompt, cache="passage")
    again = states.states(passage, identity.passage_prompt, cache="passage")
    assert again is computed  # served from the cache, not computed again
    fresh = states._compute(passage, identity.passage_prompt)
    assert np.array_equal(fresh[0], computed[0]) and np.array_equal(fresh[1], computed[1])
    assert token_recall(states, question, passage, identity.query_prompt, identity.passage_prompt) == first


def test_the_quote_across_languages_is_the_sentence_that_restates_the_question(model):
    """When words cannot choose the quote, `ask` takes the sentence that restates the question token
    by token, each sentence read alone; its states are kept for the next answer."""
    encoder, _ = model
    states, identity = encoder.token_states, encoder.identity
    cases = [
        ("鸭子在生物分类上属于哪个科？", ["Ducks live near water.", "Ducks are in the family Anatidae, with swans and geese.",
                                  "A duck can live for ten years."], 1),
        ("What is the warranty period of the R-500 vacuum?", ["R-500 的噪音为 65 分贝。", "R-500 保修期为两年，自购买之日起计算。",
                                                              "R-500 重 3 公斤。"], 1),
    ]
    for question, sentences, holds in cases:
        scores = sentence_recalls(states, question, sentences, identity.query_prompt, identity.passage_prompt)
        assert int(np.argmax(scores)) == holds, (question, scores)
    kept = states.states(cases[0][1][1], identity.passage_prompt, cache="sentence")
    assert states.states(cases[0][1][1], identity.passage_prompt, cache="sentence") is kept
    assert sentence_recalls(states, "？", ["Ducks live near water."], identity.query_prompt, identity.passage_prompt) == [0.0]
