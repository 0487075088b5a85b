// Command pause holds a Pod's sandbox: it does nothing until SIGTERM or SIGINT. It is
// the sandbox ("pause") image of the node flotilla-node runs, built by "make images"
// because that node has no registry to pull Kubernetes' own from.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "--version" {
		fmt.Println("pause")
		return
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	<-signals
}
