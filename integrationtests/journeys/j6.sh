#!/usr/bin/env bash
# Journey J6 of JOURNEYS.md: a Bundle in `clusters` targeting env=dev reaches the
# matching cluster, run with the real kubectl and helm.
#
# Needs: HUB, DEV and PROD (kubeconfig paths of the hub and of two downstream
# clusters), AGENT (the agent binary: there is no kubelet, so "the agent runs" means
# starting it as the chart's Deployment would), helm and kubectl on PATH, and charts/
# in the working directory.
set -euo pipefail

# Register both clusters with one token, as in J1.
kubectl --kubeconfig $HUB create namespace clusters
kubectl --kubeconfig $HUB apply -f - <<YAML
kind: ClusterRegistrationToken
apiVersion: "fleet.cattle.io/v1alpha1"
metadata:
  name: new-token
  namespace: clusters
YAML
while ! kubectl --kubeconfig $HUB --namespace=clusters get secret new-token; do sleep 1; done
kubectl --kubeconfig $HUB --namespace clusters get secret new-token \
  -o 'jsonpath={.data.values}' | base64 --decode > values.yaml
pids=()
trap 'kill ${pids[@]} 2>/dev/null || true' EXIT
for env in dev prod; do
  ds=DEV; [ $env = prod ] && ds=PROD
  helm --kubeconfig ${!ds} -n cattle-fleet-system install --create-namespace \
    --set-string labels.env=$env --values values.yaml fleet-agent charts/fleet-like/agent
  # the agent runs
  "$AGENT" --kubeconfig ${!ds} --namespace cattle-fleet-system >agent-$env.log 2>&1 &
  pids+=($!)
done
until [ "$(kubectl --kubeconfig $HUB -n clusters get clusters.fleet.cattle.io -o name | wc -l)" = 2 ]; do sleep 0.2; done
kubectl --kubeconfig $HUB -n clusters wait --for=condition=Ready clusters.fleet.cattle.io --all --timeout=120s

# The journey: a Bundle targeting env=dev.
cat > bundle.yaml <<YAML
apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata:
  name: hello
  namespace: clusters
spec:
  defaultNamespace: hello
  resources:
  - name: hello.yaml
    content: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: hello
      data:
        greeting: hello from the hub
  targets:
  - clusterSelector:
      matchLabels:
        env: dev
YAML
applied=$(date +%s%N)
kubectl --kubeconfig $HUB apply -f bundle.yaml
kubectl --kubeconfig $HUB -n clusters wait --for=condition=Ready bundles.fleet.cattle.io/hello --timeout=120s
ready=$(date +%s%N)
echo "kubectl apply to Bundle Ready: $(( (ready - applied) / 1000000 )) ms"
kubectl --kubeconfig $HUB -n clusters get bundles.fleet.cattle.io
kubectl --kubeconfig $HUB -n clusters get clusters.fleet.cattle.io

# What the journey expects.
dev=$(kubectl --kubeconfig $HUB -n clusters get clusters.fleet.cattle.io -l env=dev -o jsonpath='{.items[0].metadata.name}')
prod=$(kubectl --kubeconfig $HUB -n clusters get clusters.fleet.cattle.io -l env=prod -o jsonpath='{.items[0].metadata.name}')
[ "$(kubectl --kubeconfig $HUB -n clusters get bundles.fleet.cattle.io hello -o jsonpath='{.status.display.readyClusters}')" = 1/1 ] \
  || { echo "Bundle hello is not 1/1 ready"; exit 1; }
[ "$(kubectl --kubeconfig $DEV -n hello get configmap hello -o jsonpath='{.data.greeting}')" = "hello from the hub" ] \
  || { echo "the dev cluster lacks ConfigMap hello/hello"; exit 1; }
