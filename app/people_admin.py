"""The admin's people and API keys: every action needs the admin session and goes to the admin log with
who did it. People made here log in to the pages (as `web.users` do); the people of the settings file
are shown, and changed only there. The last admin cannot be removed or made a user; with a configured
admin password (`web.admin_password_hash`) there is always one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.admin_sessions import AdminSessions
from app.auth import hash_password
from app.errors import NotFound, Refused
from app.people import ROLES, ApiKey, PeopleStore, Role, owner_of
from app.settings import Settings

_LONGEST_NAME = 64
_SHORTEST_PASSWORD = 8


@dataclass(frozen=True)
class NewKey:
    secret: str  # shown once: only its hash is kept
    key: ApiKey


class PeopleAdmin:
    def __init__(
        self,
        *,
        people: PeopleStore,
        sessions: AdminSessions,
        settings: Settings,
        record: Callable[..., None],
    ) -> None:
        self.store, self.sessions, self.settings, self._record = people, sessions, settings, record
        self.on_end: list[Callable[[str], None]] = []  # each ends a person's page sessions (app/page_logins.py)
        self.logins_on = True  # whether the pages ask for logins at this start (app/server.py says)
        self._upgrade()

    def _upgrade(self) -> None:
        """The configured admin password becomes that of the first admin, a person named `admin` (once, in
        place: the nameless login with it keeps working). Such a person alone does not switch page logins on."""
        configured = self.settings.web.admin_password_hash
        free = "admin" not in self.settings.web.users and self.store.person("admin") is None
        if configured and free and self.store.add("admin", configured, "admin", upgraded=True):
            self._record("start", "add person", "admin (admin), from web.admin_password_hash")

    # -- what the pages' logins and the key layers read -------------------------------------

    def login_hash(self, name: str) -> str | None:
        """The password hash of a person made here who may log in (None: no such person, or disabled)."""
        found = self.store.person(name)
        return None if found is None or found.disabled else self.store.password_hash(name)

    def must_change(self, name: str) -> bool:
        """Whether this person's password was reset: they set a new one before anything else."""
        found = self.store.person(name)
        return found is not None and found.must_change

    def owner_of_login(self, name: str) -> str:
        """Whose rows a page login's are: a person made here by their stable id (`person:<id>`: kept through a
        rename, never given to the next person of the same name); a login of the settings file by its name."""
        found = self.store.person(name)
        return owner_of(found.id) if found is not None and found.id else f"user:{name}"

    def any_people(self) -> bool:
        """Whether anyone logs in to the pages (the `admin` made of the admin password alone does not count)."""
        return any(not p.upgraded for p in self.store.people())

    def key_owner(self, secret: str) -> str | None:
        """The person a live key made here belongs to ("" for the configured admin's; None: no such key)."""
        found = self.store.key_owner(secret)
        return None if found is None else found[1]

    def check_holder(self, token: str | None, login: str | None) -> None:
        """AdminDenied unless the page login `login` opened the session of `token`."""
        self.sessions.check_holder(token, login)

    def _who(self, token: str | None, where: str) -> str:
        return self.sessions.named(token, where)

    # -- people -----------------------------------------------------------------------------

    def people(self, token: str | None) -> list[dict[str, Any]]:
        """Admin only: every login, made here or in the settings file, with its role."""
        self.sessions.check(token)
        rows: list[dict[str, Any]] = []
        if self.settings.web.admin_password_hash:
            rows.append({"name": "(admin password)", "role": "admin", "from": "the settings file", "changed": ""})
        made = self.store.people()
        for person in made:
            role = person.role + (" (disabled)" if person.disabled else "")
            role += " (must set a password)" if person.must_change else ""
            rows.append({"name": person.name, "role": role, "from": "this page", "changed": person.changed_at})
        for name in sorted(set(self.settings.web.users) - {p.name for p in made}):
            rows.append({"name": name, "role": "user", "from": "the settings file (web.users)", "changed": ""})
        return rows

    def add_person(self, token: str | None, name: str, password: str, role: str, *, where: str) -> str:
        who = self._who(token, where)
        name, checked = _name(name), _role(role)
        _password(password)
        if name in self.settings.web.users:
            raise Refused(f"{name} is a login of the settings file (web.users): choose another name")
        if not self.store.add(name, hash_password(password), checked):
            raise Refused(f"there is already a person named {name}")
        self._record(who, "add person", f"{name} ({checked})")
        role = "an admin" if checked == "admin" else "a user"
        if not self.logins_on and checked == "user":
            return (
                f"✅ {name} is added, as {role}. ⚠ The pages ask for logins only after a restart: this box "
                "started without people, so until then every browser is its own (and no one logs in)."
            )
        return f"✅ {name} can log in now, as {role}."

    def reset_password(self, token: str | None, name: str, password: str, *, where: str) -> str:
        who = self._who(token, where)
        _password(password)
        name = self._made_here(name)
        revoked = self.store.reset(name, hash_password(password))
        if revoked is None:
            raise NotFound(f"there is no person named {name!r}")
        self._end(name)
        self._record(who, "reset password", f"{name}: sessions ended, API keys revoked ({revoked}); they set a new one")
        return (
            f"✅ {name}'s password is reset: they log in with it once and then set a new one (at /password). Every "
            f"API key of theirs is revoked ({revoked}), as a reset usually follows a compromise: they make new ones."
        )

    def change_own_password(self, name: str, password: str, new: str, *, client: str) -> str:
        """A person sets a new password with their current one (throttled as the logins are); what a reset
        password leads to before anything else may be done."""
        self.sessions.verify(name, password, client=client)
        _password(new)
        if new == password:
            raise Refused("Choose a password other than the one you were given.")
        self.store.change(name, password_hash=hash_password(new), must_change=False)
        self._end(name)
        self._record(f"{name} ({client})", "set own password", name)
        return f"✅ {name}'s new password is set: log in with it."

    def rename(self, token: str | None, name: str, new: str, *, where: str) -> str:
        who = self._who(token, where)
        name, new = self._made_here(name), _name(new)
        if new in self.settings.web.users:
            raise Refused(f"{new} is a login of the settings file (web.users): choose another name")
        if not self.store.rename(name, new):
            raise Refused(f"there is no person named {name!r}, or {new!r} is taken")
        self._end(name)
        self._record(who, "rename person", f"{name} → {new}: their conversations, uploads and keys stay theirs")
        return f"✅ {name} is {new} now (their conversations and keys stay theirs); they log in with the new name."

    def set_disabled(self, token: str | None, name: str, disabled: bool, *, where: str) -> str:
        who = self._who(token, where)
        name = self._made_here(name)
        if disabled and self.store.role(name) == "admin":
            self._keep_an_admin(name)
        if not self.store.change(name, disabled=disabled):
            raise NotFound(f"there is no person named {name!r}")
        if disabled:
            self._end(name)
        self._record(who, "disable person" if disabled else "enable person", name)
        if disabled:
            return f"✅ {name} is disabled: their sessions ended, their keys are refused; nothing of theirs is deleted."
        return f"✅ {name} is enabled again: their password and keys work as before."

    def end_sessions(self, token: str | None, name: str, *, where: str) -> str:
        who = self._who(token, where)
        name = _name(name)
        if self.store.person(name) is None and name not in self.settings.web.users:
            raise NotFound(f"there is no person named {name!r}")
        self._end(name)
        self._record(who, "end sessions", name)
        return f"✅ {name}'s sessions are ended: they log in again."

    def set_role(self, token: str | None, name: str, role: str, *, where: str) -> str:
        who = self._who(token, where)
        checked, name = _role(role), self._made_here(name)
        if checked == "user" and self.store.role(name) == "admin":
            self._keep_an_admin(name)
        if not self.store.change(name, role=checked):
            raise NotFound(f"there is no person named {name!r}")
        self._record(who, "set role", f"{name} → {checked}")
        return f"✅ {name} is {'an admin' if checked == 'admin' else 'a user'} now."

    def remove_person(self, token: str | None, name: str, *, where: str) -> str:
        who = self._who(token, where)
        name = self._made_here(name)
        if self.store.role(name) == "admin":
            self._keep_an_admin(name)
        if not self.store.remove(name):
            raise NotFound(f"there is no person named {name!r}")
        self._end(name)
        self._record(who, "remove person", f"{name}: their sessions ended, their API keys revoked, their rows no one's")
        return (
            f"✅ {name} is removed; their sessions ended and their API keys are revoked. Their conversations and "
            "extraction runs are no one's now: kept in the database (and its backups), seen by no one, not by a "
            f"new person named {name} either; the documents they uploaded stay, for an admin alone to delete."
        )

    def _made_here(self, name: str) -> str:
        name = _name(name)
        if name in self.settings.web.users and self.store.role(name) is None:
            raise Refused(f"{name} is a login of the settings file (web.users): change it there")
        return name

    def _keep_an_admin(self, name: str) -> None:
        if not self.settings.web.admin_password_hash and self.store.admins() <= 1:
            raise Refused(f"{name} is the last admin: make another person an admin first")

    def _end(self, name: str) -> None:
        self.sessions.end(name)
        for end in self.on_end:
            end(name)

    # -- API keys ---------------------------------------------------------------------------

    def keys(self, token: str | None) -> list[ApiKey]:
        """Admin only: every key made here, revoked ones too (never their secrets)."""
        self.sessions.check(token)
        return self.store.keys()

    def create_key(self, token: str | None, name: str, owner: str, *, where: str) -> NewKey:
        """A new key for `owner` (a person made here, or "" for the admin who makes it)."""
        session = self.sessions.check(token)
        who = self._who(token, where)
        label = " ".join(str(name or "").split())[:_LONGEST_NAME]
        if not label:
            raise Refused("Name the key first (what or who uses it: an agent, a script).")
        owner = str(owner or "").strip() or session.name
        if owner and self.store.role(owner) is None:
            raise Refused(f"there is no person named {owner!r} here to own the key")
        secret, key = self.store.create_key(label, owner=owner, created_by=session.name or "admin")
        self._record(who, "create API key", f"{label} ({key.shown}) for {owner or 'the configured admin'}")
        return NewKey(secret, key)

    # -- a person's own keys (their page login, no admin session) ------------------------------

    def _own(self, login: str | None) -> str:
        name = str(login or "")
        if not name:
            raise Refused("API keys of your own need a page login (this box has none): ask the admin for a key.")
        if self.store.active_role(name) is None and name not in self.settings.web.users:
            raise Refused(f"{name} may not make API keys here")
        return name

    def own_keys(self, login: str | None) -> list[ApiKey]:
        """The keys of the logged-in person (their secrets never)."""
        name = self._own(login)
        return [k for k in self.store.keys() if k.owner == name]  # noqa: SIM118 (a store, not a dict)

    def create_own_key(self, login: str | None, name: str, *, where: str) -> NewKey:
        """A new key of the logged-in person's own: what a program does with it is theirs."""
        owner = self._own(login)
        label = " ".join(str(name or "").split())[:_LONGEST_NAME]
        if not label:
            raise Refused("Name the key first (what or who uses it: an agent, a script).")
        secret, key = self.store.create_key(label, owner=owner, created_by=owner)
        self._record(f"{owner} ({where})", "create API key", f"{label} ({key.shown}) for {owner}, their own")
        return NewKey(secret, key)

    def revoke_own_key(self, login: str | None, key_id: str, *, where: str) -> str:
        owner = self._own(login)
        if str(key_id or "") not in {k.id for k in self.own_keys(owner) if not k.revoked_at}:
            raise NotFound(f"you have no live API key {key_id!r}")
        key = self.store.revoke(str(key_id))
        assert key is not None
        self._record(f"{owner} ({where})", "revoke API key", f"{key.name} ({key.shown}), their own")
        return f"✅ The key {key.name} ({key.shown}) is revoked: it is refused from now on."

    def revoke_key(self, token: str | None, key_id: str, *, where: str) -> str:
        who = self._who(token, where)
        key = self.store.revoke(str(key_id or "").strip())
        if key is None:
            raise NotFound(f"there is no live API key {key_id!r}")
        self._record(who, "revoke API key", f"{key.name} ({key.shown})")
        return f"✅ The key {key.name} ({key.shown}) is revoked: it is refused from now on."


def _name(name: str) -> str:
    name = str(name or "").strip()
    if not name or len(name) > _LONGEST_NAME or any(c.isspace() or not c.isprintable() for c in name):
        raise Refused(f"A name is 1 to {_LONGEST_NAME} characters without spaces.")
    if name.startswith("("):
        raise Refused("A name may not start with '('.")
    return name


def _role(role: str) -> Role:
    for known in ROLES:
        if role == known:
            return known
    raise Refused(f"A role is one of {', '.join(ROLES)}, not {role!r}.")


def _password(password: str) -> None:
    if not isinstance(password, str) or len(password) < _SHORTEST_PASSWORD:
        raise Refused(f"A password has at least {_SHORTEST_PASSWORD} characters.")
