#!/usr/bin/env bash
# The dashboard's endpoints with curl: serve a store with a view token, apply a chain,
# load the page's assets and read what the page reads (every object, why one is not Ready).
set -euo pipefail
cd "$(mktemp -d)"

token=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')
(umask 077; echo "$token,grafana,view" > tokens.csv)  # 0600

cat > chain.yaml <<'YAML'
apiVersion: setpoint.dev/v1alpha1
kind: Process
metadata: {name: db}
spec: {args: [sleep, "1000"]}
---
apiVersion: setpoint.dev/v1alpha1
kind: Process
metadata: {name: web}
spec:
  args: [sleep, "1000"]
  dependsOn: [{kind: Process, name: db, condition: Ready}]
YAML
setpoint --store sqlite:///state.db apply -f chain.yaml > /dev/null

setpoint --store sqlite:///state.db serve --port 0 --token-file tokens.csv > serve.log &
trap 'kill $!' EXIT
until grep -q "serving the API" serve.log; do sleep 0.1; done
url=$(sed -n 's/^serving the API on \([^ ]*\).*/\1/p' serve.log)
api() { curl -sk -H "Authorization: Bearer $token" "$url$1"; }

# The page: no data in it, a strict Content-Security-Policy on it.
curl -sk -D - -o /dev/null "$url/ui/" | grep -i '^content-security-policy' | cut -c1-50
# What it reads: every object in one list (then one watch from its resourceVersion) ...
api /apis/insight.setpoint.dev/v1alpha1/objects \
    | python3 -c 'import json,sys; print(sorted(o["metadata"]["name"] for o in json.load(sys.stdin)["items"] if o["kind"] == "Process"))'
# ... and why web is not Ready: its root blocker along dependsOn.
api /apis/insight.setpoint.dev/v1alpha1/namespaces/default/processes/web/why \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["rootBlocker"]["message"])'
# A view token may not write.
curl -sk -o /dev/null -w '%{http_code}\n' -X DELETE -H "Authorization: Bearer $token" \
    "$url/apis/setpoint.dev/v1alpha1/namespaces/default/processes/web"
echo "open $url/ui/ and log in with the token in tokens.csv"
