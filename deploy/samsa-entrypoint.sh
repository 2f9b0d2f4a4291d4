#!/bin/sh
# The image's entrypoint. Started as root (the default), it does one thing as root and drops to
# the samsa user for the service itself:
#   the cluster secret is mounted from the host (a compose secret is a bind mount, with the host
#   file's owner and mode), and the services accept only a file of their own with mode 0600; so
#   it is copied to /run/samsa/cluster.secret, owned by samsa, mode 0600.
# Started as another user (docker run --user), it runs the command as is.
set -eu
secret_source=${CLUSTER_SECRET_SOURCE:-/run/secrets/samsa_cluster_secret}
if [ "$(id -u)" = 0 ]; then
  install -d -o samsa -g samsa -m 0700 /run/samsa
  if [ -f "$secret_source" ]; then
    install -o samsa -g samsa -m 0600 "$secret_source" /run/samsa/cluster.secret
  fi
  # A named volume mounted over /var/lib/samsa is new and empty on the first start.
  chown samsa:samsa /var/lib/samsa
  exec setpriv --reuid=samsa --regid=samsa --init-groups -- "$@"
fi
exec "$@"
