from __future__ import annotations

from signoff_club.passwords import hash_password, verify_password


def test_a_hash_verifies_only_its_password() -> None:
    stored = hash_password("demo-manager")
    assert stored.startswith("scrypt$")
    assert verify_password("demo-manager", stored)
    assert not verify_password("demo-viewer", stored)


def test_every_hash_has_its_own_salt() -> None:
    assert hash_password("same") != hash_password("same")


def test_a_malformed_hash_verifies_nothing() -> None:
    assert not verify_password("x", "")
    assert not verify_password("x", "bcrypt$1$2$3$4$5")
    assert not verify_password("x", "scrypt$a$b$c$d$e")
