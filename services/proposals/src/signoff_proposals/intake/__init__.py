"""Taking in what the agent asks: who it speaks for, the operation's ``resolve``, quotas."""
