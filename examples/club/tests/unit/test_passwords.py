from __future__ import annotations

import pytest
from argon2 import extract_parameters
from signoff_club.passwords import (
    MEMORY_KIB,
    hash_password,
    needs_rehash,
    scrypt_hash,
    verify_password,
)


def test_a_hash_verifies_only_its_password() -> None:
    stored = hash_password("demo-manager")
    assert stored.startswith("$argon2id$")
    assert verify_password("demo-manager", stored)
    assert not verify_password("demo-viewer", stored)


def test_the_work_factor_is_at_least_owasps_minimum_for_argon2id() -> None:
    """OWASP Password Storage Cheat Sheet: argon2id, m = 19 MiB, t = 2, p = 1 at least."""
    found = extract_parameters(hash_password("x"))
    assert found.type.name == "ID"
    assert found.memory_cost >= 19 * 1024 == MEMORY_KIB
    assert found.time_cost >= 2 and found.parallelism >= 1
    assert not needs_rehash(hash_password("x"))


def test_every_hash_has_its_own_salt() -> None:
    assert hash_password("same") != hash_password("same")


def test_an_old_scrypt_hash_still_verifies_and_needs_rehashing() -> None:
    old = scrypt_hash("demo-manager", b"0123456789abcdef")
    assert old.startswith("scrypt$16384$8$1$")
    assert verify_password("demo-manager", old)
    assert not verify_password("demo-viewer", old)
    assert needs_rehash(old)


def test_weaker_argon2_parameters_need_rehashing() -> None:
    from argon2 import PasswordHasher

    weak = PasswordHasher(time_cost=1, memory_cost=8 * 1024, parallelism=1).hash("x")
    assert verify_password("x", weak) and needs_rehash(weak)


@pytest.mark.parametrize(
    "stored", ["", "bcrypt$1$2$3$4$5", "scrypt$a$b$c$d$e", "$argon2id$v=19$nonsense"]
)
def test_a_malformed_hash_verifies_nothing(stored: str) -> None:
    assert not verify_password("x", stored)
