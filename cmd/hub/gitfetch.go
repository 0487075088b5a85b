package main

import (
	"github.com/spf13/cobra"

	"github.com/flotilla/flotilla/pkg/gitfetch"
)

// newGitFetchWorkerCommand is the child process the hub runs one GitRepo checkout
// in, under memory and file limits; the job comes on stdin.
func newGitFetchWorkerCommand() *cobra.Command {
	return &cobra.Command{
		Use:    gitfetch.WorkerCommand,
		Short:  "Check out one GitRepo commit (run by the hub, reads its job on stdin)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return gitfetch.Work(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
}
