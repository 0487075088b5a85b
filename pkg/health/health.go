// Package health serves the /healthz and /readyz probes of the hub and the agent.
package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
)

// Server answers /healthz (the process is alive) and /readyz (what SetReady says:
// for the hub, that it has finished setting up; for the agent, that it runs with its
// identity).
type Server struct {
	ready atomic.Bool
}

// SetReady sets what /readyz answers.
func (h *Server) SetReady(ready bool) { h.ready.Store(ready) }

// Serve listens on addr until ctx ends. An empty addr or "0" turns it off.
func (h *Server) Serve(ctx context.Context, addr string) error {
	if addr == "" || addr == "0" {
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !h.ready.Load() {
			http.Error(w, "setting up", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return ServeHTTP(ctx, addr, "--health-probe-bind-address", "/healthz and /readyz", mux)
}

// ServeHTTP serves handler on addr until ctx ends (an empty addr or "0" turns it
// off); flag and what name the address and what is served in errors and logs.
func ServeHTTP(ctx context.Context, addr, flag, what string, handler http.Handler) error {
	if addr == "" || addr == "0" {
		return nil
	}
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s %s: %w", flag, addr, err)
	}
	ServeListener(ctx, listener, what, handler)
	return nil
}

// ServeListener serves handler on listener until ctx ends, in the background.
func ServeListener(ctx context.Context, listener net.Listener, what string, handler http.Handler) {
	Serve(ctx, listener, what, &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute})
}

// Serve runs server on listener until ctx ends, in the background.
func Serve(ctx context.Context, listener net.Listener, what string, server *http.Server) {
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = server.Shutdown(shutdownCtx)
	}()
	go func() {
		if err := server.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logrus.WithError(err).WithField("serving", what).Error("Server stopped")
		}
	}()
	logrus.WithField("address", listener.Addr().String()).Info("Serving " + what)
}
