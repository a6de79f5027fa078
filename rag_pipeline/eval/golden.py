"""placeholder"""
from rag_pipeline.config import PROJECT_ROOT
DEFAULT_GOLDEN = PROJECT_ROOT / "data" / "golden" / "sample_golden.jsonl"
