package gitfetch

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// maxFiles bounds the files and folders of one checkout.
var maxFiles int64 = 20000

// budget counts the bytes a fetch downloads; past its limit every read fails.
type budget struct {
	limit int64
	used  atomic.Int64
}

type budgetKey struct{}

// withBudget makes the HTTP downloads under ctx fail once they add up to more than
// limit bytes.
func withBudget(ctx context.Context, limit int64) (context.Context, *budget) {
	b := &budget{limit: limit}
	return context.WithValue(ctx, budgetKey{}, b), b
}

func (b *budget) exceeded() bool { return b.used.Load() > b.limit }

func (b *budget) err() error {
	return &Error{ReasonTooLarge, fmt.Errorf("the repository sent more than %d bytes (--gitrepo-max-size)", b.limit)}
}

// budgetTransport counts response bodies against the budget of their request's
// context, if it has one.
type budgetTransport struct{ next http.RoundTripper }

func (t budgetTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if b, ok := req.Context().Value(budgetKey{}).(*budget); ok {
		resp.Body = &countedBody{ReadCloser: resp.Body, budget: b}
	}
	return resp, nil
}

type countedBody struct {
	io.ReadCloser
	budget *budget
}

func (c *countedBody) Read(p []byte) (int, error) { return c.budget.read(c.ReadCloser, p) }

// read reads from r into p, counting what it reads; past the limit it fails.
func (b *budget) read(r io.Reader, p []byte) (int, error) {
	if b.exceeded() {
		return 0, b.err()
	}
	n, err := r.Read(p)
	if b.used.Add(int64(n)) > b.limit {
		return n, b.err()
	}
	return n, err
}

// checkTree fails when the files of commit, as the object headers declare them,
// would take more than maxBytes or be more than MaxFiles, before anything is
// written out.
func checkTree(repo *git.Repository, commit plumbing.Hash, maxBytes int64) error {
	c, err := repo.CommitObject(commit)
	if err != nil {
		return &Error{ReasonRevisionNotFound, fmt.Errorf("commit %s: %w", commit, err)}
	}
	tree, err := c.Tree()
	if err != nil {
		return err
	}
	walker := object.NewTreeWalker(tree, true, nil)
	defer walker.Close()
	var total, count int64
	for {
		_, entry, err := walker.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if count++; count > maxFiles {
			return &Error{ReasonTooLarge, fmt.Errorf("the commit has more than %d files and folders", maxFiles)}
		}
		if entry.Mode == filemode.Dir || entry.Mode == filemode.Submodule {
			continue
		}
		size, err := repo.Storer.EncodedObjectSize(entry.Hash)
		if err != nil {
			return err
		}
		if total += size; total > maxBytes {
			return &Error{ReasonTooLarge, fmt.Errorf("the commit's files take more than %d bytes (--gitrepo-max-size)", maxBytes)}
		}
	}
}
