package appendlog

// OnResolve makes a's committer call f with each Pending just before it
// resolves it (from the committer's goroutines, one at a time). Set it
// before the first Submit.
func OnResolve(a *Appender, f func(*Pending)) { a.c.onResolve = f }
