"""The one error type. Library code raises FolioError with a sentence that names the fix;
only cli.py renders it (as `folio: ...` on stderr) and turns it into an exit code."""


class FolioError(Exception):
    """An expected failure, explained in one sentence for the user."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code
