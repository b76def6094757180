#!/usr/bin/env bash
# kubectl against setpoint: serve a store with a token, apply, get, patch, clean up.
set -euo pipefail
cd "$(mktemp -d)"

# One admin token (the Kubernetes static token file's layout, the role third).
(umask 077; echo "$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))'),alice,admin" > tokens.csv)  # 0600

setpoint serve --port 0 --token-file tokens.csv > serve.log &
trap 'kill $!' EXIT
until grep -q "serving the API" serve.log; do sleep 0.1; done
export KUBECONFIG=$PWD/.setpoint/kubeconfig    # written by serve: URL, token, certificate

cat > web.yaml <<'YAML'
apiVersion: setpoint.dev/v1alpha1
kind: Process
metadata:
  name: web
  labels: {app: web}
spec:
  args: [python3, -m, http.server, "8000"]
YAML

kubectl apply -f web.yaml
kubectl get processes -o name
kubectl label process web tier=front
kubectl get processes -l tier=front -o jsonpath='{.items[0].metadata.labels.tier}{"\n"}'
kubectl delete process web
