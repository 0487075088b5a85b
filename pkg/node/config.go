package node

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentbaseconfigv1alpha1 "k8s.io/component-base/config/v1alpha1"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/flotilla/flotilla/pkg/node/launch"
)

// Defaults of a node's flags, and where its CNI plugins are.
const (
	defaultPodCIDR          = "10.42.0.0/24"
	defaultClusterCIDR      = launch.DefaultClusterCIDR
	defaultBridge           = "flotilla0"
	cniNetworkName          = "flotilla"
	cniPluginDir            = "/usr/lib/cni"
	containerdNamespace     = "k8s.io"
	maxUnixSocketPathLength = 107
)

// paths are where a node keeps its state, all under its data directory but for the
// containerd socket (see socketPath).
type paths struct {
	dataDir string
}

func (p paths) containerdConfig() string {
	return filepath.Join(p.dataDir, "containerd", "config.toml")
}
func (p paths) containerdRoot() string  { return filepath.Join(p.dataDir, "containerd", "root") }
func (p paths) containerdState() string { return filepath.Join(p.dataDir, "containerd", "state") }
func (p paths) cniConfDir() string      { return filepath.Join(p.dataDir, "cni", "net.d") }
func (p paths) cniIPAMDir() string      { return filepath.Join(p.dataDir, "cni", "ipam") }
func (p paths) kubeletRoot() string     { return filepath.Join(p.dataDir, "kubelet") }
func (p paths) kubeletConfig() string   { return filepath.Join(p.dataDir, "kubelet-config.yaml") }
func (p paths) proxyConfig() string     { return filepath.Join(p.dataDir, "kube-proxy-config.yaml") }
func (p paths) podLogs() string         { return filepath.Join(p.dataDir, "logs", "pods") }
func (p paths) log(component string) string {
	return filepath.Join(p.dataDir, "logs", component+".log")
}

// socketPath is containerd's socket. A Unix socket path has at most 107 bytes and
// test data directories are long, so the socket lives in /run under a name derived
// from the data directory: two nodes with different data directories never share one.
func (p paths) socketPath() string {
	path := filepath.Join(p.containerdState(), "containerd.sock")
	if len(path) <= maxUnixSocketPathLength {
		return path
	}
	sum := sha256.Sum256([]byte(p.dataDir))
	return filepath.Join("/run", "flotilla-node", hex.EncodeToString(sum[:6]), "containerd.sock")
}

func (p paths) endpoint() string { return "unix://" + p.socketPath() }

// containerdConfig is containerd's configuration (version 2, Debian's containerd
// 1.6): state under the data directory, the CRI plugin with the given sandbox
// ("pause") image, runc with cgroupfs, and CNI from Debian's plugins with this node's
// configuration directory. restrict_oom_score_adj keeps runc from raising a
// container's oom_score_adj, which a root without CAP_SYS_RESOURCE may not do.
func containerdConfig(p paths, sandboxImage string) string {
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	lines := []string{
		"version = 2",
		"root = " + q(p.containerdRoot()),
		"state = " + q(p.containerdState()),
		"",
		"[grpc]",
		"  address = " + q(p.socketPath()),
		"",
		`[plugins."io.containerd.internal.v1.opt"]`,
		"  path = " + q(filepath.Join(p.dataDir, "containerd", "opt")),
		"",
		`[plugins."io.containerd.grpc.v1.cri"]`,
		"  sandbox_image = " + q(sandboxImage),
		"  restrict_oom_score_adj = true",
		"  enable_selinux = false",
		`  [plugins."io.containerd.grpc.v1.cri".containerd]`,
		`    snapshotter = "overlayfs"`,
		`    default_runtime_name = "runc"`,
		`    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]`,
		`      runtime_type = "io.containerd.runc.v2"`,
		`      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]`,
		"        SystemdCgroup = false",
		`  [plugins."io.containerd.grpc.v1.cri".cni]`,
		"    bin_dir = " + q(cniPluginDir),
		"    conf_dir = " + q(p.cniConfDir()),
		"    max_conf_num = 1",
		"",
	}
	return strings.Join(lines, "\n")
}

