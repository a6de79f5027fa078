"""Retrieval and answer evaluation: BEIR benchmarks and the sample corpus's golden set."""
