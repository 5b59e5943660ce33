// Package crashrig holds helpers for the reliability tests: a TCP proxy
// that loses acknowledgements on demand, and (in process.go) a real
// `ledger serve` process that can be killed and restarted.
package crashrig

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// Proxy is a TCP proxy in front of a NATS server that can lose what the
// server sends: Hold keeps every byte from the server back (a publish
// reaches the server and is stored, its acknowledgement does not reach the
// client), and Cut then closes every connection, dropping what was held —
// exactly a connection lost between the store and the ack. Clients
// reconnect through the proxy and see a normal server again.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	conns  map[*pipe]struct{}
	hold   bool
	closed bool
	cuts   int
	wg     sync.WaitGroup
}

type pipe struct {
	client, server net.Conn
	mu             sync.Mutex
	held           [][]byte
}

// StartProxy listens on a free loopback port and forwards to target
// ("host:port").
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("crashrig: proxy listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[*pipe]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// URL is the proxy's NATS URL.
func (p *Proxy) URL() string { return "nats://" + p.ln.Addr().String() }

// Hold starts holding back everything servers send, on current and new
// connections, until Cut.
func (p *Proxy) Hold() {
	p.mu.Lock()
	p.hold = true
	p.mu.Unlock()
}

// Cut closes every connection, dropping what was held, and stops holding.
// It returns the number of connections closed.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold = false
	n := len(p.conns)
	for c := range p.conns {
		c.close()
		delete(p.conns, c)
	}
	p.cuts += n
	return n
}

// Cuts is the number of connections Cut has closed so far.
func (p *Proxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		pp := &pipe{client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			pp.close()
			return
		}
		p.conns[pp] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(s, c)
			p.drop(pp)
		}()
		go func() {
			defer p.wg.Done()
			p.downstream(pp)
			p.drop(pp)
		}()
	}
}

// downstream copies server to client, holding bytes back while p holds.
func (p *Proxy) downstream(pp *pipe) {
	buf := make([]byte, 64<<10)
	for {
		n, err := pp.server.Read(buf)
		if n > 0 {
			p.mu.Lock()
			hold := p.hold
			p.mu.Unlock()
			pp.mu.Lock()
			if hold {
				pp.held = append(pp.held, append([]byte(nil), buf[:n]...))
				pp.mu.Unlock()
			} else {
				held := pp.held
				pp.held = nil
				pp.mu.Unlock()
				for _, b := range append(held, buf[:n]) {
					if _, werr := pp.client.Write(b); werr != nil {
						return
					}
				}
			}
		}
		if err != nil {
			return // closed, reset or EOF: the connection is gone either way
		}
	}
}

func (p *Proxy) drop(pp *pipe) {
	p.mu.Lock()
	delete(p.conns, pp)
	p.mu.Unlock()
	pp.close()
}

func (pp *pipe) close() {
	_ = pp.client.Close()
	_ = pp.server.Close()
	pp.mu.Lock()
	pp.held = nil
	pp.mu.Unlock()
}
