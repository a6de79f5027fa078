"""The one configurable resource: where the raw files and the lake live, which model to use."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from rag_pipeline.config import Settings
from rag_pipeline.embedding.encoder import Encoder, encoder_for


class RagSettingsResource(dg.ConfigurableResource):
    """Pipeline settings; each defaults to its RAG_* environment variable (see README)."""

    raw_dir: str = str(Settings().raw_dir)
    lake_dir: str = str(Settings().lake_dir)
    embedding_model: str = Settings().embedding_model
    model_cache_dir: str = str(Settings().model_cache_dir)
    embedding_precision: str = Settings().embedding_precision
    ocr_min_confidence: float = Settings().ocr_min_confidence
    max_deletion_fraction: float = Settings().max_deletion_fraction
    allow_mass_deletion: bool = False
    parse_workers: int = Settings().parse_workers
    parse_timeout_s: float = Settings().parse_timeout_s
    golden_file: str = str(Settings().golden_file or "none")
    eval_tolerance: float = Settings().eval_tolerance

    def settings(self) -> Settings:
        return Settings(
            raw_dir=Path(self.raw_dir),
            lake_dir=Path(self.lake_dir),
            embedding_model=self.embedding_model,
            model_cache_dir=Path(self.model_cache_dir),
            embedding_precision=self.embedding_precision,
            ocr_min_confidence=self.ocr_min_confidence,
            max_deletion_fraction=self.max_deletion_fraction,
            allow_mass_deletion=self.allow_mass_deletion,
            parse_workers=self.parse_workers,
            parse_timeout_s=self.parse_timeout_s,
            golden_file=None if self.golden_file.lower() in ("", "none", "off") else Path(self.golden_file),
            eval_tolerance=self.eval_tolerance,
        )

    def encoder(self) -> Encoder:
        s = self.settings()
        return encoder_for(s)
