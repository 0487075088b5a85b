package gitrepo

import (
	"context"
	"slices"
	"sync"
)

// slots is a semaphore shared fairly among workspaces (namespaces): while more than
// one slot exists, a workspace holds at most all but one, so one workspace alone
// never makes another wait; and a freed slot goes to the workspace holding the
// fewest, the longest waiting first among equals.
type slots struct {
	mu      sync.Mutex
	limit   int
	held    map[string]int
	waiting []*waiter
}

type waiter struct {
	workspace string
	granted   chan struct{}
}

func newSlots(limit int) *slots {
	return &slots{limit: max(limit, 1), held: map[string]int{}}
}

// acquire waits for a slot for workspace; the function it returns gives it back.
func (s *slots) acquire(ctx context.Context, workspace string) (func(), error) {
	w := &waiter{workspace: workspace, granted: make(chan struct{})}
	s.mu.Lock()
	s.waiting = append(s.waiting, w)
	s.grant()
	s.mu.Unlock()
	select {
	case <-w.granted:
		return func() { s.release(workspace) }, nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-w.granted: // granted as the wait ended: give it to the next
		s.releaseLocked(workspace)
	default:
		s.waiting = slices.DeleteFunc(s.waiting, func(o *waiter) bool { return o == w })
	}
	return nil, ctx.Err()
}

func (s *slots) release(workspace string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(workspace)
}

func (s *slots) releaseLocked(workspace string) {
	if s.held[workspace]--; s.held[workspace] <= 0 {
		delete(s.held, workspace)
	}
	s.grant()
}

// grant hands out the free slots, as next chooses.
func (s *slots) grant() {
	for {
		i := next(s.waiting, s.held, s.limit)
		if i < 0 {
			return
		}
		w := s.waiting[i]
		s.waiting = slices.Delete(s.waiting, i, i+1)
		s.held[w.workspace]++
		close(w.granted)
	}
}

// next is the index of the waiter that gets a free slot of limit, given the slots
// each workspace holds: of the waiters whose workspace may take one more, the first
// whose workspace holds the fewest; -1 when no slot is free or no waiter may.
func next(waiting []*waiter, held map[string]int, limit int) int {
	busy := 0
	for _, n := range held {
		busy += n
	}
	if busy >= limit {
		return -1
	}
	perWorkspace := max(limit-1, 1)
	best := -1
	for i, w := range waiting {
		n := held[w.workspace]
		if n >= perWorkspace {
			continue
		}
		if best < 0 || n < held[waiting[best].workspace] {
			best = i
		}
	}
	return best
}
