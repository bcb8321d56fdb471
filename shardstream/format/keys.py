"""The key/extension rule (webdataset's): the key runs up to the first dot after the last slash."""

from __future__ import annotations

from ..errors import KeyRuleError

_FORBIDDEN_CHARS = ("\x00", "\n", "\r", "\\")


def split_member_name(name: str) -> tuple[str, str]:
    """Split a tar member name into (key, extension); the extension may itself hold dots ("0.jpg")."""
    slash = name.rfind("/")
    dot = name.find(".", slash + 1)
    if dot < 0:
        return name, ""
    return name[:dot], name[dot + 1 :]


def normalize_extension(ext: str) -> str:
    return ext.lower()


def check_key(key: str) -> str:
    """Return ``key`` if it reads back as itself and is safe as a tar path, else raise KeyRuleError."""
    if not key:
        raise KeyRuleError("empty key")
    if any(ch in key for ch in _FORBIDDEN_CHARS):
        raise KeyRuleError(f"key {key!r} holds a NUL, newline, carriage return or backslash")
    if key.startswith("/"):
        raise KeyRuleError(f"key {key!r} is an absolute path; tar member names must be relative")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:  # a file name that is not UTF-8 (a lone surrogate from the OS): no tar name
        raise KeyRuleError(f"key {key!r} is not valid UTF-8 (a file name in another encoding?)") from None
    parts = key.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise KeyRuleError(f"key {key!r} has an empty, '.' or '..' path component")
    last = parts[-1]
    if "." in last:
        read_back = split_member_name(f"{key}.ext")[0]
        raise KeyRuleError(
            f"key {key!r} has a dot after its last slash, so readers would split it as key "
            f"{read_back!r}; use --key-field to pick another field, or rename the key"
        )
    return key


def member_name(key: str, ext: str) -> str:
    return f"{key}.{ext}"
