"""Paper layer: tables, figures and the numbers map, built from summaries only (never from stages).

Entry points (one per notebook ``paper_<element>.py``) live in :mod:`capaudit.paper.run`.
"""
