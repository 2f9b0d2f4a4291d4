#!/usr/bin/env bash
# Writes the cluster secret that deploy/docker-compose.yml mounts (deploy/cluster.secret, mode
# 0600, git-ignored): 32 random bytes, URL-safe base64. Keeps an existing one: every service of a
# cluster must share the same secret, and changing it locks out the members that have the old one.
set -euo pipefail
secret=${1:-"$(dirname "$0")/cluster.secret"}
if [ -s "$secret" ]; then
  echo "$secret exists; kept" >&2
  exit 0
fi
umask 077
python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > "$secret"
echo "wrote $secret" >&2
