"""A chat conversation (OpenAI `messages`) as the engine's document and question.

The engine answers a question about a document; its prompt is the system turn, then the
document, then the question. The rule, chosen so that every turn of one conversation about one
document gives the same document text (and so reuses the engine's cached prefixes):

- system and developer messages, joined, are the system turn; when together they are at least
  LONG_MESSAGE_CHARS long, they are the document instead (the server's system prompt stays);
- otherwise the first user message holds the document, followed by its question (a client may
  send both in one message: `llm` joins piped text and the prompt with a space). The question is
  the message's last paragraph (after its last blank line) when that is at most QUESTION_MAX_CHARS
  long; else its last line, when that is; else its last words, at most QUESTION_MAX_CHARS, cut at
  whitespace. The text before it is the document, when it is at least LONG_MESSAGE_CHARS long; a
  short message, or one with no such split, has no document: all of it is the question. Either
  way the prompt holds the message's text in its order (the whitespace at the split becomes the
  template's break between document and question): only where the protected question starts moves;
- the last message must be the user's: it is the question. Between the document and it, the
  earlier turns (the first message's question, the assistant's answers, the user's follow-ups)
  come before it as a transcript ("User: ..." / "Assistant: ..."), so the model sees them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.serve.errors import bad_request, unsupported

LONG_MESSAGE_CHARS = 2000  # a system message this long (or a first user message's head) is the document
# The longest question split off a first user message: a question is kept whole (SpecPrefill never
# drops it), so a message that is mostly document must not end up all question.
QUESTION_MAX_CHARS = 1000
ROLES = ("system", "developer", "user", "assistant")
SYSTEM_ROLES = ("system", "developer")


@dataclass(frozen=True)
class Message:
    role: str
    text: str


@dataclass(frozen=True)
class Conversation:
    system_prompt: str | None  # None: the server's own
    document: str
    question: str


def message_text(content: Any, index: int) -> str:
    """A message's text: a string, or a list of text parts (other parts are refused)."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        texts = []
        for part in content:
            if (
                not isinstance(part, dict)
                or part.get("type") != "text"
                or not isinstance(part.get("text"), str)
            ):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise unsupported(
                    f"messages[{index}].content",
                    f"only text content is supported, got a part of type {kind!r}",
                )
            texts.append(part["text"])
        return "\n".join(texts)
    raise bad_request(
        f"messages[{index}].content must be a string or a list of text parts", f"messages[{index}].content"
    )


def parse_messages(raw: Any) -> list[Message]:
    if not isinstance(raw, list) or not raw:
        raise bad_request("messages must be a non-empty list", "messages", "missing_required_parameter")
    messages = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise bad_request(f"messages[{i}] must be an object", f"messages[{i}]")
        role = item.get("role")
        if role not in ROLES:
            raise unsupported(
                f"messages[{i}].role",
                f"messages[{i}].role {role!r} is not supported; expected one of {', '.join(ROLES)}",
            )
        if item.get("tool_calls") or item.get("function_call"):
            raise unsupported(f"messages[{i}]", "tool calls are not supported")
        messages.append(Message(role, message_text(item.get("content"), i)))
    if messages[-1].role != "user":
        raise bad_request(
            "the last message must be the user's: it is the question", f"messages[{len(raw) - 1}]"
        )
    if not messages[-1].text.strip():
        raise bad_request("the last user message is empty", f"messages[{len(raw) - 1}].content")
    return messages


def split_document(text: str) -> tuple[str, str]:
    """(document, question) of a first user message (the module's rule): the first split, at its last
    blank line, its last line break or its last words, whose question is short and whose document long."""
    text = text.rstrip()
    for head, tail in question_splits(text):
        question = tail.strip()
        if len(head) >= LONG_MESSAGE_CHARS and 0 < len(question) <= QUESTION_MAX_CHARS:
            return head, question
    return "", text.strip()


def question_splits(text: str):
    """(before, after) each place a first user message's question may start, in the rule's order."""
    for separator in ("\n\n", "\n"):
        head, _, tail = text.rpartition(separator)
        yield head, tail
    yield last_words(text)


def last_words(text: str) -> tuple[str, str]:
    """(before, after) a cut at the first whitespace of the text's last QUESTION_MAX_CHARS characters;
    ("", text) when they hold none (a cut inside a word would change the word)."""
    start = max(len(text) - QUESTION_MAX_CHARS, 0)
    cut = next((i for i in range(start, len(text)) if text[i].isspace()), None)
    return ("", text) if cut is None else (text[:cut], text[cut + 1 :])


def conversation_of(messages: list[Message]) -> Conversation:
    """The document, question and system turn of a conversation (the module's rule)."""
    system = "\n\n".join(m.text for m in messages if m.role in SYSTEM_ROLES).strip()
    turns = [m for m in messages if m.role not in SYSTEM_ROLES]
    if len(system) >= LONG_MESSAGE_CHARS:
        document, system_prompt = system, None
    else:
        document, system_prompt = "", system or None
        if turns[0].role == "user":
            document, first_question = split_document(turns[0].text)
            turns = [Message("user", first_question), *turns[1:]]
    return Conversation(system_prompt, document, transcript(turns))


def transcript(turns: list[Message]) -> str:
    """The question: the last message alone, or the turns so far, labelled, ending with it."""
    if len(turns) == 1:
        return turns[0].text.strip()
    labels = {"user": "User", "assistant": "Assistant"}
    return "\n\n".join(f"{labels[m.role]}: {m.text.strip()}" for m in turns if m.text.strip())
