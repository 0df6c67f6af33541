#!/usr/bin/env bash
# Start the local PostgreSQL and RabbitMQ if this machine has them and they are down.
# On a machine without them (a laptop with Docker), the tests start containers instead.
set -euo pipefail

wait_port() { # host port seconds
  local deadline=$((SECONDS + $3))
  until (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; do
    if ((SECONDS > deadline)); then echo "port $1:$2 not open after $3 s" >&2; return 1; fi
    sleep 0.5
  done
}

if command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
  if ! pg_isready -h 127.0.0.1 -p 5432 -q; then
    echo "starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start
  fi
  wait_port 127.0.0.1 5432 60
fi

if command -v rabbitmq-server >/dev/null; then
  if ! (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; then
    echo "starting RabbitMQ"
    rabbitmq-server -detached
  fi
  wait_port 127.0.0.1 5672 120
  # The port opens before the node is fully booted; wait until it answers.
  command -v rabbitmqctl >/dev/null && timeout 120 rabbitmqctl -q await_startup >/dev/null 2>&1 || true
fi
