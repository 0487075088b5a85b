#!/usr/bin/env bash
# Journey J9 of JOURNEYS.md: a GitRepo turns a repository's folders into Bundles, and
# a git push reaches the clusters; a wrong password and a broken fleet.yaml show why.
# Run with the real kubectl and git.
#
# Needs: HUB and DEV (kubeconfigs of the hub and of a registered cluster labelled
# env=dev, in workspace fleet-default), REPO (the repository's URL, served with
# basic auth as GIT_USER / GIT_PASSWORD) and PUSH (where to push to it).
set -euo pipefail

git clone -q "$PUSH" work
git -C work config user.email you@example.com
git -C work config user.name you
mkdir -p work/hello
cat > work/hello/fleet.yaml <<YAML
defaultNamespace: hello
YAML
cat > work/hello/configmap.yaml <<YAML
apiVersion: v1
kind: ConfigMap
metadata:
  name: hello
data:
  greeting: hello from git
YAML
git -C work add -A && git -C work commit -q -m hello && git -C work push -q origin HEAD:main

# The journey: a GitRepo with repo, branch, paths and targets.
kubectl --kubeconfig $HUB -n fleet-default create secret generic git-auth --type=kubernetes.io/basic-auth \
  --from-literal=username="$GIT_USER" --from-literal=password="$GIT_PASSWORD"
cat > gitrepo.yaml <<YAML
apiVersion: fleet.cattle.io/v1alpha1
kind: GitRepo
metadata:
  name: hello
  namespace: fleet-default
spec:
  repo: $REPO
  branch: main
  clientSecretName: git-auth
  pollingInterval: 5s
  paths:
  - hello
  targets:
  - clusterSelector:
      matchLabels:
        env: dev
YAML
kubectl --kubeconfig $HUB apply -f gitrepo.yaml
kubectl --kubeconfig $HUB -n fleet-default wait --for=condition=Ready gitrepos.fleet.cattle.io/hello --timeout=120s
kubectl --kubeconfig $HUB -n fleet-default get gitrepos.fleet.cattle.io
[ "$(kubectl --kubeconfig $DEV -n hello get configmap hello -o jsonpath='{.data.greeting}')" = "hello from git" ] \
  || { echo "the dev cluster lacks ConfigMap hello/hello"; exit 1; }

# A new commit reaches the cluster by polling.
sed -i 's/hello from git/hello from a push/' work/hello/configmap.yaml
git -C work commit -q -am "a new greeting"
pushed=$(date +%s%N)
git -C work push -q origin HEAD:main
until [ "$(kubectl --kubeconfig $DEV -n hello get configmap hello -o jsonpath='{.data.greeting}')" = "hello from a push" ]; do sleep 0.2; done
echo "git push to the change downstream (polling every 5s): $(( ($(date +%s%N) - pushed) / 1000000 )) ms"
[ "$(kubectl --kubeconfig $HUB -n fleet-default get gitrepos.fleet.cattle.io hello -o jsonpath='{.status.commit}')" = "$(git -C work rev-parse HEAD)" ] \
  || { echo "status.commit is not the pushed commit"; exit 1; }

# A wrong password and a broken fleet.yaml show why.
kubectl --kubeconfig $HUB -n fleet-default create secret generic wrong-auth --type=kubernetes.io/basic-auth \
  --from-literal=username="$GIT_USER" --from-literal=password=wrong
sed -e 's/name: hello/name: wrong-password/' -e 's/git-auth/wrong-auth/' gitrepo.yaml | kubectl --kubeconfig $HUB apply -f -
git -C work checkout -q -b broken
printf 'defaultNamespace: broken\nhelm: [this is not\n' > work/hello/fleet.yaml
git -C work commit -q -am "a broken fleet.yaml" && git -C work push -q origin HEAD:broken
sed -e 's/name: hello/name: broken/' -e 's/branch: main/branch: broken/' gitrepo.yaml | kubectl --kubeconfig $HUB apply -f -
reason() { kubectl --kubeconfig $HUB -n fleet-default get gitrepos.fleet.cattle.io $1 -o jsonpath='{.status.conditions[?(@.type=="Accepted")].reason}'; }
for want in wrong-password=AuthFailed broken=InvalidBundle; do
  gr=${want%=*}
  for i in $(seq 120); do [ "$(reason $gr)" = "${want#*=}" ] && break; sleep 0.5; done
  [ "$(reason $gr)" = "${want#*=}" ] || { echo "$gr: Accepted reason $(reason $gr), want ${want#*=}"; exit 1; }
done
kubectl --kubeconfig $HUB -n fleet-default get gitrepos.fleet.cattle.io
kubectl --kubeconfig $HUB -n fleet-default get gitrepos.fleet.cattle.io broken \
  -o jsonpath='{.status.conditions[?(@.type=="Accepted")].message}' | grep -q 'hello/fleet.yaml: yaml: line 2' \
  || { echo "broken: the message does not name the file and line"; exit 1; }

# Deleting the GitRepo deletes its Bundles, and their objects downstream.
kubectl --kubeconfig $HUB -n fleet-default delete gitrepos.fleet.cattle.io hello
until ! kubectl --kubeconfig $DEV -n hello get configmap hello 2>/dev/null; do sleep 0.5; done
echo "J9 passed: hello followed main to $DEV, and the failures said why"
