"""Lexical units, windows and the surface-concentration survey."""
