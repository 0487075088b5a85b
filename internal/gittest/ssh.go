package gittest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Key is an SSH key pair for a test: the private key as a Secret's ssh-privatekey
// holds it, and the public key.
type Key struct {
	PrivatePEM []byte
	Public     ssh.PublicKey
}

// NewKey makes an ed25519 key pair.
func NewKey(t *testing.T) Key {
	t.Helper()
	_, private, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(private, "")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(private)
	if err != nil {
		t.Fatal(err)
	}
	return Key{PrivatePEM: pem.EncodeToMemory(block), Public: signer.PublicKey()}
}

// ServeSSH serves the repository over SSH too, to the holder of client's key, as
// `git upload-pack` behind an SSH server of the test's own. It returns the
// repository's ssh:// URL and the known_hosts line of the server's key.
func (s *Server) ServeSSH(client Key) (string, []byte) {
	s.t.Helper()
	host := NewKey(s.t)
	hostSigner, err := ssh.ParsePrivateKey(host.PrivatePEM)
	if err != nil {
		s.t.Fatal(err)
	}
	config := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
		if bytes.Equal(key.Marshal(), client.Public.Marshal()) {
			return nil, nil
		}
		s.Refused.Add(1)
		return nil, errors.New("unknown key")
	}}
	config.AddHostKey(hostSigner)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go s.serveSSHConn(conn, config)
		}
	}()
	addr := l.Addr().String()
	return "ssh://git@" + addr + "/repo.git", []byte(knownhosts.Line([]string{knownhosts.Normalize(addr)}, host.Public) + "\n")
}

func (s *Server) serveSSHConn(conn net.Conn, config *ssh.ServerConfig) {
	defer conn.Close()
	_, chans, reqs, err := ssh.NewServerConn(conn, config)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "sessions only")
			continue
		}
		ch, requests, err := nc.Accept()
		if err != nil {
			return
		}
		go s.serveSession(ch, requests)
	}
}

// serveSession runs `git upload-pack` of the repository for an exec request that
// asks for it, and nothing else.
func (s *Server) serveSession(ch ssh.Channel, requests <-chan *ssh.Request) {
	defer ch.Close()
	for req := range requests {
		if req.Type != "exec" {
			_ = req.Reply(req.Type == "env", nil)
			continue
		}
		var payload struct{ Command string }
		if err := ssh.Unmarshal(req.Payload, &payload); err != nil {
			_ = req.Reply(false, nil)
			return
		}
		name, arg, _ := strings.Cut(payload.Command, " ")
		if name != "git-upload-pack" || path.Base(strings.Trim(arg, "'\"")) != "repo.git" {
			_ = req.Reply(false, nil)
			return
		}
		_ = req.Reply(true, nil)
		s.Pulls.Add(1)
		cmd := exec.Command("git", "upload-pack", s.Bare)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
		status := uint32(0)
		if err := cmd.Run(); err != nil {
			status = 1
			fmt.Fprintln(ch.Stderr(), err)
		}
		exit := make([]byte, 4)
		binary.BigEndian.PutUint32(exit, status)
		_, _ = ch.SendRequest("exit-status", false, exit)
		return
	}
}
