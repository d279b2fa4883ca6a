"""Exceptions shared by every component; each one carries a message a user can act on."""


class CobaltliteError(Exception):
    """Base class: the message says what is wrong and where."""


class InputError(CobaltliteError):
    """A file or option the user gave cannot be used (names the file and line, or the option)."""


class MachineError(CobaltliteError):
    """A machine description is inconsistent or a placement request is impossible."""


class DatabaseInUseError(InputError):
    """The `database:` given is already claimed by another queue manager, its only writer."""
