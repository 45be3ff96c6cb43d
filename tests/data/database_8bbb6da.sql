-- A Quartet database as the code at commit 8bbb6da made it (its `_migrations` table, before
-- sqlite-utils Migrations): schema and rows, read back by tests/test_database.py.
-- Made once by running that commit's stores; never edit (it stands for files already out there).
CREATE TABLE "_migrations" (
   "scope" TEXT,
   "name" TEXT,
   "applied_at" TEXT,
   PRIMARY KEY ("scope", "name")
);
CREATE TABLE "conversations" (
   "id" TEXT PRIMARY KEY,
   "title" TEXT,
   "system_prompt" TEXT,
   "created_at" TEXT,
   "updated_at" TEXT
, "owner" TEXT NOT NULL DEFAULT '');
CREATE TABLE "messages" (
   "id" INTEGER PRIMARY KEY,
   "conversation_id" TEXT REFERENCES "conversations"("id"),
   "role" TEXT,
   "content" TEXT,
   "status" TEXT,
   "stats" TEXT,
   "created_at" TEXT
, "active" INTEGER NOT NULL DEFAULT 1);
CREATE INDEX "idx_messages_conversation_id_id"
    ON "messages" ("conversation_id", "id");
CREATE INDEX "idx_conversations_updated_at"
    ON "conversations" ("updated_at");
CREATE INDEX "idx_conversations_owner_updated_at"
    ON "conversations" ("owner", "updated_at");
CREATE TABLE "documents" (
   "id" INTEGER PRIMARY KEY,
   "path" TEXT NOT NULL,
   "name" TEXT NOT NULL,
   "collection" TEXT NOT NULL,
   "sha256" TEXT,
   "size" INTEGER,
   "mtime" REAL,
   "status" TEXT NOT NULL,
   "error_kind" TEXT,
   "error" TEXT,
   "note" TEXT,
   "pages_done" INTEGER DEFAULT 0,
   "pages_total" INTEGER DEFAULT 0,
   "chunk_count" INTEGER DEFAULT 0,
   "model" TEXT,
   "duplicate_of" INTEGER,
   "added_at" TEXT,
   "indexed_at" TEXT
);
CREATE UNIQUE INDEX "idx_documents_path"
    ON "documents" ("path");
CREATE INDEX "idx_documents_sha256"
    ON "documents" ("sha256");
CREATE INDEX "idx_documents_collection"
    ON "documents" ("collection");
CREATE TABLE "pages" (
   "document_id" INTEGER REFERENCES "documents"("id"),
   "number" INTEGER,
   "text" TEXT,
   PRIMARY KEY ("document_id", "number")
);
CREATE TABLE "chunks" (
   "id" INTEGER PRIMARY KEY,
   "document_id" INTEGER REFERENCES "documents"("id"),
   "page" INTEGER,
   "ordinal" INTEGER,
   "start" INTEGER,
   "end" INTEGER,
   "tokens" INTEGER,
   "text" TEXT
);
CREATE INDEX "idx_chunks_document_id_ordinal"
    ON "chunks" ("document_id", "ordinal");
CREATE VIRTUAL TABLE "chunks_fts" USING FTS5 (
    "text",
    tokenize='trigram',
    content="chunks"
);
CREATE TRIGGER "chunks_ai" AFTER INSERT ON "chunks" BEGIN
  INSERT INTO "chunks_fts" (rowid, "text") VALUES (new.rowid, new."text");
END;
CREATE TRIGGER "chunks_ad" AFTER DELETE ON "chunks" BEGIN
  INSERT INTO "chunks_fts" ("chunks_fts", rowid, "text") VALUES('delete', old.rowid, old."text");
END;
CREATE TRIGGER "chunks_au" AFTER UPDATE ON "chunks" BEGIN
  INSERT INTO "chunks_fts" ("chunks_fts", rowid, "text") VALUES('delete', old.rowid, old."text");
  INSERT INTO "chunks_fts" (rowid, "text") VALUES (new.rowid, new."text");
END;
CREATE VIRTUAL TABLE chunks_fts_vocab USING fts5vocab(chunks_fts, 'row');
CREATE TABLE "vectors" (
   "chunk_id" INTEGER PRIMARY KEY REFERENCES "chunks"("id"),
   "model" TEXT,
   "vector" BLOB
);
CREATE TABLE "extraction_runs" (
   "id" INTEGER PRIMARY KEY,
   "template" TEXT,
   "schema" TEXT NOT NULL,
   "title" TEXT,
   "status" TEXT NOT NULL,
   "created_at" TEXT NOT NULL,
   "finished_at" TEXT,
   "error" TEXT,
   "documents_total" INTEGER DEFAULT 0,
   "documents_done" INTEGER DEFAULT 0
);
CREATE TABLE "extraction_results" (
   "id" INTEGER PRIMARY KEY,
   "run_id" INTEGER NOT NULL REFERENCES "extraction_runs"("id"),
   "document_id" INTEGER,
   "document_name" TEXT NOT NULL,
   "status" TEXT NOT NULL,
   "error" TEXT,
   "record" TEXT,
   "fields" TEXT,
   "corrected" TEXT,
   "updated_at" TEXT
);
CREATE INDEX "idx_extraction_results_run_id_id"
    ON "extraction_results" ("run_id", "id");
