#!/bin/sh
# Make the certificates of a multi-host cobaltlite install (docs/multi-host.md, "Certificates").
#   etc/tls/make-certs.sh DIR ca                      a CA: DIR/ca.crt, DIR/ca.key (keep it offline)
#   etc/tls/make-certs.sh DIR HOST [IP ...]           DIR/HOST.crt and DIR/HOST.key, signed by
#                                                     DIR/ca.key, valid for the name HOST and
#                                                     each IP (what peers dial must be listed)
# Every host's certificate serves both as server and as client certificate.
set -eu
dir=$1; name=$2; shift 2
umask 077
if [ "$name" = ca ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
        -subj "/CN=cobaltlite CA" -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
    chmod 644 "$dir/ca.crt"
    exit 0
fi
san="DNS:$name"
for ip in "$@"; do san="$san,IP:$ip"; done
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$name" \
    -keyout "$dir/$name.key" -out "$dir/$name.csr" 2>/dev/null
printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" > "$dir/$name.ext"
openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
    -CAcreateserial -days 825 -extfile "$dir/$name.ext" -out "$dir/$name.crt" 2>/dev/null
rm -f "$dir/$name.csr" "$dir/$name.ext"
chmod 644 "$dir/$name.crt"
