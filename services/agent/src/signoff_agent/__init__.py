"""The agent service: where a model's (or a machine client's) request first meets signoff.

It owns conversations and the model loop, and runs each operation's ``resolve`` — the only
place a request becomes frozen arguments and a preview. It never stores or approves a proposal
and never executes anything: it hands resolved proposals to the proposals service.
"""
