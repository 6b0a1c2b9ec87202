"""Annotator sign-in for a locally run app: a file of `name:password` or `name:sha256:<hex>` lines
(`#` comments and blank lines ignored), checked by Gradio's login page, and `SignInThrottle`, which
slows and then locks out password guessing (per name and per client address).

The same file names the campaign's roles, one line per role (a name never starts with `@`, so
a file without such lines means what it always meant):

    alice:wonderland
    bob:sha256:<hex>
    carol:secret
    @reviewer carol hf:dana      # may adjudicate disagreements (the Review tab)
    @organiser bob               # the per-annotator table, drift, pausing (Results)

A role names people listed with a password above or below, or Hugging Face names (`hf:<user>`,
who sign in on a Space). `Roles` is what the app and the service read.

    python -m db.users hash alice        # prints alice:sha256:<hex> for the file (prompts for it)
"""
from __future__ import annotations

import getpass
import hashlib
import hmac
import re
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

MAX_USERS = 10_000
MAX_NAME = 64
# A sign-in name is a handle, not a display name: ASCII letters, digits and . _ - @ + only.
# Bidi controls, zero-width characters and homoglyphs (a Cyrillic "а" in "аlice") would otherwise
# reach the organiser's tables looking like another person; a name longer than the database
# column used to sign in and then have every click refused.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")
HF_PREFIX = "hf:"  # Hugging Face sign-in names (ui.annotate.user_of); ':' never occurs in a file's names


def name_problem(name: object) -> str | None:
    """Why `name` cannot be an annotator's name, or None. Names from the annotators file, and
    'hf:<username>' from Hugging Face sign-in."""
    if not isinstance(name, str):
        return "a user name must be text"
    bare = name[len(HF_PREFIX):] if name.startswith(HF_PREFIX) else name
    if not NAME_RE.fullmatch(bare):
        return (f"user name {ascii(name)[:80]} is not allowed: 1-{MAX_NAME} characters, ASCII letters, digits "
                "and . _ - @ + only, starting with a letter or digit")
    return None


def _digest(password: str) -> str:
    return hashlib.sha256(password.encode()).hexdigest()


ROLES = ("reviewer", "organiser")
ROLE_ALIASES = {"reviewer": "reviewer", "reviewers": "reviewer", "organiser": "organiser",
                "organizer": "organiser", "organisers": "organiser", "organizers": "organiser"}


@dataclass(frozen=True)
class Roles:
    """Who may review (adjudicate) and who organises, by sign-in name."""

    reviewers: frozenset[str] = frozenset()
    organisers: frozenset[str] = frozenset()

    def is_reviewer(self, name: str | None) -> bool:
        return bool(name) and name in self.reviewers

    def is_organiser(self, name: str | None) -> bool:
        return bool(name) and name in self.organisers


def _lines(p: Path) -> list[tuple[int, str]]:
    return [(n, raw.strip()) for n, raw in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if raw.strip() and not raw.strip().startswith("#")]


def load_roles(path: str | Path | None) -> Roles:
    """The `@role name ...` lines of the annotators file (module docstring); no file: no roles.
    ValueError names the bad line."""
    if not path:
        return Roles()
    p = Path(path).expanduser()
    if not p.is_file():
        raise FileNotFoundError(f"annotators file {p} does not exist")
    lines = _lines(p)
    listed = {line.partition(":")[0].strip() for _, line in lines if not line.startswith("@")}
    found: dict[str, set[str]] = {r: set() for r in ROLES}
    for n, line in lines:
        if not line.startswith("@"):
            continue
        head, *names = line[1:].split("#", 1)[0].split()
        role = ROLE_ALIASES.get(head.lower())
        if role is None:
            raise ValueError(f"{p}:{n}: unknown role {head!r} (one of {', '.join(ROLES)})")
        if not names:
            raise ValueError(f"{p}:{n}: '@{head}' names nobody")
        for name in names:
            problem = name_problem(name)
            if problem:
                raise ValueError(f"{p}:{n}: {problem}")
            if not name.startswith(HF_PREFIX) and name not in listed:
                raise ValueError(f"{p}:{n}: {name!r} has no 'name:password' line in this file "
                                 f"(a Hugging Face name is written {HF_PREFIX}{name})")
            found[role].add(name)
    return Roles(frozenset(found["reviewer"]), frozenset(found["organiser"]))


