// Package kubeconfig builds and writes kubeconfig files: the hub's admin kubeconfig,
// and (later) the credentials agents are handed.
package kubeconfig

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Credential is how a kubeconfig user authenticates: a client certificate or a token.
type Credential struct {
	ClientCertificatePEM []byte
	ClientKeyPEM         []byte
	Token                string
}

// New returns a kubeconfig with one cluster, user and context, all named name, that
// reaches server trusting caPEM.
func New(name, server string, caPEM []byte, cred Credential) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cred.ClientCertificatePEM,
		ClientKeyData:         cred.ClientKeyPEM,
		Token:                 cred.Token,
	}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	return cfg
}

// Write writes cfg to path with owner-only permissions, replacing what was there.
func Write(cfg *clientcmdapi.Config, path string) error {
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("encoding kubeconfig %s: %w", path, err)
	}
	return writeFileAtomic(path, data, 0o600)
}

// RESTConfig returns a client configuration for cfg's current context.
func RESTConfig(cfg *clientcmdapi.Config) (*rest.Config, error) {
	return clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
}

// Load reads a kubeconfig file (or, with an empty path, the in-cluster configuration)
// into a client configuration.
func Load(path string) (*rest.Config, error) {
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig given and not running in a cluster: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}
