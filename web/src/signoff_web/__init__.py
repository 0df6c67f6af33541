"""signoff's web frontend: server-rendered pages over the agent and proposals APIs."""
