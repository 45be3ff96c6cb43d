"""The extraction workbench: typed fields and tables pulled out of documents, each value with its page.

json_schema.py templates → a checked JSON Schema (fields, lists, and tables of scalar columns)
fields.py     the field table (and its column table) a person edits → a schema, and back
answers.py    the fields described for the prompt, the grammar's schema, the check, a cut answer closed
extractor.py  a document in parts, one constrained answer each, validated and retried once
grounding.py  is a value really on the page? numbers, dates and text matched in their common forms
rows.py       is a table row really on the page? its cells near each other on one page
merge.py      the records of a document's parts → one record, with conflicts and provenance
store.py      runs and their results in SQLite, the user's corrections
exports.py    CSV of the flat fields, a CSV per table, JSON with pages and snippets
service.py    runs in the background, corrections from the review tables
"""
