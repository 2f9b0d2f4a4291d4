#!/bin/sh
# The image's entrypoint. Started as root (the default), it does one thing as root and drops to
# the samsa user for the service itself:
#   the cluster secret is mounted from the host (a compose secret is a bind mount, with the host
#   file's owner and mode), and the services accept only a file of their own with mode 0600; so
#   it is copied to /run/samsa/cluster.secret, owned by samsa, mode 0600; and so are the TLS
#   files deploy/docker-compose.tls.yml mounts (samsa_tls_ca, samsa_tls_certificate and
#   samsa_tls_key), to /run/samsa/tls/ (ca.pem, certificate.pem, key.pem; the key 0600), and the
#   SCRAM bootstrap file deploy/docker-compose.sasl.yml mounts on the controllers
#   (samsa_sasl_scram_credentials), to /run/samsa/sasl/scram-credentials, 0600.
# Started as another user (docker run --user), it runs the command as is.
set -eu
secret_source=${CLUSTER_SECRET_SOURCE:-/run/secrets/samsa_cluster_secret}
tls_source=${TLS_SOURCE:-/run/secrets}
sasl_source=${SASL_SOURCE:-/run/secrets/samsa_sasl_scram_credentials}
if [ "$(id -u)" = 0 ]; then
  install -d -o samsa -g samsa -m 0700 /run/samsa
  if [ -f "$secret_source" ]; then
    install -o samsa -g samsa -m 0600 "$secret_source" /run/samsa/cluster.secret
  fi
  if [ -f "$tls_source/samsa_tls_key" ]; then
    install -d -o samsa -g samsa -m 0700 /run/samsa/tls
    install -o samsa -g samsa -m 0644 "$tls_source/samsa_tls_ca" /run/samsa/tls/ca.pem
    install -o samsa -g samsa -m 0644 "$tls_source/samsa_tls_certificate" /run/samsa/tls/certificate.pem
    install -o samsa -g samsa -m 0600 "$tls_source/samsa_tls_key" /run/samsa/tls/key.pem
  fi
  if [ -f "$sasl_source" ]; then
    install -d -o samsa -g samsa -m 0700 /run/samsa/sasl
    install -o samsa -g samsa -m 0600 "$sasl_source" /run/samsa/sasl/scram-credentials
  fi
  # A named volume mounted over /var/lib/samsa is new and empty on the first start.
  chown samsa:samsa /var/lib/samsa
  exec setpriv --reuid=samsa --regid=samsa --init-groups -- "$@"
fi
exec "$@"
