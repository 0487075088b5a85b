package gitrepo

import (
	"context"
	"testing"
	"time"
)

func TestNextSlot(t *testing.T) {
	w := func(workspaces ...string) []*waiter {
		var out []*waiter
		for _, ws := range workspaces {
			out = append(out, &waiter{workspace: ws})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		waiting []*waiter
		held    map[string]int
		limit   int
		want    int
	}{
		{"nobody waits", nil, map[string]int{}, 4, -1},
		{"a free slot goes to the first waiter", w("a", "b"), map[string]int{}, 4, 0},
		{"no slot is free", w("b"), map[string]int{"a": 3, "c": 1}, 4, -1},
		{"a workspace holds all but one slot at most", w("a", "a"), map[string]int{"a": 3}, 4, -1},
		{"the last slot goes to another workspace", w("a", "b"), map[string]int{"a": 3}, 4, 1},
		{"the workspace holding fewest goes first", w("a", "b", "c"), map[string]int{"a": 1, "b": 1}, 4, 2},
		{"among equals, the longest waiting", w("b", "c"), map[string]int{"a": 1}, 4, 0},
		{"one slot is one workspace's at a time", w("a"), map[string]int{}, 1, 0},
		{"one slot, taken", w("b"), map[string]int{"a": 1}, 1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := next(tc.waiting, tc.held, tc.limit); got != tc.want {
				t.Fatalf("next = %d, want %d", got, tc.want)
			}
		})
	}
}

// One workspace holding every slot it may cannot make another wait, and a freed
// slot goes to the workspace that waited with none before the one that holds most.
func TestSlotsAreFairAmongWorkspaces(t *testing.T) {
	s := newSlots(3)
	ctx := context.Background()
	var releases []func()
	for range 2 {
		release, err := s.acquire(ctx, "greedy")
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := s.acquire(short, "greedy"); err == nil {
		t.Fatal("a workspace took the last of three slots")
	}
	other, err := s.acquire(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}

	granted := make(chan string, 2)
	for _, ws := range []string{"greedy", "third"} {
		go func() {
			release, err := s.acquire(ctx, ws)
			if err == nil {
				granted <- ws
				release()
			}
		}()
		for s.waitingFor(ws) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	releases[0]()
	if got := <-granted; got != "third" {
		t.Fatalf("the freed slot went to %s, want the workspace holding none", got)
	}
	other()
	if got := <-granted; got != "greedy" {
		t.Fatalf("then %s, want greedy", got)
	}
	releases[1]()
	// greedy's goroutine gives its slot back after saying it got one.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		held, waiting := len(s.held), len(s.waiting)
		s.mu.Unlock()
		if held == 0 && waiting == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left %d workspaces holding slots, %d waiting", held, waiting)
		}
	}
}

// waitingFor counts workspace's waiters.
func (s *slots) waitingFor(workspace string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, w := range s.waiting {
		if w.workspace == workspace {
			n++
		}
	}
	return n
}
