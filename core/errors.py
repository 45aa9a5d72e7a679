"""User-facing errors.

An `Error` is a mistake in the user's input (model, options). The CLI prints it as
`[ ERROR ]  message` plus the FAQ pointer and exits 1 without a traceback; any other
exception is an internal error and gets a banner with the traceback.
"""


class Error(Exception):
    """A problem the user can fix. `faq` is the reference FAQ question number."""

    def __init__(self, message: str, *args, faq: int | None = None):
        if args:
            message = message.format(*args)
        super().__init__(message)
        self.message = message
        self.faq = faq

    def __str__(self):
        text = self.message
        if self.faq is not None:
            text += "\n For more information please refer to Model Optimizer FAQ, question #{}.".format(self.faq)
        return text


class FrameworkError(Error):
    """Raised when the input model cannot be read (bad file, bad syntax)."""


class ShapeError(Error):
    """Raised when shapes cannot be inferred or do not agree."""
