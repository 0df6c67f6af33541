"""The ``signoff`` command line: a thin shell that gathers subcommands by entry point."""

import os
import sys

if sys.argv[1:2] == ["serve"]:
    # A service's process (``signoff serve NAME``) never renders rich text, yet structlog imports
    # rich and Pygments at import time, only to pretty-print exceptions on a terminal: ≈ 3.5 MB
    # of every service's memory. Marked absent here, before anything imports structlog or
    # typer: structlog then prints plain tracebacks, and typer (told so) plain help and errors.
    sys.modules.setdefault("rich", None)  # type: ignore[arg-type]
    # httpx's own command line (``httpx._main``, imported if it can be) would load Pygments'
    # lexer tables before finding rich absent: ≈ 0.7 MB more, for a command no service runs
    sys.modules.setdefault("pygments", None)  # type: ignore[arg-type]
    # zstandard is installed for the benchmark's LangGraph side (langsmith); httpx would load it
    # (≈ 0.7 MB) to offer zstd in Accept-Encoding, and the model's and providers' answers come
    # as gzip or plain just the same
    sys.modules.setdefault("zstandard", None)  # type: ignore[arg-type]
    # FastAPI imports pydantic.v1, if it can, to refuse its models in a route's types: ≈ 1.5 MB
    # of the agent and the proposals service (issue 18) for a check that finds none, as signoff
    # has no pydantic.v1 model; absent, FastAPI takes it that there are none
    sys.modules.setdefault("pydantic.v1", None)  # type: ignore[arg-type]
    # Tokens and contracts are Ed25519 on PyNaCl (signoff_runtime.eddsa, keys); PyJWT would
    # still load cryptography's Rust module (≈ 8 MB) for algorithms no service uses, unless a
    # service checks an external issuer's RS256 or ES256 tokens (SIGNOFF_AUTH__JWKS_URL)
    if not os.environ.get("SIGNOFF_AUTH__JWKS_URL"):
        sys.modules.setdefault("cryptography", None)  # type: ignore[arg-type]
    os.environ.setdefault("TYPER_USE_RICH", "0")
    # SQLAlchemy's asyncio engine without the ORM its package imports for AsyncSession, which
    # no service uses: ≈ 40 modules and 6 to 8 MB of each service (signoff_runtime.engine_only)
    from signoff_runtime import allocator, collector, deferred, engine_only

    engine_only.install()
    # cryptography's X.509 classes, which PyJWT imports for certificates signoff never reads,
    # run on first use instead where cryptography is loaded (an external issuer's tokens):
    # 0.8 to 1.7 MB (signoff_runtime.deferred)
    deferred.install()
    # glibc's mmap threshold fixed, so large freed buffers leave the process (≈ 4 MB off the
    # proposals service's peak; signoff_runtime.allocator)
    allocator.tune()
    # what the service's start leaves (its modules) frozen out of the cyclic collector's full
    # collections, once it is up: no 0.1 s pauses walking it again (signoff_runtime.collector)
    collector.install()
