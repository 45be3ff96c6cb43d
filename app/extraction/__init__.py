"""The extraction workbench: typed fields pulled out of documents, each with the page it came from.

schemas.py    templates and user-made field tables → a checked JSON Schema (a small, flat subset)
grounding.py  is a value really on the page? numbers, dates and text matched in their common forms
merge.py      the records of a document's parts → one record, with conflicts and provenance
store.py      runs and their results in SQLite, the user's corrections, CSV and JSON exports
"""
