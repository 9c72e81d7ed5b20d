"""How `serve` reads a conversation: the document, the question and the system turn (the rule in
engine/serve/conversation.py), and the stop-sequence scanner."""

from __future__ import annotations

import pytest

from engine.serve.conversation import (
    LONG_MESSAGE_CHARS,
    QUESTION_MAX_CHARS,
    conversation_of,
    parse_messages,
)
from engine.serve.errors import ApiError
from engine.serve.stops import StopScanner

DOC = "Chapter one. " * (LONG_MESSAGE_CHARS // 10)


def read(*messages: tuple[str, str]):
    return conversation_of(parse_messages([{"role": r, "content": c} for r, c in messages]))


def test_the_first_user_message_holds_the_document_and_its_last_paragraph_is_the_question():
    c = read(("user", f"{DOC}\n\nWhat is chapter one?"))
    assert c.document == DOC and c.question == "What is chapter one?" and c.system_prompt is None


def test_every_turn_of_one_conversation_has_the_same_document():
    first = read(("system", "Be brief."), ("user", f"{DOC}\n\nQ1?"))
    later = read(("system", "Be brief."), ("user", f"{DOC}\n\nQ1?"), ("assistant", "A1."), ("user", "Q2?"))
    assert first.document == later.document == DOC
    assert first.system_prompt == later.system_prompt == "Be brief."
    assert later.question == "User: Q1?\n\nAssistant: A1.\n\nUser: Q2?"


def test_a_long_system_message_is_the_document():
    c = read(("system", DOC), ("user", "Summarize it."))
    assert c.document == DOC.strip() and c.question == "Summarize it." and c.system_prompt is None


def test_a_short_message_has_no_document():
    assert read(("user", "Hello\n\nthere")).document == ""
    assert read(("user", "x" * (2 * LONG_MESSAGE_CHARS))).question == "x" * (2 * LONG_MESSAGE_CHARS)


MANUAL = "".join(f"Line {i} of the manual, by its authors.\n" for i in range(100))  # no blank line


def split_in_order(text: str, c) -> bool:
    """The message's text is the document, then whitespace, then the question: only the split moved."""
    between = text[len(c.document) : len(text.rstrip()) - len(c.question)]
    return text.startswith(c.document) and text.rstrip().endswith(c.question) and not between.strip()


def test_a_message_of_piped_text_and_a_question_holds_a_document():
    """`llm "Who wrote it?" < manual.txt` sends the file, a space and the prompt as one message."""
    text = MANUAL + " Who wrote the manual?"
    c = read(("user", text))
    assert c.document == MANUAL.rstrip("\n") and c.question == "Who wrote the manual?"
    assert split_in_order(text, c)


def test_piped_text_without_a_final_line_break_gives_its_last_line_to_the_question():
    text = MANUAL.rstrip("\n") + " Who wrote the manual?"
    c = read(("user", text))
    assert c.question == "Line 99 of the manual, by its authors. Who wrote the manual?"
    assert c.document == "".join(MANUAL.splitlines(keepends=True)[:99]).rstrip("\n")
    assert split_in_order(text, c)


def test_a_message_with_no_line_break_keeps_its_last_words_as_the_question():
    text = "Chapter one. " * (LONG_MESSAGE_CHARS // 4) + "Who wrote it?"
    c = read(("user", text))
    assert (
        c.question.endswith("Who wrote it?")
        and QUESTION_MAX_CHARS - 20 < len(c.question) <= QUESTION_MAX_CHARS
    )
    assert c.document + " " + c.question == text  # cut at a space, between whole words


def test_a_long_last_paragraph_gives_its_last_line_to_the_question():
    paragraph = MANUAL.replace("\n", " ") * 2  # one long paragraph
    text = f"{DOC}\n\n{paragraph}\nWho wrote it?"
    c = read(("user", text))
    assert c.question == "Who wrote it?" and split_in_order(text, c)


def test_text_parts_are_joined():
    messages = parse_messages(
        [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    )
    assert messages[0].text == "a\nb"


@pytest.mark.parametrize(
    "raw",
    [
        [],
        [{"role": "assistant", "content": "x"}],
        [{"role": "user", "content": " "}],
        [{"role": "tool", "content": "x"}],
        ["text"],
        [{"role": "user", "content": 3}],
    ],
)
def test_conversations_the_engine_cannot_answer_are_refused(raw):
    with pytest.raises(ApiError) as error:
        parse_messages(raw)
    assert error.value.status == 400


def test_a_stop_sequence_split_over_pieces_is_found_and_held_back():
    scanner = StopScanner(("STOP",))
    assert [scanner.feed(p) for p in ("go ", "ST", "OP", " more")] == ["go ", "", "", ""]
    assert scanner.stopped and scanner.flush() == ""
    scanner = StopScanner(("STOP",))
    assert scanner.feed("a ST") == "a " and scanner.feed("ar") == "STar" and scanner.flush() == ""
