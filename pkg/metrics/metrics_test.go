package metrics

import (
	"net"
	"testing"
)

func TestLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want bool
	}{
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8080}, true},
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 8080}, true},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 8080}, false},
		{&net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 8080}, false},
		{&net.UnixAddr{Name: "/tmp/s"}, false},
	} {
		t.Run(tc.addr.String(), func(t *testing.T) {
			if got := loopback(tc.addr); got != tc.want {
				t.Fatalf("loopback(%s) = %v, want %v", tc.addr, got, tc.want)
			}
		})
	}
}
