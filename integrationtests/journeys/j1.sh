#!/usr/bin/env bash
# Journey J1 of JOURNEYS.md: agent-initiated registration of a new cluster, run with
# the real kubectl and helm exactly as the journey writes it.
#
# Needs: HUB and DS (kubeconfig paths of the hub and of a downstream cluster), helm and
# kubectl on PATH, and charts/ in the working directory. AGENT is the agent binary
# where DS has no node: "the agent runs" then means starting it as the chart's
# Deployment would. Without AGENT, DS runs Pods and the chart's agent Pod runs.
set -euo pipefail

kubectl --kubeconfig $HUB create namespace clusters
kubectl --kubeconfig $HUB apply -f - <<YAML
kind: ClusterRegistrationToken
apiVersion: "fleet.cattle.io/v1alpha1"
metadata:
  name: new-token
  namespace: clusters
spec:
  ttl: 240h
YAML
while ! kubectl --kubeconfig $HUB --namespace=clusters get secret new-token; do sleep 1; done
kubectl --kubeconfig $HUB --namespace clusters get secret new-token \
  -o 'jsonpath={.data.values}' | base64 --decode > values.yaml
helm --kubeconfig $DS -n cattle-fleet-system install --create-namespace \
  --set-string labels.example=true --set-string labels.env=dev \
  --values values.yaml fleet-agent charts/fleet-like/agent
installed=$(date +%s%N)

# the agent runs
if [ -n "${AGENT:-}" ]; then
  "$AGENT" --kubeconfig $DS --namespace cattle-fleet-system >agent.log 2>&1 &
  agent=$!
  trap 'kill $agent 2>/dev/null || true' EXIT
fi

until [ -n "$(kubectl --kubeconfig $HUB -n clusters get clusters.fleet.cattle.io -o name)" ]; do sleep 0.2; done
kubectl --kubeconfig $HUB -n clusters wait --for=condition=Ready clusters.fleet.cattle.io --all --timeout=120s
ready=$(date +%s%N)
echo "helm install to Ready: $(( (ready - installed) / 1000000 )) ms"
if [ -z "${AGENT:-}" ]; then
  kubectl --kubeconfig $DS -n cattle-fleet-system rollout status deployment/fleet-agent --timeout=120s
  kubectl --kubeconfig $DS -n cattle-fleet-system get pods -o wide
fi

kubectl --kubeconfig $HUB -n clusters get clusters.fleet.cattle.io

# What the journey expects.
name=$(kubectl --kubeconfig $HUB -n clusters get clusters.fleet.cattle.io -o jsonpath='{.items[0].metadata.name}')
[[ $name =~ ^cluster-[0-9a-f]{12}$ ]] || { echo "unexpected Cluster name $name"; exit 1; }
[ "$(kubectl --kubeconfig $HUB -n clusters get clusters.fleet.cattle.io $name -o jsonpath='{.metadata.labels.example},{.metadata.labels.env}')" = "true,dev" ] \
  || { echo "Cluster $name lacks the labels example=true,env=dev"; exit 1; }
header=$(kubectl --kubeconfig $HUB -n clusters get clusters.fleet.cattle.io | awk 'NR == 1 { $1 = $1; print }')
[ "$header" = "NAME BUNDLES-READY NODES-READY SAMPLE-NODE LAST-SEEN STATUS" ] || { echo "columns: $header"; exit 1; }
[ -n "$(kubectl --kubeconfig $HUB -n clusters get clusters.fleet.cattle.io $name -o jsonpath='{.status.agent.lastSeen}')" ] \
  || { echo "LAST-SEEN is empty"; exit 1; }
if kubectl --kubeconfig $DS -n cattle-fleet-system get secret fleet-agent-bootstrap 2>/dev/null; then
  echo "the bootstrap Secret is still there"; exit 1
fi
[ "$(kubectl --kubeconfig $DS -n cattle-fleet-system get secret fleet-agent -o jsonpath='{.data.clusterName}' | base64 --decode)" = "$name" ] \
  || { echo "fleet-agent does not hold the identity of $name"; exit 1; }
echo "J1 passed: $name registered"
