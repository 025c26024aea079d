"""Kafka's principal: a type and a name, written `User:alice` in ACLs, `super.users` and logs."""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """`User:alice` -> KafkaPrincipal("User", "alice"); the name may itself hold colons (a
        certificate's distinguished name rarely does, a wildcard `User:*` is a name too)."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(f"{text!r} is not a principal (expected Type:name, e.g. User:alice)")
        return cls(principal_type, name)

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls(USER_TYPE, name)

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


# Kafka's KafkaPrincipal.ANONYMOUS: every connection on a PLAINTEXT listener, and a TLS
# connection without a client certificate.
ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
