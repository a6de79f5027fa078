"""Random principals for the property-based permission tests (search/ask in-process and over HTTP)."""

from __future__ import annotations

from hypothesis import strategies as st

from rag_pipeline.ingest.scan import SECURITY_LEVELS
from rag_pipeline.query.filters import Principal

principals = st.builds(
    Principal,
    user=st.sampled_from(["", "finance@northwind-robotics.example", "hr@northwind-robotics.example", "nobody@x"]),
    groups=st.lists(st.sampled_from(["all-staff", "finance", "it-ops", "hr", "guests"]), max_size=3).map(tuple),
    clearance=st.sampled_from(SECURITY_LEVELS),
    departments=st.lists(st.sampled_from(["HR", "IT", "Finance", "Product", "Legal"]), max_size=2).map(tuple),
)
