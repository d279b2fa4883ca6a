"""The shared component secret: a random token in a file only its owner can read.

Every component daemon demands this token in the Pyro5 connection handshake, so reading the file is
what separates a component from any other local process. The file must therefore be mode 0600 and
owned by the account the components run as (or root); `read_secret` refuses anything looser rather
than trusting a token other users may have read.
"""

import contextlib
import os
import secrets
import stat
import tempfile
from pathlib import Path

from cobaltlite.errors import InputError
from cobaltlite.rpc.errors import SecurityError

TOKEN_BYTES = 32
# A hand-written secret shorter than this is too easy to guess; generated ones are 64 hex digits.
MIN_SECRET_CHARS = 32


def create_secret(path: str | Path, *, overwrite: bool = False) -> str:
    """Write a fresh random token (32 bytes, hex) to `path` with mode 0600 and return it.

    The parent directory is created with mode 0700 when missing. The file is written to a temporary
    name in the same directory and moved into place, so a reader never sees a partial token. An
    existing file is kept (InputError) unless `overwrite` is true: replacing the secret locks every
    running component out until it is restarted.
    """
    path = Path(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    token = secrets.token_hex(TOKEN_BYTES)
    # mkstemp creates the file 0600 whatever the umask, so the token is never readable by others.
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as tmp:
            tmp.write(token + "\n")
            tmp.flush()
            os.fsync(tmp.fileno())
        if overwrite:
            os.replace(tmp_name, path)
        else:
            # link() fails if the name exists, so the check and the creation are one step.
            try:
                os.link(tmp_name, path)
            except FileExistsError:
                raise InputError(
                    f"secret file {path} already exists; refusing to overwrite it "
                    "(running components would no longer accept each other)"
                ) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
    _fsync_directory(path.parent)
    return token


def read_secret(path: str | Path) -> str:
    """Return the token in `path` after checking that nobody but its owner can read or change it.

    Refused with SecurityError: a file with any group or other permission bit, a file owned by an
    account other than the current user or root, a symbolic link, or anything but a regular file.
    The checks are made on the opened file, so the file cannot be swapped between check and read.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError(f"secret file {path} does not exist") from None
    except OSError as exc:
        # O_NOFOLLOW reports a symbolic link as ELOOP.
        raise SecurityError(f"cannot open secret file {path} safely: {exc.strerror}") from None
    with os.fdopen(fd, encoding="ascii") as file:
        info = os.fstat(file.fileno())
        _check_secret_file(path, info)
        token = file.read().strip()
    if len(token) < MIN_SECRET_CHARS:
        raise SecurityError(
            f"secret file {path} holds {len(token)} characters; at least {MIN_SECRET_CHARS} "
            "are needed (create a new one with create_secret)"
        )
    return token


def _check_secret_file(path: Path, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise SecurityError(f"secret file {path} is not a regular file")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise SecurityError(
            f"secret file {path} has mode {mode:04o}; group and other users must have no access "
            f"(run: chmod 600 {path})"
        )
    if info.st_uid not in (os.geteuid(), 0):
        raise SecurityError(
            f"secret file {path} is owned by uid {info.st_uid}; it must belong to uid "
            f"{os.geteuid()} (the current user) or root"
        )


def _fsync_directory(directory: Path) -> None:
    # Makes the new directory entry itself durable, not only the file's contents.
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
