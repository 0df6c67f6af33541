"""cryptography's X.509 package, imported by PyJWT, runs only when something reads it.

Each case runs in a fresh interpreter: this one imported PyJWT, and so X.509, long ago.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_token_is_signed_and_checked_without_running_x509_and_a_certificate_loads_it() -> None:
    out = _run(
        """
        import sys
        from signoff_runtime import deferred
        print(deferred.install(), deferred.install())
        import jwt
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        key = Ed25519PrivateKey.generate()
        token = jwt.encode({"sub": "u1"}, key, algorithm="EdDSA")
        claims = jwt.decode(token, key.public_key(), algorithms=["EdDSA"])
        print(claims["sub"], deferred.is_deferred("cryptography.x509"))
        print("cryptography.x509.base" in sys.modules)
        import cryptography
        from cryptography import x509
        print(x509 is cryptography.x509 is sys.modules["cryptography.x509"])
        print(x509.load_der_x509_certificate.__name__, "cryptography.x509.base" in sys.modules)
        print(deferred.is_deferred("cryptography.x509"))
        """
    )
    assert out == [
        *("True", "False"),  # installed once only
        *("u1", "True"),  # a token made and checked; X.509 imported, its code not run
        "False",  # nor any of its modules
        "True",  # one module object, named on its package as an import names it
        *("load_der_x509_certificate", "True"),  # the first read runs the real module
        "False",  # which is an ordinary module from then on
    ], out


def test_without_it_pyjwt_runs_x509() -> None:
    """The control: what ``install`` saves is there to save."""
    out = _run(
        """
        import sys
        import jwt
        print("cryptography.x509.base" in sys.modules)
        """
    )
    assert out == ["True"], out


def test_installing_imports_nothing() -> None:
    """A service that checks no token (the reconciler) still loads no cryptography."""
    out = _run(
        """
        import sys
        from signoff_runtime import deferred
        deferred.install()
        import json, sqlalchemy
        print("cryptography" in sys.modules, "cryptography.x509" in sys.modules)
        """
    )
    assert out == ["False", "False"], out


def test_a_finder_that_asks_every_finder_in_turn_does_not_loop() -> None:
    """An import hook or profiler that delegates to the whole of ``sys.meta_path`` asks the
    deferring finder again for the same name; told no, it finds the module, which is deferred."""
    out = _run(
        """
        import sys
        from signoff_runtime import deferred

        class Asking:
            def find_spec(self, name, path, target=None):
                for finder in sys.meta_path:
                    if finder is not self and hasattr(finder, "find_spec"):
                        spec = finder.find_spec(name, path, target)
                        if spec is not None:
                            return spec
                return None

        sys.meta_path.insert(0, Asking())
        deferred.install()
        import jwt
        print(deferred.is_deferred("cryptography.x509"))
        """
    )
    assert out == ["True"], out
