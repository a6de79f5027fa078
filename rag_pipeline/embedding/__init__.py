"""Embedding model: offline build of the default model, identity, and a cached encoder."""
