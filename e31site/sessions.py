"""Django's database sessions, but a session cookie that no key of ours could be is no session: PostgreSQL
refuses a NUL in a query, which Django's own store would answer with a 500."""

from django.contrib.sessions.backends.base import VALID_KEY_CHARS
from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore

KEY_CHARS = frozenset(VALID_KEY_CHARS)


class SessionStore(DatabaseSessionStore):
    def _validate_session_key(self, key: str | None) -> bool:
        return bool(key) and len(key or "") >= 8 and set(key or "") <= KEY_CHARS
