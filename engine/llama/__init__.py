"""The target model on llama.cpp: the native driver, its runtime, and what only serves it
(the chat prompt, fitting the context window, vocabulary fingerprints, memory needs)."""
