package node

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Preflight says why this machine cannot run a node, or nil if it can: it needs root,
// mounted cgroups, and Debian's containerd, runc, CNI plugins and iptables ("make
// node-packages" installs them).
func Preflight() error {
	var problems []string
	if os.Geteuid() != 0 {
		problems = append(problems, "not root (the kubelet and containerd need it)")
	}
	if !cgroupsMounted() {
		problems = append(problems, "no cgroups mounted at /sys/fs/cgroup")
	}
	for _, program := range []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc", "iptables", "ip6tables"} {
		if _, err := exec.LookPath(program); err != nil {
			problems = append(problems, program+" not found (make node-packages)")
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "portmap", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniPluginDir, plugin)); err != nil {
			problems = append(problems, fmt.Sprintf("CNI plugin %s not in %s (make node-packages)", plugin, cniPluginDir))
		}
	}
	if len(problems) > 0 {
		return errors.New("this machine cannot run a node: " + strings.Join(problems, "; "))
	}
	return nil
}

func cgroupsMounted() bool {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return true // cgroup v2
	}
	_, err := os.Stat("/sys/fs/cgroup/memory/memory.limit_in_bytes")
	return err == nil // cgroup v1
}
