package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestPickIsBelowTheEphemeralRangeAndFree(t *testing.T) {
	for range 20 {
		port, err := Pick()
		if err != nil {
			t.Fatal(err)
		}
		if port < lowest || port >= ephemeralStart() {
			t.Fatalf("port %d is outside [%d, %d)", port, lowest, ephemeralStart())
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("port %d is not free: %v", port, err)
		}
		l.Close()
	}
}
