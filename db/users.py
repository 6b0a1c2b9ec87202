"""Annotator sign-in for a locally run app: a file of `name:password` or `name:sha256:<hex>` lines
(`#` comments and blank lines ignored), checked by Gradio's login page.

    python -m db.users hash alice        # prints alice:sha256:<hex> for the file (prompts for it)
"""
from __future__ import annotations

import getpass
import hashlib
import hmac
import sys
from pathlib import Path
from typing import Callable

MAX_USERS = 10_000


def _digest(password: str) -> str:
    return hashlib.sha256(password.encode()).hexdigest()


def load_users(path: str | Path) -> dict[str, str]:
    """name -> stored secret ('sha256:<hex>' or the plain password). ValueError names the bad line."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise FileNotFoundError(f"annotators file {p} does not exist")
    users: dict[str, str] = {}
    for n, raw in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, secret = line.partition(":")
        name = name.strip()
        if not sep or not name or not secret:
            raise ValueError(f"{p}:{n}: expected 'name:password' or 'name:sha256:<hex>'")
        if name in users:
            raise ValueError(f"{p}:{n}: user {name!r} listed twice")
        if secret.startswith("sha256:") and len(secret) != 7 + 64:
            raise ValueError(f"{p}:{n}: a sha256 entry needs 64 hex digits")
        users[name] = secret
        if len(users) > MAX_USERS:
            raise ValueError(f"{p}: more than {MAX_USERS} users")
    if not users:
        raise ValueError(f"{p} lists no annotators")
    return users


def checker(path: str | Path) -> Callable[[str, str], bool]:
    """Gradio's `auth=` callable for the users in `path` (read once, at launch)."""
    users = load_users(path)

    def check(username: str, password: str) -> bool:
        secret = users.get((username or "").strip())
        if secret is None:
            return False
        if secret.startswith("sha256:"):
            return hmac.compare_digest(secret[7:], _digest(password or ""))
        return hmac.compare_digest(secret.encode(), (password or "").encode())

    return check


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "hash":
        print("usage: python -m db.users hash NAME", file=sys.stderr)
        return 2
    print(f"{args[1]}:sha256:{_digest(getpass.getpass(f'password for {args[1]}: '))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
