"""Which API a bearer token is for (its ``aud``): one audience per API.

Apart from ``tokens`` (PyJWT and cryptography, ≈ 9 MB) so that the rate limiter, which every
service installs, can name its buckets' audiences without loading them: a service that has no
rated route (the executor, the reconciler) never checks a token.
"""

#: the agent's HTTP API (conversations, the machine-facing propose, its event stream), and the
#: person's token the agent forwards with a proposal or pause-point request
AGENT_AUDIENCE = "signoff-agent"
#: the proposals service's HTTP API and AMQP approval commands: what approving needs
PROPOSALS_AUDIENCE = "signoff-proposals"
AUDIENCES = (AGENT_AUDIENCE, PROPOSALS_AUDIENCE)
