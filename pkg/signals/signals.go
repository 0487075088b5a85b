// Package signals turns SIGINT and SIGTERM into a cancelled context for the hub and
// agent programs.
package signals

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"
)

// Context ends on the first SIGINT or SIGTERM so the program can shut down cleanly;
// a second signal exits at once.
func Context() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-ch
		logrus.WithField("signal", sig.String()).Info("Shutting down")
		cancel()
		<-ch
		os.Exit(1)
	}()
	return ctx
}