CREATE TABLE "admin_log" (
   "id" INTEGER PRIMARY KEY,
   "at" TEXT,
   "who" TEXT,
   "action" TEXT,
   "detail" TEXT,
   "ok" INTEGER
);
INSERT INTO [_migrations] ([scope], [name], [applied_at]) VALUES ('chat', '001_conversations', '2026-12-01T08:26:16.559+00:00');
INSERT INTO [_migrations] ([scope], [name], [applied_at]) VALUES ('chat', '002_owner', '2026-12-01T08:26:16.559+00:00');
INSERT INTO [_migrations] ([scope], [name], [applied_at]) VALUES ('chat', '003_active', '2026-12-01T08:26:16.559+00:00');
INSERT INTO [_migrations] ([scope], [name], [applied_at]) VALUES ('knowledge', '001_knowledge', '2026-12-01T08:26:16.561+00:00');
INSERT INTO [_migrations] ([scope], [name], [applied_at]) VALUES ('extraction', '001_extraction', '2026-12-01T08:26:16.563+00:00');
INSERT INTO [_migrations] ([scope], [name], [applied_at]) VALUES ('admin', '001_admin_log', '2026-12-01T08:26:16.563+00:00');
INSERT INTO [conversations] ([id], [title], [system_prompt], [created_at], [updated_at], [owner]) VALUES ('b4cc0fa5aa7a45f8ab4440d09ef1d08d', 'Where is the kb folder?', 'Be brief.', '2026-12-01T08:26:16.559+00:00', '2026-12-01T08:26:16.560+00:00', 'browser:a');
INSERT INTO [messages] ([id], [conversation_id], [role], [content], [status], [stats], [created_at], [active]) VALUES (1, 'b4cc0fa5aa7a45f8ab4440d09ef1d08d', 'user', 'Where is the kb folder?', 'ok', NULL, '2026-12-01T08:26:16.559+00:00', 1);
INSERT INTO [messages] ([id], [conversation_id], [role], [content], [status], [stats], [created_at], [active]) VALUES (2, 'b4cc0fa5aa7a45f8ab4440d09ef1d08d', 'assistant', 'In kb/.', 'ok', '{"generated_tokens": 4}', '2026-12-01T08:26:16.560+00:00', 1);
INSERT INTO [documents] ([id], [path], [name], [collection], [sha256], [size], [mtime], [status], [error_kind], [error], [note], [pages_done], [pages_total], [chunk_count], [model], [duplicate_of], [added_at], [indexed_at]) VALUES (1, '/kb/a.txt', 'a.txt', 'default', 'abababababababababababababababababababababababababababababababab', 47, 1.0, 'ok', NULL, NULL, NULL, 1, 1, 1, 'all-MiniLM-L6-v2', NULL, '2026-12-01T08:26:16.561+00:00', '2026-12-01T08:26:16.562+00:00');
INSERT INTO [documents] ([id], [path], [name], [collection], [sha256], [size], [mtime], [status], [error_kind], [error], [note], [pages_done], [pages_total], [chunk_count], [model], [duplicate_of], [added_at], [indexed_at]) VALUES (2, '/kb/b.pdf', 'b.pdf', 'default', NULL, NULL, NULL, 'error', 'encrypted', 'b.pdf is password-protected', NULL, 0, 0, 0, NULL, NULL, '2026-12-01T08:26:16.562+00:00', '2026-12-01T08:26:16.562+00:00');
INSERT INTO [pages] ([document_id], [number], [text]) VALUES (1, 1, 'The lighthouse keeper logs the weather at dawn.');
INSERT INTO [chunks] ([id], [document_id], [page], [ordinal], [start], [end], [tokens], [text]) VALUES (1, 1, 1, 0, 0, 47, 9, 'The lighthouse keeper logs the weather at dawn.');
INSERT INTO [vectors] ([chunk_id], [model], [vector]) VALUES (1, 'all-MiniLM-L6-v2', X'000000000000803e0000003f0000403f');
INSERT INTO [extraction_runs] ([id], [template], [schema], [title], [status], [created_at], [finished_at], [error], [documents_total], [documents_done]) VALUES (1, 'invoice', '{"type": "object", "properties": {"total": {"type": "number"}}}', 'Invoices', 'done', '2026-12-01T08:26:16.563+00:00', '2026-12-01T08:26:16.563+00:00', NULL, 1, 0);
INSERT INTO [extraction_results] ([id], [run_id], [document_id], [document_name], [status], [error], [record], [fields], [corrected], [updated_at]) VALUES (1, 1, 1, 'a.txt', 'done', NULL, '{"total": 42.0}', '{"total": {"page": 1, "snippet": "42", "verified": true, "conflicts": [], "conflict": false, "items": [], "rows": []}}', '{}', '2026-12-01T08:26:16.563+00:00');
INSERT INTO [admin_log] ([id], [at], [who], [action], [detail], [ok]) VALUES (1, '2026-12-01T08:26:16.563+00:00', 'admin', 'login', 'admin session opened', 1);
