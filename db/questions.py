"""The annotation questions, declared once: each one's values, the words on its buttons, its
hotkeys and its help. The models (the values a judgment may hold), the Annotate tab (buttons,
keys, the status's words), the report and the load bench read them from here."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Choice:
    value: str  # what the database stores
    label: str  # the button's words
    key: str  # its hotkey


@dataclass(frozen=True)
class Question:
    name: str  # the judgment's column
    prompt: str
    choices: tuple[Choice, ...]

    @property
    def values(self) -> tuple[str, ...]:
        return tuple(c.value for c in self.choices)

    def label(self, value: str | None) -> str:
        """The button's words for a stored value (the value itself when unknown)."""
        return next((c.label for c in self.choices if c.value == value), str(value))


IDENTITY = Question("identity", "Does the candidate show the same character as the reference?", (
    Choice("yes", "Same character", "1"), Choice("no", "Different character", "2"),
    Choice("cant_tell", "Can't tell", "3")))
EDIT = Question("edit", "Does the candidate satisfy the edit?", (
    Choice("yes", "Edit satisfied", "Q"), Choice("partial", "Partly", "W"), Choice("no", "Not satisfied", "E")))
QUESTIONS = (IDENTITY, EDIT)


def value_of(label: str) -> str | None:
    """The stored value behind a button's words, in any question (None when no button says it)."""
    return next((c.value for q in QUESTIONS for c in q.choices if c.label == label), None)
