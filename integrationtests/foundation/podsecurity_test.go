package foundation

import (
	"strings"
	"testing"

	"github.com/flotilla/flotilla/integrationtests/framework"
)

const (
	plainPod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: plain\nspec:\n  containers:\n  - name: c\n    image: pause\n"
	// The node's processes and its root file system: the way out of a container
	// (privileged containers are refused by the API server everywhere).
	privilegedPod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: privileged\nspec:\n  hostPID: true\n  volumes:\n  - name: root\n    hostPath: {path: /}\n  containers:\n  - name: c\n    image: pause\n    volumeMounts: [{name: root, mountPath: /host}]\n"
)

// A Bundle that may create Pods in its namespace (a serviceAccount with edit rights
// there) must not get a privileged one on the node: the embedded API server enforces
// the baseline Pod Security Standard in namespaces that do not choose a level, warns
// at restricted, and leaves kube-system and namespaces labelled otherwise alone.
// --pod-security=restricted enforces that level instead.
func TestPodSecurityDefaultsHoldOnTheEmbeddedControlPlane(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		args      []string
		level     string
		plainOK   bool
		plainWarn bool
	}{
		{name: "default", level: "baseline", plainOK: true, plainWarn: true},
		{name: "restricted", args: []string{"--pod-security=restricted"}, level: "restricted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ds := framework.StartControlPlane(t, "podsecurity-"+tc.name, tc.args...)
			for _, ns := range []string{"team", "opted-out"} {
				ds.MustKubectl("", "create", "namespace", ns)
				eventually(t, "the default ServiceAccount of "+ns, func() error {
					_, err := ds.Kubectl("", "-n", ns, "get", "serviceaccount", "default")
					return err
				})
			}
			ds.MustKubectl("", "label", "namespace", "opted-out", "pod-security.kubernetes.io/enforce=privileged")

			out, err := ds.Kubectl(privilegedPod, "-n", "team", "apply", "-f", "-")
			t.Logf("a privileged Pod in team: %v: %s", err, out)
			if err == nil || !strings.Contains(out, `violates PodSecurity "`+tc.level+`:latest"`) || !strings.Contains(out, "hostPID") || !strings.Contains(out, "hostPath") {
				t.Errorf("a privileged Pod in a namespace without a level: %v, want it refused by PodSecurity %s\n%s", err, tc.level, out)
			}
			out, err = ds.Kubectl(plainPod, "-n", "team", "apply", "-f", "-")
			t.Logf("a plain Pod in team: %v: %s", err, out)
			if (err == nil) != tc.plainOK || tc.plainWarn != strings.Contains(out, `would violate PodSecurity "restricted:latest"`) {
				t.Errorf("a plain Pod: %v (want admitted=%v, a restricted warning=%v)\n%s", err, tc.plainOK, tc.plainWarn, out)
			}
			for _, ns := range []string{"opted-out", "kube-system"} {
				if ns == "kube-system" {
					eventually(t, "the default ServiceAccount of kube-system", func() error {
						_, err := ds.Kubectl("", "-n", ns, "get", "serviceaccount", "default")
						return err
					})
				}
				if out, err := ds.Kubectl(privilegedPod, "-n", ns, "apply", "-f", "-"); err != nil {
					t.Errorf("a privileged Pod in %s: %v, want it admitted\n%s", ns, err, out)
				}
			}
		})
	}
}
