#!/usr/bin/env bash
# What each image of deploy/docker/Dockerfile adds to python:3.11-slim, measured without a Docker
# engine: the same virtual environment the image's build stage makes (its hashed lock, then
# signoff's packages with --no-deps, none editable) is built in a scratch directory, its
# installed size taken with `du`, and its service's entry module imported from it (the set is
# enough to start). Usage, from the repository root after `make install`:
#   deploy/docker/measure-images.sh            # one line per image: name, set, MiB, import ok
set -euo pipefail
cd "$(dirname "$0")/../.."
UV=${UV:-.venv/bin/uv}
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# built from a copy, as the image's build stage does: no build/ left in the work tree
mkdir "$scratch/src"
cp -r shared cli examples services web "$scratch/src/"
find "$scratch/src" -name build -prune -exec rm -rf {} +

core="shared/contracts shared/runtime cli examples/card_provider examples/scripted_model examples/club"
#  image       set         packages                                           module to import
images=(
  "proposals   runtime     $core services/proposals                            signoff_proposals.app"
  "executor    runtime     $core services/executor                             signoff_executor.app"
  "reconciler  runtime     $core services/reconciler                           signoff_reconciler.app"
  "agent       agent       $core services/agent                                signoff_agent.app"
  "web         web         $core web                                           signoff_web.app"
  "tools       tools       $core services/proposals services/executor services/reconciler services/agent web signoff_cli.main"
  "provider    simulators  examples/card_provider examples/scripted_model examples/club signoff_card_provider.app"
  "model       simulators  examples/card_provider examples/scripted_model examples/club signoff_scripted_model.app"
  "everything  requirements $core services/proposals services/executor services/reconciler services/agent web shared/conformance signoff_cli.main"
)
printf '%-11s %-13s %8s  %s\n' image set MiB import
for line in "${images[@]}"; do
  read -r name set rest <<<"$line"
  words=($rest)
  module=${words[-1]}
  packages=("${words[@]:0:${#words[@]}-1}")
  venv="$scratch/$name"
  "$PYTHON" -m venv --without-pip "$venv"
  "$UV" pip install -q --python "$venv/bin/python" --require-hashes -r "requirements/$set.txt"
  "$UV" pip install -q --python "$venv/bin/python" --no-deps "${packages[@]/#/$scratch/src/}"
  # the build's own leftovers are not in an image
  find "$venv" -name __pycache__ -prune -exec rm -rf {} +
  size=$(du -sm "$venv" | cut -f1)
  if "$venv/bin/python" -c "import $module" 2>"$scratch/$name.err"; then ok=yes; else ok="NO: $(tail -1 "$scratch/$name.err")"; fi
  printf '%-11s %-13s %8s  %s\n' "$name" "$set" "$size" "$ok"
  rm -rf "$venv"
done
