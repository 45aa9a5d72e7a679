"""The one exception type of the IR package.

`ir` is used by the converter (which writes IR) and by the inference daemons (which
read IR from disk they do not control), so every problem with an IR file or with a
network handed to the writer is reported as an `IRError` that says what is wrong,
where, and what to do. Callers print `str(err)` as a single `[ ERROR ]` line.
"""

from __future__ import annotations


class IRError(Exception):
    """A problem with an IR file or with a network to be written as IR.

    message: what is wrong and what to do about it.
    faq:     the reference FAQ question number, when it has one.
    where:   the file (and, when known, the layer) the problem is in.
    """

    def __init__(self, message: str, *, faq: int | None = None, where: str | None = None):
        super().__init__(message)
        self.message = message
        self.faq = faq
        self.where = where

    def __str__(self) -> str:
        text = self.message if not self.where else f"{self.where}: {self.message}"
        if self.faq is not None:
            text += f" For more information please refer to Model Optimizer FAQ, question #{self.faq}."
        # One line: the CLI prints errors as single `[ ERROR ]` lines.
        return text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")

    def __reduce__(self):
        # Keep keyword-only attributes when pickled (e.g. across multiprocessing).
        return (_rebuild, (self.message, self.faq, self.where))


def _rebuild(message, faq, where):
    return IRError(message, faq=faq, where=where)
