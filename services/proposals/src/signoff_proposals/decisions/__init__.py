"""Deciding a pending proposal: approve, decline, withdraw, revise — over HTTP and AMQP alike."""
