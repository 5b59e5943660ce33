package connbudget

import (
	"context"
	"io"
	"net"
	"time"
)

// Lingering close (issue 36 item 1). A request refused before its body
// was read to its end closes its connection; closing a TCP socket with
// unread data makes the kernel answer the client's next bytes with a
// reset, and a client still sending its body then sees "broken pipe" or
// "connection reset" instead of the refusal that was sent. So a
// connection marked with Linger is closed gracefully: its write side is
// shut (the client reads the answer and then EOF at once), and the
// server goes on reading and discarding what the client still sends, for
// at most LingerTime and LingerBytes, before it closes for good. A
// well-behaved client finishes its body, reads the refusal and closes;
// an attacker holds the slot for LingerTime at most, and a lingering
// connection is the first one closed to make room.
const (
	LingerTime  = 2 * time.Second
	LingerBytes = 4 << 20
)

// Linger marks the connection of the request whose context is ctx to be
// closed gracefully (see LingerTime). Outside a Budget it does nothing.
func Linger(ctx context.Context) {
	if c, ok := ctx.Value(ctxKey{}).(*Conn); ok {
		c.linger.Store(true)
	}
}

// Lingering is how many connections are lingering now.
func (b *Budget) Lingering() int { return int(b.lingering.Load()) }

// CloseWrite shuts the write side of the connection (net/http calls it
// before closing a connection whose request body was not read, so that
// the client reads the answer and EOF at once).
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// lingerClose starts the graceful close of a connection marked with
// Linger; it reports false when the connection is to be closed at once
// (not marked, already lingering, or the budget is closing).
func (c *Conn) lingerClose() bool {
	if !c.linger.Load() || !c.lingerStarted.CompareAndSwap(false, true) {
		return false
	}
	b := c.b
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return false
	}
	b.lingerWG.Add(1)
	b.mu.Unlock()
	b.lingering.Add(1)
	_ = c.CloseWrite()
	go func() {
		defer b.lingerWG.Done()
		defer b.lingering.Add(-1)
		_ = c.Conn.SetReadDeadline(time.Now().Add(LingerTime))
		_, _ = io.Copy(io.Discard, io.LimitReader(c.Conn, LingerBytes))
		_ = c.closeNow()
	}()
	return true
}

// closeNow closes the connection and frees its slot; safe twice.
func (c *Conn) closeNow() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.b.untrack(c)
		<-c.b.sem
	})
	return err
}

// closeLingering closes every lingering connection at once and waits for
// their goroutines (the listener's Close).
func (b *Budget) closeLingering() {
	b.mu.Lock()
	b.closing = true
	var ls []*Conn
	for c := range b.conns {
		if c.lingerStarted.Load() {
			ls = append(ls, c)
		}
	}
	b.mu.Unlock()
	for _, c := range ls {
		_ = c.Conn.SetReadDeadline(time.Now())
	}
	b.lingerWG.Wait()
}

var _ net.Conn = (*Conn)(nil)
