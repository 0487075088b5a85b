// Package freeport picks a TCP port for a server a test or the benchmark is about to
// start on 127.0.0.1.
//
// The kernel's own choice (listening on port 0) comes from the ephemeral range, the
// same range it takes the local ports of outgoing connections from: between the pick
// and the server's bind, any of the thousands of connections a busy test machine
// opens may take it, and the server fails with "address already in use". Ports are
// picked below that range instead, at random, and checked free.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowest is the lowest port picked: above the well-known and commonly configured
// ports (6443, 8080, ...).
const lowest = 10000

// Pick returns a port on 127.0.0.1 that no one listens on or connects from.
func Pick() (int, error) {
	highest := ephemeralStart() - 1
	if highest <= lowest {
		return 0, fmt.Errorf("no ports below the ephemeral range (starting at %d) to pick from", highest+1)
	}
	var lastErr error
	for range 100 {
		port := lowest + rand.IntN(highest-lowest+1)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			lastErr = err
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no free port found: %w", lastErr)
}

// ephemeralStart is the first port of the kernel's ephemeral range (32768 unless
// configured otherwise).
func ephemeralStart() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return 32768
	}
	start, err := strconv.Atoi(fields[0])
	if err != nil {
		return 32768
	}
	return start
}
