package connbudget

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Local callers' shares (issue 36, open mode). Without tokens every local
// program reaches the server from the loopback address, so one share per
// address would let one local program's idle watchers, MCP waits and MCP
// sessions lock every other local program out. A caller without a token
// on a loopback connection is named by the process that owns the
// connection's client end ("proc:<pid>"), found in /proc (Linux: the
// socket in /proc/net/tcp{,6}, then its inode among the open files of
// /proc/<pid>/fd; procTable), for long-lived requests only (streams, MCP
// sessions: LocalProgram; holds are named by connection): every connection of one program counts against one
// share, so a program cannot take more than its share by opening more
// connections, and each other program has a share of its own. When the
// owner cannot be found (not Linux, /proc hidden, a process of another
// user) the caller is named by its connection ("conn:<addr>"), as before.

// LocalProcess names the process that owns the client end of the loopback
// TCP connection from remote to local: "proc:<pid>", or "" when it cannot
// be found. The connection must exist by the time of the call.
func LocalProcess(local, remote net.Addr) string {
	return localProcessSince(local, remote, time.Now())
}

// localProcessSince is LocalProcess for a connection that existed at
// since: a refresh of the tables begun after since that does not find it
// is final.
func localProcessSince(local, remote net.Addr, since time.Time) string {
	l, ok1 := local.(*net.TCPAddr)
	r, ok2 := remote.(*net.TCPAddr)
	if !ok1 || !ok2 || !r.IP.IsLoopback() {
		return ""
	}
	if pid := procs.lookup(addrKey(r.IP, r.Port)+">"+addrKey(l.IP, l.Port), since); pid != "" {
		return "proc:" + pid
	}
	return ""
}

func addrKey(ip net.IP, port int) string {
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	return ip.String() + ":" + strconv.Itoa(port)
}

// procTable maps loopback TCP connections ("client>server" addresses) to
// the socket inode of their client end, and socket inodes to the pids
// that hold them, as of the last refresh (/proc/net/tcp{,6}, then
// /proc/*/fd). A lookup that misses waits for a refresh begun after its
// connection existed. Refreshes run one at a time and at most one per
// procRefreshGap, whatever the rate of new connections: a flood of them
// costs at most that many scans of /proc, and each waits a gap at most.
type procTable struct {
	mu      sync.Mutex
	cond    *sync.Cond
	byConn  map[string]string
	byNode  map[string]string
	running bool
	last    time.Time // start of the last refresh
}

const procRefreshGap = 50 * time.Millisecond

var procs = func() *procTable {
	t := &procTable{}
	t.cond = sync.NewCond(&t.mu)
	return t
}()

func (t *procTable) lookup(conn string, since time.Time) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		if ino, ok := t.byConn[conn]; ok {
			if pid := t.byNode[ino]; pid != "" {
				return pid
			}
		}
		switch {
		case t.running:
			t.cond.Wait()
			continue
		case !t.last.IsZero() && t.last.After(since):
			return "" // a refresh begun after the connection existed did not find it
		}
		if wait := procRefreshGap - time.Since(t.last); wait > 0 {
			t.mu.Unlock()
			time.Sleep(wait)
			t.mu.Lock()
			continue
		}
		t.running = true
		start := time.Now()
		t.mu.Unlock()
		byConn := map[string]string{}
		for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
			scanTCPTable(f, byConn)
		}
		byNode := scanProcFDs()
		t.mu.Lock()
		t.byConn, t.byNode, t.last, t.running = byConn, byNode, start, false
		t.cond.Broadcast()
	}
}

// scanTCPTable adds the loopback sockets of a /proc/net/tcp table to
// byConn ("local>remote" → inode).
func scanTCPTable(path string, byConn map[string]string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 || fs[9] == "0" {
			continue
		}
		lip, lport, ok1 := parseHexAddr(fs[1])
		rip, rport, ok2 := parseHexAddr(fs[2])
		if !ok1 || !ok2 || !lip.IsLoopback() {
			continue
		}
		byConn[addrKey(lip, lport)+">"+addrKey(rip, rport)] = fs[9]
	}
}

// parseHexAddr parses "0100007F:1F90": the address as 32-bit words in
// the kernel's byte order, the port in hex.
func parseHexAddr(s string) (net.IP, int, bool) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return nil, 0, false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return nil, 0, false
	}
	raw, err := hex.DecodeString(h)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return nil, 0, false
	}
	ip := make(net.IP, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.BigEndian.PutUint32(ip[i:], binary.NativeEndian.Uint32(raw[i:]))
	}
	return ip, int(port), true
}

func scanProcFDs() map[string]string {
	out := map[string]string{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid := e.Name()
		if pid == "" || pid[0] < '0' || pid[0] > '9' {
			continue
		}
		dir := "/proc/" + pid + "/fd/"
		fds, err := os.ReadDir(dir) // another user's process: not readable, skipped
		if err != nil {
			continue
		}
		for _, fd := range fds {
			l, err := os.Readlink(dir + fd.Name())
			if err != nil || !strings.HasPrefix(l, "socket:[") {
				continue
			}
			ino := strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")
			if _, dup := out[ino]; !dup {
				out[ino] = pid
			}
		}
	}
	return out
}

// localKey names the anonymous caller of a connection in open mode: its
// process when loopback and found, else the connection. Computed once
// per connection.
func (c *Conn) localKey() string {
	c.keyOnce.Do(func() {
		if p := localProcessSince(c.LocalAddr(), c.RemoteAddr(), c.born); p != "" {
			c.key = p
		} else {
			c.key = "conn:" + c.RemoteAddr().String()
		}
	})
	return c.key
}

// openModeClient names a caller without a token in open mode (see the
// comment at the top of this file).
func openModeClient(r *http.Request) string {
	if c, ok := r.Context().Value(ctxKey{}).(*Conn); ok {
		return c.localKey()
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
			if p := LocalProcess(la, net.TCPAddrFromAddrPort(ap)); p != "" {
				return p
			}
		}
	}
	return "conn:" + r.RemoteAddr
}
