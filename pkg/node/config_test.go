package node

import (
	"encoding/json"
	"net"
	"strings"
	"testing"

	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

func TestSocketPathFitsAUnixSocket(t *testing.T) {
	for _, tc := range []struct {
		name, dataDir string
		inDataDir     bool
	}{
		{"short data directory", "/var/lib/flotilla-node", true},
		{"long test directory", "/tmp/" + strings.Repeat("TestJourneyJ6ARealDeploymentRollsOut/", 3) + "node", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := paths{dataDir: tc.dataDir}
			got := p.socketPath()
			if len(got) > maxUnixSocketPathLength {
				t.Fatalf("socket path %q is %d bytes", got, len(got))
			}
			if strings.HasPrefix(got, tc.dataDir) != tc.inDataDir {
				t.Errorf("socket path %q: in the data directory = %v, want %v", got, !tc.inDataDir, tc.inDataDir)
			}
			if other := (paths{dataDir: tc.dataDir + "2"}).socketPath(); other == got {
				t.Errorf("two data directories share the socket %s", got)
			}
		})
	}
}

func TestConfigsNameTheNodesOwnPaths(t *testing.T) {
	p := paths{dataDir: "/srv/node"}
	containerd := containerdConfig(p, "flotilla/pause:1.2.3")
	for _, want := range []string{
		`root = "/srv/node/containerd/root"`,
		`sandbox_image = "flotilla/pause:1.2.3"`,
		`restrict_oom_score_adj = true`,
		`SystemdCgroup = false`,
		`conf_dir = "/srv/node/cni/net.d"`,
		`address = "/srv/node/containerd/state/containerd.sock"`,
	} {
		if !strings.Contains(containerd, want) {
			t.Errorf("containerd config lacks %s:\n%s", want, containerd)
		}
	}

	raw, err := cniConfig(p, "br-test", "10.42.0.0/24")
	if err != nil {
		t.Fatal(err)
	}
	var cni struct {
		Plugins []struct {
			Type, Bridge string
			IPAM         struct {
				DataDir string
				Ranges  [][]struct{ Subnet string }
			}
		}
	}
	if err := json.Unmarshal(raw, &cni); err != nil {
		t.Fatal(err)
	}
	if len(cni.Plugins) != 2 || cni.Plugins[0].Bridge != "br-test" || cni.Plugins[0].IPAM.DataDir != "/srv/node/cni/ipam" ||
		cni.Plugins[0].IPAM.Ranges[0][0].Subnet != "10.42.0.0/24" || cni.Plugins[1].Type != "portmap" {
		t.Errorf("CNI config: %s", raw)
	}

	raw, err = kubeletConfig(p, "/srv/creds", "10.42.0.0/24")
	if err != nil {
		t.Fatal(err)
	}
	var kubelet kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict(raw, &kubelet); err != nil {
		t.Fatalf("kubelet config: %v\n%s", err, raw)
	}
	if *kubelet.Authentication.Anonymous.Enabled || kubelet.Authorization.Mode != kubeletv1beta1.KubeletAuthorizationModeWebhook {
		t.Errorf("the kubelet API must authenticate and authorize every caller: %s", raw)
	}
	if kubelet.ContainerRuntimeEndpoint != "unix:///srv/node/containerd/state/containerd.sock" || *kubelet.ImageGCHighThresholdPercent != 100 {
		t.Errorf("kubelet config: %s", raw)
	}

	raw, err = proxyConfig("/srv/creds", "node-a", net.ParseIP("192.0.2.2"), "10.42.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	var proxy kubeproxyv1alpha1.KubeProxyConfiguration
	if err := yaml.UnmarshalStrict(raw, &proxy); err != nil {
		t.Fatalf("kube-proxy config: %v\n%s", err, raw)
	}
	if proxy.Mode != "iptables" || proxy.HostnameOverride != "node-a" || *proxy.Conntrack.MaxPerCore != 0 ||
		proxy.ClientConnection.Kubeconfig != "/srv/creds/kube-proxy.kubeconfig" {
		t.Errorf("kube-proxy config: %s", raw)
	}
}

func TestSandboxImageIsThePauseImage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		images []imageTarball
		want   string
	}{
		{"among others", []imageTarball{{tags: []string{"flotilla/agent:0.1.0"}}, {tags: []string{"flotilla/pause:0.1.0"}}}, "flotilla/pause:0.1.0"},
		{"with a registry port", []imageTarball{{tags: []string{"registry:5000/pause:3"}}}, "registry:5000/pause:3"},
		{"a name that only ends in pause", []imageTarball{{tags: []string{"flotilla/nopause:1"}}}, ""},
		{"none", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sandboxImage(tc.images)
			if got != tc.want || (err == nil) != (tc.want != "") {
				t.Errorf("sandboxImage = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
