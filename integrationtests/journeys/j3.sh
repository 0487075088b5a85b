#!/usr/bin/env bash
# Journey J3 of JOURNEYS.md: manager-initiated registration, run with the real kubectl
# (and helm to look at the downstream cluster) exactly as the journey writes it.
#
# Needs: HUB and DS (kubeconfig paths of the hub and of a downstream cluster the hub
# can reach), kubectl and helm on PATH. AGENT is the agent binary where DS has no node:
# it is run as the Deployment the hub installs would run it. Without AGENT, DS runs
# Pods and the agent Pod the hub installs runs.
set -euo pipefail

kubectl --kubeconfig $HUB create namespace clusters
kubectl --kubeconfig $HUB -n clusters create secret generic my-cluster-kubeconfig \
  --from-file=value=$DS
kubectl --kubeconfig $HUB apply -f - <<YAML
apiVersion: fleet.cattle.io/v1alpha1
kind: Cluster
metadata:
  name: my-cluster
  namespace: clusters
  labels: {demo: "true", env: dev}
spec:
  kubeConfigSecret: my-cluster-kubeconfig
YAML
applied=$(date +%s%N)

# The hub installs the fleet-agent release into the downstream cattle-fleet-system itself.
kubectl --kubeconfig $HUB -n clusters wait --for=condition=Imported clusters.fleet.cattle.io/my-cluster --timeout=120s
helm --kubeconfig $DS -n cattle-fleet-system list
[ "$(helm --kubeconfig $DS -n cattle-fleet-system list -q)" = "fleet-agent" ] || { echo "no fleet-agent release downstream"; exit 1; }

# the agent runs
if [ -n "${AGENT:-}" ]; then
  "$AGENT" --kubeconfig $DS --namespace cattle-fleet-system >agent.log 2>&1 &
  agent=$!
  trap 'kill $agent 2>/dev/null || true' EXIT
fi
kubectl --kubeconfig $HUB -n clusters wait --for=condition=Ready clusters.fleet.cattle.io/my-cluster --timeout=120s
ready=$(date +%s%N)
echo "kubectl apply to Ready: $(( (ready - applied) / 1000000 )) ms"
kubectl --kubeconfig $HUB -n clusters get clusters.fleet.cattle.io

# Raising redeployAgentGeneration redeploys the agent; agentDeployedGeneration follows.
kubectl --kubeconfig $HUB -n clusters patch clusters.fleet.cattle.io my-cluster --type merge \
  -p '{"spec":{"redeployAgentGeneration":1}}'
kubectl --kubeconfig $HUB -n clusters wait --for=jsonpath='{.status.agentDeployedGeneration}'=1 \
  clusters.fleet.cattle.io/my-cluster --timeout=120s
kubectl --kubeconfig $HUB -n clusters wait --for=condition=Ready clusters.fleet.cattle.io/my-cluster --timeout=120s

# A bad kubeconfig shows as a readable Imported=False condition.
kubectl --kubeconfig $HUB apply -f - <<YAML
apiVersion: fleet.cattle.io/v1alpha1
kind: Cluster
metadata:
  name: broken
  namespace: clusters
spec:
  kubeConfigSecret: no-such-secret
YAML
kubectl --kubeconfig $HUB -n clusters wait --for=condition=Imported=False clusters.fleet.cattle.io/broken --timeout=60s
message=$(kubectl --kubeconfig $HUB -n clusters get clusters.fleet.cattle.io broken \
  -o jsonpath='{.status.conditions[?(@.type=="Imported")].message}')
echo "broken: $message"
[[ $message == *"kubeconfig Secret clusters/no-such-secret not found"* ]] || { echo "unclear message"; exit 1; }
echo "J3 passed"
