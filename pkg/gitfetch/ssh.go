package gitfetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	"golang.org/x/net/proxy"
)

// policyScheme is the proxy scheme under which go-git's SSH transport dials through
// the hub's address policy: go-git dials SSH itself, and takes a dialer only as a
// proxy. Its URL carries the connection's byte bound and deadline.
const policyScheme = "flotilla-policy"

var registerSSH sync.Once

func installSSH() {
	registerSSH.Do(func() {
		proxy.RegisterDialerType(policyScheme, func(u *url.URL, _ proxy.Dialer) (proxy.Dialer, error) {
			b, ok := budgets.Load(u.Query().Get("budget"))
			if !ok {
				return nil, errors.New("ssh dialer: no such fetch")
			}
			timeout, err := time.ParseDuration(u.Query().Get("timeout"))
			if err != nil {
				return nil, fmt.Errorf("ssh dialer: %w", err)
			}
			return &policyDialer{budget: b.(*budget), timeout: timeout}, nil
		})
	})
}

// budgets are the byte budgets of the fetches under way over SSH, by ID.
var (
	budgets  sync.Map
	budgetID atomic.Int64
)

// policyDialer connects where the installed policy allows, and bounds what the
// connection reads (its fetch's budget) and how long it lives.
type policyDialer struct {
	budget  *budget
	timeout time.Duration
}

func (d *policyDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

func (d *policyDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	policy := policyInstalled.Load()
	if policy == nil {
		return nil, errors.New("no address policy is installed")
	}
	dialer := &net.Dialer{Timeout: 30 * time.Second, Control: policy.Control}
	conn, err := dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if err := conn.SetDeadline(time.Now().Add(d.timeout)); err != nil {
		conn.Close()
		return nil, err
	}
	return &boundedConn{Conn: conn, budget: d.budget}, nil
}

// boundedConn counts what it reads against its fetch's budget, and fails past it.
type boundedConn struct {
	net.Conn
	budget *budget
}

func (c *boundedConn) Read(p []byte) (int, error) { return c.budget.read(c.Conn, p) }

// isSSH says whether raw is an SSH repository: ssh://, or scp-like user@host:path.
func isSSH(raw string) bool {
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" {
		return u.Scheme == "ssh"
	}
	ep, err := transport.NewEndpoint(raw)
	return err == nil && ep.Protocol == "ssh"
}

// sshAuth is the key of s for its SSH repository, checking the server against
// s.KnownHosts (written to a file in dir, which must exist).
func sshAuth(s Source, user, dir string) (*gitssh.PublicKeys, error) {
	if len(s.SSHPrivateKey) == 0 {
		return nil, &Error{ReasonAuthFailed, fmt.Errorf("%s: an SSH repository needs a key: clientSecretName names a Secret with ssh-privatekey and known_hosts", s.URL)}
	}
	if len(s.KnownHosts) == 0 {
		return nil, &Error{ReasonHostKeyNotTrusted, fmt.Errorf("%s: the Secret of clientSecretName has no known_hosts: the server's key is checked against it, always", s.URL)}
	}
	keys, err := gitssh.NewPublicKeys(user, s.SSHPrivateKey, "")
	if err != nil {
		return nil, &Error{ReasonAuthFailed, fmt.Errorf("%s: ssh-privatekey: %w", s.URL, err)}
	}
	path := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(path, s.KnownHosts, 0o600); err != nil {
		return nil, err
	}
	callback, err := knownhosts.New(path)
	if err != nil {
		return nil, &Error{ReasonHostKeyNotTrusted, fmt.Errorf("%s: known_hosts: %w", s.URL, err)}
	}
	keys.HostKeyCallback = callback
	return keys, nil
}

// sshProxy routes an SSH connection through the policy dialer, counting against b,
// for the time left to ctx; release forgets b.
func sshProxy(ctx context.Context, b *budget) (opts transport.ProxyOptions, release func()) {
	timeout := 10 * time.Minute
	if deadline, ok := ctx.Deadline(); ok {
		timeout = time.Until(deadline)
	}
	id := strconv.FormatInt(budgetID.Add(1), 10)
	budgets.Store(id, b)
	q := url.Values{"budget": {id}, "timeout": {timeout.String()}}
	return transport.ProxyOptions{URL: policyScheme + "://policy?" + q.Encode()}, func() { budgets.Delete(id) }
}
