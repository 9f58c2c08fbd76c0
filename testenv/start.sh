#!/usr/bin/env bash
# testenv/start.sh KUBECONFIG_PATH [--kube-scheduler [CONFIG_FILE]] [--port N] [--data-dir DIR] [--parent-pid PID]
#
# Builds the program if needed, then runs it in the foreground: an embedded etcd,
# kube-apiserver v1.37 and optionally kube-scheduler v1.37 on loopback. It writes a
# kubeconfig to KUBECONFIG_PATH, prints "ready", and runs until killed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$("$here/build.sh")"
exec "$bin" "$@"
