"""The knowledge base: files in, searchable pages and chunks out.

file (upload or `kb/`) → ingestion queue → loader → chunks → embedder → store; a question goes
through hybrid search (vectors + full text) and comes back as hits with file and page.
`KnowledgeService` (in `service.py`) is the one object the rest of the app talks to.
"""
