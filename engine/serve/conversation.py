"""A chat conversation (OpenAI `messages`) as the engine's document and question.

The engine answers a question about a document; its prompt is the system turn, then the
document, then the question. The rule, chosen so that every turn of one conversation about one
document gives the same document text (and so reuses the engine's cached prefixes):

- system and developer messages, joined, are the system turn; when together they are at least
  LONG_MESSAGE_CHARS long, they are the document instead (the server's system prompt stays);
- otherwise the first user message holds the document: its text up to its last blank line is
  the document, its last paragraph is its question (a first message with no blank line, or a
  short one, has no document: all of it is the question);
- the last message must be the user's: it is the question. Between the document and it, the
  earlier turns (the first message's question, the assistant's answers, the user's follow-ups)
  come before it as a transcript ("User: ..." / "Assistant: ..."), so the model sees them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.serve.errors import bad_request, unsupported

LONG_MESSAGE_CHARS = 2000  # a system message this long (or a first user message's head) is the document
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
    """(document, question) of a first user message: split at its last blank line, when what comes
    before it is long enough to be a document."""
    head, sep, tail = text.rstrip().rpartition("\n\n")
    if not sep or len(head) < LONG_MESSAGE_CHARS or not tail.strip():
        return "", text.strip()
    return head, tail.strip()


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