def load_users(path: str | Path) -> dict[str, str]:
    """name -> stored secret ('sha256:<hex>' or the plain password). ValueError names the bad
    line. Role lines (`@reviewer ...`) are `load_roles`'."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise FileNotFoundError(f"annotators file {p} does not exist")
    load_roles(p)  # a bad role line is refused at start, like a bad user line
    users: dict[str, str] = {}
    for n, raw in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith("@"):
            continue
        name, sep, secret = line.partition(":")
        name = name.strip()
        if not sep or not name or not secret:
            raise ValueError(f"{p}:{n}: expected 'name:password' or 'name:sha256:<hex>'")
        problem = name_problem(name)
        if problem:
            raise ValueError(f"{p}:{n}: {problem}")
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
        if not isinstance(username, str) or not isinstance(password, str) or len(password) > 4096:
            return False
        secret = users.get(username.strip())
        if secret is None:
            return False
        if secret.startswith("sha256:"):
            return hmac.compare_digest(secret[7:], _digest(password or ""))
        return hmac.compare_digest(secret.encode(), (password or "").encode())

    return check


@dataclass(frozen=True)
class Attempt:
    """What the throttle decided for one sign-in attempt: wait `delay` seconds before answering;
    `locked`: refuse without checking the password (the answer looks like a wrong password)."""

    delay: float
    locked: bool
    reason: str = ""  # for the log: which limit locked it


class SignInThrottle:
    """Failed sign-ins per annotator name and per client address.

    Every attempt counts as a failure from the moment it starts (so a burst of parallel guesses
    is counted before any of them is answered) and is forgiven when the password was right.
    With `n` recent failures (within `window_s`) on the name or the address:
    - n < `free`: answered at once; then a growing delay, `base_delay * 2**(n - free)`, at most
      `max_delay` seconds, before the answer (the caller sleeps without blocking other requests);
    - n >= `lock_name_after` on a name, or `lock_addr_after` on an address: locked for `lock_s`
      seconds — every attempt is refused, the right password too, and the refusal is the same
      "incorrect credentials" as a wrong password.
    A correct password clears the name's failures (not the address's: one valid account must not
    reset a guesser's count). Unknown names are counted like known ones, so the throttle does not
    reveal which names exist. State is in memory, per app process (bounded to `max_keys`).
    """

    def __init__(self, free: int = 3, base_delay: float = 0.5, max_delay: float = 8.0,
                 lock_name_after: int = 10, lock_addr_after: int = 50, window_s: float = 900.0,
                 lock_s: float = 900.0, max_keys: int = 100_000,
                 clock: Callable[[], float] = time.monotonic):
        self.free, self.base_delay, self.max_delay = free, base_delay, max_delay
        self.lock_name_after, self.lock_addr_after = lock_name_after, lock_addr_after
        self.window_s, self.lock_s, self.max_keys = window_s, lock_s, max_keys
        self.clock = clock
        self._fails: dict[tuple[str, str], deque[float]] = {}
        self._locked: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _keys(name: str, addr: str | None) -> tuple[tuple[str, str], tuple[str, str]]:
        return ("name", (name or "").strip()[:MAX_NAME]), ("addr", addr or "unknown")

    def _recent(self, key: tuple[str, str], now: float) -> deque[float]:
        q = self._fails.get(key)
        if q is None:
            if len(self._fails) >= self.max_keys:
                self._prune(now)
            q = self._fails[key] = deque()
        while q and now - q[0] > self.window_s:
            q.popleft()
        return q

    def _prune(self, now: float) -> None:
        for k in [k for k, q in self._fails.items() if not q or now - q[-1] > self.window_s]:
            del self._fails[k]
        for k in [k for k, until in self._locked.items() if until <= now]:
            del self._locked[k]
        while len(self._fails) >= self.max_keys:  # still full: forget the oldest
            del self._fails[min(self._fails, key=lambda k: self._fails[k][-1] if self._fails[k] else 0)]

    def begin(self, name: str, addr: str | None) -> Attempt:
        """Count this attempt (as a failure until `success`) and say how to answer it."""
        now = self.clock()
        kname, kaddr = self._keys(name, addr)
        with self._lock:
            for key in (kname, kaddr):
                until = self._locked.get(key)
                if until is not None and until > now:
                    return Attempt(0.0, True, f"{key[0]} locked for {until - now:.0f} s more")
            fn, fa = self._recent(kname, now), self._recent(kaddr, now)
            n = max(len(fn), len(fa))
            fn.append(now)
            fa.append(now)
            if len(fn) > self.lock_name_after or len(fa) > self.lock_addr_after:
                key, limit = (kname, self.lock_name_after) if len(fn) > self.lock_name_after \
                    else (kaddr, self.lock_addr_after)
                self._locked[key] = now + self.lock_s
                return Attempt(0.0, True, f"{limit} failed attempts on this {key[0]}: locked for "
                               f"{self.lock_s:.0f} s")
        delay = 0.0 if n < self.free else min(self.base_delay * 2 ** (n - self.free), self.max_delay)
        return Attempt(delay, False)

    def success(self, name: str, addr: str | None) -> None:
        """The password was right: forgive this attempt, clear the name's failures."""
        now = self.clock()
        kname, kaddr = self._keys(name, addr)
        with self._lock:
            self._fails.pop(kname, None)
            fa = self._recent(kaddr, now)
            if fa:
                fa.pop()

    def failures(self, name: str, addr: str | None) -> tuple[int, int]:
        """(recent failures on the name, on the address): for tests and logs."""
        now = self.clock()
        kname, kaddr = self._keys(name, addr)
        with self._lock:
            return len(self._recent(kname, now)), len(self._recent(kaddr, now))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "hash":
        print("usage: python -m db.users hash NAME", file=sys.stderr)
        return 2
    print(f"{args[1]}:sha256:{_digest(getpass.getpass(f'password for {args[1]}: '))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
