"""`specprefill serve`: an OpenAI-compatible HTTP server in front of one loaded engine.

The parts, one job each: the request body read and checked (body), the conversation turned into
a document and a question (conversation), the one engine behind a bounded queue (worker), the
OpenAI response shapes (replies), the counters (metrics), the routes (app) and the uvicorn
server with its graceful shutdown (server). It uses the engine through engine.api only.
"""
