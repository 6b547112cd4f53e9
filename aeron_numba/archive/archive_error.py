"""The archive client's error: what an archive's ERROR ControlResponse (or a failed connect) tells its client."""

from __future__ import annotations

from aeron_numba.errors import AeronError
from aeron_numba.layout import archive as A

ERROR_NAMES = {code: name for name, code in A.ARCHIVE_ERROR_CODES.items()}


def error_text(response) -> str:
    """An ERROR ControlResponse as text: its archive error code name and message."""
    return f"archive error {ERROR_NAMES.get(response.relevant_id, response.relevant_id)}: {response.error_message}"


class ArchiveError(AeronError):
    """The archive refused a request: ``error_code`` is its archive error code (§6.2, e.g. UNKNOWN_RECORDING)."""

    def __init__(self, message: str, error_code: int = A.ARCHIVE_ERROR_CODES["GENERIC"], correlation_id: int = -1):
        super().__init__(message)
        self.error_code = error_code
        self.error_code_name = ERROR_NAMES.get(error_code, str(error_code))
        self.correlation_id = correlation_id
