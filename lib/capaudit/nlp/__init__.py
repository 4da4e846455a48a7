"""Offline NLP resources shared by stages (WordNet from Debian's packages, spaCy model)."""
