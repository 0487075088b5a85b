package webhook

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/flotilla/flotilla/pkg/health"
)

// Limits bound what the push event listener holds for the unauthenticated callers it
// answers: nothing is known of a caller before its event is read and verified.
type Limits struct {
	// MaxConnections bounds the open connections; past it a new one is answered 503.
	MaxConnections int
	// MaxConnectionsPerClient bounds one remote address's open connections; past it a
	// new one is answered 429. Each connection carries one request at a time (the
	// listener speaks HTTP/1.1 only), so this bounds its concurrent requests too.
	MaxConnectionsPerClient int
	// MaxMemory bounds the bytes of event bodies held at once; an event that would
	// pass it is answered 503.
	MaxMemory int64
	// ReadTimeout bounds the time to read a request, header and body; a slower one
	// is answered 408. Headers take at most a fifth of it.
	ReadTimeout time.Duration
}

// DefaultLimits are the hub's defaults.
func DefaultLimits() Limits {
	return Limits{MaxConnections: 256, MaxConnectionsPerClient: 32, MaxMemory: 64 << 20, ReadTimeout: 20 * time.Second}
}

// MaxHeaderBytes bounds an event's header.
const MaxHeaderBytes = 64 << 10

// Check says what is wrong with l, naming the hub's flags.
func (l Limits) Check() error {
	switch {
	case l.MaxConnections < 1:
		return fmt.Errorf("--webhook-max-connections must be at least 1, not %d", l.MaxConnections)
	case l.MaxConnectionsPerClient < 1 || l.MaxConnectionsPerClient > l.MaxConnections:
		return fmt.Errorf("--webhook-max-connections-per-client must be between 1 and --webhook-max-connections (%d), not %d", l.MaxConnections, l.MaxConnectionsPerClient)
	case l.MaxMemory < MaxBody+1:
		return fmt.Errorf("--webhook-max-memory must hold one event of %d bytes, not %d", MaxBody, l.MaxMemory)
	case l.ReadTimeout < time.Second:
		return fmt.Errorf("--webhook-read-timeout must be at least 1s, not %s", l.ReadTimeout)
	}
	return nil
}

// Serve answers push events on addr with h, within limits, until ctx ends.
func Serve(ctx context.Context, addr string, h *Handler, limits Limits) error {
	if err := limits.Check(); err != nil {
		return err
	}
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--webhook-bind-address %s: %w", addr, err)
	}
	h.memory = &budget{max: limits.MaxMemory}
	server := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: limits.ReadTimeout / 5,
		ReadTimeout:       limits.ReadTimeout,
		// The answer waits on the API for at most answerTimeout.
		WriteTimeout:   limits.ReadTimeout + answerTimeout + 5*time.Second,
		IdleTimeout:    limits.ReadTimeout,
		MaxHeaderBytes: MaxHeaderBytes,
	}
	// HTTP/1.1 only: one request per connection at a time.
	server.Protocols = new(http.Protocols)
	server.Protocols.SetHTTP1(true)
	health.Serve(ctx, newConnLimiter(listener, limits, h.Log), "Git push events", server)
	return nil
}

// budget is memory shared by the requests being read.
type budget struct {
	used atomic.Int64
	max  int64
}

// take reserves n bytes, or says they are not there.
func (b *budget) take(n int64) bool {
	if b == nil {
		return true
	}
	if b.used.Add(n) > b.max {
		b.used.Add(-n)
		return false
	}
	return true
}

func (b *budget) give(n int64) {
	if b != nil {
		b.used.Add(-n)
	}
}

// connLimiter is a listener that bounds open connections, in all and per remote
// address, answering the ones past a bound at once instead of leaving them queued.
type connLimiter struct {
	net.Listener
	limits Limits
	log    logrus.FieldLogger

	mu    sync.Mutex
	total int
	open  map[string]int
	// refusing bounds the refusals under way, refusalsPerConnection for each
	// connection let in: a refusal holds a goroutine and a socket for a second at most.
	refusing chan struct{}
}

// newConnLimiter bounds listener's connections by limits.
func newConnLimiter(listener net.Listener, limits Limits, log logrus.FieldLogger) *connLimiter {
	return &connLimiter{Listener: listener, limits: limits, log: log, open: map[string]int{}, refusing: make(chan struct{}, refusalsPerConnection*limits.MaxConnections)}
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		client := clientOf(conn.RemoteAddr())
		status, why := l.admit(client)
		if status == 0 {
			return &limitedConn{Conn: conn, release: sync.OnceFunc(func() { l.release(client) })}, nil
		}
		select {
		case l.refusing <- struct{}{}:
			go func() {
				defer func() { <-l.refusing }()
				refuseConn(conn, status, why)
			}()
		default:
			// As many refusals as it lingers over are under way: this one is only closed.
			conn.Close()
		}
		l.log.WithField("from", client).Debug("Refused a webhook connection: " + why)
	}
}

// admit counts a new connection from client in, or says why not: the status to
// answer and its reason.
func (l *connLimiter) admit(client string) (int, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return admit(l.limits, l.total, l.open[client], func() { l.total++; l.open[client]++ })
}

// admit decides on a connection given the open ones, in all and from its client,
// calling count when it is let in.
func admit(limits Limits, total, fromClient int, count func()) (int, string) {
	switch {
	case fromClient >= limits.MaxConnectionsPerClient:
		return http.StatusTooManyRequests, fmt.Sprintf("too many connections from one address (at most %d)", limits.MaxConnectionsPerClient)
	case total >= limits.MaxConnections:
		return http.StatusServiceUnavailable, fmt.Sprintf("too many connections (at most %d)", limits.MaxConnections)
	}
	count()
	return 0, ""
}

func (l *connLimiter) release(client string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.open[client]--; l.open[client] <= 0 {
		delete(l.open, client)
	}
}

// clientOf is the address a connection comes from, without its port.
func clientOf(addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	return addr.String()
}

// refuseConn answers a connection that is not let in, without reading its request,
// and closes it. It closes its side first and reads what the caller still sends, for
// a moment, so that the caller reads the answer rather than a reset; a caller that
// neither reads nor stops sending does not hold it longer.
func refuseConn(conn net.Conn, status int, why string) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	body := why + "\n"
	if _, err := fmt.Fprintf(conn, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nRetry-After: %s\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), strconv.Itoa(retryAfterSeconds), body); err != nil {
		return
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(conn, MaxBody))
}

// refusalsPerConnection is how many refusals may linger for each connection the
// listener holds; past them a refused connection is closed without an answer.
const refusalsPerConnection = 4

// retryAfterSeconds is what answers past a bound ask callers to wait.
const retryAfterSeconds = 5

// limitedConn gives its place back once closed.
type limitedConn struct {
	net.Conn
	release func()
}

func (c *limitedConn) Close() error {
	c.release()
	return c.Conn.Close()
}