helm --kubeconfig $DEV -n hello list | grep -q '^hello\b' || { echo "no release hello on the dev cluster"; exit 1; }
if kubectl --kubeconfig $PROD get namespace hello 2>/dev/null; then echo "the prod cluster got the bundle"; exit 1; fi
# BUNDLES-READY counts the bundle on dev, and each cluster's own agent bundle.
until [ "$(kubectl --kubeconfig $HUB -n clusters get clusters.fleet.cattle.io $dev -o jsonpath='{.status.display.readyBundles}')" = 2/2 ]; do sleep 0.2; done
[ "$(kubectl --kubeconfig $HUB -n clusters get clusters.fleet.cattle.io $prod -o jsonpath='{.status.display.readyBundles}')" = 1/1 ] \
  || { echo "BUNDLES-READY of $prod is not 1/1"; exit 1; }
# One agent release per cluster, upgraded by the agent bundle fleet-agent-<cluster>.
for ds in $DEV $PROD; do
  helm --kubeconfig $ds list -A --filter '^fleet-agent$' > agents.txt
  cat agents.txt
  [ "$(grep -c fleet-agent agents.txt)" = 1 ] || { echo "not exactly one fleet-agent release"; exit 1; }
  helm --kubeconfig $ds -n cattle-fleet-system history fleet-agent | grep -q "Upgrade complete" \
    || { echo "the agent bundle did not upgrade the agent release"; exit 1; }
done
kubectl --kubeconfig $HUB -n clusters get bundles.fleet.cattle.io fleet-agent-$dev fleet-agent-$prod
echo "J6 passed: hello reached $dev only"

# The same with a folder as Fleet users keep them (docs/fleet-yaml.md): a fleet.yaml
# with a customisation per environment, a manifest, an overlay and a templated value.
mkdir -p my-app/overlays/prod
cat > my-app/fleet.yaml <<YAML
defaultNamespace: my-app
helm:
  values:
    cluster: \${ .ClusterName }
targetCustomizations:
- name: dev
  clusterSelector:
    matchLabels: {env: dev}
- name: prod
  clusterSelector:
    matchLabels: {env: prod}
  yaml:
    overlays: [prod]
YAML
cat > my-app/config.yaml <<YAML
apiVersion: v1
kind: ConfigMap
metadata:
  name: my-app
data:
  size: small
YAML
cat > my-app/overlays/prod/config_patch.yaml <<YAML
data:
  size: large
YAML
rendered=$(hub test my-app -l env=prod)
echo "$rendered"
grep -q 'size: large' <<<"$rendered" || { echo "hub test does not show the prod overlay"; exit 1; }
matched=$(hub test my-app -l env=dev 2>&1 >/dev/null)
[ "$matched" = "# Matched: dev" ] || { echo "hub test matched: $matched, want target dev"; exit 1; }
hub apply --kubeconfig $HUB -n clusters my-app my-app
kubectl --kubeconfig $HUB -n clusters wait --for=condition=Ready bundles.fleet.cattle.io/my-app-my-app --timeout=120s
kubectl --kubeconfig $HUB -n clusters get bundles.fleet.cattle.io my-app-my-app
[ "$(kubectl --kubeconfig $DEV -n my-app get configmap my-app -o jsonpath='{.data.size}')" = small ] \
  || { echo "the dev cluster lacks my-app/my-app with size small"; exit 1; }
[ "$(kubectl --kubeconfig $PROD -n my-app get configmap my-app -o jsonpath='{.data.size}')" = large ] \
  || { echo "the prod cluster lacks my-app/my-app with size large"; exit 1; }
[ "$(kubectl --kubeconfig $HUB -n clusters get bundledeployments.fleet.cattle.io -A -l fleet.cattle.io/bundle-name=my-app-my-app,fleet.cattle.io/cluster=$prod -o jsonpath='{.items[0].spec.options.helm.values.cluster}')" = "$prod" ] \
  || { echo "the templated value is not the cluster's name"; exit 1; }
echo "fleet.yaml passed: my-app reached $dev and $prod, each with its options"
