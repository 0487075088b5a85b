package controlplane

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// maxSocketPath is the longest path a Unix socket can have on Linux, less a margin.
const maxSocketPath = 100

// startEtcd starts an embedded single-member etcd with its data under dir. It listens
// only on Unix sockets inside dir: no TCP port to collide with another control plane,
// and no unauthenticated etcd on the network.
func startEtcd(ctx context.Context, dir, logFile string) (*embed.Etcd, string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", fmt.Errorf("creating %s: %w", dir, err)
	}
	clientSocket := filepath.Join(dir, "client.sock")
	peerSocket := filepath.Join(dir, "peer.sock")
	if len(peerSocket) > maxSocketPath {
		return nil, "", fmt.Errorf("data directory %s is too deep for etcd's Unix sockets (%d characters, at most %d): choose a shorter --data-dir",
			dir, len(peerSocket), maxSocketPath)
	}
	// Sockets left by a process that was killed would make the listeners fail.
	os.Remove(clientSocket)
	os.Remove(peerSocket)

	clientURL := url.URL{Scheme: "unix", Path: clientSocket}
	peerURL := url.URL{Scheme: "unix", Path: peerSocket}

	cfg := embed.NewConfig()
	cfg.Name = "flotilla"
	cfg.Dir = filepath.Join(dir, "data")
	cfg.ListenClientUrls = []url.URL{clientURL}
	// etcd refuses a Unix URL as the advertised client URL although nobody dials it;
	// give it an address that leads nowhere.
	cfg.AdvertiseClientUrls = []url.URL{{Scheme: "http", Host: "127.0.0.111:0"}}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.Name + "=" + peerURL.String()
	cfg.ListenMetricsUrls = nil
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{logFile}
	// Keep the history small: the hub writes status often and nobody reads old revisions.
	cfg.AutoCompactionMode = embed.CompactorModePeriodic
	cfg.AutoCompactionRetention = "5m"
	cfg.QuotaBackendBytes = 8 * 1024 * 1024 * 1024

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("starting etcd in %s: %w", dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, "", fmt.Errorf("etcd failed while starting: %w", err)
	case <-time.After(time.Minute):
		e.Close()
		return nil, "", fmt.Errorf("etcd in %s was not ready after a minute; see %s", dir, logFile)
	case <-ctx.Done():
		e.Close()
		return nil, "", ctx.Err()
	}
	return e, "unix://" + clientSocket, nil
}
