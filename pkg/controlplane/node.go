package controlplane

import (
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	certutil "k8s.io/client-go/util/cert"

	"github.com/flotilla/flotilla/pkg/node/launch"
)

// NodeConfig names the node that joins a control plane (Config.Node).
type NodeConfig struct {
	// Name is the Node's name; its kubelet's credential is issued for it.
	Name string
	// IP is the Node's address: the kubelet's serving certificate covers it and the
	// "kubernetes" Service sends Pods to the API server there.
	IP net.IP
}

// The node's credentials, issued by the control plane's CA.
const (
	kubeletClientName  = "kubelet"
	proxyClientName    = "kube-proxy"
	schedulerName      = "kube-scheduler"
	kubeletServingName = "kubelet-serving"
	// apiServerKubeletClientName is the API server's credential for kubelets (logs,
	// exec, port-forward); the kubelet authorizes it like any client.
	apiServerKubeletClientName = "apiserver-kubelet-client"
)

// NodeCredentialsDir is where a control plane with a node writes the node's
// kubeconfigs and certificates (flotilla-node --credentials-dir).
func NodeCredentialsDir(dataDir string) string { return filepath.Join(dataDir, "node", "credentials") }

// ensureNodeLeaves issues the node's credentials: the kubelet's client certificate
// as system:node:<name> in system:nodes (what the Node authorizer and the
// NodeRestriction admission plugin expect), kube-proxy's and the scheduler's as the
// users the default RBAC roles are bound to, and the kubelet's serving certificate.
func (p *pki) ensureNodeLeaves(n NodeConfig) error {
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	leaves := []struct {
		name   string
		config certutil.Config
	}{
		{kubeletClientName, certutil.Config{CommonName: "system:node:" + n.Name, Organization: []string{"system:nodes"}, Usages: client}},
		{proxyClientName, certutil.Config{CommonName: "system:kube-proxy", Usages: client}},
		{schedulerName, certutil.Config{CommonName: "system:kube-scheduler", Usages: client}},
		{apiServerKubeletClientName, certutil.Config{CommonName: "flotilla-apiserver-kubelet-client", Organization: []string{"system:masters"}, Usages: client}},
		{kubeletServingName, certutil.Config{
			CommonName: "system:node:" + n.Name,
			AltNames:   certutil.AltNames{DNSNames: []string{n.Name}, IPs: []net.IP{n.IP}},
			Usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}},
	}
	for _, leaf := range leaves {
		if err := p.ensureLeaf(leaf.name, leaf.config); err != nil {
			return err
		}
	}
	return nil
}

// writeNodeCredentials writes what flotilla-node reads from NodeCredentialsDir.
func (c *ControlPlane) writeNodeCredentials() error {
	dir := NodeCredentialsDir(c.cfg.DataDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, file := range map[string]string{
		kubeletClientName: launch.KubeletKubeconfig,
		proxyClientName:   launch.ProxyKubeconfig,
		schedulerName:     launch.SchedulerKubeconfig,
	} {
		if err := c.writeKubeconfig(name, "flotilla", filepath.Join(dir, file)); err != nil {
			return err
		}
	}
	certPEM, keyPEM, err := c.pki.clientCredential(kubeletServingName)
	if err != nil {
		return err
	}
	for file, content := range map[string][]byte{
		launch.CAFile:                 c.CAPEM,
		launch.KubeletServingCertFile: certPEM,
		launch.KubeletServingKeyFile:  keyPEM,
	} {
		if err := os.WriteFile(filepath.Join(dir, file), content, 0o600); err != nil {
			return fmt.Errorf("writing the node's %s: %w", file, err)
		}
	}
	return nil
}

// nodeAPIServerFlags are the API server flags that a node needs: the Node authorizer
// and NodeRestriction, a credential for the kubelet's API, and the "kubernetes"
// Service's endpoint kept at the node's address.
func (c *ControlPlane) nodeAPIServerFlags() []string {
	p := c.pki
	return []string{
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--advertise-address=" + c.cfg.Node.IP.String(),
		"--endpoint-reconciler-type=lease",
		"--kubelet-client-certificate=" + p.certFile(apiServerKubeletClientName),
		"--kubelet-client-key=" + p.keyFile(apiServerKubeletClientName),
		"--kubelet-certificate-authority=" + p.certFile(caName),
		"--kubelet-preferred-address-types=InternalIP,Hostname",
	}
}

// replaceFlags returns flags with each of overrides put in place of the flag of the
// same name, or added.
func replaceFlags(flags, overrides []string) []string {
	name := func(flag string) string { n, _, _ := strings.Cut(flag, "="); return n }
	out := make([]string, 0, len(flags)+len(overrides))
	for _, flag := range flags {
		replaced := false
		for _, o := range overrides {
			if name(o) == name(flag) {
				replaced = true
			}
		}
		if !replaced {
			out = append(out, flag)
		}
	}
	return append(out, overrides...)
}