// cniConfig is the node's CNI network: a bridge with the node as the Pods' gateway,
// masquerading traffic that leaves the Pod network, and host-local addresses from
// podCIDR, plus portmap for hostPort.
func cniConfig(p paths, bridge, podCIDR string) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       cniNetworkName,
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      bridge,
				"isGateway":   true,
				"ipMasq":      true,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": podCIDR}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": p.cniIPAMDir(),
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// kubeletConfig is the kubelet's configuration file. The kubelet authenticates the
// API server by its client certificate (x509) and everyone else by token (webhook),
// and asks the API server what each may do. Image garbage collection is off: the
// node's images were loaded from tarballs and nothing could pull them back. Eviction
// thresholds are low, so a nearly full test machine does not evict the Pods under test.
func kubeletConfig(p paths, credentialsDir, podCIDR string) ([]byte, error) {
	cfg := kubeletv1beta1.KubeletConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration"},
		Authentication: kubeletv1beta1.KubeletAuthentication{
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true)},
			X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: filepath.Join(credentialsDir, launch.CAFile)},
		},
		Authorization:               kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook},
		TLSCertFile:                 filepath.Join(credentialsDir, launch.KubeletServingCertFile),
		TLSPrivateKeyFile:           filepath.Join(credentialsDir, launch.KubeletServingKeyFile),
		CgroupDriver:                "cgroupfs",
		FailCgroupV1:                ptr.To(false),
		FailSwapOn:                  ptr.To(false),
		ContainerRuntimeEndpoint:    p.endpoint(),
		ImageServiceEndpoint:        p.endpoint(),
		PodCIDR:                     podCIDR,
		PodLogsDir:                  p.podLogs(),
		ImageGCHighThresholdPercent: ptr.To[int32](100),
		ImageGCLowThresholdPercent:  ptr.To[int32](99),
		EvictionHard: map[string]string{
			"memory.available":  "50Mi",
			"nodefs.available":  "1%",
			"nodefs.inodesFree": "1%",
			"imagefs.available": "1%",
		},
		// Static Pods are not used; a node started again must not find old ones.
		StaticPodPath:  "",
		ResolverConfig: ptr.To("/etc/resolv.conf"),
	}
	return yaml.Marshal(cfg)
}

// proxyConfig is kube-proxy's configuration: iptables mode, no conntrack changes and
// no NodePorts on loopback.
func proxyConfig(credentialsDir, nodeName string, nodeIP net.IP, clusterCIDR string) ([]byte, error) {
	cfg := kubeproxyv1alpha1.KubeProxyConfiguration{
		TypeMeta:           metav1.TypeMeta{APIVersion: "kubeproxy.config.k8s.io/v1alpha1", Kind: "KubeProxyConfiguration"},
		ClientConnection:   componentbaseconfigv1alpha1.ClientConnectionConfiguration{Kubeconfig: filepath.Join(credentialsDir, launch.ProxyKubeconfig)},
		Mode:               "iptables",
		ClusterCIDR:        clusterCIDR,
		HostnameOverride:   nodeName,
		BindAddress:        nodeIP.String(),
		HealthzBindAddress: "127.0.0.1:10256",
		MetricsBindAddress: "127.0.0.1:10249",
		// NodePorts on 127.0.0.1 would need route_localnet, which lets other hosts
		// reach this machine's loopback services (CVE-2020-8558).
		IPTables: kubeproxyv1alpha1.KubeProxyIPTablesConfiguration{LocalhostNodePorts: ptr.To(false)},
		Conntrack: kubeproxyv1alpha1.KubeProxyConntrackConfiguration{
			MaxPerCore:            ptr.To[int32](0),
			Min:                   ptr.To[int32](0),
			TCPEstablishedTimeout: &metav1.Duration{},
			TCPCloseWaitTimeout:   &metav1.Duration{},
		},
	}
	return yaml.Marshal(cfg)
}
