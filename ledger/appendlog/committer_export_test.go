package appendlog

// OnResolve makes a's committer call f with each Pending just before it
// resolves it (from the committer's goroutines, one at a time). Set it
// before the first Submit.
func OnResolve(a *Appender, f func(*Pending)) { a.c.onResolve = f }

// Awaiting is the number of atomic batches a's committer has sent and
// not yet had an answer for (nor given up on).
func Awaiting(a *Appender) int {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	return len(a.c.waiting)
}
