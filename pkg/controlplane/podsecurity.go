package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// PodSecurityLevels are the Pod Security Standards' levels, most open first.
var PodSecurityLevels = []string{"privileged", "baseline", "restricted"}

// DefaultPodSecurity is the level enforced in namespaces that do not choose one.
const DefaultPodSecurity = "baseline"

// podSecurityExempt are the namespaces the defaults do not apply to: the control
// plane's own.
var podSecurityExempt = []string{"kube-system"}

// podSecurityConfig is the API server's admission configuration: the PodSecurity
// plugin enforces level in every namespace without a pod-security.kubernetes.io/enforce
// label, and warns and audits at restricted.
func podSecurityConfig(level string) ([]byte, error) {
	if !slices.Contains(PodSecurityLevels, level) {
		return nil, fmt.Errorf("the Pod Security level %q is none of %v", level, PodSecurityLevels)
	}
	exempt := ""
	for _, ns := range podSecurityExempt {
		exempt += fmt.Sprintf("\n      - %s", ns)
	}
	return []byte(fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: %[1]s
      enforce-version: latest
      audit: restricted
      audit-version: latest
      warn: restricted
      warn-version: latest
    exemptions:
      namespaces:%[2]s
`, level, exempt)), nil
}

// writeAdmissionConfig writes the admission configuration under the data directory
// and returns its path.
func (c *ControlPlane) writeAdmissionConfig() (string, error) {
	level := c.cfg.PodSecurity
	if level == "" {
		level = DefaultPodSecurity
	}
	data, err := podSecurityConfig(level)
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.cfg.DataDir, "admission.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", err
	}
	return path, nil
}
