package webhook

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

func TestAdmit(t *testing.T) {
	limits := Limits{MaxConnections: 4, MaxConnectionsPerClient: 2}
	for _, tc := range []struct {
		name              string
		total, fromClient int
		status            int
	}{
		{"the first", 0, 0, 0},
		{"a second from the client", 1, 1, 0},
		{"a third from the client", 2, 2, http.StatusTooManyRequests},
		{"a new client when all are taken", 4, 0, http.StatusServiceUnavailable},
		{"the last place", 3, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counted := false
			status, why := admit(limits, tc.total, tc.fromClient, func() { counted = true })
			if status != tc.status || counted != (tc.status == 0) || (status != 0) != (why != "") {
				t.Fatalf("admit = %d %q, counted %v; want %d", status, why, counted, tc.status)
			}
		})
	}
}

func TestLimitsCheck(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Limits)
		flag   string
	}{
		{"the defaults", func(*Limits) {}, ""},
		{"no connections", func(l *Limits) { l.MaxConnections = 0 }, "--webhook-max-connections "},
		{"more per client than in all", func(l *Limits) { l.MaxConnectionsPerClient = l.MaxConnections + 1 }, "--webhook-max-connections-per-client"},
		{"memory for less than an event", func(l *Limits) { l.MaxMemory = MaxBody }, "--webhook-max-memory"},
		{"no time to read", func(l *Limits) { l.ReadTimeout = time.Millisecond }, "--webhook-read-timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := DefaultLimits()
			tc.change(&l)
			err := l.Check()
			if (err == nil) != (tc.flag == "") || err != nil && !strings.Contains(err.Error(), tc.flag) {
				t.Fatalf("Check() = %v, want an error naming %q", err, tc.flag)
			}
		})
	}
}

// chunked is a body of unstated length.
type chunked struct{ io.Reader }

func TestReadHoldsEventsWithinMemory(t *testing.T) {
	memory := &budget{max: 3 << 10}
	push := func(body io.Reader, length int64) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/", body)
		r.ContentLength = length
		r.Header.Set("X-GitHub-Event", "push")
		return r
	}
	status := func(err error) int {
		var e *Error
		if errors.As(err, &e) {
			return e.Status
		}
		return 0
	}
	first, releaseFirst, err := read(push(strings.NewReader(strings.Repeat("a", 2<<10)), 2<<10), memory)
	if err != nil || len(first.Body) != 2<<10 {
		t.Fatalf("a 2 KiB event within 3 KiB: %d bytes, %v", len(first.Body), err)
	}
	if _, release, err := read(push(strings.NewReader(strings.Repeat("b", 2<<10)), 2<<10), memory); status(err) != http.StatusServiceUnavailable {
		t.Fatalf("a second 2 KiB event while the first is held: %v, want 503", err)
	} else {
		release()
	}
	if _, _, err := read(push(strings.NewReader(""), MaxBody+1), memory); status(err) != http.StatusRequestEntityTooLarge {
		t.Fatalf("an event stating more than MaxBody: %v, want 413 before reading", err)
	}
	if memory.used.Load() != 2<<10 {
		t.Fatalf("refused events hold %d bytes", memory.used.Load()-2<<10)
	}
	releaseFirst()
	if memory.used.Load() != 0 {
		t.Fatalf("%d bytes held after the release", memory.used.Load())
	}

	// A body of unstated length takes MaxBody while it is read.
	big := &budget{max: MaxBody + 1}
	e, release, err := read(push(chunked{strings.NewReader("{}")}, -1), big)
	if err != nil || string(e.Body) != "{}" || big.used.Load() != MaxBody+1 {
		t.Fatalf("an unstated length: %q, %v, %d bytes held", e.Body, err, big.used.Load())
	}
	release()
	if _, release, err := read(push(chunked{strings.NewReader(strings.Repeat(" ", MaxBody+1))}, -1), big); status(err) != http.StatusRequestEntityTooLarge {
		t.Fatalf("an unstated length past MaxBody: %v, want 413", err)
	} else {
		release()
	}
	if _, _, err := read(push(strings.NewReader("{"), 10), nil); status(err) != http.StatusBadRequest {
		t.Fatalf("a body shorter than stated: %v, want 400", err)
	}
}

func TestConnLimiterAnswersConnectionsPastItsBounds(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newConnLimiter(inner, Limits{MaxConnections: 3, MaxConnectionsPerClient: 2}, logrus.New())
	server := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })}
	go server.Serve(l)
	t.Cleanup(func() { server.Close() })
	dial := func(from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		conn, err := d.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	status := func(conn net.Conn) int {
		t.Helper()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: hub\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	a1, a2 := dial("127.0.0.1"), dial("127.0.0.1")
	if got := status(a1); got != http.StatusOK {
		t.Fatalf("the first connection: %d", got)
	}
	if got := status(dial("127.0.0.1")); got != http.StatusTooManyRequests {
		t.Fatalf("a third connection from one address: %d, want 429", got)
	}
	b := dial("127.0.0.2")
	if got := status(dial("127.0.0.3")); got != http.StatusServiceUnavailable {
		t.Fatalf("a fourth connection in all: %d, want 503", got)
	}
	if got := status(b); got != http.StatusOK {
		t.Fatalf("another address's connection: %d", got)
	}
	// A closed connection gives its place back.
	a2.Close()
	if got := status(dialAdmitted(t, dial)); got != http.StatusOK {
		t.Fatalf("a connection after one was closed: %d", got)
	}
}

// dialAdmitted dials until a connection is let in (is not answered at once).
func dialAdmitted(t *testing.T, dial func(string) net.Conn) net.Conn {
	t.Helper()
	for i := 0; ; i++ {
		conn := dial("127.0.0.1")
		_ = conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		var one [1]byte
		if _, err := conn.Read(one[:]); errors.Is(err, os.ErrDeadlineExceeded) {
			_ = conn.SetReadDeadline(time.Time{})
			return conn
		}
		conn.Close()
		if i == 100 {
			t.Fatal("the closed connection's place was not given back")
		}
	}
}
