"""An OpenAI-compatible upstream server as the engine's backend (client.py talks to it, backend.py serves)."""
