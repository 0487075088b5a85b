// Package procstat reads what the kernel accounts to a process: its CPU time and
// resident memory, from /proc. The benchmarks use it.
package procstat

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Usage is what the kernel accounts to a process.
type Usage struct {
	CPUSeconds float64 `json:"cpuSeconds"`
	// ChildrenCPUSeconds is the CPU time of its children it has waited for.
	ChildrenCPUSeconds float64 `json:"childrenCPUSeconds,omitempty"`
	// PeakRSSMiB is the resident set's high-water mark (VmHWM).
	PeakRSSMiB float64 `json:"peakRSSMiB"`
	RSSMiB     float64 `json:"rssMiB"`
}

// clockTicks is USER_HZ, 100 on Linux for every architecture Go supports.
const clockTicks = 100

// Of reads the usage of process pid.
func Of(pid int) (Usage, error) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return Usage{}, err
	}
	// Fields after the command name, which is in parentheses and may hold spaces:
	// utime, stime, cutime and cstime are the 12th to the 15th.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	if len(fields) < 15 {
		return Usage{}, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	ticks := make([]float64, 4)
	for i := range ticks {
		ticks[i], _ = strconv.ParseFloat(fields[11+i], 64)
	}
	u := Usage{CPUSeconds: (ticks[0] + ticks[1]) / clockTicks, ChildrenCPUSeconds: (ticks[2] + ticks[3]) / clockTicks}
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return Usage{}, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 64)
		if err != nil {
			continue
		}
		switch key {
		case "VmHWM":
			u.PeakRSSMiB = kb / 1024
		case "VmRSS":
			u.RSSMiB = kb / 1024
		}
	}
	return u, nil
}
