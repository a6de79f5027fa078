"""Permissions are filters inside the search: property-based check over random principals."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_pipeline.query.filters import Principal
from rag_pipeline.store import schema as s
from rag_pipeline_tests.oracle import may_read
from rag_pipeline_tests.principals import principals

pytestmark = pytest.mark.slow

QUERIES = ["budget 2026", "annual leave", "E-45", "服务器备份", "报销", "R-500 滚刷", "password policy"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(principal=principals, query=st.sampled_from(QUERIES), mode=st.sampled_from(["hybrid", "vector", "keyword"]))
def test_no_principal_ever_sees_a_document_it_may_not_read(sample_index, principal, query, mode):
    docs = {d["doc_id"]: d for d in sample_index.lake.published_arrow(s.DOCUMENTS, sample_index.manifest).to_pylist()}
    hits = sample_index.search(query, mode=mode, k=100, principal=principal)
    assert all(may_read(docs[h.doc_id], principal) for h in hits)
    if mode == "hybrid":  # answers draw on the same filtered retrieval
        answer = sample_index.ask(query, principal=principal)
        assert all(may_read(docs[c.doc_id], principal) for c in answer.citations)
    if mode == "vector":  # the dense arm ranks everything it may see: nothing readable is missing
        readable = {d for d, doc in docs.items() if may_read(doc, principal)}
        assert {h.doc_id for h in hits} == readable


def test_a_principal_without_rights_sees_nothing_and_is_told_so(sample_index):
    nobody = Principal(groups=(), clearance="public")
    assert len(sample_index.search("annual leave", k=50, principal=nobody)) == 0
    answer = sample_index.ask("How many days of annual leave?", principal=nobody)
    assert answer.refused and "no document you may read" in answer.reason
